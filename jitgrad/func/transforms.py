"""grad, grad_and_value, vjp, jvp, linearize, jacrev, jacfwd, hessian (``torch.func``'s), composable with each
other and with vmap.

Reverse mode records the graph on the physical tensors (the whole batch, for a function called inside vmap)
and runs the engine on them. An input differentiated inside vmap that is not batched at an open vmap level is
first expanded to that level (a stride-0 view), so that each sample's gradient stays its own: in
``vmap(grad(loss), in_dims=(None, 0))(params, x)`` each sample gets the gradient with respect to the shared
params, not their sum over the batch. A cotangent batched at a level the graph was not recorded at (jacrev's
basis) runs the backward's formulas on BatchedTensors: every VJP formula is table ops, so vmap batches them.
Forward mode puts the tangent on the physical tensor (a forward_ad level per jvp: they nest), where dispatch runs the JVP
after vmap's hook has unwrapped the batch.
"""
import functools
import threading

from .._grad_mode import STATE, enable_grad
from .._tensor import Tensor
from .._factories import eye, ones_like, zeros_like
from ..autograd import engine
from ..autograd import forward_ad as fwAD
from . import _pytree
from ._batched import LEVELS, move_out, unwrap_all, wrap_levels
from .vmap import HOOK, vmap

_DEPTH = [0]  # open grad/vjp/jvp transforms: an inner one records its backward for the outer ones


class _Open(threading.local):
    """This thread's open grad/vjp transforms (reverse mode differentiates what runs inside them) and open jvps
    whose inputs have no history: what runs inside such jvps alone is differentiated in forward mode only (see
    _forward_only)."""
    reverse = 0
    forward_only = 0


_OPEN = _Open()


# ------------------------------------------------------------------ arguments
def _wrap_argnum(argnum, num_args):
    if not isinstance(argnum, int):
        raise RuntimeError("argnum must be int, got: %s" % type(argnum))
    if 0 <= argnum < num_args:
        return argnum
    if -num_args <= argnum < 0:
        return argnum + num_args
    raise RuntimeError("Got argnum=%d, but only %d positional inputs" % (argnum, num_args))


def _argnums(argnums, num_args):
    if isinstance(argnums, tuple):
        if len(argnums) == 0:
            raise RuntimeError("argnums must be non-empty")
        if len(set(argnums)) != len(argnums):
            raise RuntimeError("argnums elements must be unique, got %s" % (argnums,))
        return tuple(_wrap_argnum(a, num_args) for a in argnums)
    if isinstance(argnums, int):
        return _wrap_argnum(argnums, num_args)
    raise RuntimeError("argnums must be int or Tuple[int, ...], got: %s" % type(argnums))


def _selected(args, argnums):
    return args[argnums] if isinstance(argnums, int) else tuple(args[a] for a in argnums)


def _replaced(args, argnums, new):
    if isinstance(argnums, int):
        return tuple(new if i == argnums else a for i, a in enumerate(args))
    return tuple(new[argnums.index(i)] if i in argnums else a for i, a in enumerate(args))


def _check_tensors(flat, api, what):
    for x in flat:
        if not isinstance(x, Tensor):
            raise RuntimeError("%s: Expected %s to only contain Tensors, got %s" % (api, what, type(x)))


# ------------------------------------------------------------------ reverse mode on the physical tensors
def _physical(x, levels):
    """``x`` batched at every level of ``levels`` (expanded where it is not), unwrapped of them: its leading
    dims are the levels' batch dims, outermost first."""
    for lv in reversed(levels):
        x = move_out(x, lv.level, lv.size)
    return x


def _leaf(x, levels):
    """(what the function sees, the physical tensor to differentiate with respect to) for input ``x``."""
    p = _physical(x, levels)
    if p is not unwrap_all(x)[0]:
        leaf = p  # (a new tensor, expanded at a level: connected to an outer graph, carrying a tangent, as x is)
    elif p._requires_grad or STATE.dual is not None or STATE.capture is not None:
        leaf = p.view_as(p)  # (an alias connected to the outer graph, carrying p's tangent; an op a trace records)
    else:
        leaf = p.detach()  # (an alias of the same storage and version counter)
    if not leaf.requires_grad:
        leaf.requires_grad_()
    return wrap_levels(leaf, [lv.level for lv in levels]), leaf


def _levels_in(trees):
    """The vmap levels any tensor in ``trees`` is batched at."""
    found = set()
    for x in _pytree.flatten(trees)[0]:
        if isinstance(x, Tensor):
            found.update(unwrap_all(x)[1])
    return found


