"""The benchmark workloads, written once against PyTorch's API.

jitgrad has PyTorch's API, so the same code builds each workload on ``jitgrad`` (the asv suite,
compare.py) and on ``torch`` (compare.py). A builder takes the library module and returns a
``step()`` closure that runs one forward and backward pass (and, for the training steps, the
optimizer update). Inputs come from NumPy with a fixed seed, so both libraries see the same data.
"""
import os

# what jitgrad sets when it is imported before NumPy (see jitgrad/__init__.py): here NumPy comes first
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402

SEED = 0


def blas_kernels():
    """The kernels NumPy's OpenBLAS runs here, e.g. "OpenBLAS SkylakeX kernels": the GEMM-bound workloads
    depend on them (the OPENBLAS_CORETYPE environment variable picks others)."""
    try:
        import threadpoolctl  # (scikit-learn's dependency: the examples extra)
    except ImportError:
        return "OpenBLAS kernels unknown (threadpoolctl is not installed)"
    names = [i.get("architecture", "?") for i in threadpoolctl.threadpool_info() if i.get("internal_api") == "openblas"]
    return "OpenBLAS %s kernels" % ", ".join(names) if names else "no OpenBLAS"


def _f32(rng, *shape):
    return rng.standard_normal(shape, dtype=np.float32)


def _leaf(lib, array):
    return lib.from_numpy(array).requires_grad_()


def _clear(*tensors):
    for t in tensors:
        t.grad = None


def _compiled(lib, fn, compiled):
    """``fn``, or ``lib.compile(fn)`` for the compiled column (jitgrad only: PyTorch's column is eager)."""
    return lib.compile(fn) if compiled else fn


def chain100(lib, compiled=False):
    """Per-op overhead: 100 small ops (mul, add, tanh, sigmoid x 25) on 16 elements, then backward."""
    rng = np.random.default_rng(SEED)
    x, w, b = (_leaf(lib, _f32(rng, 16)) for _ in range(3))

    def forward(x, w, b):
        y = x
        for _ in range(25):
            y = (y * w + b).tanh().sigmoid()
        return y.sum()
    forward = _compiled(lib, forward, compiled)

    def step():
        _clear(x, w, b)
        forward(x, w, b).backward()
    return step


def chain100_forward(lib):
    """``chain100``'s forward alone (its graph recorded, no backward): chain100 minus this is its backward."""
    rng = np.random.default_rng(SEED)
    x, w, b = (_leaf(lib, _f32(rng, 16)) for _ in range(3))

    def step():
        y = x
        for _ in range(25):
            y = (y * w + b).tanh().sigmoid()
        return y.sum()
    return step


def mul16(lib):
    """Per-op cost without recording: ``a * b`` on 16 elements, no input requires grad."""
    rng = np.random.default_rng(SEED)
    a, b = (lib.from_numpy(_f32(rng, 16)) for _ in range(2))

    def step():
        return a * b
    return step


def mul16_grad(lib):
    """Per-op cost with recording: ``a * b`` on 16 elements whose inputs require grad (no backward)."""
    rng = np.random.default_rng(SEED)
    a, b = (_leaf(lib, _f32(rng, 16)) for _ in range(2))

    def step():
        return a * b
    return step


def elementwise_4m(lib, compiled=False):
    """A fused-looking elementwise chain: sum(tanh(x*w+b)**2 * sigmoid(x)) on 4M elements, fwd+bwd."""
    rng = np.random.default_rng(SEED)
    x, w, b = (_leaf(lib, _f32(rng, 1 << 22)) for _ in range(3))
    forward = _compiled(lib, lambda x, w, b: ((x * w + b).tanh() ** 2 * x.sigmoid()).sum(), compiled)

    def step():
        _clear(x, w, b)
        forward(x, w, b).backward()
    return step


def scalar_graph1000(lib, compiled=False):
    """A 1,000-op graph of scalar (0-d) ops -- softplus, sums of 4 nodes, products, 4-way softmaxes --
    over 16 inputs, then backward: what an optimizer of a small scientific model evaluates."""
    return _scalar_graph(lib, compiled, stacked=False)


