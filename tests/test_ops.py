"""Op tests generated from the op table (jitgrad.ops.OPS).

For every op x dtype x sample: the forward against the entry's NumPy reference (values, shape,
dtype, and whether the result requires grad); in float64, gradients against central finite
differences (gradcheck); for entries with fused VJP kernels, the fused backward against the
formula backward (create_graph=True). Binary elementwise ops also get broadcast shapes drawn by
hypothesis. Samples come from the entries (see jitgrad/ops/_table.py for their format).
"""
import re
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import jitgrad as jg
from jitgrad import _dtype as D
from jitgrad.autograd import gradcheck
from jitgrad.ops import OPS

DTYPES = (np.float32, np.float64, np.int64, np.bool_)
TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}


def _no_kernel(kernel, dtype):
    return NotImplementedError, re.escape("\"%s\" not implemented for '%s'" % (kernel, dtype))


# (op, dtype) pairs PyTorch rejects: the exception and its message (a regex), as PyTorch 2.13 gives them.
REJECTED = {
    ("neg", "bool"): (RuntimeError, re.escape("Negation, the `-` operator, on a bool tensor is not supported. If you "
                                              "are trying to invert a mask, use the `~` or `logical_not()` operator "
                                              "instead.")),
    ("abs", "bool"): _no_kernel("abs_cpu", "Bool"),
    ("relu", "bool"): (RuntimeError, "Boolean inputs not supported for relu"),
    ("sub", "bool"): (RuntimeError, "Subtraction, the `-` operator, with (two bool tensors|a bool tensor) is not "
                                    "supported"),
    ("mm", "bool"): _no_kernel("addmm_impl_cpu_", "Bool"), ("bmm", "bool"): _no_kernel("bmm", "Bool"),
    ("mv", "bool"): _no_kernel("addmv_impl_cpu", "Bool"), ("dot", "bool"): _no_kernel("dot", "Bool"),
    ("matmul", "bool"): (NotImplementedError, "\"(addmm_impl_cpu_|bmm|dot|addmv_impl_cpu)\" not implemented for "
                                              "'Bool'"),
    ("argmax", "bool"): (RuntimeError, re.escape("argmax(): does not support bool input")),
    ("argmin", "bool"): (RuntimeError, re.escape("argmin(): does not support bool input")),
}
REJECTED.update({(op, dt): _no_kernel(kernel, t) for op, kernel in [
    ("leaky_relu", "leaky_relu_cpu"), ("elu", "elu_cpu"), ("gelu", "GeluKernelImpl"), ("gelu_tanh", "GeluKernelImpl"),
    ("silu", "silu_cpu"), ("softplus", "softplus_cpu"), ("softmax", "softmax_lastdim_kernel_impl"),
    ("log_softmax", "log_softmax_lastdim_kernel_impl")] for dt, t in [("int64", "Long"), ("bool", "Bool")]})
REJECTED.update({(op, "bool"): _no_kernel(op + "_vml_cpu", "Bool") for op in ("floor", "ceil", "round", "trunc")})
for _dt, _t in [("int64", "Long"), ("bool", "Bool")]:
    REJECTED.update({
        ("mean", _dt): (RuntimeError, re.escape("mean(): could not infer output dtype. Input dtype must be either a "
                                                "floating point or complex dtype. Got: " + _t)),
        ("var", _dt): (RuntimeError, "std and var only support floating point and complex dtypes"),
        ("norm", _dt): (RuntimeError, "linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
                        + _t)})
    REJECTED[("mean_all", _dt)], REJECTED[("std", _dt)] = REJECTED[("mean", _dt)], REJECTED[("var", _dt)]

# (op, dtype) pairs PyTorch rejects when all operands are tensors of the dtype (a Python number promotes them).
REJECTED_TENSORS_ONLY = {
    ("div_rounded", "bool"): (NotImplementedError, "\"div_(trunc|floor)_cpu\" not implemented for 'Bool'"),
    ("pow", "bool"): _no_kernel("pow", "Bool"), ("clamp", "bool"): _no_kernel("clamp_cpu", "Bool"),
}

# Ops with no samples in the table, and the test file that covers them instead.
EXPLICIT = {}


# ------------------------------------------------------------------ samples -> tensors
def call_of(op):
    """The public callable a sample's (args, kwargs) is applied to."""
    return getattr(op, "call", None) or getattr(jg, op.name)


def samples_of(op, dtype):
    rng = np.random.default_rng(zlib.crc32(("%s-%s" % (op.name, np.dtype(dtype).name)).encode()))
    return op.samples(rng, np.dtype(dtype).type) if op.samples else []


