"""gradcheck / gradgradcheck: backward's Jacobian against central finite differences, as PyTorch does.

Slow mode builds both Jacobians in full: the numerical one column by column (perturb one input
element by +-eps, in place, as ``x.data`` would), the analytical one row by row (``grad`` of the
output against a one-hot ``grad_output``). Fast mode (PyTorch's "fast gradcheck") compares one
number per (input, output) pair instead: ``v^T J u`` for random unit vectors ``u`` (per input) and
``v`` (per output), the numerical side as a directional difference along ``u`` and the analytical
side as ``grad`` with ``grad_output = v``; on a mismatch it reruns slow mode for the report.
Both modes then check that backward is linear in grad_output and (``check_undefined_grad``) that
it copes with undefined (None) output gradients. Everything runs in float64 on the side.
"""
import functools
import warnings

import numpy as np

from .._factories import zeros_like
from .._grad_mode import STATE
from .._graph import Node, edge
from .._layout import LAZY
from .._tensor import Tensor
from ..ops.complex import complex as _complex
from ..ops.shape import stack
from . import forward_ad
from .engine import VMAP, grad


class GradcheckError(RuntimeError):
    pass


FAILED_NONDET_MSG = """\n
NOTE: If your op relies on non-deterministic operations i.e., it is listed here:
https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html
this failure might be expected.

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck.
If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `nondet_tol=<tol>` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `gradcheck_nondet_tol=<tol>`.
- is a Module test (e.g., in common_nn.py), then modify the corresponding
  module_test entry to have `gradcheck_nondet_tol=<tol>`
"""

FAST_FAIL_SLOW_OK_MSG = """
Fast gradcheck failed but element-wise differences are small. This means that the
test might've passed in slow_mode!

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck:

If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `fast_mode=False` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `gradcheck_fast_mode=False`
- is a Module test (e.g., in common_nn.py), then modify the corresponding
  module_test entry to have `gradcheck_fast_mode=False`
""".strip()

UNDEFINED_GRAD_BC_WARNING = (
    "Backwards compatibility: New undefined gradient support checking feature is enabled by default, but it may "
    "break existing callers of this function. If this is true for you, you can call this function with "
    "\"check_undefined_grad=False\" to disable the feature")


# ------------------------------------------------------------------ small helpers
def _is_tensor(x):
    return isinstance(x, Tensor)


def _as_tuple(x):
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _requires_grad(x):
    return _is_tensor(x) and x._requires_grad


def _diff_outputs(out):
    return tuple(o for o in _as_tuple(out) if _requires_grad(o))


def _flat64(t):
    """A float64 copy of ``t``'s values, flattened (outputs are copied before the next evaluation)."""
    d = t._data
    return np.array(d.resolved() if d.__class__ in LAZY else d, dtype=np.float64).reshape(-1)  # (lazy: the values)


def _tensor64(arr):
    return Tensor._wrap(np.asarray(arr, dtype=np.float64))


def _grad(outputs, inputs, grad_outputs):
    return grad(outputs, inputs, grad_outputs, retain_graph=True, allow_unused=True)


def _check_inputs(inputs):
    any_diff = False
    for i, x in enumerate(inputs):
        if not _requires_grad(x):
            continue
        if x.dtype.name not in ("float64", "complex128"):
            warnings.warn("Input #%d requires gradient and is not a double precision floating point or complex. This "
                          "check will likely fail if all the inputs are not of double precision floating point or "
                          "complex. " % i, stacklevel=3)
        if x.device.type != "cpu":
            raise NotImplementedError("gradcheck perturbs its inputs in host memory: pass CPU tensors (input %d is on "
                                      "%s)" % (i, x.device))
        if x._data.size and any(st == 0 and n > 1 for st, n in zip(x._data.strides, x._data.shape)):
            raise RuntimeError("The %dth input has a dimension with stride 0. gradcheck only supports inputs that are "
                               "non-overlapping to be able to compute the numerical gradients correctly. You should "
                               "call .contiguous on the input before passing it to gradcheck." % i)
        if not x._data.flags.writeable:
            raise RuntimeError("The %dth input is read-only: gradcheck perturbs its inputs in place. Pass a writable "
                               "copy (clone()) instead." % i)
        any_diff = True
    if not any_diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of them have "
                         "requires_grad=True.")