def scalar_stack1000(lib, compiled=False):
    """``scalar_graph1000`` with each 4-way softmax taken of the 4 values stacked into a vector (``stack``,
    ``softmax(0)``, ``unbind``): a graph of values of two sizes, 1,000 ops."""
    return _scalar_graph(lib, compiled, stacked=True)


def _scalar_graph(lib, compiled, stacked):
    rng = np.random.default_rng(SEED)
    xs = [_leaf(lib, _f32(rng)) for _ in range(16)]
    plan, n_ops = [], 0  # (kind, operand positions), drawn once so both libraries build the same graph
    n_vals = len(xs)
    while n_ops < 1000:
        kind = ["softplus", "sum4", "prod", "softmax4"][len(plan) % 4]
        picks = [int(i) for i in rng.integers(max(0, n_vals - 24), n_vals, 4)]
        plan.append((kind, picks))
        n_ops += {"softplus": 1, "sum4": 3, "prod": 1, "softmax4": 3 if stacked else 11}[kind]
        n_vals += 4 if kind == "softmax4" else 1
    softplus = lib.nn.functional.softplus

    def forward(*xs):
        v = list(xs)
        for kind, (a, b, c, d) in plan:
            if kind == "softplus":
                v.append(softplus(v[a]))
            elif kind == "sum4":
                v.append(v[a] + v[b] + v[c] + v[d])
            elif kind == "prod":
                v.append(v[a] * v[b])
            elif stacked:
                v += lib.stack([v[a], v[b], v[c], v[d]]).softmax(0).unbind(0)
            else:
                e = [v[a].exp(), v[b].exp(), v[c].exp(), v[d].exp()]
                s = e[0] + e[1] + e[2] + e[3]
                v += [ei / s for ei in e]
        return v[-1] + v[-2]
    forward = _compiled(lib, forward, compiled)

    def step():
        _clear(*xs)
        forward(*xs).backward()
    return step


def reduction(kind):
    """sum / mean / max over axis 1 of a 4096x4096 float32 matrix, fwd+bwd."""
    def build(lib):
        rng = np.random.default_rng(SEED)
        x = _leaf(lib, _f32(rng, 4096, 4096))
        g = lib.ones(4096)
        reduce = {"sum": lambda: x.sum(1), "mean": lambda: x.mean(1), "max": lambda: x.max(1)[0]}[kind]

        def step():
            _clear(x)
            reduce().backward(g)
        return step
    build.__name__ = build.__qualname__ = "reduction_" + kind
    build.__doc__ = "%s over axis 1 of 4096x4096, fwd+bwd" % kind
    return build


def matmul_1024(lib):
    """1024x1024 @ 1024x1024 float32, fwd+bwd."""
    rng = np.random.default_rng(SEED)
    a, b = _leaf(lib, _f32(rng, 1024, 1024)), _leaf(lib, _f32(rng, 1024, 1024))
    g = lib.ones(1024, 1024)

    def step():
        _clear(a, b)
        (a @ b).backward(g)
    return step


def has_nn(lib, *names):
    """Whether ``lib.nn`` / ``lib.optim`` import and have the layers ``names`` (besides the MLP's)."""
    try:
        import importlib
        nn = importlib.import_module(lib.__name__ + ".nn")
        optim = importlib.import_module(lib.__name__ + ".optim")
    except ImportError:
        return False
    return all(hasattr(nn, n) for n in names + ("Sequential", "Linear", "ReLU")) and hasattr(optim, "SGD") \
        and hasattr(nn, "functional") and hasattr(nn.functional, "cross_entropy")


def _training_step(lib, model, x, y, params=None, item=False):
    opt = lib.optim.SGD(model.parameters() if params is None else params, lr=0.01, momentum=0.9)
    cross_entropy = lib.nn.functional.cross_entropy

    def step():
        opt.zero_grad()
        loss = cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item() if item else loss
    return step


