"""Compile and cache the op table's kernels ahead of time.

    python -m jitgrad.precompile                      # every op, float32 and float64
    python -m jitgrad.precompile --ops add,mul,relu   # a few ops
    python -m jitgrad.precompile --serial-only        # skip the multi-threaded builds

Kernels compile for each argument signature they meet (dtype, memory layout, serial or
parallel build), and numba's on-disk cache keeps them (NUMBA_CACHE_DIR picks where). This runs
every op's sample inputs forward and backward, once as they are (serial builds) and once with
the parallel threshold at zero (the parallel builds that large tensors use), so that the cache
holds them and later processes only load them: no first-step compile, and no serial twin
standing in while a parallel build compiles in the background. The parallel builds that
have a serial twin compile in the background worker here too (beside the serial ones); this
waits for it to finish before it reports; so do the blocked GEMM that large products run
(kernels/blas.py), the blocked LU (kernels/lu.py) and eigh's split (kernels/eigh.py), which no sample is large
enough to reach. Graph-specific code (jitgrad.compile's fused loops, compiled autograd's plans) is not covered: it
is cached when a program first builds it.
The whole table takes several minutes; --ops and --dtypes narrow it.
The helpers that turn a table sample into a call are shared with the op benchmarks.
"""
import argparse
import sys
import time

import numpy as np

from . import _dtype as D
from ._grad_mode import enable_grad
from ._jit_stats import jit_stats
from ._op import dispatch
from ._tensor import Tensor
from .kernels import _background, blas, config, eigh, lu
from .autograd.engine import backward as run_backward  # run_sample's argument 'backward' is a flag
from .ops import FUNCTIONS, METHODS, OPS

DTYPES = ("float32", "float64")


def op_callable(op):
    """The public function an op's samples are applied to (``op.exposure.call``, else jitgrad.<name> or
    Tensor.<name>); ops with neither are called through dispatch with the sample's kwargs as params."""
    fn = op.exposure.call or FUNCTIONS.get(op.name) or METHODS.get(op.name)
    if fn is not None:
        return fn
    return lambda *args, **params: dispatch(op, args, params)


def to_tensors(value, requires_grad):
    """NumPy arrays (also inside tuples and lists) -> tensors; float ones require grad if asked."""
    if isinstance(value, np.ndarray):
        t = Tensor._wrap(value.copy() if not value.flags.writeable else value)
        if requires_grad and value.dtype.kind == "f":
            t.requires_grad_()
        return t
    if isinstance(value, (tuple, list)):
        return type(value)(to_tensors(v, requires_grad) for v in value)
    return value


def leaves(value):
    """The tensors that require grad in a converted sample (args or kwargs)."""
    if isinstance(value, Tensor):
        return [value] if value.requires_grad else []
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in leaves(v)]
    return []


def differentiable_outputs(out):
    """The outputs of a call that backward can start from, with a gradient of ones for each."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    outs = [o for o in outs if isinstance(o, Tensor) and o.requires_grad]
    return outs, [Tensor._wrap(np.ones(o.shape, o.dtype.np)) for o in outs]


def run_sample(op, args, kwargs, backward=True):
    """Run one table sample through the op's public call, then backward from its outputs."""
    grad = backward and op.differentiable
    args, kwargs = to_tensors(args, grad), {k: to_tensors(v, grad) for k, v in kwargs.items()}
    out = op_callable(op)(*args, **kwargs)
    if grad:
        outs, grads = differentiable_outputs(out)
        if outs:
            run_backward(outs, grads)
    return out


def precompile_op(op, dtypes=DTYPES, parallel=True):
    """Run the samples of ``op`` in each dtype (serial, then parallel builds). Returns the errors."""
    errors = []
    thresholds = (config.PARALLEL_THRESHOLD, 0) if parallel else (config.PARALLEL_THRESHOLD,)
    saved = config.PARALLEL_THRESHOLD
    try:
        for threshold in thresholds:
            config.PARALLEL_THRESHOLD = threshold
            for dtype in dtypes:
                rng = np.random.default_rng(0)
                for args, kwargs in op.tests.samples(rng, np.dtype(dtype)):
                    try:
                        with np.errstate(all="ignore"):
                            run_sample(op, args, kwargs)
                    except Exception as e:  # noqa: BLE001  (reported, and the other samples still run)
                        errors.append("%s %s: %s: %s" % (op.name, dtype, type(e).__name__, e))
    finally:
        config.PARALLEL_THRESHOLD = saved
    return errors


