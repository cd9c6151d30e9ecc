"""asv benchmarks generated from the op table: for every op that declares ``bench`` sizes,
``Op_<name>.time_forward`` and (differentiable ops) ``Op_<name>.time_forward_backward``, at each
size, in float32 and float64.

Inputs of a declared size are made from the op's own samples: the first sample whose array
arguments all have that rank and one shape is the template, and each array is redrawn at the
declared size within the template's value range (so log still gets positive inputs); its
other arguments (scalars, dim=...) are kept. A size of three numbers for an op of two operands
of other ranks is a matrix product's (m, k, n): operands (..., m, k) and (..., k, n), vectors
(k,), with the template's batch dimensions kept; dot's pair of equal vectors is (k,), outer's (m,), (n,).
Failing both, a size of lower rank than the template's is padded with leading 1s ((16,) -> (1, 16)
for a reduction whose samples are matrices with dim=1).

time_forward runs the op as training does: for a differentiable op its inputs require grad, so
the time includes recording the graph.
"""
import numpy as np

from jitgrad.autograd.engine import backward
from jitgrad.ops import OPS
from jitgrad.precompile import differentiable_outputs, leaves, op_callable, to_tensors

DTYPES = ["float32", "float64"]


def _label(size):
    return "x".join(str(n) for n in size)


def _redraw(rng, template, shape):
    """A new array of ``shape`` like ``template`` (dtype, value range)."""
    if template.dtype.kind == "b":
        return rng.random(shape) > 0.5
    lo, hi = (template.min(), template.max()) if template.size else (-1, 1)
    if template.dtype.kind in "iu":
        return rng.integers(lo, hi + 1, size=shape).astype(template.dtype)
    return rng.uniform(lo, hi, size=shape).astype(template.dtype)


def _arrays(args):
    return [a for a in args if isinstance(a, np.ndarray) and a.ndim]


def _shapes_same_rank(args, size):
    arrays = _arrays(args)
    if arrays and all(a.shape == arrays[0].shape and a.ndim == len(size) for a in arrays):
        return [size if isinstance(a, np.ndarray) and a.ndim else None for a in args]
    return None


def _shapes_matmul(args, size):
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    if len(size) != 3 or len(arrays) != 2 or len(args) != 2:
        return None
    (m, k, n), (a, b) = size, arrays
    if a.ndim == 1 and b.ndim == 1:
        return [(k,), (k,)] if a.shape == b.shape else [(m,), (n,)]
    sa = a.shape[:-2] + (m, k) if a.ndim >= 2 else (k,)
    sb = b.shape[:-2] + (k, n) if b.ndim >= 2 else (k,)
    return [sa, sb]


def _shapes_padded(args, size):
    arrays = _arrays(args)
    if arrays and all(a.shape == arrays[0].shape and a.ndim > len(size) for a in arrays):
        shape = (1,) * (arrays[0].ndim - len(size)) + tuple(size)
        return [shape if isinstance(a, np.ndarray) and a.ndim else None for a in args]
    return None


def bench_sample(op, size, dtype, seed=0):
    """(args, kwargs) of NumPy values for ``op`` at the declared ``size``, or None if no sample fits."""
    rng = np.random.default_rng(seed)
    samples = op.tests.samples(rng, np.dtype(dtype)) if op.tests.samples else []
    for rule in (_shapes_same_rank, _shapes_matmul, _shapes_padded):
        for args, kwargs in samples:
            shapes = rule(args, size)
            if shapes is not None:
                args = tuple(a if s is None else _redraw(rng, a, s) for a, s in zip(args, shapes))
                return args, kwargs
    return None


class _Forward:
    """Times one op's forward at a declared size (inputs that do not require grad)."""
    op_name = None
    param_names = ["size", "dtype"]
    requires_grad = False

    def setup(self, size, dtype):
        op = OPS[self.op_name]
        sample = bench_sample(op, self.sizes[size], dtype)
        if sample is None:
            raise NotImplementedError("no sample of %s fits size %s" % (op.name, size))
        self.fn = op_callable(op)
        self.args = to_tensors(sample[0], self.requires_grad)
        self.kwargs = {k: to_tensors(v, self.requires_grad) for k, v in sample[1].items()}
        self.leaves = leaves(self.args) + leaves(self.kwargs)
        self.run()  # compile before timing

    def run(self):
        return self.fn(*self.args, **self.kwargs)

    def time_forward(self, size, dtype):
        self.run()


class _ForwardBackward(_Forward):
    """Also times forward+backward (inputs that require grad, a gradient of ones)."""
    requires_grad = True

    def run(self):
        for t in self.leaves:
            t.grad = None
        outs, grads = differentiable_outputs(self.fn(*self.args, **self.kwargs))
        if outs:
            backward(outs, grads)

    def time_forward_backward(self, size, dtype):
        self.run()

    def time_forward(self, size, dtype):
        self.fn(*self.args, **self.kwargs)


def _benchmark_class(op):
    sizes = {_label(s): tuple(s) for s in op.tests.bench["sizes"]}
    base = _ForwardBackward if op.differentiable else _Forward
    doc = "%s: forward%s at sizes %s" % (op.name, " and forward+backward" if op.differentiable else "",
                                         ", ".join(sizes))
    return type("Op_" + op.name, (base,), {"op_name": op.name, "sizes": sizes, "params": [list(sizes), DTYPES],
                                           "__doc__": doc, "__module__": __name__})


for _op in OPS.values():
    if _op.tests.bench and _op.tests.bench.get("sizes"):
        globals()["Op_" + _op.name] = _benchmark_class(_op)