def _record(run, flat, hint, outputs_of):
    """Run ``run(inputs)`` on leaves made of ``flat``: (its result, [(input, leaf)], the levels the leaves are
    batched at). A leaf is expanded at the open vmap levels that some argument (``hint``) is batched at; if an
    output turns out batched at another one (a batched tensor the function closes over), the function runs
    again with the leaves expanded at every level, so that no sample's gradient is summed into another's."""
    every = list(LEVELS)
    used = [lv for lv in every if lv.level in hint]
    while True:
        pairs = [_leaf(x, used) if isinstance(x, Tensor) else (x, None) for x in flat]
        result = run([p[0] for p in pairs])
        if len(used) == len(every) or _levels_in(outputs_of(result)) <= {lv.level for lv in used}:
            return result, pairs, used
        used = every


def _backward(outputs, cotangents, leaves, levels, create_graph, forward_only=False):
    """The gradients of ``outputs`` (with ``cotangents``) with respect to the physical ``leaves``, batched back
    at ``levels``. ``forward_only``: the graph asked for (``create_graph``) serves forward mode's tangents alone,
    which the formulas carry without recording themselves."""
    outs, cts = [], []
    for o, c in zip(outputs, cotangents):
        p = _physical(o, levels)
        if p.requires_grad:
            outs.append(p)
            cts.append(_physical(c, levels))
    batched_ct = any(unwrap_all(c)[1] for c in cts)
    if not outs:
        grads = [None] * len(leaves)
    elif (batched_ct and not create_graph or forward_only) and STATE.capture is None:
        # the formulas run on the batched cotangents or the tangents (the engine's graph mode), their graph not kept:
        # not recorded (vmap's hook, outside vmap too, claims the ops that would be and runs them with grad mode off)
        saved, HOOK.no_graph, hook, STATE.vmap = HOOK.no_graph, True, STATE.vmap, HOOK
        try:
            grads = engine.grad(outs, leaves, cts, retain_graph=True, create_graph=True, allow_unused=True)
        finally:
            HOOK.no_graph, STATE.vmap = saved, hook
    elif batched_ct or create_graph or STATE.vmap is None or STATE.capture is not None:
        grads = engine.grad(outs, leaves, cts, retain_graph=True, create_graph=create_graph or batched_ct,
                            allow_unused=True)
    else:
        # a backward of physical tensors only: it runs outside the open vmaps, where compiled autograd's plans
        # can run it (they leave a backward inside vmap to the node-by-node engine)
        hook, STATE.vmap = STATE.vmap, None
        try:
            grads = engine.grad(outs, leaves, cts, retain_graph=True, allow_unused=True)
        finally:
            STATE.vmap = hook
    names = [lv.level for lv in levels]
    return [wrap_levels(zeros_like(leaf) if g is None else g if create_graph or not g._requires_grad else g.detach(),
                        names) for g, leaf in zip(grads, leaves)]


def _needs_graph(flat_inputs):
    """Whether a transform's backward must itself be differentiable: inside another transform, inside a dual
    level (forward-over-reverse), or for inputs that carry history."""
    return _DEPTH[0] > 0 or STATE.dual is not None or _has_history(flat_inputs)


def _has_history(flat_inputs):
    return any(isinstance(x, Tensor) and x.requires_grad for x in flat_inputs)


def _forward_only(flat_inputs):
    """Whether what runs now is differentiated in forward mode alone, if at all (hessian's jacrev, inside jacfwd's
    jvp): no grad or vjp is open, every open dual level is such a jvp's, and the inputs have no history."""
    return _OPEN.reverse == 0 and _OPEN.forward_only == len(fwAD._L.open) and not _has_history(flat_inputs)


def _strip(x, create_graph):
    return x if create_graph or not isinstance(x, Tensor) else x.detach()


