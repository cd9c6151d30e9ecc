"""jitgrad.Generator, the default generator, the random factories and the random ops (jitgrad/ops/random.py).

Determinism under a seed and state round trips are checked exactly; distributions with loose bounds on fixed
seeds (means and frequencies within several standard errors); errors with PyTorch's messages.
"""
import math
import os
import pickle

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.ops import OPS


def gen(seed=0):
    return jg.Generator().manual_seed(seed)


def same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.numpy(), b.numpy())


# ------------------------------------------------------------------ Generator
def test_generator_seed_and_state_round_trip():
    g = jg.Generator()
    assert g.device == jg.device("cpu") and g.initial_seed() == 67280421310721
    assert g.manual_seed(3) is g and g.initial_seed() == 3
    state = g.get_state()
    assert state.dtype == jg.uint8 and state.ndim == 1
    a = jg.rand(5, generator=g)
    b = jg.randn(3, generator=g)
    g.set_state(state)
    assert same(jg.rand(5, generator=g), a) and same(jg.randn(3, generator=g), b)
    assert g.initial_seed() == 3
    h = jg.Generator().set_state(state)  # a state moves to another generator, initial seed included
    assert same(jg.rand(5, generator=h), a) and h.initial_seed() == 3


def test_same_seed_same_stream_other_seed_other_stream():
    assert same(jg.rand(4, generator=gen(1)), jg.rand(4, generator=gen(1)))
    assert not same(jg.rand(4, generator=gen(1)), jg.rand(4, generator=gen(2)))
    assert same(jg.randperm(10, generator=gen(5)), jg.randperm(10, generator=gen(5)))


def test_seed_values_as_pytorch_reads_them():
    g = jg.Generator()
    assert g.manual_seed(-1).initial_seed() == 2 ** 64 - 1
    assert g.manual_seed(1.5).initial_seed() == 1
    with pytest.raises(ValueError, match="Overflow when unpacking long long"):
        g.manual_seed(2 ** 64)
    with pytest.raises(ValueError, match="invalid literal for int"):
        g.manual_seed("a")
    s = g.seed()
    assert g.initial_seed() == s and 0 <= s < 2 ** 64


def test_set_state_errors():
    g = jg.Generator()
    with pytest.raises(TypeError, match="RNG state must be a jitgrad.ByteTensor"):
        g.set_state(jg.zeros(3))
    with pytest.raises(RuntimeError, match="state size to be 3"):
        g.set_state(jg.zeros(3, dtype=jg.uint8))


def test_generator_pickles_with_its_state():
    g = gen(7)
    jg.rand(3, generator=g)
    h = pickle.loads(pickle.dumps(g))
    assert h.initial_seed() == 7 and same(jg.rand(4, generator=h), jg.rand(4, generator=g))


def test_default_generator_functions():
    assert jg.manual_seed(11) is jg.default_generator and jg.initial_seed() == 11
    assert jg.random.initial_seed() == 11
    state = jg.get_rng_state()
    a = jg.randn(4)
    jg.set_rng_state(state)
    assert same(jg.randn(4), a)
    with jg.random.fork_rng():
        jg.rand(10)
    assert not same(jg.randn(4), a)  # the state after the block is the one before it
    jg.set_rng_state(state)
    jg.randn(4)
    b = jg.randn(2)
    jg.set_rng_state(state)
    with jg.random.fork_rng():
        jg.rand(100)
    jg.randn(4)
    assert same(jg.randn(2), b)


def test_a_generator_leaves_the_default_stream_alone():
    jg.manual_seed(0)
    a = jg.rand(3)
    jg.manual_seed(0)
    jg.rand(100, generator=gen(9))
    jg.randn(10, generator=gen(9))
    assert same(jg.rand(3), a)


def test_generator_of_another_device_and_not_a_generator():
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator but found 'cuda'"):
        g = jg.Generator.__new__(jg.Generator)
        g.__dict__.update(gen(0).__dict__, _device=jg.device("cuda"))
        jg.rand(2, generator=g)
    with pytest.raises(TypeError, match="expected a jitgrad.Generator"):
        jg.rand(2, generator=5)