def precompile(ops=None, dtypes=DTYPES, parallel=True, out=sys.stdout):
    """Precompile the kernels of ``ops`` (names; default: the whole table); print one line per op."""
    names = list(OPS) if ops is None else list(ops)
    unknown = [n for n in names if n not in OPS]
    if unknown:
        raise ValueError("unknown op(s): %s" % ", ".join(unknown))
    before = jit_stats()
    start = time.perf_counter()
    errors, skipped = [], []
    with enable_grad():
        for name in names:
            op = OPS[name]
            if op.tests.samples is None:
                skipped.append(name)
                continue
            s0, t0 = jit_stats(), time.perf_counter()
            errs = precompile_op(op, dtypes, parallel)
            s1 = jit_stats()
            print("%-14s compiled %3d  loaded %3d  %6.2f s%s" % (
                name, s1["kernels_compiled"] - s0["kernels_compiled"], s1["cache_hits"] - s0["cache_hits"],
                time.perf_counter() - t0, "  (%d sample(s) failed)" % len(errs) if errs else ""), file=out)
            errors += errs
    if parallel:
        blas.precompile(dtypes)
        lu.precompile(dtypes)
        eigh.precompile(dtypes)
    if before["background_builds"] < jit_stats()["background_builds"]:
        print("waiting for the background worker's parallel builds ...", file=out, flush=True)
        _background.wait()
    after = jit_stats()
    background = after["background_builds"] - before["background_builds"]
    print("precompiled %d op(s) for %s%s: %d kernel signature(s) compiled in %.1f s, %d loaded from the cache, "
          "%d parallel build(s) compiled in the background in %.1f s, %.1f s in all" % (
              len(names) - len(skipped), "/".join(dtypes), "" if parallel else " (serial builds only)",
              after["kernels_compiled"] - before["kernels_compiled"], after["compile_seconds"] - before["compile_seconds"],
              after["cache_hits"] - before["cache_hits"], background,
              after["background_seconds"] - before["background_seconds"], time.perf_counter() - start), file=out)
    if skipped:
        print("no samples to run (skipped): " + ", ".join(skipped), file=out)
    for e in dict.fromkeys(errors):
        n = errors.count(e)
        print("failed: %s%s" % (e, " (%d samples)" % n if n > 1 else ""), file=out)
    return {"ops": len(names) - len(skipped), "skipped": skipped, "errors": errors,
            "compiled": after["kernels_compiled"] - before["kernels_compiled"], "background": background}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m jitgrad.precompile", formatter_class=argparse.RawDescriptionHelpFormatter,
                                     description=__doc__.rsplit("\nThe helpers", 1)[0])
    parser.add_argument("--ops", help="comma-separated op names (default: every op of the table)")
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="comma-separated dtypes (default: %(default)s)")
    parser.add_argument("--serial-only", action="store_true", help="skip the parallel (multi-threaded) builds")
    parser.add_argument("--list", action="store_true", help="list the op names and exit")
    a = parser.parse_args(argv)
    if a.list:
        print(" ".join(OPS))
        return 0
    dtypes = tuple(d.strip() for d in a.dtypes.split(",") if d.strip())
    kernel_dtypes = [t.name for t in D.ALL if t.compute is t]  # (float16/bfloat16 ops run float32 kernels)
    bad = [d for d in dtypes if d not in kernel_dtypes]
    if bad:
        parser.error("unknown dtype(s): %s (choose from %s)" % (", ".join(bad), ", ".join(kernel_dtypes)))
    try:
        result = precompile(a.ops.split(",") if a.ops else None, dtypes, not a.serial_only)
    except ValueError as e:
        parser.error(str(e))
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