def _mlp(lib):
    """The MLP 784-512-256-10 and a batch of 256 inputs and labels."""
    if not has_nn(lib):
        raise NotImplementedError("%s.nn / %s.optim lack Linear, ReLU, Sequential or SGD" % (lib.__name__, lib.__name__))
    rng = np.random.default_rng(SEED)
    x = lib.from_numpy(_f32(rng, 256, 784))
    y = lib.from_numpy(rng.integers(0, 10, 256))
    lib.manual_seed(SEED)
    nn = lib.nn
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
    return model, x, y


def mlp_step(lib, compiled=False):
    """One training step of an MLP 784-512-256-10, batch 256, cross-entropy, SGD with momentum 0.9
    (compiled column: the model compiled; loss, backward and SGD outside it)."""
    model, x, y = _mlp(lib)
    if compiled:
        return _training_step(lib, lib.compile(model), x, y, model.parameters())
    return _training_step(lib, model, x, y)


def mlp_step_whole(lib, compiled=False):
    """``mlp_step``'s training step (zero_grad, forward, cross-entropy, backward, SGD with momentum 0.9) in
    one function (compiled column: that whole function compiled: backward and the update run in its plan)."""
    model, x, y = _mlp(lib)
    step = _training_step(lib, model, x, y)
    return lib.compile(step) if compiled else step


def mlp_step_item(lib, compiled=False):
    """``mlp_step_whole``'s step ending in ``return loss.item()``, as training loops log their loss (compiled
    column: a graph break at the read; the step before it is compiled, its optimizer step runs as called)."""
    model, x, y = _mlp(lib)
    step = _training_step(lib, model, x, y, item=True)
    return lib.compile(step) if compiled else step


def cnn_step(lib):
    """One training step of a small CNN on 64x1x28x28: two (3x3 conv, ReLU, 2x2 max-pool) blocks
    with 16 and 32 channels, then a linear layer; cross-entropy, SGD with momentum 0.9."""
    if not has_nn(lib, "Conv2d", "MaxPool2d", "Flatten"):
        raise NotImplementedError("%s.nn lacks Conv2d, MaxPool2d or Flatten" % lib.__name__)
    rng = np.random.default_rng(SEED)
    x = lib.from_numpy(_f32(rng, 64, 1, 28, 28))
    y = lib.from_numpy(rng.integers(0, 10, 64))
    lib.manual_seed(SEED)
    nn = lib.nn
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    return _training_step(lib, model, x, y)


def _adamw_step(lib, model, inputs, targets, vocab):
    opt = lib.optim.AdamW(model.parameters(), lr=1e-3)
    cross_entropy = lib.nn.functional.cross_entropy

    def step():
        opt.zero_grad()
        loss = cross_entropy(model(inputs).reshape(-1, vocab), targets)
        loss.backward()
        opt.step()
        return loss
    return step


def _tagger_step(lib, cell):
    if not has_nn(lib, cell) or not hasattr(lib.optim, "AdamW"):
        raise NotImplementedError("%s.nn lacks %s or %s.optim lacks AdamW" % (lib.__name__, cell, lib.__name__))
    rng = np.random.default_rng(SEED)
    x = lib.from_numpy(_f32(rng, 64, 32, 64))
    y = lib.from_numpy(rng.integers(0, 10, 64 * 32))
    lib.manual_seed(SEED)
    nn = lib.nn

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = getattr(nn, cell)(64, 256, num_layers=2)
            self.head = nn.Linear(256, 10)

        def forward(self, x):
            return self.head(self.rnn(x)[0])
    return _adamw_step(lib, Tagger(), x, y, 10)


def lstm_step(lib):
    """One training step of a sequence tagger: LSTM (2 layers, hidden 256) over 64 steps of a batch of 32
    (64 input features), a linear layer to 10 tags at every step; cross-entropy, AdamW."""
    return _tagger_step(lib, "LSTM")


