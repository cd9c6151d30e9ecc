"""jitgrad.autograd.functional: Jacobians, Hessians and their products with vectors.

The API of ``torch.autograd.functional``.

Every function takes ``func`` and ``inputs`` (a Tensor or a tuple of Tensors) and answers with
the same nesting as its arguments: a tuple only where a tuple was given. All are built on
reverse mode (``autograd.grad``): ``jvp`` and ``hvp`` use the double-backward trick (the backward
is linear in its grad_output, so differentiating it with respect to that grad_output gives a
forward-mode product). ``create_graph=True`` keeps the results differentiable; ``strict=True``
raises when an output does not depend on an input instead of answering zeros.

jacobian and hessian loop over output elements, one backward each, unless ``vectorize=True``: then one
backward runs for the whole standard basis of the outputs under vmap (``grad(is_grads_batched=True)``), or,
with ``strategy="forward-mode"`` (which, as PyTorch's, needs ``vectorize=True``), one forward pass with dual
inputs (``jitgrad.autograd.forward_ad``) whose tangents are the standard basis of the inputs, under vmap.
"""
import numpy as np

from .._factories import zeros, zeros_like
from .._grad_mode import enable_grad, is_grad_enabled, set_grad_enabled
from .._tensor import Tensor
from ..ops.shape import stack
from . import forward_ad as fwAD
from .engine import VMAP, grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


# ------------------------------------------------------------------ argument handling
def _tensor_tuple(value, arg_name, fn_name):
    """(was it a tuple, the tuple), checking that every element is a Tensor."""
    is_tuple = isinstance(value, tuple)
    items = value if is_tuple else (value,)
    for i, el in enumerate(items):
        if not isinstance(el, Tensor):
            where = "the value at index %d has type %s" % (i, type(el)) if is_tuple else \
                "the given %s has type %s" % (arg_name, type(el))
            raise TypeError("The %s given to %s must be either a Tensor or a tuple of Tensors but %s."
                            % (arg_name, fn_name, where))
    return is_tuple, items


def _fresh(tensors, create_graph, need_graph):
    """New tensor objects for the inputs, so that grad tells them apart from the same tensors captured
    by ``func``: a differentiable alias when the caller wants a graph back to them, else a detached leaf."""
    return tuple(t.view_as(t) if create_graph and t._requires_grad else t.detach().requires_grad_(need_graph)
                 for t in tensors)


def _strip(results, create_graph):
    """Detach results the caller asked no history for (recursively for tuples of tuples)."""
    if isinstance(results[0], Tensor):
        return results if create_graph else tuple(r.detach() for r in results)
    return tuple(_strip(r, create_graph) for r in results)


def _unpack(res, was_tuple):
    """Undo the tupling: ``was_tuple`` is a bool, or (outer, inner) for nested results."""
    if isinstance(was_tuple, tuple):
        outer, inner = was_tuple
        if not inner:
            res = tuple(r[0] for r in res)
        return res if outer else res[0]
    return res if was_tuple else res[0]


def _check_v(v, other, other_is_tuple):
    if len(other) != len(v):
        if other_is_tuple:
            raise RuntimeError("v is a tuple of invalid length: should be %d but got %d." % (len(other), len(v)))
        raise RuntimeError("The given v should contain a single Tensor.")
    for i, (a, b) in enumerate(zip(v, other)):
        if a.shape != b.shape:
            raise RuntimeError("%sv has invalid size: should be %r but got %r."
                               % ("Entry %d in " % i if other_is_tuple else "", b.shape, a.shape))


_NOT_REQUIRING = {
    "outputs": "Output {i} of the user-provided function does not require gradients. The outputs must be computed in "
               "a differentiable manner from the input when running in strict mode.",
    "grad_inputs": "The gradient with respect to input {i} is independent of the inputs of the user-provided "
                   "function. This is not allowed in strict mode.",
    "jacobian": "While computing the hessian, found that the jacobian of the user-provided function with respect to "
                "input {i} is independent of the input. This is not allowed in strict mode. You should ensure that "
                "your function is twice differentiable and that the jacobian depends on the inputs (this would be "
                "violated by a linear function for example).",
    "hessian": "The hessian of the user-provided function with respect to input {i} is independent of the input. This "
               "is not allowed in strict mode. You should ensure that your function is thrice differentiable and "
               "that the hessian depends on the inputs.",
}