# ------------------------------------------------------------------ numerical side
def _evaluate(fn, inputs):
    """The tensor outputs of ``fn(*inputs)`` (other outputs are skipped)."""
    return [o for o in _as_tuple(fn(*inputs)) if _is_tensor(o)]


def _directional_difference(fn, inputs, i, direction, eps, where=None):
    """(f(x + eps d) - f(x - eps d)) / (2 eps) for input ``i``, one flat float64 array per tensor output.

    The input's array is written in place (no version bump, like ``x.data``) and restored after.
    """
    arr = inputs[i]._data
    orig = arr.copy()
    step = (eps * direction.reshape(arr.shape)).astype(arr.dtype)
    try:
        arr[...] = orig - step
        minus = _evaluate(fn, inputs)
        minus = [(o.shape, o.dtype, _flat64(o)) for o in minus]
        arr[...] = orig + step
        plus = [(o.shape, o.dtype, _flat64(o)) for o in _evaluate(fn, inputs)]
    finally:
        arr[...] = orig
    out = []
    for (sa, da, a), (sb, db, b) in zip(minus, plus):
        on_index = "on index %s " % (where,) if where is not None else ""
        if sa != sb:
            raise AssertionError("Expected `func` to return outputs with the same shape when inputs are perturbed %sby "
                                 "%s, but got: shapes %s and %s." % (on_index, eps, sa, sb))
        if da is not db:
            raise AssertionError("Expected `func` to return outputs with the same dtype when inputs are perturbed %sby "
                                 "%s, but got: dtypes %s and %s." % (on_index, eps, da, db))
        out.append((b - a) / (2 * eps))
    return out


def numerical_jacobian(fn, inputs, eps=1e-6):
    """J[i][k] (input i numel x output k numel) for every input requiring grad (None for the others) and
    every tensor output, by central differences."""
    jac = []
    for i, x in enumerate(inputs):
        if not _requires_grad(x):
            jac.append(None)
            continue
        n = x.numel()
        cols = None
        for j in range(n):
            e = np.zeros(n)
            e[j] = 1.0
            where = np.unravel_index(j, x.shape) if x.ndim else ()
            col = _directional_difference(fn, inputs, i, e, eps, tuple(int(w) for w in where))
            if cols is None:
                cols = [np.zeros((n, c.size)) for c in col]
            for k, c in enumerate(col):
                cols[k][j] = c
        jac.append(cols if cols is not None else [np.zeros((0, o.numel())) for o in _evaluate(fn, inputs)])
    return jac


# ------------------------------------------------------------------ analytical side
def _vjp_rows(output, diff_inputs, grad_output):
    """grad of ``output`` with ``grad_output``: one flat float64 row per input (zeros where unused), plus
    whether the sizes and dtypes were right."""
    rows, sizes_ok, types_ok = [], True, True
    for x, g in zip(diff_inputs, _grad(output, diff_inputs, grad_output)):
        if g is None:
            rows.append(np.zeros(x.numel()))
            continue
        if g.shape != x.shape:
            sizes_ok = False
        elif g.dtype is not x.dtype:
            types_ok = False
        rows.append(_flat64(g) if g.numel() == x.numel() else np.zeros(x.numel()))
    return rows, sizes_ok, types_ok