def test_nn_init_and_dropout_follow_the_generators():
    w1, w2 = jg.empty(3, 4), jg.empty(3, 4)
    jg.nn.init.normal_(w1, generator=gen(4))
    jg.nn.init.normal_(w2, generator=gen(4))
    assert same(w1, w2)
    jg.manual_seed(3)
    d1 = jg.nn.functional.dropout(jg.ones(50), 0.5)
    jg.manual_seed(3)
    assert same(jg.nn.functional.dropout(jg.ones(50), 0.5), d1)


# ------------------------------------------------------------------ factories
@pytest.mark.parametrize("fn,kernel", [(jg.rand, "check_uniform_bounds"), (jg.randn, "normal_kernel_cpu")])
def test_float_factories_reject_integer_dtypes(fn, kernel):
    with pytest.raises(NotImplementedError, match='"%s" not implemented for \'Long\'' % kernel):
        fn(2, dtype=jg.int64)


def test_factories_dtypes_shapes_and_generator():
    g = gen(0)
    assert jg.rand(2, 3, generator=g).dtype == jg.float32
    assert jg.randn((2, 3), dtype=jg.float64, generator=g).shape == (2, 3)
    r = jg.randint(3, 5, (100,), generator=g)
    assert r.dtype == jg.int64 and r.min().item() == 3 and r.max().item() == 4
    assert jg.randint(5, (3,), dtype=jg.float32, generator=g).dtype == jg.float32
    assert sorted(jg.randperm(20, generator=g).tolist()) == list(range(20))
    assert jg.rand_like(jg.zeros(2, dtype=jg.float64), generator=g).dtype == jg.float64
    assert jg.randn_like(jg.zeros(2, 2), generator=g).shape == (2, 2)
    assert jg.randint_like(jg.zeros(4), 5, generator=g).dtype == jg.float32
    assert jg.rand(3, requires_grad=True).requires_grad


def test_factory_errors():
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to', but got from=5 >= to=3"):
        jg.randint(5, 3, (3,))
    with pytest.raises(RuntimeError, match=r"Trying to create tensor with negative dimension -1: \[-1\]"):
        jg.randperm(-1)
    with pytest.raises(RuntimeError, match="Only Tensors of floating point"):
        jg.randint(5, (3,), requires_grad=True)
    with pytest.raises(NotImplementedError, match="normal_kernel_cpu"):
        jg.randn_like(jg.zeros(2, dtype=jg.int64))


def test_uniform_and_normal_statistics():
    u = jg.rand(20000, generator=gen(1)).numpy()
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    z = jg.randn(20000, dtype=jg.float64, generator=gen(2)).numpy()
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03
    p = jg.randperm(1000, generator=gen(3)).numpy()
    assert abs(np.corrcoef(p, np.arange(1000))[0, 1]) < 0.15


# ------------------------------------------------------------------ normal
def test_normal_overloads_broadcast_and_statistics():
    g = gen(0)
    x = jg.normal(jg.tensor([0.0, 100.0]).reshape(2, 1).expand(2, 5000), jg.tensor([1.0, 0.1]).reshape(2, 1),
                  generator=g)
    a = x.numpy()
    assert abs(a[0].mean()) < 0.1 and abs(a[0].std() - 1) < 0.1
    assert abs(a[1].mean() - 100) < 0.01 and abs(a[1].std() - 0.1) < 0.01
    assert jg.normal(jg.zeros(3, 1), jg.ones(2)).shape == (3, 2)
    assert jg.normal(2.0, jg.ones(4)).shape == (4,)
    assert jg.normal(jg.zeros(()), 1.0).shape == ()
    y = jg.normal(3.0, 0.5, (4000,), generator=g)
    assert y.dtype == jg.float32 and abs(y.numpy().mean() - 3) < 0.05
    assert jg.normal(jg.zeros(3, dtype=jg.float64), jg.ones(3)).dtype == jg.float64
    assert jg.normal(jg.zeros(3), jg.ones(3, dtype=jg.int64)).dtype == jg.float32
    assert same(jg.normal(jg.zeros(5), 1.0, generator=gen(4)), jg.normal(jg.zeros(5), 1.0, generator=gen(4)))


