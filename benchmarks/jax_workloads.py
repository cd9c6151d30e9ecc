"""The function-transform workloads of workloads.py written for JAX, for compare.py's JAX column.

Same data (NumPy, the same seed), same functions, as a JAX user writes them: the transformed function
under ``jax.jit`` (compiled once in the warm-up step), results waited for with ``block_until_ready``.
JAX is a benchmark-only tool here (``pip install jax``), never a dependency of jitgrad.
"""
import numpy as np

from workloads import SEED, _f32


def _jax():
    import jax
    jax.config.update("jax_platforms", "cpu")
    return jax, jax.numpy


def _run(fn, *args):
    def step():
        out = fn(*args)
        for leaf in __import__("jax").tree_util.tree_leaves(out):
            leaf.block_until_ready()
    return step


def per_sample_grads():
    jax, jnp = _jax()
    rng = np.random.default_rng(SEED)
    params = {"w1": jnp.asarray(_f32(rng, 128, 784) * 0.03), "b1": jnp.zeros(128, jnp.float32),
              "w2": jnp.asarray(_f32(rng, 10, 128) * 0.08), "b2": jnp.zeros(10, jnp.float32)}
    x = jnp.asarray(_f32(rng, 64, 784))
    y = jnp.asarray(rng.integers(0, 10, 64))

    def loss(p, x, y):
        h = jax.nn.relu(p["w1"] @ x + p["b1"])
        logits = p["w2"] @ h + p["b2"]
        return -jax.nn.log_softmax(logits)[y]
    return _run(jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))), params, x, y)


def hessian_tanh100():
    jax, jnp = _jax()
    rng = np.random.default_rng(SEED)
    A, x = jnp.asarray(_f32(rng, 100, 100)), jnp.asarray(_f32(rng, 100))
    return _run(jax.jit(jax.hessian(lambda x: (jnp.tanh(A @ x) ** 2).sum() + 0.5 * (x * x).sum())), x)


def _tanh_mlp64():
    jax, jnp = _jax()
    rng = np.random.default_rng(SEED)
    w1, w2, x = jnp.asarray(_f32(rng, 64, 64)), jnp.asarray(_f32(rng, 64, 64)), jnp.asarray(_f32(rng, 64))
    return jax, (lambda x: jnp.tanh(w2 @ jnp.tanh(w1 @ x))), x


def jacrev_mlp64():
    jax, f, x = _tanh_mlp64()
    return _run(jax.jit(jax.jacrev(f)), x)


def jacfwd_mlp64():
    jax, f, x = _tanh_mlp64()
    return _run(jax.jit(jax.jacfwd(f)), x)


def jvp_chain100():
    jax, jnp = _jax()
    rng = np.random.default_rng(SEED)
    x, t = jnp.asarray(_f32(rng, 4096)), jnp.asarray(_f32(rng, 4096))

    def f(x):
        for _ in range(33):
            x = jnp.tanh(x * 1.01 + 0.01)
        return x * 1.0
    return _run(jax.jit(lambda x, t: jax.jvp(f, (x,), (t,))), x, t)


WORKLOADS = {f.__name__: f for f in (per_sample_grads, hessian_tanh100, jacrev_mlp64, jacfwd_mlp64, jvp_chain100)}