def gru_step(lib):
    """``lstm_step``'s tagger with a GRU (2 layers, hidden 256) in place of the LSTM."""
    return _tagger_step(lib, "GRU")


def transformer_step(lib):
    """One training step of a 4-layer causal transformer language model (d_model 128, 4 heads, feed-forward
    512, pre-norm, no dropout) on batch 32 x 64 tokens of a 256-symbol vocabulary; cross-entropy, AdamW."""
    if not has_nn(lib, "TransformerEncoderLayer", "Embedding", "LayerNorm") or not hasattr(lib.optim, "AdamW"):
        raise NotImplementedError("%s.nn lacks the transformer layers" % lib.__name__)
    rng = np.random.default_rng(SEED)
    vocab, seq = 256, 64
    tokens = lib.from_numpy(rng.integers(0, vocab, (32, seq)))
    targets = lib.from_numpy(rng.integers(0, vocab, 32 * seq))
    lib.manual_seed(SEED)
    nn = lib.nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, 128)
            self.pos = nn.Embedding(seq, 128)
            layer = nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True, norm_first=True)
            self.blocks = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(128)
            self.head = nn.Linear(128, vocab)
            self.register_buffer("positions", lib.arange(seq))
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq))

        def forward(self, idx):
            x = self.tok(idx) + self.pos(self.positions)
            return self.head(self.norm(self.blocks(x, mask=self.mask, is_causal=True)))
    return _adamw_step(lib, LM(), tokens, targets, vocab)


def dataloader_epoch(num_workers):
    """One epoch of a DataLoader over a TensorDataset of 60000 28x28 float32 images and int64 labels, batch 64,
    shuffled, in the main process or with worker processes (started for the epoch, as by default)."""
    def build(lib):
        import importlib
        import multiprocessing
        try:
            data = importlib.import_module(lib.__name__ + ".utils.data")
        except ImportError:
            raise NotImplementedError("%s.utils.data is missing" % lib.__name__) from None
        rng = np.random.default_rng(SEED)
        images, labels = _f32(rng, 60000, 28, 28), rng.integers(0, 10, 60000)
        dataset = data.TensorDataset(lib.from_numpy(images), lib.from_numpy(labels))
        # workers as a script on Linux starts them (fork); compare.py's spawned process would otherwise spawn them,
        # each a fresh interpreter that imports the library and unpickles the whole dataset
        fork = "fork" if num_workers and "fork" in multiprocessing.get_all_start_methods() else None
        loader = data.DataLoader(dataset, batch_size=64, shuffle=True, num_workers=num_workers,
                                 generator=lib.Generator().manual_seed(SEED), multiprocessing_context=fork)

        def step():
            n = 0
            for images, labels in loader:
                n += labels.shape[0]
            assert n == 60000
        return step
    build.__name__ = build.__qualname__ = "dataloader_%dw" % num_workers
    build.__doc__ = dataloader_epoch.__doc__.replace("in the main process or with worker processes",
                                                     "%d worker process(es)" % num_workers)
    return build


# name -> builder, in the order the comparison table lists them
WORKLOADS = {f.__name__: f for f in (chain100, chain100_forward, mul16, mul16_grad, elementwise_4m, mlp_step, mlp_step_whole,
                                     mlp_step_item, cnn_step, reduction("sum"), reduction("mean"), reduction("max"),
                                     matmul_1024, lstm_step, gru_step, transformer_step, dataloader_epoch(0),
                                     dataloader_epoch(2), scalar_graph1000, scalar_stack1000)}
# the workloads with a compiled column (their builders take compiled=True: jitgrad.compile's speed)
COMPILED = ("chain100", "elementwise_4m", "mlp_step", "mlp_step_whole", "mlp_step_item", "scalar_graph1000",
            "scalar_stack1000")