def _copy(a):
    """A copy with the same memory layout (a transposed sample stays non-contiguous)."""
    c = np.empty_like(a, order="K")
    c[...] = a
    return c


def build(args, kwargs, leaf):
    """(args, kwargs) with each array replaced by ``leaf(array)``: arrays in args, also inside lists
    and tuples, and array-valued kwargs."""
    def walk(obj):
        if isinstance(obj, np.ndarray):
            return leaf(obj)
        if isinstance(obj, (list, tuple)):
            return type(obj)(walk(o) for o in obj)
        return obj
    return walk(args), {k: leaf(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}


def tensors_for(args, kwargs, requires_grad):
    """The sample as tensors (float ones requiring grad if asked) and the list of those inputs."""
    inputs = []

    def leaf(a):
        t = jg.from_numpy(_copy(a))
        if requires_grad and a.dtype.kind == "f":
            t.requires_grad_()
            inputs.append(t)
        return t
    targs, tkwargs = build(args, kwargs, leaf)
    return targs, tkwargs, inputs


def as_function(op, args, kwargs):
    """(fn, inputs): fn(*inputs) runs the op on the sample with its float tensors replaced by ``inputs``."""
    targs, tkwargs, inputs = tensors_for(args, kwargs, True)
    ids = {id(t): k for k, t in enumerate(inputs)}
    call = call_of(op)

    def fn(*xs):
        def walk(obj):
            if isinstance(obj, jg.Tensor) and id(obj) in ids:
                return xs[ids[id(obj)]]
            if isinstance(obj, (list, tuple)):
                return type(obj)(walk(o) for o in obj)
            return obj
        return call(*walk(targs), **{k: walk(v) for k, v in tkwargs.items()})
    return fn, inputs


def reference(op, args, kwargs):
    """The entry's NumPy reference. Where NumPy computes bool inputs in float16 or not at all (-x), PyTorch
    computes them in the default float dtype: so does the reference."""
    with np.errstate(all="ignore"):
        try:
            out = op.ref(*args, **kwargs)
            if not any(np.asarray(o).dtype == np.float16 for o in (out if op.n_outputs > 1 else [out])):
                return out
        except TypeError:
            pass
        return op.ref(*build(args, kwargs, lambda a: a.astype(np.float32) if a.dtype == bool else a)[0], **kwargs)


def has_number(args, kwargs):
    """Whether a Python number is among the operands."""
    return any(isinstance(a, (int, float)) and not isinstance(a, bool) for a in list(args) + list(kwargs.values()))


def outputs(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def expected_dtype(ref_out, dtype, args, kwargs):
    """PyTorch's result dtype: a dtype named by the sample, else by the reference's kind: bool, int64, or
    for a float result the input's float dtype (integer inputs give the default float dtype)."""
    named = [a for a in list(args) + list(kwargs.values()) if isinstance(a, D.dtype)]
    if named:
        return named[0]
    kind = np.asarray(ref_out).dtype.kind
    if kind == "b":
        return jg.bool
    if kind in "iu":
        return jg.int64
    return D.FROM_NP[np.dtype(dtype)] if np.dtype(dtype).kind == "f" else jg.get_default_dtype()


# ------------------------------------------------------------------ parametrization
def _cases(dtypes=DTYPES):
    for name, op in OPS.items():
        for dt in dtypes:
            for k, _ in enumerate(samples_of(op, dt)):
                yield pytest.param(name, dt, k, id="%s-%s-%d" % (name, np.dtype(dt).name, k))


def _sample(name, dtype, k):
    op = OPS[name]
    return op, samples_of(op, dtype)[k]


# ------------------------------------------------------------------ the generated tests
@pytest.mark.parametrize("name,dtype,k", list(_cases()))
def test_forward(name, dtype, k):
    op, (args, kwargs) = _sample(name, dtype, k)
    key = (name, np.dtype(dtype).name)
    rejected = REJECTED.get(key) or (None if has_number(args, kwargs) else REJECTED_TENSORS_ONLY.get(key))
    floating = np.dtype(dtype).kind == "f"
    targs, tkwargs, inputs = tensors_for(args, kwargs, floating)
    if rejected is not None:
        exc, msg = rejected
        with pytest.raises(exc, match="^" + msg):
            call_of(op)(*targs, **tkwargs)
        return
    expected = reference(op, args, kwargs)
    result = call_of(op)(*targs, **tkwargs)
    outs = outputs(result)
    refs = list(expected) if op.n_outputs > 1 else [expected]
    assert len(outs) == len(refs)
    for out, ref in zip(outs, refs):
        ref = np.asarray(ref)
        assert isinstance(out, jg.Tensor)
        assert out.shape == ref.shape, (out.shape, ref.shape)
        assert out.dtype is expected_dtype(ref, dtype, args, kwargs)
        got = out.detach().numpy()
        if ref.dtype.kind == "f":
            np.testing.assert_allclose(got, ref, equal_nan=True, **TOL[np.float64 if got.dtype == np.float64 else
                                                                        np.float32])
        else:
            np.testing.assert_array_equal(got, ref)
        differentiable = op.differentiable and bool(inputs) and out.dtype.is_floating_point
        assert out.requires_grad == differentiable
        if not any(out is t for t in inputs):  # x.to(x.dtype) is x
            assert (out.grad_fn is not None) == differentiable


@pytest.mark.parametrize("name,dtype,k", [c for c in _cases((np.float64,)) if OPS[c.values[0]].differentiable])
def test_gradcheck(name, dtype, k):
    op, (args, kwargs) = _sample(name, dtype, k)
    fn, inputs = as_function(op, args, kwargs)
    if not inputs:
        pytest.skip("no float input")  # pragma: no cover  (every differentiable sample has one)
    low_precision = any(o.dtype is not jg.float64 for o in outputs(fn(*inputs)) if o.dtype.is_floating_point)
    tol = dict(eps=1e-3, atol=1e-3) if low_precision else {}  # a float32 output (cast) rounds the differences
    assert gradcheck(fn, inputs, **tol)


@pytest.mark.parametrize("name,dtype,k", [c for c in _cases((np.float64,)) if any(OPS[c.values[0]].fused)])
def test_fused_vjp_equals_formula(name, dtype, k):
    op, (args, kwargs) = _sample(name, dtype, k)
    fn, inputs = as_function(op, args, kwargs)
    rng = np.random.default_rng(k)

    def grads(create_graph):
        outs = [o for o in outputs(fn(*inputs)) if o.requires_grad]
        gos = [jg.tensor(rng.standard_normal(o.shape), dtype=o.dtype) for o in outs]
        return jg.autograd.grad(outs, inputs, gos, create_graph=create_graph, allow_unused=True)
    state = rng.bit_generator.state
    fused = grads(False)
    rng.bit_generator.state = state
    formula = grads(True)
    for a, b in zip(fused, formula):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)


BINARY = sorted(n for n, op in OPS.items() if op.broadcast and op.inputs == ("self", "other") and op.ref is not None)


@pytest.mark.parametrize("name", BINARY)
@settings(max_examples=4, deadline=None, database=None)
@given(shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
       seed=st.integers(0, 2 ** 16))
def test_binary_broadcasting(name, shapes, seed):
    op = OPS[name]
    rng = np.random.default_rng(seed)
    # values in [0.5, 2] are inside every binary op's domain (div, pow, atan2, ...)
    a, b = (rng.uniform(0.5, 2.0, s) for s in shapes.input_shapes)
    kwargs = {"rounding_mode": "floor"} if name == "div_rounded" else {}
    out = call_of(op)(jg.from_numpy(a), jg.from_numpy(b), **kwargs)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(out.numpy(), op.ref(a, b, **kwargs), rtol=1e-10, atol=1e-12)
    assert out.shape == shapes.result_shape
    if op.differentiable:
        fn, inputs = as_function(op, (a, b), kwargs)
        assert gradcheck(fn, inputs)


# ------------------------------------------------------------------ coverage of the table
def test_every_op_is_covered():
    for name, op in OPS.items():
        if name in EXPLICIT:
            path = __file__.rsplit("/", 1)[0] + "/" + EXPLICIT[name][0]
            with open(path) as f:
                assert EXPLICIT[name][1] in f.read(), "%s does not test %s" % path
            continue
        assert any(samples_of(op, dt) for dt in DTYPES), "op %r has no samples and no explicit test" % name
        assert op.ref is not None, "op %r has samples but no reference" % name


def test_samples_cover_0d_broadcast_and_noncontiguous():
    """Across the table, samples include 0-d inputs, broadcasting and non-contiguous inputs."""
    kinds = set()
    for op in OPS.values():
        for args, kwargs in samples_of(op, np.float64):
            arrays = []
            build(args, kwargs, arrays.append)
            kinds.update("0-d" for a in arrays if a.ndim == 0)
            kinds.update("non-contiguous" for a in arrays if not a.flags.c_contiguous)
            if op.broadcast and len({a.shape for a in arrays}) > 1:
                kinds.add("broadcast")
    assert kinds == {"0-d", "non-contiguous", "broadcast"}