def test_normal_errors():
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0, but found std -1"):
        jg.normal(jg.zeros(3), -1.0)
    with pytest.raises(RuntimeError, match="normal expects all elements of std >= 0.0"):
        jg.normal(jg.zeros(3), -jg.ones(3))
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0, but found std -1"):
        jg.normal(0.0, -1.0, (2,))
    with pytest.raises(NotImplementedError, match="\"normal_kernel_cpu\" not implemented for 'Long'"):
        jg.normal(jg.zeros(3, dtype=jg.int64), 1.0)
    with pytest.raises(NotImplementedError, match="normal_kernel_cpu"):
        jg.normal(0.0, 1.0, (2,), dtype=jg.int64)
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size of tensor b \(4\)"):
        jg.normal(jg.zeros(3), jg.ones(4))
    with pytest.raises(TypeError, match="normal"):
        jg.normal(2.0, 3.0)


@pytest.mark.parametrize("make,node", [
    (lambda m, s: jg.normal(m, 1.0), "NormalBackward1"),
    (lambda m, s: jg.normal(1.0, s), "NormalBackward2"),
    (lambda m, s: jg.normal(m, s), "NormalBackward3"),
])
def test_normal_takes_a_zero_gradient(make, node):
    """normal_tensor_float, normal_float_tensor, normal_tensor_tensor: PyTorch's nodes, zero gradients."""
    m = jg.zeros(2, 1, requires_grad=True)
    s = jg.ones(3, requires_grad=True)
    out = make(m, s)
    assert type(out.grad_fn).__name__ == node
    out.sum().backward()
    for t in (m, s):
        if t.grad is not None:
            assert t.grad.shape == t.shape and not t.grad.any()


# ------------------------------------------------------------------ multinomial
def test_multinomial_frequencies_with_and_without_replacement():
    w = jg.tensor([1.0, 2.0, 0.0, 5.0])
    s = jg.multinomial(w, 8000, replacement=True, generator=gen(0))
    assert s.dtype == jg.int64 and s.shape == (8000,)
    freq = np.bincount(s.numpy(), minlength=4) / 8000
    assert np.allclose(freq, [1 / 8, 2 / 8, 0, 5 / 8], atol=0.02) and freq[2] == 0
    # without replacement: distinct categories; the first draw follows the weights
    rows = jg.multinomial(w.expand(4000, 4), 3, generator=gen(1)).numpy()
    assert rows.shape == (4000, 3) and all(len(set(r)) == 3 for r in rows[:200])
    assert np.allclose(np.bincount(rows[:, 0], minlength=4) / 4000, [1 / 8, 2 / 8, 0, 5 / 8], atol=0.03)
    # zero-weight categories come last, once the others are taken
    assert jg.multinomial(jg.tensor([0.0, 1.0, 0.0]), 2, generator=gen(2)).tolist()[0] == 1
    assert jg.multinomial(jg.ones(2, 3), 2).shape == (2, 2)
    assert same(jg.multinomial(w, 10, True, generator=gen(5)), jg.multinomial(w, 10, True, generator=gen(5)))


def test_multinomial_is_not_differentiable():
    w = jg.ones(3, requires_grad=True)
    out = jg.multinomial(w, 2)
    assert not out.requires_grad and out.grad_fn is None


@pytest.mark.parametrize("args,exc,msg", [
    ((jg.tensor([0.1, 0.9]), 3), RuntimeError, "cannot sample n_sample > prob_dist.size\\(-1\\) samples without "
                                                "replacement"),
    ((jg.tensor([-0.1, 0.9]), 1), RuntimeError, "probability tensor contains either `inf`, `nan` or element < 0"),
    ((jg.tensor([float("nan"), 0.0]), 1), RuntimeError, "probability tensor contains either `inf`, `nan`"),
    ((jg.tensor([float("inf"), 0.0]), 1), RuntimeError, "probability tensor contains either `inf`, `nan`"),
    ((jg.tensor([0.0, 0.0]), 1), RuntimeError, "invalid multinomial distribution \\(sum of probabilities <= 0\\)"),
    ((jg.tensor([[1.0, 2.0], [0.0, 0.0]]), 1, True), RuntimeError, "sum of probabilities <= 0"),
    ((jg.tensor(0.5), 1), RuntimeError, "prob_dist must be 1 or 2 dim"),
    ((jg.ones(2, 2, 2), 1), RuntimeError, "prob_dist must be 1 or 2 dim"),
    ((jg.ones(2), 0), RuntimeError, "cannot sample n_sample <= 0 samples"),
    ((jg.tensor([1, 2]), 1), RuntimeError, "multinomial only supports floating-point dtypes for input, got: Long"),
])
def test_multinomial_errors(args, exc, msg):
    with pytest.raises(exc, match=msg):
        jg.multinomial(*args)