# The speed targets: the largest acceptable jitgrad/PyTorch-CPU median ratio per workload (the
# per-op rows also have absolute targets: 2.5 us for mul16, 4 us for mul16_grad).
BAR = {"chain100": 1.3, "chain100_forward": 1.3, "mul16": 3.0, "mul16_grad": 2.5, "elementwise_4m": 0.8, "mlp_step": 1.0,
       "mlp_step_whole": 1.0, "mlp_step_item": 1.0, "cnn_step": 1.2,
       "reduction_sum": 1.0, "reduction_mean": 1.0, "reduction_max": 0.6, "matmul_1024": 1.1,
       "lstm_step": 1.3, "gru_step": 1.3, "transformer_step": 1.3,
       "dataloader_0w": 1.3, "dataloader_2w": 1.3, "scalar_graph1000": 1.3,
       "scalar_stack1000": 1.3}
# the targets of the compiled column: jitgrad compiled / PyTorch eager
# (mlp_step_item has mlp_step's: both compile the forward and backward, and run the optimizer step as called)
COMPILED_BAR = {"chain100": 0.1, "elementwise_4m": 0.2, "mlp_step": 0.9, "mlp_step_whole": 0.8, "mlp_step_item": 0.9,
                "scalar_graph1000": 0.1, "scalar_stack1000": 0.1}
COLD_START_BAR = 2.0  # seconds, a fresh process with a warm cache to its first MLP step


def library(name):
    """Import ``jitgrad`` (also for "jitgrad-compiled") or ``torch`` (PyTorch limited to 2 threads, like the
    2-core bar machine)."""
    if name == "torch":
        import torch
        torch.set_num_threads(int(os.environ.get("JITGRAD_BENCH_THREADS", 2)))
        return torch
    import jitgrad
    return jitgrad


# ---------------------------------------------------------------------- the sorting, einsum and resampling ops
def einsum_attention(lib):
    """Attention through einsum, batch 8, 4 heads, 128 tokens, head size 32: scores, softmax, values; backward."""
    rng = np.random.default_rng(SEED)
    q, k, v = (_leaf(lib, _f32(rng, 8, 4, 128, 32)) for _ in range(3))

    def step():
        _clear(q, k, v)
        att = lib.einsum("bhqd,bhkd->bhqk", q, k).softmax(-1)
        lib.einsum("bhqk,bhkd->bhqd", att, v).sum().backward()
    return step


def sort_topk(lib):
    """topk (k=16) and a full sort along rows of a 256 x 1024 float32 matrix; backward through both."""
    rng = np.random.default_rng(SEED)
    x = _leaf(lib, _f32(rng, 256, 1024))

    def step():
        _clear(x)
        (x.topk(16, 1).values.sum() + x.sort(1, descending=True).values[:, :8].sum()).backward()
    return step


def pad_upsample(lib):
    """Reflection padding then bilinear 2x upsampling of 8 x 16 x 64 x 64 float32; backward."""
    rng = np.random.default_rng(SEED)
    x = _leaf(lib, _f32(rng, 8, 16, 64, 64))
    F = lib.nn.functional

    def step():
        _clear(x)
        F.interpolate(F.pad(x, (1, 1, 1, 1), mode="reflect"), scale_factor=2, mode="bilinear").sum().backward()
    return step


WORKLOADS.update((f.__name__, f) for f in (einsum_attention, sort_topk, pad_upsample))
BAR.update({"einsum_attention": 1.5, "sort_topk": 2.0, "pad_upsample": 2.0})


# ---------------------------------------------------------------------- function transforms (issue 31)
def per_sample_grads(lib, compiled=False):
    """``vmap(grad(loss))`` with ``functional_call``: per-sample gradients of an MLP 784-128-10, batch 64."""
    rng = np.random.default_rng(SEED)
    lib.manual_seed(SEED)
    model = lib.nn.Sequential(lib.nn.Linear(784, 128), lib.nn.ReLU(), lib.nn.Linear(128, 10))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = lib.from_numpy(_f32(rng, 64, 784))
    y = lib.from_numpy(rng.integers(0, 10, 64))

    def loss(p, x, y):
        return lib.nn.functional.cross_entropy(lib.func.functional_call(model, p, (x.unsqueeze(0),)), y.unsqueeze(0))
    fn = _compiled(lib, lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, 0)), compiled)
    return lambda: fn(params, x, y)


