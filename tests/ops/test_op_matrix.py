"""The op-table matrix: every entry x dtype x sample x check, one parametrized product (``test_entry``).

The checks, each a function below, run where its ``applies`` says:

- forward: the public call against the entry's NumPy reference (values, shape, dtype, whether the result
  requires grad), or PyTorch's error for a dtype it rejects; float32, float64, int64 and bool samples;
- grad: gradients against central finite differences (gradcheck), float64;
- fused: the fused VJP kernels against the formulas (create_graph=True), float64;
- gradgrad: second order (gradgradcheck) where the entry claims double backward, float64;
- compile: jitgrad.compile's captured plan run op by op against eager, forward and gradients, called again
  with new values (integer and boolean inputs permuted), float64; compile-tape and compile-loops: the
  elementwise entries through the fused backends (a tape for small graphs, generated loops), float64 and,
  for a few, float32;
- amp: the samples in float16 and bfloat16 against the same op on the rounded values in float32, rounded
  once (bit for bit), with gradients reaching the leaves in the reduced dtype (PyTorch's error where the
  entry refuses them);
- complex: the entries that take complex operands (``op.types.complex``) run forward in complex64 and
  complex128 against NumPy, and grad and gradgrad in complex128 (gradcheck checks the real and imaginary
  parts, as PyTorch's); the others refuse complex128 with an error of their own, never a kernel's. By
  default one sample per entry (the first); ``-m slow`` runs them all.

- jvp: forward mode's JVP of the first output against central finite differences, float64 (and complex128 for
  the entries of complex inputs);
- jvp-grad: reverse mode over forward mode against reverse over reverse (d/dx <J t, w>), float64;
- vmap: vmap of the public call against a loop over the batch, for several in_dims and out_dims, in the first
  dtype the entry has samples in.
  jvp, jvp-grad and vmap run every fourth, eighth and fifth entry by default (every sample of each), all
  under ``-m slow``.

CUDA runs the forward samples and gradients in a simulator child (tests/cuda/test_cuda_ops.py).
"""
import re
import warnings

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.autograd.forward_ad as fwAD
from jitgrad import _dtype as D
from jitgrad.autograd import gradcheck, gradgradcheck
from jitgrad.func.batching import RULES as BATCHING_RULES, random as random_rule
from jitgrad.ops import OPS

from helpers import as_function, build, call_of, outputs, rounded, samples_of, tensors_for, values

DTYPES = (np.float32, np.float64, np.int64, np.bool_)
COMPLEX = (np.complex64, np.complex128)
TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}
F16, BF16, F32 = jg.float16, jg.bfloat16, jg.float32


# ====================================================================== forward
# (op, dtype) pairs PyTorch rejects: the exception and its message (a regex), from the entries' ``unsupported``
# dtypes. Where a Python number is an operand of an op that broadcasts, it takes part in type promotion, so
# the rejection applies when all operands are tensors of the dtype (REJECTED_TENSORS_ONLY).
REJECTED, REJECTED_TENSORS_ONLY = {}, {}
for _name, _op in OPS.items():
    for _dt, (_exc, _msg) in _op.types.unsupported.items():
        (REJECTED_TENSORS_ONLY if _op.broadcast else REJECTED)[(_name, _dt)] = (_exc, re.escape(_msg))
# Rejections that the public function raises before dispatch, so no entry's ``unsupported`` states them:
# sub's message depends on which operand is bool, matmul reports the kernel of the rank case it routes to,
# div_rounded's message names the rounding mode.
REJECTED[("sub", "bool")] = (RuntimeError, "Subtraction, the `-` operator, with (two bool tensors|a bool tensor) is "
                                           "not supported")
REJECTED[("matmul", "bool")] = (NotImplementedError, "\"(addmm_impl_cpu_|bmm|dot|addmv_impl_cpu)\" not implemented "
                                                     "for 'Bool'")
REJECTED_TENSORS_ONLY[("div_rounded", "bool")] = (NotImplementedError, "\"div_(trunc|floor)_cpu\" not implemented "
                                                                       "for 'Bool'")