def _analytical_jacobian(output, diff_inputs, nondet_tol, check_grad_dtypes, grad_outputs):
    """Stack the vjp rows for each grad_output in ``grad_outputs`` (one-hot rows in slow mode, one random
    vector in fast mode), twice, and check size, dtype and reentrancy as PyTorch does."""
    runs = []
    for _ in range(2):  # twice: backward must give the same result for the same grad_output
        jac = [np.zeros((x.numel(), len(grad_outputs))) for x in diff_inputs]
        sizes_ok = types_ok = True
        for m, go in enumerate(grad_outputs):
            rows, s_ok, t_ok = _vjp_rows(output, diff_inputs, go)
            sizes_ok, types_ok = sizes_ok and s_ok, types_ok and t_ok
            for j, r in zip(jac, rows):
                j[:, m] = r
        runs.append(jac)
    if not types_ok and check_grad_dtypes:
        raise GradcheckError("Gradient has dtype mismatch")
    if not sizes_ok:
        raise GradcheckError("Analytical gradient has incorrect size")
    for a, b in zip(*runs):
        if a.size and np.abs(a - b).max() > nondet_tol:
            raise GradcheckError(
                "Backward is not reentrant, i.e., running backward with same input and grad_output multiple times "
                "gives different values, although analytical gradient matches numerical gradient.The tolerance for "
                "nondeterminism was %s." % nondet_tol + FAILED_NONDET_MSG)
    return runs[0]


def _one_hot_grad_outputs(output):
    out = []
    for m in range(output.numel()):
        go = np.zeros(output.shape, dtype=output.dtype.np)
        go.reshape(-1)[m] = 1
        out.append(Tensor._wrap(go))
    return out


def analytical_jacobian(output, inputs, nondet_tol=0.0, check_grad_dtypes=False):
    """J[i] (input i numel x output numel) for each input requiring grad, from backward."""
    diff_inputs = [x for x in inputs if _requires_grad(x)]
    return _analytical_jacobian(output, diff_inputs, nondet_tol, check_grad_dtypes, _one_hot_grad_outputs(output))


# ------------------------------------------------------------------ the two modes
def _mismatch(k, i, numerical, analytical):
    return ("Jacobian mismatch for output %d with respect to input %d,\nnumerical:%r\nanalytical:%r\n"
            % (k, i, _tensor64(numerical), _tensor64(analytical)))


def _slow_gradcheck(func, inputs, outputs, eps, rtol, atol, nondet_tol, check_grad_dtypes):
    diff_idx = [i for i, x in enumerate(inputs) if _requires_grad(x)]
    out_idx = [k for k, o in enumerate(_evaluate(func, inputs)) if _requires_grad(o)]
    numerical = numerical_jacobian(func, inputs, eps)
    if not outputs:
        _expect_zero(numerical[i][k] for i in diff_idx for k in range(len(numerical[i])))
        return
    for k, o in enumerate(outputs):
        analytical = analytical_jacobian(o, inputs, nondet_tol, check_grad_dtypes)
        for j, (i, a) in enumerate(zip(diff_idx, analytical)):
            n = numerical[i][out_idx[k]]
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                raise GradcheckError(_mismatch(k, j, n, a))


def _forward_ad_check(func, inputs, eps, rtol, atol):
    """The Jacobian forward-mode AD gives, column by column (a one-hot tangent per input element), against
    central finite differences, with PyTorch's message."""
    numerical = numerical_jacobian(func, inputs, eps)
    diff_idx = [i for i, x in enumerate(inputs) if _requires_grad(x)]
    for j, i in enumerate(diff_idx):
        x = inputs[i]
        n = x.numel()
        columns = []
        for e in np.eye(n, dtype=x.dtype.np):
            args = list(inputs)
            with forward_ad.dual_level():
                args[i] = forward_ad.make_dual(x.detach(), Tensor._wrap(e.reshape(tuple(x.shape))))
                outs = [o for o in _as_tuple(func(*args)) if _is_tensor(o)]
                columns.append([_jvp64(forward_ad.unpack_dual(o).tangent, o) for o in outs])
        for k in range(len(numerical[i])):
            analytical = np.array([c[k] for c in columns]).reshape(n, -1)
            if not np.allclose(analytical, numerical[i][k], rtol=rtol, atol=atol):
                raise GradcheckError("Jacobian computed with forward mode mismatch for output %d with respect to input "
                                     "%d,\nnumerical:%r\nanalytical:%r\n" % (k, j, _tensor64(numerical[i][k]),
                                                                             _tensor64(analytical)))