def hessian_tanh100(lib, compiled=False):
    """``hessian`` of ``sum(tanh(A @ x)**2) + 0.5 x.x``, x in R^100 (forward over reverse)."""
    rng = np.random.default_rng(SEED)
    A, x = lib.from_numpy(_f32(rng, 100, 100)), lib.from_numpy(_f32(rng, 100))
    fn = _compiled(lib, lib.func.hessian(lambda x: ((A @ x).tanh() ** 2).sum() + 0.5 * (x * x).sum()), compiled)
    return lambda: fn(x)


def _tanh_mlp64(lib):
    rng = np.random.default_rng(SEED)
    w1, w2, x = lib.from_numpy(_f32(rng, 64, 64)), lib.from_numpy(_f32(rng, 64, 64)), lib.from_numpy(_f32(rng, 64))
    return (lambda x: (w2 @ (w1 @ x).tanh()).tanh()), x


def jacrev_mlp64(lib, compiled=False):
    """``jacrev`` of a 64->64 tanh MLP (two layers)."""
    f, x = _tanh_mlp64(lib)
    fn = _compiled(lib, lib.func.jacrev(f), compiled)
    return lambda: fn(x)


def jacfwd_mlp64(lib, compiled=False):
    """``jacfwd`` of the same 64->64 tanh MLP."""
    f, x = _tanh_mlp64(lib)
    fn = _compiled(lib, lib.func.jacfwd(f), compiled)
    return lambda: fn(x)


def jvp_chain100(lib, compiled=False):
    """``jvp`` through a 100-op elementwise chain (x * 1.01 + 0.01, tanh, alternating) on 4,096 floats."""
    rng = np.random.default_rng(SEED)
    x, t = lib.from_numpy(_f32(rng, 4096)), lib.from_numpy(_f32(rng, 4096))

    def f(x):
        for _ in range(33):
            x = (x * 1.01 + 0.01).tanh()
        return x * 1.0
    fn = _compiled(lib, lambda x, t: lib.func.jvp(f, (x,), (t,)), compiled)
    return lambda: fn(x, t)


WORKLOADS.update((f.__name__, f) for f in (per_sample_grads, hessian_tanh100, jacrev_mlp64, jacfwd_mlp64,
                                            jvp_chain100))
BAR.update({"per_sample_grads": 0.8, "hessian_tanh100": 0.8, "jacrev_mlp64": 0.8, "jacfwd_mlp64": 0.8,
            "jvp_chain100": 0.8})
COMPILED += ("per_sample_grads", "hessian_tanh100", "jacrev_mlp64", "jacfwd_mlp64", "jvp_chain100")
# the compiled transforms' target is JAX's: jitgrad.compile of the transformed function / jax.jit of it
COMPILED_JAX_BAR = {name: 1.5 for name in ("per_sample_grads", "hessian_tanh100", "jacrev_mlp64", "jacfwd_mlp64",
                                            "jvp_chain100")}
# ---------------------------------------------------------------------- linear algebra (issue 33), float64
def _f64(rng, *shape):
    return rng.standard_normal(shape)


def gp_nll_512(lib):
    """GP regression: the negative log marginal likelihood of 512 points in 3-D (RBF kernel: Cholesky, triangular
    solves, log-det) and its gradient in the three log-hyperparameters."""
    rng = np.random.default_rng(SEED)
    X = lib.from_numpy(rng.uniform(-2, 2, (512, 3)))
    y = lib.from_numpy(np.sin(X.numpy()).sum(1) + 0.1 * rng.standard_normal(512))
    p = _leaf(lib, np.array([0.1, 0.2, -1.0]))
    eye = lib.eye(512, dtype=lib.float64)

    def step():
        _clear(p)
        K = (2 * p[1]).exp() * (-0.5 * lib.cdist(X, X) ** 2 / (2 * p[0]).exp()).exp() + (2 * p[2]).exp() * eye
        L = lib.linalg.cholesky(K)
        alpha = lib.cholesky_solve(y.unsqueeze(-1), L)
        nll = 0.5 * (y.unsqueeze(-1) * alpha).sum() + L.diagonal().log().sum()
        nll.backward()
    return step