def reference(op, args, kwargs):
    """The entry's NumPy reference. Where NumPy computes bool inputs in float16 or not at all (-x), PyTorch
    computes them in the default float dtype: so does the reference."""
    with np.errstate(all="ignore"):
        try:
            out = op.tests.ref(*args, **kwargs)
            several = op.n_outputs != 1 + len(op.workspace)  # (workspace outputs: hidden)
            if not any(np.asarray(o).dtype == np.float16 for o in (out if several else [out])):
                return out
        except TypeError:
            pass
        return op.tests.ref(*build(args, kwargs, lambda a: a.astype(np.float32) if a.dtype == bool else a)[0], **kwargs)


def has_number(args, kwargs):
    """Whether a Python number is among the operands."""
    return any(isinstance(a, (int, float)) and not isinstance(a, bool) for a in list(args) + list(kwargs.values()))


def expected_dtype(ref_out, dtype, args, kwargs):
    """PyTorch's result dtype: a dtype named by the sample, else by the reference's kind: bool, int64, or
    for a float result the input's float dtype (integer inputs give the default float dtype)."""
    named = [a for a in list(args) + list(kwargs.values()) if isinstance(a, D.dtype)]
    if named:
        return named[0]
    kind = np.asarray(ref_out).dtype.kind
    if np.dtype(dtype).kind == "c" and kind in "fc":  # complex inputs: their dtype, or its parts' (abs, real)
        return D.FROM_NP[np.dtype(dtype)] if kind == "c" else D.FROM_NP[np.dtype(dtype)].to_real()
    if kind == "c":  # complex results of real inputs (complex, polar, view_as_complex): NumPy's
        return D.FROM_NP[np.asarray(ref_out).dtype]
    if kind == "b":
        return jg.bool
    if kind in "iu":  # int64, but where the reference says int32 (LAPACK's pivots and infos, as PyTorch's)
        return jg.int32 if np.asarray(ref_out).dtype == np.int32 else jg.int64
    return D.FROM_NP[np.dtype(dtype)] if np.dtype(dtype).kind == "f" else jg.get_default_dtype()


def check_forward(op, dtype, args, kwargs):
    key = (op.name, np.dtype(dtype).name)
    rejected = REJECTED.get(key) or (None if has_number(args, kwargs) else REJECTED_TENSORS_ONLY.get(key))
    floating = np.dtype(dtype).kind == "f" or np.dtype(dtype).kind == "c" and op.name not in COMPLEX_NO_GRAD
    targs, tkwargs, inputs = tensors_for(args, kwargs, floating)
    if rejected is not None:
        exc, msg = rejected
        with pytest.raises(exc, match="^" + msg):
            call_of(op)(*targs, **tkwargs)
        return
    expected = reference(op, args, kwargs)
    result = call_of(op)(*targs, **tkwargs)
    outs = outputs(result)
    refs = list(expected) if op.n_outputs != 1 + len(op.workspace) else [expected]  # (workspaces: hidden)
    assert len(outs) == len(refs)
    for out, ref in zip(outs, refs):
        ref = np.asarray(ref)
        assert isinstance(out, jg.Tensor)
        assert out.shape == ref.shape, (out.shape, ref.shape)
        assert out.dtype is expected_dtype(ref, dtype, args, kwargs)
        got = out.detach().numpy()
        if ref.dtype.kind in "fc":
            np.testing.assert_allclose(got, ref, equal_nan=True, **TOL[np.float64 if got.dtype in (np.float64,
                                                                                                   np.complex128) else
                                                                        np.float32])
        else:
            np.testing.assert_array_equal(got, ref)
        differentiable = op.differentiable and bool(inputs) and out.dtype.is_inexact
        assert out.requires_grad == differentiable
        if not any(out is t for t in inputs):  # x.to(x.dtype) is x
            assert (out.grad_fn is not None) == differentiable


# ====================================================================== gradients
def _low_precision(fn, inputs):
    """Whether a floating output is not float64 (a cast): finite differences then need a coarser step."""
    return any(o.dtype is not jg.float64 for o in outputs(fn(*inputs)) if o.dtype.is_floating_point)


def check_grad(op, dtype, args, kwargs):
    fn, inputs = as_function(op, args, kwargs)
    assert inputs, "a differentiable entry's sample has a float input"
    tol = dict(eps=1e-3, atol=1e-3) if _low_precision(fn, inputs) else {}
    assert gradcheck(fn, inputs, **tol)


def check_fused(op, dtype, args, kwargs):
    fn, inputs = as_function(op, args, kwargs)
    rng = np.random.default_rng(len(op.name))

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


