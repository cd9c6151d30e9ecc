"""gradcheck / gradgradcheck: analytical Jacobians (from backward) against central finite differences."""
import numpy as np

from .._grad_mode import no_grad


class GradcheckError(RuntimeError):
    pass


def _as_tuple(x):
    from .._tensor import Tensor
    return (x,) if isinstance(x, Tensor) else tuple(x)


def _outputs(fn, inputs):
    from .._tensor import Tensor
    out = fn(*inputs)
    outs = _as_tuple(out) if isinstance(out, (Tensor, tuple, list)) else (out,)
    return [o for o in outs if isinstance(o, Tensor) and o.dtype.is_floating_point]


def numerical_jacobian(fn, inputs, eps):
    """J[i][k]: (input i elements) x (output k elements), by central differences in float64."""
    from .._tensor import Tensor
    with no_grad():
        outs = _outputs(fn, inputs)
        jac = []
        for x in inputs:
            if not (isinstance(x, Tensor) and x._requires_grad):
                jac.append(None)
                continue
            cols = [np.zeros((x.numel(), o.numel())) for o in outs]
            flat = x._data.reshape(-1) if x._data.flags.c_contiguous else None
            if flat is None:
                raise GradcheckError("gradcheck needs contiguous inputs")
            for j in range(x.numel()):
                orig = flat[j].copy()
                flat[j] = orig + eps
                plus = [o._data.astype(np.float64).reshape(-1).copy() for o in _outputs(fn, inputs)]
                flat[j] = orig - eps
                minus = [o._data.astype(np.float64).reshape(-1).copy() for o in _outputs(fn, inputs)]
                flat[j] = orig
                for k in range(len(outs)):
                    cols[k][j] = (plus[k] - minus[k]) / (2 * eps)
            jac.append(cols)
    return jac


def analytical_jacobian(fn, inputs, nondet_tol=0.0):
    from .._factories import zeros_like
    from .engine import grad
    outs = _outputs(fn, inputs)
    diff = [x for x in inputs if getattr(x, "_requires_grad", False)]
    jac = [[np.zeros((x.numel(), o.numel())) for o in outs] if getattr(x, "_requires_grad", False) else None
           for x in inputs]
    for k, o in enumerate(outs):
        if not o._requires_grad:
            continue
        for m in range(o.numel()):
            go = zeros_like(o)
            go._data.reshape(-1)[m] = 1
            gs = grad(o, diff, go, retain_graph=True, allow_unused=True)
            it = iter(gs)
            for i, x in enumerate(inputs):
                if jac[i] is None:
                    continue
                g = next(it)
                if g is not None:
                    jac[i][k][:, m] = g._data.astype(np.float64).reshape(-1)
    return jac, outs


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False, fast_mode=False,
              masked=None):
    """True if backward's Jacobian matches central finite differences (else raise or return False)."""
    import warnings
    inputs = _as_tuple(inputs)
    for i, x in enumerate(inputs):
        if getattr(x, "_requires_grad", False) and x.dtype.name != "float64":
            warnings.warn("Input #%d requires gradient and is not a double precision floating point or complex. This "
                          "check will likely fail if all the inputs are not of double precision floating point or "
                          "complex. " % i)
    if not any(getattr(x, "_requires_grad", False) for x in inputs):
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of the them have "
                         "requires_grad=True.")
    num = numerical_jacobian(func, inputs, eps)
    ana, outs = analytical_jacobian(func, inputs)
    for i, x in enumerate(inputs):
        if num[i] is None:
            continue
        for k in range(len(outs)):
            a, n = ana[i][k], num[i][k]
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                msg = ("Jacobian mismatch for output %d with respect to input %d,\nnumerical:%s\nanalytical:%s\n"
                       % (k, i, _fmt(n), _fmt(a)))
                if raise_exception:
                    raise GradcheckError(msg)
                return False
    return True


def _fmt(m):
    from .._factories import tensor
    return repr(tensor(m, dtype="float64"))


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3, gen_non_contig_grad_outputs=False,
                  raise_exception=True, nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
                  check_batched_grad=False, fast_mode=False, masked=False):
    """gradcheck of the function (inputs, grad_outputs) -> gradients, i.e. of the backward itself."""
    from .._factories import randn_like
    from .engine import grad
    inputs = _as_tuple(inputs)
    outs = _outputs(func, inputs)
    if grad_outputs is None:
        grad_outputs = tuple(randn_like(o, dtype=o.dtype).requires_grad_() for o in outs)
    grad_outputs = _as_tuple(grad_outputs)
    n_in = len(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if getattr(x, "_requires_grad", False)]

    def first_grads(*args):
        xs, gos = args[:n_in], args[n_in:]
        ys = _outputs(func, xs)
        gs = grad(ys, [xs[i] for i in diff_idx], gos, create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_grads, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