def _check_requires_grad(tensors, kind, strict):
    if not strict:
        return
    for i, t in enumerate(tensors):
        if t is None:  # only for grad_inputs
            raise RuntimeError("The output of the user-provided function is independent of input %d. This is not "
                               "allowed in strict mode." % i)
        if not t._requires_grad:
            raise RuntimeError(_NOT_REQUIRING[kind].format(i=i))


def _grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """autograd.grad that skips outputs not requiring grad and answers None for unreached inputs."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o._requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    outs, gos = zip(*pairs)
    return grad(outs, inputs, gos, allow_unused=True, create_graph=create_graph, retain_graph=retain_graph)


_INDEPENDENT = {
    "back": "The output of the user-provided function is independent of input {i}. This is not allowed in strict "
            "mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the grad_outputs when using "
                  "the double backward trick to compute forward mode gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. This is not allowed in "
                   "strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry {i} in the grad_jacobian. "
                         "This is not allowed in strict mode as it prevents from using the double backward trick to "
                         "replace forward mode AD.",
}


def _zeros_for_none(grads, refs, strict, create_graph, stage):
    """Replace None gradients by zeros shaped like ``refs`` (or raise in strict mode)."""
    out = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise RuntimeError(_INDEPENDENT[stage].format(i=i))
            g = zeros_like(refs[i])
        elif strict and create_graph and not g._requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError("The %s of the user-provided function is independent of input %d. This is not allowed "
                               "in strict mode when create_graph=True." % (what, i))
        out.append(g)
    return tuple(out)


def _call(func, inputs, fn_name, strict):
    outputs = func(*inputs)
    is_tuple, outputs = _tensor_tuple(outputs, "outputs of the user-provided function", fn_name)
    _check_requires_grad(outputs, "outputs", strict)
    return is_tuple, outputs


def _scalar_output(is_tuple, outputs, fn_name):
    if is_tuple:
        raise RuntimeError("The function given to %s should return a single Tensor" % fn_name)
    if outputs[0].numel() != 1:
        raise RuntimeError("The Tensor returned by the function given to %s should contain a single element" % fn_name)


def _vector(v, refs, refs_is_tuple, create_graph, fn_name, none_message):
    if v is None:
        if len(refs) != 1 or refs[0].numel() != 1:
            raise RuntimeError(none_message)
        return None
    _, v = _tensor_tuple(v, "v", fn_name)
    v = _fresh(v, create_graph, need_graph=False)
    _check_v(v, refs, refs_is_tuple)
    return v


_V_NONE_INPUT = ("The vector v can only be None if the input to the user-provided function is a single Tensor with a "
                 "single element.")


# ------------------------------------------------------------------ public API
def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product of ``func`` at ``inputs``."""
    with enable_grad():
        in_tuple, inputs = _tensor_tuple(inputs, "inputs", "vjp")
        inputs = _fresh(inputs, create_graph, need_graph=True)
        out_tuple, outputs = _call(func, inputs, "vjp", strict)
        v = _vector(v, outputs, out_tuple, create_graph, "vjp",
                    "The vector v can only be None if the user-provided function returns a single Tensor with a "
                    "single element.")
    with set_grad_enabled(create_graph or is_grad_enabled()):
        res = _zeros_for_none(_grad(outputs, inputs, v, create_graph), inputs, strict, create_graph, "back")
    return _unpack(_strip(outputs, create_graph), out_tuple), _unpack(_strip(res, create_graph), in_tuple)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product, by the double-backward trick."""
    with enable_grad():
        in_tuple, inputs = _tensor_tuple(inputs, "inputs", "jvp")
        inputs = _fresh(inputs, create_graph, need_graph=True)
        v = _vector(v, inputs, in_tuple, create_graph, "jvp",
                    "The vector v can only be None if the input to the user-provided function is a single Tensor "
                    "with a single element.")
        out_tuple, outputs = _call(func, inputs, "jvp", strict)
        # backward is linear in grad_outputs, so their value does not matter (zeros: no inf or nan)
        grad_outputs = tuple(zeros_like(o, requires_grad=True) for o in outputs)
        grad_inputs = _grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict)
    with set_grad_enabled(create_graph or is_grad_enabled()):
        res = _zeros_for_none(_grad(grad_inputs, grad_outputs, v, create_graph), outputs, strict, create_graph,
                              "back_trick")
    return _unpack(_strip(outputs, create_graph), out_tuple), _unpack(_strip(res, create_graph), out_tuple)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: for output i and input j a tensor of shape
    ``outputs[i].shape + inputs[j].shape`` (nested tuples as given). One backward per output element, or
    one vmapped pass with ``vectorize=True`` (reverse mode, or forward mode with ``strategy``)."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your function '
                             'has more outputs than inputs, "forward-mode" tends to be more performant. Otherwise, '
                             'prefer to use "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError('torch.autograd.functional.jacobian: `create_graph=True` and '
                                      '`strategy="forward-mode"` are not supported together (yet). Please either set '
                                      '`create_graph=False` or `strategy="reverse-mode"`.')
        return _jacfwd(func, inputs, strict, vectorize)
    with enable_grad():
        in_tuple, inputs = _tensor_tuple(inputs, "inputs", "jacobian")
        inputs = _fresh(inputs, create_graph, need_graph=True)
        out_tuple, outputs = _call(func, inputs, "jacobian", strict)
        if vectorize:
            if strict:
                raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
                                   "supported together. Please either set `strict=False` or `vectorize=False`.")
            return _unpack(_strip(_jacrev_vectorized(outputs, inputs, create_graph), create_graph),
                           (out_tuple, in_tuple))
        result = []
        for i, out in enumerate(outputs):
            rows = [[] for _ in inputs]
            for k in range(out.numel()):
                one_hot = np.zeros(out.shape, dtype=out.dtype.np)
                one_hot.reshape(-1)[k] = 1
                row = _grad((out,), inputs, (Tensor._wrap(one_hot),), create_graph=create_graph, retain_graph=True)
                for j, (g, x) in enumerate(zip(row, inputs)):
                    if g is None:
                        if strict:
                            raise RuntimeError("Output %d of the user-provided function is independent of input %d. "
                                               "This is not allowed in strict mode." % (i, j))
                        g = zeros_like(x)
                    elif strict and create_graph and not g._requires_grad:
                        raise RuntimeError("The jacobian of the user-provided function is independent of input %d. "
                                           "This is not allowed in strict mode when create_graph=True." % i)
                    rows[j].append(g)
            result.append(tuple(_stack(r, out, x) for r, x in zip(rows, inputs)))
        return _unpack(_strip(tuple(result), create_graph), (out_tuple, in_tuple))


def _basis(tensors):
    """The standard basis of R^N (N: the tensors' elements in all) split by tensor: per tensor an (N, numel)
    block of the identity, in its dtype and on its device."""
    numels = [t.numel() for t in tensors]
    total, start, out = sum(numels), 0, []
    for t, n in zip(tensors, numels):
        block = np.zeros((total, n), dtype=t.dtype.np)
        block[np.arange(start, start + n), np.arange(n)] = 1
        out.append(Tensor._wrap(block).to(t.device))
        start += n
    return out


def _jacrev_vectorized(outputs, inputs, create_graph):
    """Every row of the Jacobian from one backward: the outputs' standard basis as batched grad_outputs."""
    numels = [o.numel() for o in outputs]
    flat = tuple(o.reshape(-1) for o in outputs)
    pairs = [(o, g) for o, g in zip(flat, _basis(outputs)) if o._requires_grad]
    grads = grad([p[0] for p in pairs], inputs, [p[1] for p in pairs], retain_graph=True, create_graph=create_graph,
                 allow_unused=True, is_grads_batched=True) if pairs else (None,) * len(inputs)
    per_input = [zeros((sum(numels),) + tuple(x.shape), dtype=x.dtype) if g is None else g
                 for g, x in zip(grads, inputs)]
    return tuple(tuple(j.view(tuple(o.shape) + tuple(x.shape)) for j, x in zip(
        (g.split(numels, 0)[i] for g in per_input), inputs)) for i, o in enumerate(outputs))


def _jacfwd(func, inputs, strict, vectorize):
    """jacobian(strategy="forward-mode"): one forward pass under vmap, the inputs' standard basis the tangents."""
    if strict:
        raise RuntimeError('torch.autograd.functional.jacobian: `strict=True` and `strategy="forward-mode"` are not '
                           'supported together (yet). Please either set `strict=False` or `strategy="reverse-mode"`.')
    in_tuple, inputs = _tensor_tuple(inputs, "inputs", "jacobian")
    if not vectorize:
        raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse Hessian isonly "
                                  "implemented for `vectorize=True`.")
    info = []

    def push(*tangents):
        with fwAD.dual_level():
            duals = tuple(fwAD.make_dual(x, t.view_as(x)) for x, t in zip(inputs, tangents))
            out_tuple, outs = _tensor_tuple(func(*duals), "outputs", "jacobian")
            unpacked = [fwAD.unpack_dual(o) for o in outs]
            info[:] = [out_tuple, [u.primal for u in unpacked]]
            return tuple(zeros_like(u.primal) if u.tangent is None else u.tangent for u in unpacked)
    columns = VMAP[0](push)(*_basis(inputs))
    out_tuple, outputs = info
    numels = [x.numel() for x in inputs]
    result = []
    for cols, o in zip(columns, outputs):  # cols: (N_in, *out_shape)
        cols = cols.permute(tuple(range(1, cols.ndim)) + (0,))
        # (no create_graph with forward mode: the tangents' history, if any, is not handed back)
        result.append(tuple(c.reshape(tuple(o.shape) + tuple(x.shape)).detach()
                            for c, x in zip(cols.split(numels, -1), inputs)))
    return _unpack(tuple(result), (out_tuple, in_tuple))