def check_gradgrad(op, dtype, args, kwargs):
    fn, inputs = as_function(op, args, kwargs)
    assert inputs, "a differentiable entry's sample has a float input"
    if not _low_precision(fn, inputs):
        assert gradgradcheck(fn, inputs)
        return
    with pytest.warns(UserWarning, match="is not a double precision"):  # float32 grad_outputs for a float32 result
        assert gradgradcheck(fn, inputs, eps=1e-3, atol=1e-3)  # (cast): rounding needs a larger step


# ====================================================================== jitgrad.compile
def _run(fn, args, kwargs, seed):
    """fn's float outputs and the gradients of a fixed random weighting of them."""
    inputs = []

    def leaf(a):
        t = jg.tensor(a.copy())
        if a.dtype.kind == "f":
            t.requires_grad_()
            inputs.append(t)
        return t
    a, k = build(args, kwargs, leaf)
    outs = [t for t in outputs(fn(a, k)) if isinstance(t, jg.Tensor)]
    rng = np.random.default_rng(seed)
    loss = None
    for o in outs:
        if o.requires_grad:
            w = jg.tensor(rng.standard_normal(o.shape).astype(o.dtype.np))
            term = (o * w).sum()
            loss = term if loss is None else loss + term
    if loss is not None:
        loss.backward()
    return [o.detach().numpy() for o in outs], [None if t.grad is None else t.grad.numpy() for t in inputs]


def _perturbed(args, kwargs, rng):
    """New values of every input: floats shifted, integer and boolean ones (indices, targets, masks)
    permuted, so they stay valid and a plan that froze the traced ones gives other numbers."""
    def shift(a):
        if a.dtype.kind == "f":
            return a + rng.uniform(-0.05, 0.05, a.shape).astype(a.dtype)
        if a.size > 1:
            return rng.permutation(a.reshape(-1)).reshape(a.shape)
        return a
    return build(args, kwargs, shift)


def _compiled_matches_eager(op, dtype, args, kwargs, backend):
    call = call_of(op)
    tol = dict(rtol=1e-9, atol=1e-11) if dtype == np.float64 else dict(rtol=2e-5, atol=2e-6)
    eager = lambda a, k: call(*a, **k)  # noqa: E731
    compiled = jg.compile(eager, backend=backend)
    for a, k in ((args, kwargs), _perturbed(args, kwargs, np.random.default_rng(1))):
        try:
            want = _run(eager, a, k, 0)
        except Exception as e:  # noqa: BLE001  (an error sample: compiled must raise the same)
            with pytest.raises(type(e)):
                _run(compiled, a, k, 0)
            continue
        got = _run(compiled, a, k, 0)
        for w, g in zip(want[0], got[0]):
            np.testing.assert_allclose(g, w, **tol, err_msg="%s forward" % op.name)
            assert g.dtype == w.dtype and g.shape == w.shape
        for w, g in zip(want[1], got[1]):
            assert (w is None) == (g is None) or (g is not None and not g.any()), op.name
            if w is not None and g is not None:
                np.testing.assert_allclose(g, w, **tol, err_msg="%s gradient" % op.name)


def check_compile(op, dtype, args, kwargs):
    _compiled_matches_eager(op, dtype, args, kwargs, "eager")


def check_compile_tape(op, dtype, args, kwargs):
    """Small graphs run as a tape (compiler/tape.py)."""
    _compiled_matches_eager(op, dtype, args, kwargs, "jitgrad")