# ------------------------------------------------------------------ bernoulli
def test_bernoulli_of_probabilities_and_of_p():
    p = jg.tensor([0.0, 1.0, 0.3]).expand(5000, 3)
    b = jg.bernoulli(p, generator=gen(0))
    assert b.dtype == jg.float32
    m = b.numpy().mean(axis=0)
    assert m[0] == 0 and m[1] == 1 and abs(m[2] - 0.3) < 0.03
    c = jg.bernoulli(jg.zeros(4000), p=0.7, generator=gen(1))
    assert abs(c.numpy().mean() - 0.7) < 0.03
    assert jg.bernoulli(jg.tensor([0, 1]), p=0.5).dtype == jg.int64
    x = jg.tensor([0.0, 1.0], requires_grad=True)
    out = jg.bernoulli(x)
    assert type(out.grad_fn).__name__ == "BernoulliBackward0"  # the bernoulli entry
    out.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]


def test_bernoulli_errors():
    with pytest.raises(RuntimeError, match=r"Expected p_in >= 0 && p_in <= 1 to be true, but got false"):
        jg.bernoulli(jg.tensor([0.5, 2.0]))
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\], but got p=1.5"):
        jg.bernoulli(jg.zeros(2), p=1.5)
    with pytest.raises(NotImplementedError, match="\"bernoulli_tensor_cpu_p_\" not implemented for 'Long'"):
        jg.bernoulli(jg.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="Expected p_in >= 0"):
        jg.zeros(3).bernoulli_(jg.tensor([0.0, 2.0, 1.0]))
    with pytest.raises(RuntimeError, match="The expanded size of the tensor"):
        jg.zeros(3).bernoulli_(jg.ones(2))


# ------------------------------------------------------------------ poisson
def test_poisson():
    rates = jg.tensor([0.0, 1.0, 20.0]).expand(4000, 3)
    s = jg.poisson(rates, generator=gen(0))
    m = s.numpy().mean(axis=0)
    assert s.dtype == jg.float32 and m[0] == 0 and abs(m[1] - 1) < 0.1 and abs(m[2] - 20) < 0.5
    assert np.array_equal(s.numpy(), np.round(s.numpy()))
    with pytest.raises(RuntimeError, match="invalid Poisson rate, expected rate to be non-negative"):
        jg.poisson(jg.tensor([-1.0]))
    with pytest.raises(RuntimeError, match="invalid Poisson rate"):
        jg.poisson(jg.tensor([float("nan")]))
    with pytest.raises(NotImplementedError, match="\"poisson_cpu\" not implemented for 'Long'"):
        jg.poisson(jg.tensor([1, 2]))


# ------------------------------------------------------------------ gamma and binomial
def test_standard_gamma_samples_and_their_reparameterized_gradient():
    stats = pytest.importorskip("scipy.stats")
    from scipy import special
    alpha = jg.tensor([0.3, 1.0, 4.0, 20.0], dtype=jg.float64).expand(20000, 4)
    s = jg._standard_gamma(alpha, generator=gen(0)).numpy()
    for j, a in enumerate([0.3, 1.0, 4.0, 20.0]):
        assert stats.kstest(s[:, j], stats.gamma(a).cdf).pvalue > 1e-3
    # d x / d alpha at fixed CDF: -(dF/dalpha) / (dF/dx), F the regularized lower incomplete gamma function
    a = np.array([0.3, 0.3, 1.0, 2.5, 4.0, 9.0, 20.0, 20.0, 50.0])
    x = np.array([0.05, 1.5, 0.5, 3.0, 2.0, 9.5, 15.0, 30.0, 50.0])
    h = 1e-6 * a
    want = -(special.gammainc(a + h, x) - special.gammainc(a - h, x)) / (2 * h) / stats.gamma(a).pdf(x)
    got = jg._standard_gamma_grad(jg.tensor(a), jg.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-3)  # PyTorch's approximation: series, saddle point, rational fit
    assert jg._standard_gamma(jg.tensor([2.0])).dtype is jg.float32
    with pytest.raises(NotImplementedError, match="\"gamma_cpu\" not implemented for 'Long'"):
        jg._standard_gamma(jg.tensor([1, 2]))