def grad_and_value(func, argnums=0, has_aux=False):
    """``func``'s gradient with respect to its inputs ``argnums`` (an int or a tuple of them), and its value
    (``(value, aux)`` with ``has_aux``)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args))
        flat, spec = _pytree.flatten(_selected(args, nums))
        create_graph = _needs_graph(flat)
        forward_only = STATE.dual is not None and _forward_only(flat)

        def run(inputs):
            return func(*_replaced(args, nums, _pytree.unflatten(inputs, spec)), **kwargs)

        def main(output):
            return output[0] if has_aux and isinstance(output, tuple) and len(output) == 2 else output
        _DEPTH[0] += 1
        _OPEN.reverse += 1
        try:
            with enable_grad():
                output, pairs, levels = _record(run, flat, _levels_in((args, kwargs)), main)
                aux = None
                if has_aux:
                    if not (isinstance(output, tuple) and len(output) == 2):
                        raise RuntimeError("grad_and_value(f)(*args): output of function f should be a tuple: "
                                           "(output, aux) if has_aux is True")
                    output, aux = output
                if not isinstance(output, Tensor):
                    raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got %s"
                                       % type(output))
                if output.dim() != 0:
                    raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                                       "tensor with %d dims. Maybe you wanted to use the vjp or jacrev APIs instead?"
                                       % output.dim())
                leaves = [p[1] for p in pairs if p[1] is not None]
                grads = iter(_backward([output], [ones_like(output)], leaves, levels, create_graph, forward_only))
        finally:
            _DEPTH[0] -= 1
            _OPEN.reverse -= 1
        g = _pytree.unflatten([next(grads) if p[1] is not None else None for p in pairs], spec)
        value = _strip(output, create_graph)
        return g, ((value, _pytree.tree_map(lambda a: _strip(a, create_graph), aux)) if has_aux else value)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """``func``'s gradient with respect to its inputs ``argnums`` (``(gradient, aux)`` with ``has_aux``)."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def vjp(func, *primals, has_aux=False):
    """``(func(*primals), vjp_fn)`` (and aux): ``vjp_fn(cotangents)`` gives the vector-Jacobian products with
    respect to every primal; it can be called again, and vmapped (jacrev)."""
    flat, spec = _pytree.flatten(primals)
    _check_tensors(flat, "vjp(f, *primals)", "primals")
    create_graph = _needs_graph(flat)

    def main(output):
        return output[0] if has_aux and isinstance(output, tuple) and len(output) == 2 else output
    _DEPTH[0] += 1
    _OPEN.reverse += 1
    try:
        with enable_grad():
            output, pairs, levels = _record(lambda inputs: func(*_pytree.unflatten(inputs, spec)), flat,
                                            _levels_in(primals), main)
            aux = None
            if has_aux:
                if not (isinstance(output, tuple) and len(output) == 2):
                    raise RuntimeError("vjp(f, *primals): output of function f should be a tuple: (output, aux) if "
                                       "has_aux is True")
                output, aux = output
    finally:
        _DEPTH[0] -= 1
        _OPEN.reverse -= 1
    flat_out, out_spec = _pytree.flatten(output)
    _check_tensors(flat_out, "vjp(f, *primals)", "outputs")
    leaves = [p[1] for p in pairs]

    def vjp_fn(cotangents, retain_graph=True, create_graph=None):  # (the last two: torch.func's, kept for calls)
        flat_ct, ct_spec = _pytree.flatten(cotangents)
        if ct_spec != out_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree structure of outputs "
                               "to the function. cotangents: %s, primal output: %s" % (ct_spec, out_spec))
        for i, (c, o) in enumerate(zip(flat_ct, flat_out)):
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError("Mismatch in shape: grad_output[%d] has a shape of %s and output[%d] has a shape "
                                   "of %s." % (i, c.shape, i, o.shape))
        graph = needs_graph or bool(create_graph) or _DEPTH[0] > 0 or STATE.dual is not None
        forward_only = not create_graph and STATE.dual is not None and _forward_only(flat)
        _DEPTH[0] += 1
        _OPEN.reverse += 1
        try:
            grads = _backward(flat_out, flat_ct, leaves, levels, graph, forward_only)
        finally:
            _DEPTH[0] -= 1
            _OPEN.reverse -= 1
        return _pytree.unflatten(grads, spec)
    needs_graph = create_graph
    out = _pytree.tree_map(lambda o: _strip(o, create_graph), output)
    if has_aux:
        return out, vjp_fn, _pytree.tree_map(lambda a: _strip(a, create_graph), aux)
    return out, vjp_fn


# ------------------------------------------------------------------ forward mode
def _dual(primal, tangent):
    """``primal`` carrying ``tangent``, the tangent on the physical tensor (below every vmap level)."""
    p, levels = unwrap_all(primal)
    t = tangent
    for lv in reversed(levels):
        t = move_out(t, lv, LEVELS[lv - 1].size)
    return wrap_levels(fwAD.make_dual(p, t), levels)