def eigvalsh_256(lib):
    """The gradient of sum(eigvalsh(X^T X + I)), X 256x256."""
    x = _leaf(lib, _f64(np.random.default_rng(SEED), 256, 256))
    eye = lib.eye(256, dtype=lib.float64)

    def step():
        _clear(x)
        lib.linalg.eigvalsh(x.mT @ x + eye).sum().backward()
    return step


def _square(n, batch=()):
    rng = np.random.default_rng(SEED)
    return rng.standard_normal(batch + (n, n)) + 3 * np.eye(n) * (1 if n < 8 else np.sqrt(n))


def lstsq_256(lib):
    """lstsq of a 256x256 system with a 256x8 right-hand side, with its gradient in A and B."""
    a, b = _leaf(lib, _square(256)), _leaf(lib, _f64(np.random.default_rng(1), 256, 8))

    def step():
        _clear(a, b)
        lib.linalg.lstsq(a, b).solution.sum().backward()
    return step


def _solve_step(lib, n, rhs):
    a, b = _leaf(lib, _square(n)), _leaf(lib, _f64(np.random.default_rng(1), n, rhs))

    def step():
        _clear(a, b)
        lib.linalg.solve(a, b).sum().backward()
    return step


def solve_256(lib):
    """solve of a 256x256 system with a 256x8 right-hand side, with its gradient in A and B."""
    return _solve_step(lib, 256, 8)


def small3_100k(lib):
    """100,000 3x3 systems: solve, inv and det, forward and backward."""
    a = _leaf(lib, _square(3, (100000,)))
    b = _leaf(lib, _f64(np.random.default_rng(1), 100000, 3, 1))

    def step():
        _clear(a, b)
        (lib.linalg.solve(a, b).sum() + lib.linalg.inv(a).sum() + lib.linalg.det(a).sum()).backward()
    return step


def gaussian3_100k(lib):
    """100,000 3x3 covariances: Cholesky, a triangular solve, cholesky_solve and the log-determinant of each (a
    batched Gaussian likelihood), forward and backward."""
    rng = np.random.default_rng(SEED)
    m = rng.standard_normal((100000, 3, 3))
    a = _leaf(lib, m @ m.transpose(0, 2, 1) + np.eye(3))
    x = lib.from_numpy(rng.standard_normal((100000, 3, 1)))

    def step():
        _clear(a)
        L = lib.linalg.cholesky(a)
        z = lib.linalg.solve_triangular(L, x, upper=False)
        ((z * z).sum() + (x * lib.cholesky_solve(x, L)).sum() + lib.log(lib.diagonal(L, dim1=-2, dim2=-1)).sum()
         ).backward()
    return step


def decompositions_1024(kind):
    """cholesky / solve / eigh / svd of a 1024x1024 matrix, forward and backward."""
    def build(lib):
        rng = np.random.default_rng(SEED)
        m = rng.standard_normal((1024, 1024))
        a = _leaf(lib, m @ m.T / 1024 + np.eye(1024) if kind in ("cholesky", "eigh") else _square(1024))
        b = lib.from_numpy(rng.standard_normal((1024, 1)))

        def step():
            _clear(a)
            if kind == "cholesky":
                out = lib.linalg.cholesky(a).sum()
            elif kind == "solve":
                out = lib.linalg.solve(a, b).sum()
            elif kind == "eigh":
                w, v = lib.linalg.eigh(a)
                out = w.sum() + (v ** 2)[:, :8].sum()
            else:
                out = lib.linalg.svdvals(a).sum()
            out.backward()
        return step
    build.__name__ = "%s_1024" % kind
    return build