def test_binomial():
    n = jg.tensor([0.0, 10.0, 100.0]).expand(5000, 3)
    s = jg.binomial(n, jg.tensor([0.5, 0.3, 0.9]).expand(5000, 3), generator=gen(0))
    m = s.numpy().mean(axis=0)
    assert s.dtype is jg.float32 and m[0] == 0 and abs(m[1] - 3) < 0.1 and abs(m[2] - 90) < 0.2
    with pytest.raises(RuntimeError, match="Found dtype Double but expected Float"):
        jg.binomial(jg.tensor([1.0]), jg.tensor([0.5], dtype=jg.float64))


# ------------------------------------------------------------------ out=
def test_out_argument():
    out = jg.empty(2, 3, dtype=jg.float64)
    assert jg.rand(2, 3, out=out, generator=gen(0)) is out and out.numpy().max() < 1
    assert same(out, jg.rand(2, 3, dtype=jg.float64, generator=gen(0)))  # out's dtype is the default
    o = jg.empty(5, dtype=jg.int64)
    assert jg.randperm(5, out=o) is o and sorted(o.tolist()) == list(range(5))
    o = jg.empty(4)
    assert jg.normal(jg.zeros(4), 1.0, out=o) is o and jg.randn(4, out=o) is o
    o = jg.empty(3, dtype=jg.int64)
    assert jg.multinomial(jg.ones(3), 3, out=o) is o and sorted(o.tolist()) == [0, 1, 2]
    with pytest.raises(RuntimeError, match="does not resize out= tensors"):
        jg.rand(3, out=jg.empty(2))