def _unpack(y):
    p, levels = unwrap_all(y)
    primal, tangent = fwAD.unpack_dual(p)
    if tangent is None:
        tangent = zeros_like(primal)
    return wrap_levels(primal, levels), wrap_levels(tangent, levels)


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """``(func(*primals), J @ tangents)``: the Jacobian-vector product by forward-mode AD."""
    api = "jvp(f, primals, tangents)"
    if not isinstance(primals, tuple):
        raise RuntimeError("%s: Expected primals to be a tuple. E.g. it should be valid to call f(*primals)." % api)
    flat_p, p_spec = _pytree.flatten(primals)
    flat_t, t_spec = _pytree.flatten(tangents)
    if p_spec != t_spec:
        raise RuntimeError("%s: Expected primals and tangents to have the same python structure. For example, if "
                           "primals is a tuple of 3 tensors, tangents also must be. Got primals with structure %s and "
                           "tangents with structure %s" % (api, p_spec, t_spec))
    _check_tensors(flat_p, api, "primals")
    _check_tensors(flat_t, api, "tangents")
    keep = _needs_graph(flat_p + flat_t)  # (an outer transform differentiates the results: their history stays)
    forward_only = _forward_only(flat_p + flat_t)  # (its tangents then record no history)
    _DEPTH[0] += 1
    _OPEN.forward_only += forward_only
    try:
        with fwAD.nested_level(history=not forward_only):  # (levels nest: jvp of jvp, jacfwd of jacfwd)
            duals = [_dual(p, t) for p, t in zip(flat_p, flat_t)]
            out = func(*_pytree.unflatten(duals, p_spec))
            aux = None
            if has_aux:
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise RuntimeError("%s: output of function f should be a tuple: (output, aux) if has_aux is True"
                                       % api)
                out, aux = out
            flat_out, out_spec = _pytree.flatten(out)
            for o in flat_out:
                if not isinstance(o, Tensor):
                    raise RuntimeError("%s: expected f(*args) to return only tensors, got unsupported type %s"
                                       % (api, type(o)))
            pairs = [_unpack(o) for o in flat_out]
    finally:
        _DEPTH[0] -= 1
        _OPEN.forward_only -= forward_only
    primal_out = _pytree.unflatten([_strip(p, keep) for p, _ in pairs], out_spec)
    tangent_out = _pytree.unflatten([_strip(t, keep) for _, t in pairs], out_spec)
    return (primal_out, tangent_out, aux) if has_aux else (primal_out, tangent_out)


def linearize(func, *primals):
    """``(func(*primals), jvp_fn)``: ``jvp_fn(*tangents)`` is the Jacobian-vector product at ``primals``."""
    output = func(*primals)

    def jvp_fn(*tangents):
        flat_p, p_spec = _pytree.flatten(primals)
        flat_t, t_spec = _pytree.flatten(tangents)
        if p_spec != t_spec:
            raise RuntimeError("Expected the tangents %s to have the same argspec as the primals %s" % (t_spec, p_spec))
        for i, (t, p) in enumerate(zip(flat_t, flat_p)):
            if tuple(t.shape) != tuple(p.shape):
                raise RuntimeError("Mismatch in tangent shape: tangent:%d with shape %s in flattened pytree doesn't "
                                   "match the shape %s of the corresponding primal." % (i, t.shape, p.shape))
        return jvp(func, primals, tangents)[1]
    return output, jvp_fn


# ------------------------------------------------------------------ Jacobians
def _basis(flat, chunk_size=None):
    """The standard basis over the elements of ``flat`` (N in all), one (N, *shape) tensor per tensor."""
    n = sum(t.numel() for t in flat)
    e = eye(n, dtype=flat[0].dtype, device=flat[0].device)
    if len(flat) == 1:  # (the usual one input: the identity itself, no slice to index)
        return [e if flat[0].dim() == 1 else e.reshape((n,) + tuple(flat[0].shape))]
    out, start = [], 0
    for t in flat:
        out.append(e[:, start:start + t.numel()].reshape((n,) + tuple(t.shape)))
        start += t.numel()
    return out


def _split_rows(rows, flat_out, flat_in_shapes):
    """rows[i]: (N_out, *in_shape_i) -> per output o: (*out_shape_o, *in_shape_i)."""
    result, start = [], 0
    for o in flat_out:
        k = o.numel()
        if len(flat_out) == 1:  # (the rows are this output's: no slice, no reshape where they have its shape)
            result.append([r if tuple(r.shape) == tuple(o.shape) + tuple(shape) else
                           r.reshape(tuple(o.shape) + tuple(shape)) for r, shape in zip(rows, flat_in_shapes)])
            break
        result.append([r[start:start + k].reshape(tuple(o.shape) + tuple(shape)) for r, shape in zip(rows, flat_in_shapes)])
        start += k
    return result