def _jvp64(tangent, out):
    return np.zeros(out.numel()) if tangent is None else tangent.detach().numpy().reshape(-1).astype(np.float64)


def _expect_zero(jacobians, tol=0.0):
    for n in jacobians:
        if n.size and np.abs(n).max() > tol:
            raise GradcheckError("Numerical gradient for function expected to be zero")


def _unit_vector(rng, n):
    v = rng.random(n)
    norm = np.linalg.norm(v)
    return v / norm if norm else v


def _fast_gradcheck(func, inputs, outputs, eps, rtol, atol, nondet_tol, check_grad_dtypes):
    rng = np.random.default_rng(0)  # a generator of its own: the user's random state is left alone
    diff_idx = [i for i, x in enumerate(inputs) if _requires_grad(x)]
    all_u = [_unit_vector(rng, inputs[i].numel()) for i in diff_idx]
    all_v = [_unit_vector(rng, o.numel()) for o in outputs]
    out_idx = [k for k, o in enumerate(_evaluate(func, inputs)) if _requires_grad(o)]
    Ju = [_directional_difference(func, inputs, i, u, eps) for i, u in zip(diff_idx, all_u)]
    if not outputs:
        _expect_zero((ju for per_input in Ju for ju in per_input), nondet_tol)
        return
    numerical = [[float(v @ per_input[out_idx[k]]) for k, v in enumerate(all_v)] for per_input in Ju]
    diff_inputs = [inputs[i] for i in diff_idx]
    for k, (o, v) in enumerate(zip(outputs, all_v)):
        go = _shaped_like(v, o)
        vJ = _analytical_jacobian(o, diff_inputs, nondet_tol, check_grad_dtypes, [go])
        for j, (row, u) in enumerate(zip(vJ, all_u)):
            a, n = float(row[:, 0] @ u), numerical[j][k]
            tol = atol * float(u.sum()) * float(v.sum())  # atol scaled by v^T (all ones) u, as PyTorch does
            if not np.isclose(a, n, rtol=rtol, atol=tol):
                raise GradcheckError(_mismatch(k, j, np.asarray(n), np.asarray(a))
                                     + _slow_mode_report(func, inputs, o, j, k, diff_idx, out_idx, eps, rtol, atol))


def _shaped_like(flat, t):
    return Tensor._wrap(np.array(flat.reshape(t.shape), dtype=t.dtype.np, order="C"))


def _slow_mode_report(func, inputs, output, j, k, diff_idx, out_idx, eps, rtol, atol):
    n = numerical_jacobian(func, inputs, eps)[diff_idx[j]][out_idx[k]]
    a = analytical_jacobian(output, inputs, float("inf"))[j]
    ok = np.allclose(a, n, rtol=rtol, atol=atol)
    msg = ("\nThe above quantities relating the numerical and analytical jacobians are computed \nin fast mode. See: "
           "https://github.com/pytorch/pytorch/issues/53876 for more background \nabout fast mode. Below, we recompute "
           "numerical and analytical jacobians in slow mode:\n\nNumerical:\n %r\nAnalytical:\n%r\n\nThe max per-element "
           "difference (slow mode) is: %r.\n" % (_tensor64(n), _tensor64(a), _tensor64(np.abs(n - a).max())))
    return msg + FAST_FAIL_SLOW_OK_MSG if ok else msg


# ------------------------------------------------------------------ linearity and undefined grads
def _test_backward_mul_by_grad_output(outputs, inputs):
    diff_inputs = [x for x in inputs if _requires_grad(x)]
    grads = _grad(outputs, diff_inputs, [zeros_like(o) for o in outputs])
    for g, x in zip(grads, diff_inputs):
        if g is None:
            continue
        if np.any(g._data != 0):
            raise GradcheckError("backward not multiplied by grad_output")
        if g.dtype is not x.dtype:
            raise GradcheckError("grad is incorrect type")
        if g.shape != x.shape:
            raise GradcheckError("grad is incorrect size")