WORKLOADS.update((f.__name__, f) for f in (gp_nll_512, eigvalsh_256, lstsq_256, solve_256, small3_100k,
                                            gaussian3_100k) + tuple(
    decompositions_1024(k) for k in ("cholesky", "solve", "eigh", "svd")))
BAR.update({"gp_nll_512": 0.55, "eigvalsh_256": 0.85, "lstsq_256": 0.6, "solve_256": 0.8, "small3_100k": 0.5,
            "gaussian3_100k": 1.0,
            "cholesky_1024": 1.1, "solve_1024": 1.1, "eigh_1024": 1.1, "svd_1024": 1.1})


# ---------------------------------------------------------------------- sparse tensors (issue 35)
def spmm_10k(lib):
    """``torch.sparse.mm`` of a 10k x 10k COO matrix at 1% density (1M entries, coalesced, values requiring
    grad) and a 10k x 64 float32 matrix, forward and backward (a sparse gradient on the matrix's pattern)."""
    rng = np.random.default_rng(SEED)
    n, nnz = 10000, 1000000
    keys = np.unique(rng.integers(0, n * n, nnz))
    ind = np.stack([keys // n, keys % n]).astype(np.int64)
    s = lib.sparse_coo_tensor(lib.from_numpy(ind), lib.from_numpy(_f32(rng, keys.size)), (n, n)).coalesce()
    s.requires_grad_()
    d = _leaf(lib, _f32(rng, n, 64))

    def step():
        _clear(s, d)
        lib.sparse.mm(s, d).sum().backward()
    return step


WORKLOADS["spmm_10k"] = spmm_10k
BAR["spmm_10k"] = 1.0


# ---------------------------------------------------------------------- torch.fft
def rfft_irfft_1m(lib):
    """rfft then irfft of 2^20 float32 values (forward: no input requires grad)."""
    x = lib.from_numpy(_f32(np.random.default_rng(SEED), 1 << 20))

    def step():
        lib.fft.irfft(lib.fft.rfft(x), n=1 << 20)
    return step


def fft2_64x256(lib):
    """A batched 2-D FFT of 64 x 256 x 256 complex64 values, forward and backward (backward with a given
    complex gradient, so that the two transforms are all that runs)."""
    rng = np.random.default_rng(SEED)
    x = _leaf(lib, (_f32(rng, 64, 256, 256) + 1j * _f32(rng, 64, 256, 256)).astype(np.complex64))
    g = lib.from_numpy((_f32(rng, 64, 256, 256) + 1j * _f32(rng, 64, 256, 256)).astype(np.complex64))

    def step():
        _clear(x)
        lib.fft.fft2(x).backward(g)
    return step


WORKLOADS.update((f.__name__, f) for f in (rfft_irfft_1m, fft2_64x256))
BAR.update({"rfft_irfft_1m": 1.2, "fft2_64x256": 1.2})


# ---------------------------------------------------------------------- complex elementwise chains
def _complex_chain(lib, grad):
    rng = np.random.default_rng(SEED)
    z, w, b = (_leaf(lib, (_f32(rng, 1 << 22) + 1j * _f32(rng, 1 << 22)).astype(np.complex64)) if grad else
               lib.from_numpy((_f32(rng, 1 << 22) + 1j * _f32(rng, 1 << 22)).astype(np.complex64)) for _ in range(3))

    def step():
        if grad:
            _clear(z, w, b)
        loss = ((z * w + b).exp() * z.conj()).abs().sum()  # (a real loss of complex values)
        if grad:
            loss.backward()
    return step


def complex_chain_4m(lib):
    """A complex64 elementwise chain on 4M values, forward: |exp(z * w + b) * conj(z)| summed."""
    return _complex_chain(lib, False)


def complex_chain_4m_grad(lib):
    """``complex_chain_4m`` forward and backward (z, w and b require grad)."""
    return _complex_chain(lib, True)


WORKLOADS.update((f.__name__, f) for f in (complex_chain_4m, complex_chain_4m_grad))
BAR.update({"complex_chain_4m": 1.0, "complex_chain_4m_grad": 1.0})