def check_compile_loops(op, dtype, args, kwargs):
    """With the tape's size limit at 0, the graph gets codegen's fused loops."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jg.compiler.tape, "SMALL", 0)
        _compiled_matches_eager(op, dtype, args, kwargs, "jitgrad")


ELEMENTWISE_EXTRA = ("add", "sub", "where", "masked_fill")  # elementwise entries composed in Python
FUSED_FLOAT32 = ("mul", "tanh", "sigmoid", "add", "where", "relu", "exp")


def _elementwise(op, dtype):
    return (getattr(op.forward, "kernel", None) or op.name in ELEMENTWISE_EXTRA) and (
        dtype == np.float64 or op.name in FUSED_FLOAT32)


# ====================================================================== float16 / bfloat16
# Entries whose float16/bfloat16 result is wider, as in PyTorch: bincount sums any weights but float32 in float64
WIDENED = {"bincount": jg.float64}


def _leaves(obj):
    if isinstance(obj, jg.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _leaves(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _leaves(o)


def check_amp(op, dt, args, kwargs):
    """The sample in ``dt``: the result is the op on the same values in float32, rounded to ``dt`` once (bit
    for bit), of dtype ``dt`` where the float32 result is float32 (a dtype the sample names wins); gradients
    reach the leaves in ``dt``."""
    if op.types.reduced_precision == "refused":  # PyTorch's error, naming the dtype
        a, k = build(args, kwargs, lambda x: jg.tensor(x).to(dt) if x.dtype.kind == "f" else jg.tensor(x))
        with pytest.raises((RuntimeError, NotImplementedError), match="Half|BFloat16"):
            call_of(op)(*a, **k)
        return

    def rounded_leaf(a):
        if a.dtype.kind != "f":
            return jg.tensor(a)
        return jg.tensor(a.astype(dt.np).astype(np.float32)).to(dt).requires_grad_(op.differentiable)

    def float32_leaf(a):
        return jg.tensor(a.astype(dt.np).astype(np.float32)) if a.dtype.kind == "f" else jg.tensor(a)
    a, k = build(args, kwargs, rounded_leaf)
    ra, rk = build(args, kwargs, float32_leaf)
    ref = outputs(call_of(op)(*ra, **rk))
    got = outputs(call_of(op)(*a, **k))
    named = [x for x in list(args) + list(kwargs.values()) if isinstance(x, D.dtype)]
    for g, r in zip(got, ref):
        if not isinstance(g, jg.Tensor):
            continue
        want = named[0] if named else WIDENED.get(op.name, dt) if r.dtype is F32 else r.dtype
        assert g.dtype is want, (op.name, g.dtype, want)
        if op.name in WIDENED:
            np.testing.assert_allclose(values(g), values(r), rtol=1e-6)
        elif r.dtype is F32:
            np.testing.assert_array_equal(values(g), rounded(r.detach().numpy(), dt))
        else:
            np.testing.assert_array_equal(values(g), values(r))
    first = got[0]
    if isinstance(first, jg.Tensor) and first.requires_grad:
        first.float().sum().backward()
        for leaf in _leaves((a, k)):
            if leaf.requires_grad and leaf.grad is not None:
                assert leaf.grad.dtype is dt and leaf.grad.shape == leaf.shape, op.name


# ====================================================================== complex
def check_complex_refused(op, dtype, args, kwargs):
    """An entry without complex kernels refuses complex operands with an error (PyTorch's NotImplementedError,
    RuntimeError or TypeError), never a kernel's."""
    targs, tkwargs, _ = tensors_for(args, kwargs, False)
    with pytest.raises((NotImplementedError, RuntimeError, TypeError)) as info:
        call_of(op)(*targs, **tkwargs)
    assert "numba" not in type(info.value).__module__ and "Failed in nopython" not in str(info.value)


# entries whose public function takes complex tensors by composing entries that do (var(z) = var(z.real) +
# var(z.imag), norm of |z|, cumsum of each part): tested in tests/ops/test_complex.py
COMPOSED_COMPLEX = ("var", "std", "norm", "cumsum", "logsumexp", "logcumsumexp")
# entries PyTorch computes on complex tensors but does not differentiate there (its RuntimeError "silu does not
# support automatic differentiation for outputs with complex dtype.", tests/ops/test_complex_sweep.py; geqrf's)
COMPLEX_NO_GRAD = ("silu", "geqrf")


def _complex_samples(op, dt):
    """The entry's samples in complex dtype ``dt`` (none where its sample function makes none, or cannot)."""
    try:
        samples = samples_of(op, dt)
    except (KeyError, TypeError, ValueError):
        return []
    return samples if samples and any(isinstance(a, np.ndarray) and a.dtype.kind == "c"
                                      for a in samples[0][0]) else []


def _complex_sample(op, dt):
    return bool(_complex_samples(op, dt))