class UndefinedGrad(Node):
    """Identity in forward; passes an undefined (None) gradient back, whatever it receives."""
    __slots__ = ()

    def apply(self, grads):
        return [None]


def _undefined(o):
    return o._alias(grad_fn=UndefinedGrad((edge(o),)))


def _test_undefined_backward_mode(func, outputs, inputs):
    diff_inputs = [x for x in inputs if _requires_grad(x)]
    to_check = [[_undefined(o) for o in _diff_outputs(func(*inputs))]]
    if len(to_check[0]) > 1:  # several outputs: each may be undefined alone
        for idx in range(len(outputs)):
            outs = _diff_outputs(func(*inputs))
            to_check.append([_undefined(o) if k == idx else o for k, o in enumerate(outs)])
    for outs in to_check:
        try:
            grads = _grad(outs, diff_inputs, [zeros_like(o) for o in outs])
        except RuntimeError as e:
            warnings.warn(UNDEFINED_GRAD_BC_WARNING, stacklevel=3)
            raise GradcheckError("Expected backward function to handle undefined output grads. Please look at \"Notes "
                                 "about undefined output gradients\" in \"tools/autograd/derivatives.yaml\"") from e
        for g in grads:
            if g is not None and np.any(g._data != 0):
                warnings.warn(UNDEFINED_GRAD_BC_WARNING, stacklevel=3)
                raise GradcheckError("Expected all input grads to be undefined or zero when all output grads are "
                                     "undefined or zero. Please look at \"Notes about undefined output gradients\" in "
                                     "\"tools/autograd/derivatives.yaml\"")


# ------------------------------------------------------------------ batched gradients (vmap over the backward)
FAILED_BATCHED_GRAD_MSG = """
gradcheck or gradgradcheck failed while testing batched gradient computation.
This could have been invoked in a number of ways (via a test that calls
gradcheck/gradgradcheck directly or via an autogenerated test).

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck.
If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `check_batched_grad=False` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `check_batched_grad=False` and/or `check_batched_gradgrad=False`.

If you're modifying an existing operator that supports batched grad computation,
or wish to make a new operator work with batched grad computation, please read
the following.

To compute batched grads (e.g., jacobians, hessians), we vmap over the backward
computation. The most common failure case is if there is a 'vmap-incompatible
operation' in the backward pass. Please see
NOTE: [How to write vmap-compatible backward formulas]
in the codebase for an explanation of how to fix this.
""".strip()

FAILED_BATCHED_GRAD_MSG_FWD_AD = """
gradcheck failed while testing batched gradient computation with forward-mode AD.
This test is enabled automatically when both `check_batched_grad=True`
and `check_forward_ad=True`, but can be disabled in the following ways
dependong on how the test was invoked (via a test that calls gradcheck
directly or via an autogenerated test).

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck.
If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `check_batched_forward_grad=False` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `check_batched_forward_grad=False`
"""


def _failed_batched_msg(output_idx, input_idx, res, exp, is_forward_ad=False):
    return ("For output %d and input %d:\n\n%s\n\nGot:\n%r\n\nExpected:\n%r"
            % (output_idx, input_idx, FAILED_BATCHED_GRAD_MSG_FWD_AD if is_forward_ad else FAILED_BATCHED_GRAD_MSG,
               res, exp)).strip()


def _randn_like(rng, t):
    return Tensor._wrap(rng.standard_normal(tuple(t.shape)).astype(t.dtype.np)).to(t.device)


def _compare_batched(results, expected, output_idx, is_forward_ad):
    for input_idx, (res, exp) in enumerate(zip(results, expected)):
        if not np.allclose(res.detach().numpy(), exp.detach().numpy(), rtol=1e-5, atol=1e-8):  # torch.allclose's
            raise GradcheckError(_failed_batched_msg(input_idx if is_forward_ad else output_idx, input_idx, res, exp,
                                                     is_forward_ad))


