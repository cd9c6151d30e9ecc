"""functional_call and stack_module_state: a module called with parameters and buffers given as tensors
(the transforms differentiate and batch them), and the states of several modules stacked for vmap."""
import contextlib

from ..ops.join import stack


def _owner(module, name):
    """(the submodule holding ``name``'s last part, that part)."""
    *path, leaf = name.split(".")
    for p in path:
        module = getattr(module, p)
    return module, leaf


@contextlib.contextmanager
def _swapped(module, tensors):
    """``module`` with the parameters and buffers named in ``tensors`` replaced (restored on exit)."""
    old = []
    try:
        for name, value in tensors.items():
            owner, leaf = _owner(module, name)
            store = "_parameters" if leaf in owner._parameters else "_buffers" if leaf in owner._buffers else None
            if store is None:
                prev = owner.__dict__.get(leaf, _ABSENT)
                owner.__dict__[leaf] = value
                old.append((owner.__dict__, leaf, prev))
            else:
                d = getattr(owner, store)
                old.append((d, leaf, d[leaf]))
                d[leaf] = value
        yield
    finally:
        for d, leaf, prev in reversed(old):
            if prev is _ABSENT:
                del d[leaf]
            else:
                d[leaf] = prev


_ABSENT = object()


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """``module(*args, **kwargs)`` with its parameters and buffers replaced by the tensors in
    ``parameter_and_buffer_dicts`` (a dict name -> tensor, or a sequence of them), as torch.func's."""
    dicts = parameter_and_buffer_dicts
    if isinstance(dicts, dict):
        tensors = dict(dicts)
    else:
        tensors = {}
        for d in dicts:
            for k in d:
                if k in tensors:
                    raise ValueError("%s appeared in multiple dictionaries; behavior of functional call is ambiguous"
                                     % k)
            tensors.update(d)
    if strict:
        expected = set(dict(module.named_parameters())) | set(dict(module.named_buffers()))
        missing, unexpected = sorted(expected - set(tensors)), sorted(set(tensors) - expected)
        if missing or unexpected:
            msg = []
            if unexpected:
                msg.append("Unexpected key(s): %s." % ", ".join("'%s'" % k for k in unexpected))
            if missing:
                msg.append("Missing key(s): %s." % ", ".join("'%s'" % k for k in missing))
            raise RuntimeError("Error(s) in reparametrizing for %s:\n\t%s" % (type(module).__name__, "\n\t".join(msg)))
    if tie_weights:  # a tensor given for one name of a tied parameter stands for all its names
        names = {}
        for name, p in module.named_parameters(remove_duplicate=False):
            names.setdefault(id(p), []).append(name)
        for group in names.values():
            given = [n for n in group if n in tensors]
            if given:
                for n in group:
                    tensors.setdefault(n, tensors[given[0]])
    args = () if args is None else args if isinstance(args, tuple) else (args,)
    with _swapped(module, tensors):
        return module(*args, **(kwargs or {}))


def stack_module_state(models):
    """(params, buffers): each parameter and buffer of the models (same structure) stacked along a new dim 0,
    for vmap over functional_call (model ensembling). The stacked parameters are new leaves."""
    models = list(models)
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    kind = type(models[0])
    if not all(type(m) is kind for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    named = [dict(m.named_parameters()) for m in models]
    params = {}
    for k, p in named[0].items():
        s = stack([n[k].detach() for n in named])
        params[k] = s.requires_grad_(p.requires_grad) if p.requires_grad else s
    bufs = [dict(m.named_buffers()) for m in models]
    buffers = {k: stack([b[k] for b in bufs]) for k in bufs[0]}
    return params, buffers