# ====================================================================== forward mode (JVP)
def check_jvp(op, dtype, args, kwargs):
    """The JVP of the first output against central finite differences along random tangents (complex samples too,
    for the entries that take them: the JVP of a holomorphic op is f'(z) t)."""
    call = call_of(op)
    floats = []
    build(args, kwargs, lambda a: floats.append(a) or a if a.dtype.kind in "fc" else a)
    if not floats:
        return
    rng = np.random.default_rng(len(op.name))
    tangents = [rng.standard_normal(a.shape) + (1j * rng.standard_normal(a.shape) if a.dtype.kind == "c" else 0)
                for a in floats]

    def run(shift, dual):
        it = iter(range(len(floats)))

        def leaf(a):
            if a.dtype.kind not in "fc":
                return jg.tensor(a)
            k = next(it)
            t = jg.tensor(a + shift * tangents[k])
            return fwAD.make_dual(t, jg.tensor(tangents[k])) if dual else t
        a, kw = build(args, kwargs, leaf)
        return outputs(call(*a, **kw))[0]
    try:
        with fwAD.dual_level():
            y = run(0.0, True)
            jvp = fwAD.unpack_dual(y).tangent
    except NotImplementedError:
        pytest.fail("%s has no forward AD" % op.name)
    except Exception:  # noqa: BLE001  (a sample that raises in eager raises here too)
        return
    if y.dtype.is_inexact is False:
        return
    wide = y.dtype in (jg.float64, jg.complex128)  # (a float32 result, as cast's, takes a coarser difference)
    eps = 1e-6 if wide else 1e-2
    fd = (run(eps, False).detach().numpy().astype(np.complex128 if y.dtype.is_complex else np.float64)
          - run(-eps, False).detach().numpy()) / (2 * eps)
    assert jvp is not None, op.name
    np.testing.assert_allclose(jvp.numpy(), fd, rtol=1e-4 if wide else 1e-2, atol=1e-5 if wide else 1e-3,
                               err_msg=op.name)


def _dot(w, y):
    """The real inner product <w, y> (Re sum(conj(w) y) for complex ones)."""
    return (w.conj() * y).sum().real if y.dtype.is_complex else (w * y).sum()


def check_jvp_grad(op, dtype, args, kwargs):
    """d/dx <J(x) t, w> two ways: reverse mode through the tangent forward mode computed (its history kept), and
    reverse over reverse (d/dx <J(x)^T w, t>, as gradgrad)."""
    call = call_of(op)
    rng = np.random.default_rng(len(op.name) + 7)
    leaves = []

    def leaf(a):
        if a.dtype.kind not in "fc":
            return jg.tensor(a)
        leaves.append(jg.tensor(a, requires_grad=True))
        return leaves[-1]

    def tangent(x):  # (a complex input takes a complex tangent)
        t = jg.tensor(rng.standard_normal(tuple(x.shape)))
        return jg.complex(t, jg.tensor(rng.standard_normal(tuple(x.shape)))) if x.dtype.is_complex else t
    try:
        a, kw = build(args, kwargs, leaf)
        tangents = [tangent(x) for x in leaves]
        with fwAD.dual_level():
            duals = iter([fwAD.make_dual(x, t) for x, t in zip(leaves, tangents)])
            a2, kw2 = build(args, kwargs, lambda arr: next(duals) if arr.dtype.kind in "fc" else jg.tensor(arr))
            y, jvp = fwAD.unpack_dual(outputs(call(*a2, **kw2))[0])
        if not leaves or not y.dtype.is_inexact or jvp is None:
            return
        w = jg.tensor(rng.standard_normal(tuple(y.shape)))
        if y.dtype.is_complex:  # (a complex output: the real inner product Re <w, J t>)
            w = jg.complex(w, jg.tensor(rng.standard_normal(tuple(y.shape))))
        # (a tangent without history: J does not depend on x, so reverse over reverse must give zeros)
        got = jg.autograd.grad(_dot(w, jvp), leaves, allow_unused=True) if jvp.requires_grad else [None] * len(leaves)
        y2 = outputs(call(*a, **kw))[0]
        g = jg.autograd.grad(_dot(w, y2), leaves, create_graph=True, allow_unused=True)
        inner = sum(_dot(gk, tk) for gk, tk in zip(g, tangents) if gk is not None)  # dL along t: Re <g, t>
        want = jg.autograd.grad(inner, leaves, allow_unused=True) if isinstance(inner, jg.Tensor) and \
            inner.requires_grad else [None] * len(leaves)
    except NotImplementedError:
        return
    for a_, b_, x in zip(got, want, leaves):
        a_ = np.zeros(tuple(x.shape), x.dtype.np) if a_ is None else a_.numpy()
        b_ = np.zeros(tuple(x.shape), x.dtype.np) if b_ is None else b_.numpy()
        np.testing.assert_allclose(a_, b_, rtol=1e-7, atol=1e-9, err_msg=op.name)