def _assemble(per_out, out_spec, in_spec):
    """Nested results: outputs outside, inputs inside, each as their trees."""
    return _pytree.unflatten([_pytree.unflatten(ins, in_spec) for ins in per_out], out_spec)


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """The Jacobian of ``func`` with respect to inputs ``argnums``, by reverse mode: vmap of the vjp over the
    basis of the outputs (``chunk_size`` rows at a time)."""
    if chunk_size is not None and chunk_size <= 0:
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args))
        selected = _selected(args, nums)
        flat_in, in_spec = _pytree.flatten(selected)

        def partial(*xs):
            return func(*_replaced(args, nums, _pytree.unflatten(list(xs), in_spec)), **kwargs)
        res = vjp(partial, *flat_in, has_aux=has_aux)
        output, vjp_fn = res[0], res[1]
        flat_out, out_spec = _pytree.flatten(output)
        _check_tensors(flat_out, "jacrev(f, ...)(*args)", "outputs")
        if len(flat_out) == 1 and flat_out[0].numel() == 1:
            # one output element (a scalar function: hessian's jacrev): its one row is the vjp of ones, without a
            # vmap level of one sample, which every op of the backward would go through
            rows = vjp_fn(_pytree.unflatten([ones_like(flat_out[0])], out_spec))
        else:
            rows = vmap(lambda *cts: tuple(vjp_fn(_pytree.unflatten(list(cts), out_spec))),
                        chunk_size=chunk_size)(*_basis(flat_out))
        jac = _split_rows(list(rows), flat_out, [t.shape for t in flat_in])
        result = _assemble(jac, out_spec, in_spec)
        return (result, res[2]) if has_aux else result
    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error", chunk_size=None):
    """The Jacobian of ``func`` with respect to inputs ``argnums``, by forward mode: vmap of the jvp over the
    basis of the inputs."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args))
        selected = _selected(args, nums)
        flat_in, in_spec = _pytree.flatten(selected)
        _check_tensors(flat_in, "jacfwd(f, ...)(*args)", "inputs")

        def partial(*xs):
            return func(*_replaced(args, nums, _pytree.unflatten(list(xs), in_spec)), **kwargs)
        basis = _basis(flat_in)

        def push(*tangents):  # the primal output does not depend on the basis: unbatched (out_dims None)
            res = jvp(partial, tuple(flat_in), tuple(tangents), has_aux=has_aux)
            return (res[0], res[1], res[2]) if has_aux else (res[0], res[1])
        res = vmap(push, out_dims=(None, 0, None) if has_aux else (None, 0), randomness=randomness,
                   chunk_size=chunk_size)(*basis)
        output, tangents = res[0], res[1]
        flat_out, out_spec = _pytree.flatten(output)
        flat_t = _pytree.flatten(tangents)[0]  # per output: (N_in, *out_shape)
        per_out = []
        for o, t in zip(flat_out, flat_t):
            cols = t.movedim(0, -1) if t.dim() > 1 else t  # (*out_shape, N_in)
            ins, start = [], 0
            for x in flat_in:
                k = x.numel()
                part = cols if len(flat_in) == 1 else cols[..., start:start + k]  # (one input: no slice)
                shape = tuple(o.shape) + tuple(x.shape)
                ins.append(part if tuple(part.shape) == shape else part.reshape(shape))
                start += k
            per_out.append(ins)
        result = _assemble(per_out, out_spec, in_spec)
        return (result, res[2]) if has_aux else result
    return wrapper


def _transposed_batched(formula, s, outs, x, t):
    """forward_ad's J t for a tangent ``t`` batched by vmap (jacfwd's basis): the gradient in u of <formula(u), t>
    with u batched like t, so that each sample's product stays its own."""
    tp, levels = unwrap_all(t)
    batch = tuple(tp.shape[:len(levels)])
    keep = fwAD._keeps_history(s, t)
    with enable_grad():  # (u: physical zeros, leaves, batched at t's levels)
        us = [wrap_levels(o.detach().new_full(batch + tuple(o.shape), s.op.derivatives.transpose_at)
                          .requires_grad_(o.dtype.is_inexact),
                          levels) for o in outs]
        pulled = fwAD._pulled(formula, s, us, x, t, lambda r: unwrap_all(r)[0], keep)
    return tuple(None if j is None else wrap_levels(j if keep else fwAD._detached(j), levels) for j in pulled)


fwAD.BATCHED_TRANSPOSE[0] = _transposed_batched
engine.VMAP[0] = vmap  # (autograd's vectorized paths: grad(is_grads_batched=True), functional, gradcheck)


def hessian(func, argnums=0):
    """The Hessian of ``func``: ``jacfwd(jacrev(func))`` (forward over reverse)."""
    return jacfwd(jacrev(func, argnums), argnums)
