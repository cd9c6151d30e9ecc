"""jit_stats(): what numba compilation has cost this process so far.

Kernels compile on first use for each argument signature (dtype, layout, serial or parallel
build) and are then cached on disk, so a later process loads them instead of compiling. The
counts come from the compile listener in kernels/_jit.py and from numba's per-dispatcher
cache statistics.
"""
from .kernels import _background, _jit

# One dict per graph jitgrad.compile built (appended by jitgrad/compiler/stats.py): function, op counts,
# fused groups, compile seconds and kernels loaded from the disk cache.
GRAPHS = []
# compiled autograd's counters (jitgrad/compiler/compiled_autograd.py): plans built, backward passes run by a plan
# (hits), by the engine before their key's plan was due (misses) or instead of a plan (fallbacks, by reason)
AUTOGRAD = {"plans": 0, "hits": 0, "misses": 0, "fallbacks": 0, "build_failures": 0, "compile_seconds": 0.0,
            "fallback_reasons": {}}


def jit_stats(per_kernel=False):
    """Compilation counters of this process, as a dict:

    - ``kernels_compiled``: kernel signatures compiled here (a cache miss, or no cache);
    - ``compile_seconds``: wall time spent compiling them (scalar functions inlined into a
      kernel count in that kernel's time);
    - ``cache_hits`` / ``cache_misses``: signatures loaded from numba's on-disk cache, and
      signatures that were not found there;
    - ``background_builds``: parallel builds handed to the background compiler (their serial
      twins ran meanwhile; see kernels/_background.py), ``background_pending``: those not built yet,
      ``background_seconds``: the worker's compile time of those it built;
    - ``graphs``: one dict per graph ``jitgrad.compile`` built (``function``, ``nodes``,
      ``backward_nodes``, ``fused_groups``, ``compile_seconds``, ``kernels_from_cache``), and
      ``graph_compile_seconds``, their total;
    - ``compiled_autograd``: eager backward passes run by compiled plans: ``plans`` built (``compile_seconds``),
      ``hits``, ``misses`` (a graph not seen often enough yet), ``fallbacks`` to the node-by-node engine with
      ``fallback_reasons`` counted, ``build_failures``;
    - ``per_kernel`` (with ``per_kernel=True``): ``(name, signature, seconds)`` per compilation,
      slowest first.

    Set JITGRAD_LOG_COMPILES=1 to see each compilation as it happens, and run
    ``python -m jitgrad.precompile`` once to fill the cache ahead of time.
    """
    top = [c for c in _jit.COMPILES if c[3] == 0]
    hits = misses = 0
    for d in _jit.DISPATCHERS:
        stats = d.stats
        hits += sum(stats.cache_hits.values())
        misses += sum(stats.cache_misses.values())
    out = {
        "kernels_compiled": len(top),
        "compile_seconds": sum(c[2] for c in top),
        "cache_hits": hits,
        "cache_misses": misses,
        "background_builds": len(_background.REQUESTS),
        "background_pending": _background.pending(),
        "background_seconds": sum(d[3] for d in _background.DONE),
        "graphs": [dict(g) for g in GRAPHS],
        "graph_compile_seconds": sum(g["compile_seconds"] for g in GRAPHS),
        "compiled_autograd": dict(AUTOGRAD, fallback_reasons=dict(AUTOGRAD["fallback_reasons"])),
    }
    if per_kernel:
        out["per_kernel"] = sorted(((n, s, t) for n, s, t, _ in top), key=lambda c: -c[2])
    return out