def _jvp_grad_dtype(op):
    """The samples reverse over forward takes: float64 (complex128 for the entries of complex inputs only)."""
    return np.float64 if samples_of(op, np.float64) else np.complex128


# ====================================================================== vmap
VMAP_B = 3
VMAP_DTYPES = (np.float64, np.int64, np.bool_, np.complex128)


def _vmap_dtype(op):
    """The samples vmap takes: the first dtype of VMAP_DTYPES the entry has samples in (complex: the entries of
    complex inputs only)."""
    return next((dt for dt in VMAP_DTYPES if samples_of(op, dt)), None)


def _vmap_variants(n_float, ndims):
    """(in_dims per float array, where its batch dim goes, out_dims): all batched at 0; the first at its
    last dim; the last alone."""
    out = [([0] * n_float, 0)]
    if n_float:
        out.append(([ndims[0]] + [None] * (n_float - 1), -1))
    if n_float > 1:
        out.append(([None] * (n_float - 1) + [0], 0))
    return out


def check_vmap(op, dtype, args, kwargs):
    """vmap of the public call against a Python loop over a batch of perturbed copies, for several in_dims and
    out_dims."""
    call = call_of(op)
    rng = np.random.default_rng(len(op.name))
    floats = []  # the arrays batched: the floating ones (all of them where there are none)
    build(args, kwargs, lambda a: floats.append(a) or a if a.dtype.kind in "fc" else a)
    kinds = "fc" if floats else "fiub"
    if not floats:
        build(args, kwargs, lambda a: floats.append(a) or a)
    for dims, out_dim in _vmap_variants(len(floats), [a.ndim for a in floats]):
        # per float array: the batch of B perturbed copies, stacked at its in_dim
        batches = [None if d is None else np.stack([a + 0.05 * k * rng.standard_normal(a.shape) if kinds == "fc"
                                                    else a for k in range(VMAP_B)], axis=d)
                   for a, d in zip(floats, dims)]

        def sample_args(k):
            it = iter(range(len(floats)))

            def leaf(a):
                if a.dtype.kind not in kinds:
                    return jg.tensor(a)
                i = next(it)
                return jg.tensor(floats[i] if dims[i] is None else np.take(batches[i], k, axis=dims[i]))
            return build(args, kwargs, leaf)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = [outputs(call(*a, **kw)) for a, kw in (sample_args(k) for k in range(VMAP_B))]
        except Exception:  # noqa: BLE001  (a sample that raises in eager)
            continue
        flat_in = [jg.tensor(b if d is not None else f) for b, f, d in zip(batches, floats, dims)]

        def f(*ts):
            it = iter(ts)
            a, kw = build(args, kwargs, lambda x: next(it) if x.dtype.kind in kinds else jg.tensor(x))
            return tuple(outputs(call(*a, **kw)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = jg.vmap(f, in_dims=tuple(dims), out_dims=out_dim)(*flat_in)
        for k, g in enumerate(got):
            ref = np.stack([w[k].detach().numpy() for w in want], axis=out_dim)
            assert g.dtype == want[0][k].dtype, (op.name, k)
            np.testing.assert_allclose(g.detach().numpy(), ref, rtol=1e-10, atol=1e-12, err_msg=op.name)


# entries vmap refuses (their outputs' shapes depend on each sample's values) and the random ones (a loop draws
# other numbers): tested in tests/transforms/
VMAP_SKIPPED = frozenset(n for n, r in BATCHING_RULES.items()
                         if r is random_rule or r.__qualname__.startswith("dynamic_shape."))


# ====================================================================== the product
# check name -> (function, dtypes it runs in, the dtype of the samples it takes, whether it applies to an entry)
CHECKS = {
    "forward": (check_forward, DTYPES, None, lambda op, dt: True),
    "grad": (check_grad, (np.float64,), None, lambda op, dt: op.differentiable),
    "fused": (check_fused, (np.float64,), None, lambda op, dt: any(op.derivatives.fused)),
    "gradgrad": (check_gradgrad, (np.float64,), None,
                 lambda op, dt: op.differentiable and op.derivatives.double_backward),
    "compile": (check_compile, (np.float64,), None, lambda op, dt: True),
    "compile-tape": (check_compile_tape, (np.float64, np.float32), None, _elementwise),
    "compile-loops": (check_compile_loops, (np.float64, np.float32), None, _elementwise),
    "amp": (check_amp, (F16, BF16), np.float32, lambda op, dt: True),
    "complex": (check_forward, COMPLEX, None, lambda op, dt: op.types.complex and _complex_sample(op, dt)),
    "complex-grad": (check_grad, (np.complex128,), None, lambda op, dt: op.types.complex and op.differentiable
                     and op.name not in COMPLEX_NO_GRAD and _complex_sample(op, dt)),
    "complex-gradgrad": (check_gradgrad, (np.complex128,), None, lambda op, dt: op.types.complex and op.differentiable
                         and op.derivatives.double_backward and op.name not in COMPLEX_NO_GRAD
                         and _complex_sample(op, dt)),
    "complex-refused": (check_complex_refused, (np.complex128,), None,
                        lambda op, dt: not op.types.complex and op.name not in COMPOSED_COMPLEX
                        and _complex_sample(op, dt)),
    "jvp": (check_jvp, (np.float64, np.complex128), None,
            lambda op, dt: op.differentiable and (dt is np.float64 or op.types.complex)),
    "jvp-grad": (check_jvp_grad, (np.float64, np.complex128), None,
                 lambda op, dt: op.differentiable and op.derivatives.double_backward and dt is _jvp_grad_dtype(op)),
    "vmap": (check_vmap, VMAP_DTYPES, None, lambda op, dt: op.name not in VMAP_SKIPPED and dt is _vmap_dtype(op)),
}
SAMPLED = ("complex", "complex-refused")  # checks that run one sample per entry unless -m slow


# checks that run on a deterministic sample of the entries by default (every sample of each; all under -m slow):
# every fourth differentiable entry in name order for jvp, every eighth for jvp-grad, every fifth for vmap
_DIFFERENTIABLE = sorted(n for n, op in OPS.items() if op.tests.samples and op.differentiable)
_BATCHED = sorted(n for n, op in OPS.items() if op.tests.samples and n not in VMAP_SKIPPED)
BY_DEFAULT = {"jvp": frozenset(_DIFFERENTIABLE[::4]), "jvp-grad": frozenset(_DIFFERENTIABLE[2::8]),
              "vmap": frozenset(_BATCHED[::5])}


def _matrix():
    for name, op in OPS.items():
        counts = {}
        for check, (_, dtypes, sample_dtype, applies) in CHECKS.items():
            for dt in dtypes:
                if not applies(op, dt):
                    continue
                sdt = sample_dtype or dt
                if sdt not in counts:
                    counts[sdt] = len(_complex_samples(op, sdt) if sdt in COMPLEX else samples_of(op, sdt))
                label = dt.name if isinstance(dt, D.dtype) else np.dtype(dt).name
                for k in range(counts[sdt]):
                    marks = (pytest.mark.slow,) if k and check.startswith(SAMPLED) or \
                        check in BY_DEFAULT and name not in BY_DEFAULT[check] else ()
                    if k and check == "complex-refused":
                        continue  # (one sample tells)
                    yield pytest.param(name, dt, k, check, id="%s-%s-%d-%s" % (name, label, k, check), marks=marks)


MATRIX = list(_matrix())


@pytest.mark.parametrize("name,dtype,k,check", MATRIX)
def test_entry(name, dtype, k, check):
    fn, _, sample_dtype, _ = CHECKS[check]
    op = OPS[name]
    args, kwargs = samples_of(op, sample_dtype or dtype)[k]
    fn(op, dtype, args, kwargs)


def test_the_matrix_covers_every_entry_with_samples():
    """Each entry with samples is in the product, with every check that applies to it."""
    covered = {(p.values[0], p.values[3]) for p in MATRIX}
    for name, op in OPS.items():
        if not any(samples_of(op, dt) for dt in DTYPES):
            continue
        for check, (_, dtypes, sample_dtype, applies) in CHECKS.items():
            if any(applies(op, dt) and samples_of(op, sample_dtype or dt) for dt in dtypes):
                assert (name, check) in covered, (name, check)