def _run_batched(fn, batch, is_forward_ad):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="There is a performance drop")
        try:
            return VMAP[0](fn)(batch)
        except RuntimeError as ex:
            raise GradcheckError("While computing batched gradients, got: %s\n\n%s"
                                 % (ex, FAILED_BATCHED_GRAD_MSG_FWD_AD if is_forward_ad else FAILED_BATCHED_GRAD_MSG)) \
                from ex


def _test_batched_grad(inputs, output, output_idx):
    """Two backward calls against one vmapped over their two grad_outputs, as PyTorch's check."""
    diff_inputs = [x for x in inputs if _requires_grad(x)]

    def vjp(v):
        gs = grad(output, diff_inputs, v, retain_graph=True, allow_unused=True)
        return tuple(zeros_like(x) if g is None else g for g, x in zip(gs, diff_inputs))
    rng = np.random.default_rng(0)
    grad_outputs = [_randn_like(rng, output) for _ in range(2)]
    expected = [stack(shards) for shards in zip(*[vjp(v) for v in grad_outputs])]
    _compare_batched(_run_batched(vjp, stack(grad_outputs), False), expected, output_idx, False)


def _test_batched_grad_forward_ad(func, inputs):
    """Two forward-mode passes against one vmapped over their two tangents, per input, as PyTorch's check."""
    rng = np.random.default_rng(0)
    for input_idx, current in enumerate(inputs):
        if not (_requires_grad(current) and current.dtype.is_inexact):
            continue

        def jvp(tangent):
            with forward_ad.dual_level():
                dual = forward_ad.make_dual(current.detach(), tangent)
                args = tuple(dual if k == input_idx else (x.detach() if _is_tensor(x) else x)
                             for k, x in enumerate(inputs))
                ret = []
                for o in _as_tuple(func(*args)):
                    if o is None:
                        continue
                    primal, tangent_out = forward_ad.unpack_dual(o)
                    ret.append(zeros_like(primal) if tangent_out is None else tangent_out)
                return tuple(ret)
        tangents = [_randn_like(rng, current) for _ in range(2)]
        expected = [stack(shards) for shards in zip(*[jvp(t) for t in tangents])]
        _compare_batched(_run_batched(jvp, stack(tangents), True), expected, input_idx, True)


# ------------------------------------------------------------------ public API
def _on_the_engine(check):
    """Run ``check``'s backward passes on the node-by-node engine (STATE.eager_backward): it checks the formulas
    and that two passes agree bit for bit, which a compiled plan built between them need not."""
    @functools.wraps(check)
    def run(*args, **kwargs):
        prev = STATE.eager_backward
        STATE.eager_backward = True
        try:
            return check(*args, **kwargs)
        finally:
            STATE.eager_backward = prev
    return run