def _stack(rows, out, x):
    if not rows:  # an output with no elements
        return zeros(tuple(out.shape) + tuple(x.shape), dtype=x.dtype)
    return stack(rows, 0).view(tuple(out.shape) + tuple(x.shape))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of scalar-valued ``func`` at ``inputs``: for inputs i, j a tensor of shape
    ``inputs[i].shape + inputs[j].shape`` (the Jacobian of the gradient)."""
    in_tuple, inputs = _tensor_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def single_output(*xs):
        out = func(*xs)
        is_tuple, outs = _tensor_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(outs, "outputs", strict)
        if is_tuple or not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should contain a single element")
        return out.squeeze()

    def gradient(*xs):
        if outer_jacobian_strategy == "forward-mode":  # (dual inputs: the inner backward differentiates them)
            xs = tuple(x.requires_grad_(True) for x in xs)
        jac = jacobian(single_output, xs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        return jac

    res = jacobian(gradient, inputs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    return _unpack(res, (in_tuple, in_tuple))


def _gradient_of_scalar(func, inputs, v, create_graph, strict, fn_name):
    """Shared start of vhp/hvp: fresh inputs, checked v, the scalar output and its gradient (with a graph)."""
    in_tuple, inputs = _tensor_tuple(inputs, "inputs", fn_name)
    inputs = _fresh(inputs, create_graph, need_graph=True)
    v = _vector(v, inputs, in_tuple, create_graph, fn_name, _V_NONE_INPUT)
    out_tuple, outputs = _call(func, inputs, fn_name, strict)
    _scalar_output(out_tuple, outputs, fn_name)
    jac = _grad(outputs, inputs, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict)
    return in_tuple, inputs, v, out_tuple, outputs, jac


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H): the vector-Hessian product of scalar-valued ``func``."""
    with enable_grad():
        in_tuple, inputs, v, out_tuple, outputs, jac = _gradient_of_scalar(func, inputs, v, create_graph, strict,
                                                                            "vhp")
    with set_grad_enabled(create_graph or is_grad_enabled()):
        res = _zeros_for_none(_grad(jac, inputs, v, create_graph), inputs, strict, create_graph, "double_back")
    return _unpack(_strip(outputs, create_graph), out_tuple), _unpack(_strip(res, create_graph), in_tuple)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v): the Hessian-vector product of scalar-valued ``func``, by the double-backward
    trick (equal to vhp for twice continuously differentiable functions, whose Hessian is symmetric)."""
    with enable_grad():
        in_tuple, inputs, v, out_tuple, outputs, jac = _gradient_of_scalar(func, inputs, v, create_graph, strict,
                                                                            "hvp")
        grad_jac = tuple(zeros_like(x, requires_grad=True) for x in inputs)
        double_back = _grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict)
    with set_grad_enabled(create_graph or is_grad_enabled()):
        res = _zeros_for_none(_grad(double_back, grad_jac, v, create_graph), inputs, strict, create_graph,
                              "double_back_trick")
    return _unpack(_strip(outputs, create_graph), out_tuple), _unpack(_strip(res, create_graph), in_tuple)