# ------------------------------------------------------------------ in-place fills
def test_fill_statistics_and_dtypes():
    g = gen(0)
    u = jg.empty(10000).uniform_(-2, 3, generator=g).numpy()
    assert -2 <= u.min() and u.max() < 3 and abs(u.mean() - 0.5) < 0.05
    n = jg.empty(10000, dtype=jg.float64).normal_(5, 2, generator=g).numpy()
    assert abs(n.mean() - 5) < 0.1 and abs(n.std() - 2) < 0.1
    e = jg.empty(10000).exponential_(4, generator=g).numpy()
    assert e.min() >= 0 and abs(e.mean() - 0.25) < 0.02
    geo = jg.empty(10000, dtype=jg.int64).geometric_(0.25, generator=g).numpy()
    assert geo.min() >= 1 and abs(geo.mean() - 4) < 0.2
    ln = jg.empty(10000).log_normal_(0, 0.5, generator=g).numpy()
    assert abs(np.log(ln).mean()) < 0.03
    c = jg.empty(10000).cauchy_(1, 2, generator=g).numpy()
    assert abs(np.median(c) - 1) < 0.15
    r = jg.empty(10000).random_(2, 5, generator=g).numpy()
    assert set(np.unique(r)) == {2.0, 3.0, 4.0}
    assert jg.zeros(1000).random_(generator=g).max().item() <= 2 ** 24
    assert jg.zeros(1000, dtype=jg.int32).random_(-5, 2).min().item() >= -5
    assert set(jg.zeros(1000, dtype=jg.bool).random_(generator=g).tolist()) == {False, True}
    bern = jg.zeros(5000, dtype=jg.int64).bernoulli_(0.2, generator=g).numpy()
    assert set(np.unique(bern)) == {0, 1} and abs(bern.mean() - 0.2) < 0.03
    t = jg.zeros(3)
    assert t.uniform_(1, 1) is t and t.tolist() == [1.0, 1.0, 1.0]
    assert same(jg.empty(5).normal_(generator=gen(3)), jg.empty(5).normal_(generator=gen(3)))


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: jg.zeros(3).uniform_(2, 1), RuntimeError, "uniform_ expects to return a \\[from, to\\) range, but found "
                                                       "from=2 > to=1"),
    (lambda: jg.zeros(3, dtype=jg.int64).uniform_(), NotImplementedError, "\"check_uniform_bounds\" not implemented "
                                                                           "for 'Long'"),
    (lambda: jg.zeros(3).uniform_(0, float("inf")), RuntimeError, "to is out of bounds for float"),
    (lambda: jg.zeros(3).normal_(0, -1), RuntimeError, "normal expects std >= 0.0, but found std -1"),
    (lambda: jg.zeros(3, dtype=jg.bool).normal_(), NotImplementedError, "\"normal_kernel_cpu\" not implemented for "
                                                                         "'Bool'"),
    (lambda: jg.zeros(3).random_(5, 2), RuntimeError, "random_ expects 'from' to be less than 'to', but got from=5 >= "
                                                      "to=2"),
    (lambda: jg.zeros(3, dtype=jg.int32).random_(0, 2 ** 40), RuntimeError, "to - 1 is out of bounds for int"),
    (lambda: jg.zeros(3).exponential_(0), RuntimeError, "exponential_ expects lambda > 0.0, but found lambda=0"),
    (lambda: jg.zeros(3, dtype=jg.int64).exponential_(), RuntimeError, "Exponential distribution is a continuous "
                                                                        "probability distribution. dtype must be a "
                                                                        "floating point but you specified Long"),
    (lambda: jg.zeros(3).log_normal_(1, 0), RuntimeError, "log_normal_ expects std > 0.0, but found std=0"),
    (lambda: jg.zeros(3, dtype=jg.int64).log_normal_(), NotImplementedError, "\"log_normal_cpu\" not implemented for "
                                                                              "'Long'"),
    (lambda: jg.zeros(3).cauchy_(0, -1), RuntimeError, "cauchy_ expects sigma > 0.0, but found sigma=-1"),
    (lambda: jg.zeros(3, dtype=jg.int64).cauchy_(), RuntimeError,
     "Cauchy distribution is a continuous probability distribution. dtype must be a floating point but you specified "
     "long int"),
    (lambda: jg.zeros(3).random_(0, 2 ** 70), ValueError, "Overflow when unpacking long long"),
    (lambda: jg.zeros(3).geometric_(1), RuntimeError, "geometric_ expects p to be in \\(0, 1\\), but got p=1"),
    (lambda: jg.zeros(3, dtype=jg.bool).geometric_(0.5), NotImplementedError, "\"geometric_cpu\" not implemented for "
                                                                               "'Bool'"),
    (lambda: jg.zeros(3).bernoulli_(1.5), RuntimeError, "bernoulli_ expects p to be in \\[0, 1\\], but got p=1.5"),
    (lambda: jg.zeros(3, requires_grad=True).uniform_(), RuntimeError, "a leaf Variable that requires grad is being "
                                                                       "used in an in-place operation."),
])
def test_fill_errors(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


# Every entry of jitgrad/ops/random.py, with a call that runs it on a tensor with history (its node's name is
# PyTorch's) and the gradient it passes back: zero.
ENTRY_CALLS = {
    "uniform": (lambda t: t.uniform_(), "UniformBackward0"),
    "normal_fill": (lambda t: t.normal_(), "NormalBackward0"),
    "log_normal": (lambda t: t.log_normal_(), "LogNormalBackward0"),
    "cauchy": (lambda t: t.cauchy_(), "CauchyBackward0"),
    "exponential": (lambda t: t.exponential_(), "ExponentialBackward0"),
    "geometric": (lambda t: t.geometric_(0.5), "GeometricBackward0"),
    "random": (lambda t: t.random_(), "RandomBackward2"),
    "bernoulli_fill": (lambda t: t.bernoulli_(0.5), "BernoulliBackward2"),
    "bernoulli_tensor_fill": (lambda t: t.bernoulli_(jg.full((3,), 0.5)), "BernoulliBackward1"),
    "bernoulli": (lambda t: jg.bernoulli(t.clamp(0, 1)), "BernoulliBackward0"),
    "normal_tensor_tensor": (lambda t: jg.normal(t, jg.ones(3)), "NormalBackward3"),
    "normal_tensor_float": (lambda t: jg.normal(t, 2.0), "NormalBackward1"),
    "normal_float_tensor": (lambda t: jg.normal(0.0, t.abs()), "NormalBackward2"),
    "multinomial": (lambda t: jg.multinomial(t.abs() + 1, 2), None),
    "poisson": (lambda t: jg.poisson(t * 3), "PoissonBackward0"),
    "binomial": (lambda t: jg.binomial(t * 10, t), None),
    "_standard_gamma": (lambda t: jg._standard_gamma(t), "StandardGammaBackward0"),
    "_standard_gamma_grad": (lambda t: jg._standard_gamma_grad(t, t), None),
}
REPARAMETERIZED = {"_standard_gamma"}  # a sample that moves with its parameter: a gradient that is not zero


def test_every_random_entry_is_tested_here():
    from jitgrad.ops import random as R
    mine = {n for n, op in OPS.items() if op.forward.__module__ == R.__name__}
    assert mine == set(ENTRY_CALLS)


@pytest.mark.parametrize("name", sorted(ENTRY_CALLS))
def test_random_entry_with_history(name):
    call, node = ENTRY_CALLS[name]
    a = jg.tensor([0.2, 0.5, 0.7], requires_grad=True)
    t = a * 1
    out = call(t)
    if node is None:
        assert out.grad_fn is None
        return
    assert type(out.grad_fn).__name__ == node
    out.sum().backward()
    if name in REPARAMETERIZED:
        assert (a.grad.numpy() > 0).all()
    else:
        assert a.grad.tolist() == [0.0, 0.0, 0.0]


def test_in_place_fill_keeps_the_tensor_and_bumps_its_version():
    t = jg.zeros(4)
    v = t._version
    assert t.normal_(generator=gen(0)) is t and t._version == v + 1
    view = jg.zeros(2, 4)[1]
    view.uniform_(5, 6)
    assert view._base.numpy()[1].min() >= 5 and view._base.numpy()[0].max() == 0


def test_statistics_agree_with_pytorch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    ours = jg.multinomial(jg.tensor([1.0, 3.0]), 4000, True, generator=gen(0)).numpy().mean()
    theirs = torch.multinomial(torch.tensor([1.0, 3.0]), 4000, True).numpy().mean()
    assert abs(ours - theirs) < 4 * math.sqrt(0.75 * 0.25 / 4000) * math.sqrt(2)


_CUDA_SCRIPT = r"""
import numpy as np
import jitgrad as jg

def same(a, b):
    assert a.device.type == "cuda", a.device
    np.testing.assert_array_equal(a.cpu().numpy(), b.numpy())

def both(fn, seed=0):
    return fn("cuda", jg.Generator("cuda").manual_seed(seed)), fn("cpu", jg.Generator().manual_seed(seed))

w = [[1.0, 2.0, 0.0, 5.0], [0.0, 0.0, 1.0, 1.0]]
for replacement in (True, False):  # the CUDA sampling kernels give the CPU's categories for the same draws
    same(*both(lambda d, g: jg.multinomial(jg.tensor(w, device=d), 3, replacement, generator=g)))
    same(*both(lambda d, g: jg.multinomial(jg.tensor(w[0], device=d), 4, replacement, generator=g)))
same(*both(lambda d, g: jg.rand(3, 2, device=d, generator=g)))
same(*both(lambda d, g: jg.randn(5, device=d, generator=g)))
same(*both(lambda d, g: jg.randint(0, 9, (4,), device=d, generator=g)))
same(*both(lambda d, g: jg.randperm(6, device=d, generator=g)))
same(*both(lambda d, g: jg.normal(jg.zeros(3, 1, device=d), jg.ones(2, device=d), generator=g)))
same(*both(lambda d, g: jg.bernoulli(jg.full((6,), 0.5, device=d), generator=g)))
same(*both(lambda d, g: jg.zeros(4, device=d).uniform_(2, 3, generator=g)))
same(*both(lambda d, g: jg.poisson(jg.full((5,), 3.0, device=d), generator=g)))
same(*both(lambda d, g: jg.zeros(4, device=d).bernoulli_(jg.full((4,), 0.5, device=d), generator=g)))
try:
    jg.rand(2, device="cuda", generator=jg.Generator())
except RuntimeError as e:
    assert "Expected a 'cuda' device type for generator but found 'cpu'" in str(e)
else:
    raise AssertionError("a CPU generator filled a CUDA tensor")
print("ok")
"""


def test_random_ops_on_cuda_match_the_cpu_under_the_simulator():
    """CUDA tensors draw the host's numbers: a CUDA generator seeded as a CPU one gives the same samples."""
    import subprocess
    import sys
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, "-c", _CUDA_SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout[-2000:] + proc.stderr[-4000:]
