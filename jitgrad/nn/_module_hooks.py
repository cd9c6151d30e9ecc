"""nn.Module's forward hooks: registering them (with removable handles) and the hooked __call__."""
import itertools


class RemovableHandle:
    """Returned by the register_*_hook methods: ``handle.remove()`` unregisters the hook."""
    _ids = itertools.count()

    def __init__(self, *dicts):
        self.id = next(RemovableHandle._ids)
        self._dicts = dicts

    def remove(self):
        for d in self._dicts:
            if isinstance(d, set):
                d.discard(self.id)
            else:
                d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class ForwardHooks:
    """Module's forward pre-hooks and hooks (the dicts are made in Module.__init__)."""

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """``hook(module, args)`` (or ``(module, args, kwargs)``) before forward; may return new args."""
        handle = RemovableHandle(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(handle.id)
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """``hook(module, args, output)`` after forward; may return a new output."""
        handle = RemovableHandle(self._forward_hooks, self._forward_hooks_with_kwargs,
                                 self._forward_hooks_always_called)
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(handle.id)
        if always_call:
            self._forward_hooks_always_called.add(handle.id)
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def __call__(self, *args, **kwargs):
        if not self._forward_pre_hooks and not self._forward_hooks:
            return self.forward(*args, **kwargs)
        for hid, hook in list(self._forward_pre_hooks.items()):
            if hid in self._forward_pre_hooks_with_kwargs:
                r = hook(self, args, kwargs)
                if r is not None:
                    if not (isinstance(r, tuple) and len(r) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                           "but got %s." % (r,))
                    args, kwargs = r
            else:
                r = hook(self, args)
                if r is not None:
                    args = r if isinstance(r, tuple) else (r,)
        try:
            result = self.forward(*args, **kwargs)
        except BaseException:
            for hid, hook in list(self._forward_hooks.items()):  # always_call hooks see the failure too
                if hid in self._forward_hooks_always_called:
                    try:
                        hook(self, args, kwargs, None) if hid in self._forward_hooks_with_kwargs else \
                            hook(self, args, None)
                    except Exception:
                        pass
            raise
        for hid, hook in list(self._forward_hooks.items()):
            r = hook(self, args, kwargs, result) if hid in self._forward_hooks_with_kwargs else hook(self, args, result)
            if r is not None:
                result = r
        return result
