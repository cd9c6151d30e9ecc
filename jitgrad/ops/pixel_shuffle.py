"""pixel_shuffle and pixel_unshuffle: (*, C r^2, H, W) <-> (*, C, H r, W r), one entry each (PixelShuffleBackward0,
PixelUnshuffleBackward0), each the other's VJP. The forward is a reshape, a permute and a copy."""
import numpy as np

from .._op import Op, dispatch
from ._table import _arr, register


def _shuffle(xp, x, r):
    *batch, c, h, w = x.shape
    v = xp.reshape(x, tuple(batch) + (c // (r * r), r, r, h, w))
    n = len(batch)
    v = xp.transpose(v, tuple(range(n)) + (n, n + 3, n + 1, n + 4, n + 2))
    return xp.reshape(xp.copy(v), tuple(batch) + (c // (r * r), h * r, w * r))


def _unshuffle(xp, x, r):
    *batch, c, h, w = x.shape
    v = xp.reshape(x, tuple(batch) + (c, h // r, r, w // r, r))
    n = len(batch)
    v = xp.transpose(v, tuple(range(n)) + (n, n + 2, n + 4, n + 1, n + 3))
    return xp.reshape(xp.copy(v), tuple(batch) + (c * r * r, h // r, w // r))


def _check(name, input, factor, what):
    if input.ndim < 3:
        raise RuntimeError("%s expects input to have at least 3 dimensions, but got input with %d dimension(s)"
                           % (name, input.ndim))
    if factor <= 0:
        raise RuntimeError("%s expects a positive %s, but got %d" % (name, what, factor))


def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r)."""
    r = int(upscale_factor)
    _check("pixel_shuffle", input, r, "upscale_factor")
    if input.shape[-3] % (r * r):
        raise RuntimeError("pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           "upscale_factor, but input.size(-3)=%d is not divisible by %d" % (input.shape[-3], r * r))
    return dispatch(PIXEL_SHUFFLE, (input,), {"r": r})


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W)."""
    r = int(downscale_factor)
    _check("pixel_unshuffle", input, r, "downscale_factor")
    for d, what in ((-2, "height"), (-1, "width")):
        if input.shape[d] % r:
            raise RuntimeError("pixel_unshuffle expects %s to be divisible by downscale_factor, but input.size(%d)=%d is "
                               "not divisible by %d" % (what, d, input.shape[d], r))
    return dispatch(PIXEL_UNSHUFFLE, (input,), {"r": r})


def _np_shuffle(x, upscale_factor):
    return _shuffle(np, x, upscale_factor)


def _np_unshuffle(x, downscale_factor):
    return _unshuffle(np, x, downscale_factor)


def _samples(shapes):
    def samples(rng, dtype):
        return [((_arr(rng, s, -2.0, 2.0, dtype), r), {}) for s, r in shapes]
    return samples


PIXEL_SHUFFLE = register(Op("pixel_shuffle", lambda xp, dt, x, r: _shuffle(xp, x, r),
                            vjp=[lambda g, s: dispatch(PIXEL_UNSHUFFLE, (g,), {"r": s.r})], dtype="keep",
                            call=pixel_shuffle, api=("pixel_shuffle",), method=False, ref=_np_shuffle, complex=True,
                            samples=_samples([((1, 8, 2, 3), 2), ((2, 9, 2, 2), 3), ((4, 1, 1), 2), ((2, 1, 4, 1, 1), 2)])))
PIXEL_UNSHUFFLE = register(Op("pixel_unshuffle", lambda xp, dt, x, r: _unshuffle(xp, x, r),
                              vjp=[lambda g, s: dispatch(PIXEL_SHUFFLE, (g,), {"r": s.r})], dtype="keep",
                              call=pixel_unshuffle, api=("pixel_unshuffle",), method=False, ref=_np_unshuffle, complex=True,
                              samples=_samples([((1, 2, 4, 6), 2), ((2, 1, 3, 6), 3), ((1, 2, 2), 2),
                                                ((2, 1, 1, 4, 2), 2)])))