@_on_the_engine
def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_batched_forward_grad=False, check_forward_ad=False, check_backward_ad=True, fast_mode=False,
              masked=None):
    """True if the gradients of ``func`` at ``inputs`` (tensors requiring grad, float64 advised) match
    central finite differences; otherwise raise GradcheckError (or return False if not raise_exception).

    ``fast_mode=True`` compares random projections ``v^T J u`` instead of whole Jacobians.
    ``check_forward_ad=True`` also compares the Jacobian forward-mode AD gives (one JVP per input element,
    autograd.forward_ad). ``check_batched_grad`` (``check_batched_forward_grad``) compares two backward
    (forward-mode) passes with one vmapped over both.
    """
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad to be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError("Setting check_batched_grad=True requires check_backward_ad to be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError("Setting check_batched_forward_grad=True requires check_forward_ad to be True")
    try:
        inputs = _as_tuple(inputs)
        func, inputs = _realified(func, inputs)
        ok = _gradcheck(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad,
                        check_grad_dtypes, check_backward_ad, fast_mode)
        if check_forward_ad:
            _forward_ad_check(func, inputs, eps, rtol, atol)
        if check_batched_forward_grad:
            _test_batched_grad_forward_ad(func, inputs)
        if check_batched_grad:
            for i, o in enumerate(_diff_outputs(func(*inputs))):
                _test_batched_grad(inputs, o, i)
        return ok
    except GradcheckError:
        if raise_exception:
            raise
        return False


def _realified(func, inputs):
    """(func, inputs) over real tensors only, as PyTorch's gradcheck checks complex functions: a complex input
    requiring grad becomes two inputs, its real and imaginary parts (z = complex(x, y)), a complex output two
    outputs, its real and imaginary parts. The four real Jacobians then hold the complex VJPs (through those of
    complex, real and imag, which are PyTorch's convention)."""
    complex_in = [_requires_grad(x) and x.dtype.is_complex for x in inputs]
    if not any(complex_in) and not any(_is_tensor(o) and o.dtype.is_complex for o in _as_tuple(func(*inputs))):
        return func, inputs
    parts = []
    for x, c in zip(inputs, complex_in):
        if c:
            d = x.detach()
            parts += [d.real.clone().requires_grad_(), d.imag.clone().requires_grad_()]
        else:
            parts.append(x)

    def realified(*args):
        args, rebuilt = list(args), []
        for c in complex_in:
            rebuilt.append(_complex(args.pop(0), args.pop(0)) if c else args.pop(0))
        out = []
        for o in _as_tuple(func(*rebuilt)):
            out += [o.real, o.imag] if _is_tensor(o) and o.dtype.is_complex else [o]
        return tuple(out)
    return realified, tuple(parts)


def _gradcheck(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad, check_grad_dtypes,
               check_backward_ad, fast_mode):
    _check_inputs(inputs)
    outputs = _diff_outputs(func(*inputs))
    if not check_backward_ad:
        return True
    check = _fast_gradcheck if fast_mode else _slow_gradcheck
    check(func, inputs, outputs, eps, rtol, atol, nondet_tol, check_grad_dtypes)
    if not outputs:
        return True
    _test_backward_mul_by_grad_output(outputs, inputs)
    if check_undefined_grad:
        _test_undefined_backward_mode(func, outputs, inputs)
    return True


@_on_the_engine
def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0, check_undefined_grad=True,
                  check_grad_dtypes=False, check_batched_grad=False, check_fwd_over_rev=False, check_rev_over_rev=True,
                  fast_mode=False, masked=False):
    """gradcheck of the map (inputs, grad_outputs) -> gradients computed with create_graph=True, i.e. of
    the recorded backward itself (second derivatives). Random grad_outputs in [-1, 1) unless given."""
    if not (check_fwd_over_rev or check_rev_over_rev):
        raise AssertionError("Expected at least one of check_fwd_over_rev or check_rev_over_rev to be True")
    if check_undefined_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_undefined_grad=True requires check_rev_over_rev to be True")
    if check_batched_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_batched_grad=True requires check_rev_over_rev to be True")
    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = []
        for o in _diff_outputs(func(*inputs)):
            dt = o.dtype.np if o.dtype.is_inexact else np.float64
            if gen_non_contig_grad_outputs and o.ndim:
                arr = np.empty(tuple(o.shape) + (2,), dtype=dt)[..., 0]  # every other element: not contiguous
            else:
                arr = np.empty(tuple(o.shape), dtype=dt)
            arr[...] = rng.uniform(-1, 1, o.shape)
            if o.dtype.is_complex:
                arr += 1j * rng.uniform(-1, 1, o.shape)
            grad_outputs.append(Tensor._wrap(arr, requires_grad=True))
    grad_outputs = _as_tuple(grad_outputs)
    n_out = len(grad_outputs)
    diff_in = {i for i, x in enumerate(inputs) if _requires_grad(x)}

    def first_grads(*args):
        xs, gos = args[:len(args) - n_out], args[len(args) - n_out:]
        outs = _diff_outputs(func(*xs))
        gs = grad(outs, [x for i, x in enumerate(xs) if i in diff_in], gos, create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_grads, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol, check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad,
                     check_forward_ad=check_fwd_over_rev, check_backward_ad=check_rev_over_rev, fast_mode=fast_mode,
                     masked=masked)
