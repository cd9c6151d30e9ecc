"""Codegen: a captured graph as one generated Python function, its fused groups as generated @njit loops.

The Python function calls each op's forward kernel as dispatch would (BLAS for matmul, the conv and
pool kernels), minus dispatch's checks: shapes, dtypes and devices are guarded. Each fused group is
one loop built from the scalar functions of kernels/scalars.py; its source is written to the
on-disk cache under a name that hashes it, so numba's cache serves a second process.
"""
import hashlib
import math
import importlib.util
import os
import sys
import time

import numba
import numpy as np
from numba import njit

from ..kernels import _background, config, cpu as CPU_BACKEND
from ..kernels import scalars as _scalars
from .._device import cuda_backend
from .._tensor import Tensor
from .ir import Held, Ref
from .fusion import (NUMPY_CASTS, converted, load_kind, plan_groups, reductions_first, split_bias,
                     without_own_shape_views)

# where generated kernels go (numba caches their machine code beside them, in __pycache__)
CACHE_DIR = os.environ.get("JITGRAD_COMPILE_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "jitgrad", "compiled")
_SCALARS_STAMP = _scalars.STAMP
_KERNELS = {}  # source hash -> compiled dispatcher (per process)


class Compiled:
    """A generated plan: ``fn(*boundary arrays) -> tuple of arrays``, with what explain shows."""

    def __init__(self, fn, source, kernel_sources, groups, seconds, cache_hits, boundary, outputs, instructions=0,
                 graph=None):
        self.fn, self.source, self.kernel_sources, self.groups = fn, source, kernel_sources, groups
        self.graph = graph  # the graph the groups index (the captured one, with views dropped and biases split)
        self.seconds, self.cache_hits, self.boundary, self.outputs = seconds, cache_hits, boundary, outputs
        self.instructions = instructions  # of a tape plan (compiler/tape.py); 0 for generated code


def boundary_values(graph):
    """The values a plan takes as arguments: everything no recorded op made."""
    return [Ref(v) for v, k in enumerate(graph.kinds) if k[0] != "op"]


def generate(graph, outputs, fuse=True, name="plan"):
    """Compile ``graph`` into a function of its boundary values returning the ``outputs`` values. A graph
    of device arrays gets CUDA kernels for its fused groups and calls the CUDA backend elsewhere."""
    start = time.perf_counter()
    device = any(a.__class__ is not np.ndarray for a in graph.arrays)
    boundary = boundary_values(graph)
    graph = without_own_shape_views(graph, set(outputs))
    if fuse:
        graph = reductions_first(split_bias(graph))
    # on a device a full reduction stays the backend's kernel (a block tree), not a loop's accumulator
    groups, owner = plan_groups(graph, set(outputs), reductions=not device) if fuse else ([], {})
    owner = {i: g for g in groups for i in g.indices()}
    emit_at = {max(g.indices()): g for g in groups}
    ns = {"np": np, "XP": cuda_backend() if device else CPU_BACKEND}
    lines = ["def %s(%s):" % (name, ", ".join("v%d" % v for v in boundary) + ("," if len(boundary) == 1 else ""))]
    last_use = _last_uses(graph, outputs, owner, emit_at)
    reuse = plan_buffers(graph, outputs, owner, emit_at)
    held = {u for u, in_place in reuse.values() if not in_place}  # deleted where their buffer is taken
    kernel_sources, hits = [], 0
    for i, node in enumerate(graph.nodes):
        g = owner.get(i)
        if g is not None:
            if i in emit_at:
                src, hit = _emit_group(graph, g, len(kernel_sources), ns, lines, device, reuse)
                kernel_sources.append(src)
                hits += hit
                _free(lines, last_use, i, held)
            continue
        _emit_node(node, i, ns, lines, device)
        _free(lines, last_use, i, held)
    lines.append("    return (%s)" % "".join("v%d, " % v for v in outputs))
    source = "\n".join(lines) + "\n"
    exec(compile(source, "<jitgrad.compile %s>" % name, "exec"), ns)
    return Compiled(ns[name], source, kernel_sources, groups, time.perf_counter() - start, hits, boundary,
                    list(outputs), graph=graph)


def _last_uses(graph, outputs, owner, emit_at):
    """node index -> values whose last reader it is (freed after it: large intermediates go early)."""
    pos = {}
    for i, node in enumerate(graph.nodes):
        g = owner.get(i)
        at = max(g.indices()) if g is not None else i
        for a in node.refs():
            pos[a] = max(pos.get(a, -1), at)
    keep = set(outputs)
    internal = set()  # values that stay inside a fused loop (never assigned in the plan)
    for g in set(owner.values()):
        internal |= g.produced - set(g.outputs)
    out = {}
    for v, at in pos.items():
        if v not in keep and v not in internal and graph.kinds[v][0] == "op":
            out.setdefault(at, []).append(v)
    return out


def _free(lines, last_use, i, held=()):
    dead = [v for v in last_use.get(i, ()) if v not in held]
    if dead:
        lines.append("    del %s" % ", ".join("v%d" % v for v in sorted(dead)))


FRESH = frozenset(("mm", "linear_mm", "linear", "matmul", "bmm"))


def plan_buffers(graph, outputs, owner, emit_at):
    """Which fused-group outputs take a dead plan-owned buffer instead of a fresh one: {output value:
    (value holding that buffer, in place)}. Plan-owned buffers are the arrays the plan allocates for group
    outputs; a buffer is dead once every value that may alias it has been read for the last time, where
    a non-fused op's results may alias all its inputs (views: reshape, transpose, expand, ...), and it
    never dies when one of them is returned (the plan's outputs include the values saved for backward).
    In place: a group writes an output over an input buffer that dies at the group and that its loop
    reads only at the output's own index i (a full-shape load, and no other input aliases it): each
    element is read before it is written, by the same iteration."""
    roots, made, last = {}, {}, {}  # value -> buffers it may alias, where it is assigned, last read
    for i, node in enumerate(graph.nodes):
        g = owner.get(i)
        at = max(g.indices()) if g is not None else i
        for a in node.refs():
            last[a] = max(last.get(a, -1), at)
        if g is None:
            alias = frozenset().union(*(roots.get(a, ()) for a in node.refs()))
            for o in node.outs:
                # (a GEMM's result is a new array: a buffer of the plan's own)
                roots[o], made[o] = frozenset((o,)) if node.op.name in FRESH else alias, i
        elif i == at:
            for o in g.outputs:
                roots[o], made[o] = frozenset((o,)), i
    escaped = frozenset().union(*(roots.get(v, ()) for v in outputs))
    death = {}  # buffer -> the position after which nothing reads it
    for v, bufs in roots.items():
        for b in bufs:
            death[b] = max(death.get(b, -1), last.get(v, made[v]))
    dying = sorted((d, b) for b, d in death.items() if b not in escaped)
    written_over = set()
    free, reuse, k = {}, {}, 0  # free: (dtype, size) -> dead buffers, the latest last
    for p in sorted(emit_at):
        g = emit_at[p]
        while k < len(dying) and dying[k][0] < p:
            b = dying[k][1]
            if b not in written_over:
                free.setdefault((graph.arrays[b].dtype, graph.arrays[b].size), []).append(b)
            k += 1
        inputs, kinds = group_inputs(graph, g)
        taken = set()  # inputs written over by this group
        for o in g.outputs:
            for u, kind in zip(inputs, kinds):
                if (kind[0] == "full" and roots.get(u) == {u} and u not in escaped and death[u] == p
                        and u not in taken and graph.meta(u) == graph.meta(o)
                        and sum(u in roots.get(w, ()) for w in inputs) == 1):
                    reuse[o] = (u, True)
                    taken.add(u)
                    break
            else:
                pool = free.get((graph.arrays[o].dtype, graph.arrays[o].size))
                if pool:
                    reuse[o] = (pool.pop(), False)
        written_over |= taken
    return reuse


def group_inputs(graph, g):
    """The values group ``g`` reads from outside, in first-use order, and how its loop reads each."""
    inputs = []
    for _, _, args in g.members:
        for a in args:
            if a.__class__ is Ref and a not in g.produced and a not in inputs:
                inputs.append(a)
    return inputs, [load_kind(graph.meta(v)[0], g.shape) for v in inputs]


def _emit_node(node, i, ns, lines, device=False):
    op = node.op
    ns["OP%d" % i] = op.forward
    ns["DT%d" % i] = node.cnp
    args = []
    for j, a in enumerate(node.args):
        if a.__class__ is Ref:
            cast = "XP.astype(v%d, DT%d)" if device else "v%d.astype(DT%d)"
            args.append(cast % (a, i) if j in node.convert else "v%d" % a)
        elif a is None:
            args.append("None")
        else:
            ns["C%d_%d" % (i, j)] = node.cnp.type(a) if j in node.convert else a
            args.append("C%d_%d" % (i, j))
    static = {k: v for k, v in node.params.items() if v.__class__ is not Ref and v.__class__ is not Held}
    if static:
        ns["P%d" % i] = static
        args.append("**P%d" % i)
    ns["TW"] = Tensor._wrap
    args += ["%s=TW(v%d)" % (k, v) for k, v in node.params.items() if v.__class__ is Ref]
    for k, v in node.params.items():
        if v.__class__ is Held:  # an index key: filled with the call's index and mask arrays
            ns["H%d_%s" % (i, k)] = v
            args.append("%s=H%d_%s.fill_args(%s)" % (k, i, k, ", ".join("v%d" % r for r in v.refs())))
    outs = ", ".join("v%d" % v for v in node.outs) + ("," if op.n_outputs != 1 else "")
    lines.append("    %s = OP%d(XP, DT%d, %s)  # %s" % (outs, i, i, ", ".join(args), op.name))


def _emit_group(graph, g, k, ns, lines, device=False, reuse=None):
    """The call of group ``g`` in the plan, and its kernel (compiled or loaded from the cache); its
    outputs go to the buffers ``reuse`` (see plan_buffers) names, or to new arrays."""
    inputs, kinds = group_inputs(graph, g)
    # kernel source
    params = ["x%d" % j for j in range(len(inputs))]
    body, pre = [], []
    name_of = {}
    # A loop over blocks (reductions, on the CPU) reads and writes views of the block at j = i - lo: an index
    # that starts at 0 is known not to be negative, which the vectorizer needs (with i from lo, numba's
    # negative-index wrap-around kept the serial loop scalar: 6x slower).
    blocked = bool(g.reductions) and not device
    full, out = ("y%d[j]", "z%d[j]") if blocked else ("x%d[i]", "o%d[i]")
    for j, (v, kind) in enumerate(zip(inputs, kinds)):
        name_of[v] = "a%d" % j
        if kind[0] == "scalar":
            pre.append("    a%d = x%d[0]" % (j, j))
        elif kind[0] in ("full", "copy"):
            body.append("        a%d = %s" % (j, full % j))
        elif kind[1:] == (g.columns,):  # (in a loop of column sums: one value per column, or per row)
            body.append("        a%d = x%d[%s]" % (j, j, "c0 + j" if kind[0] == "mod" else "row"))
        elif kind[0] == "mod":
            body.append("        a%d = x%d[i %% %d]" % (j, j, kind[1]))
        else:
            body.append("        a%d = x%d[i // %d]" % (j, j, kind[1]))
    fns = set()
    for idx, fn, args in g.members:
        node = graph.nodes[idx]
        cast = NUMPY_CASTS[node.cnp]
        call = []
        for pos, a in enumerate(args):
            if a.__class__ is Ref:
                x = name_of[a]
                call.append("%s(%s)" % (cast, x) if converted(graph, node, pos, a) else x)
            else:
                call.append(_literal(a))
        v = node.outs[0]
        name_of[v] = "t%d" % len(name_of)  # numbered within the loop: equal loops have equal source
        fns.add(fn)
        body.append("        %s = %s(F_%s(%s))" % (name_of[v], NUMPY_CASTS[graph.meta(v)[1]], fn, ", ".join(call)))
    params += ["o%d" % j for j in range(len(g.outputs))] + ["r%d" % j for j in range(len(g.reductions))]
    for j, v in enumerate(g.outputs):
        body.append("        %s = %s" % (out % j, name_of[v]))
    if device:
        key = hashlib.sha1(("%s\n%s\n%s" % (_SCALARS_STAMP, params, "\n".join(pre + body))).encode()).hexdigest()[:20]
        kname = "fused_cuda_%s" % key[:10]
        kernel, hit = ns["XP"].fused_kernel(kname, params, pre, body, sorted(fns)), 0
        ksrc = "def %s(n, %s):\n%s\n    for i in range(cuda.grid(1), n, cuda.gridsize(1)):\n%s\n" % (
            kname, ", ".join(params), "".join(ln + "\n" for ln in pre), "\n".join(body))
    else:
        parallel = g.size >= config.PARALLEL_THRESHOLD
        rng = "prange" if parallel else "range"
        if g.reductions:
            views = ["y%d = x%d[lo:hi]" % (j, j) for j, k in enumerate(kinds) if k[0] in ("full", "copy")]
            views += ["z%d = o%d[lo:hi]" % (j, j) for j in range(len(g.outputs))]
            if any(k[0] in ("mod", "div") and k[1] != g.columns for k in kinds):
                body.insert(0, "        i = lo + j")
            loop = _column_reductions if g.columns else _blocked_reductions
            kbody = "\n".join(pre + loop(graph, g, name_of, body, rng, views))
        else:
            kbody = "\n".join(pre + ["    for i in %s(n):" % rng] + body)
        example = [np.int64(1)] + [np.empty(1, graph.meta(v)[1]) for v in inputs] + \
            [np.empty(1, graph.meta(v)[1]) for v in g.outputs] + \
            [np.empty(1, graph.meta(graph.nodes[r[0]].outs[0])[1]) for r in g.reductions]

        def kernel_of(parallel):
            body = kbody if parallel else kbody.replace("prange(", "range(")
            key = hashlib.sha1(("%s\n%s\n%s" % (_SCALARS_STAMP, parallel, body)).encode()).hexdigest()[:20]
            kname = "fused_%s" % key
            ksrc = "def %s(%s):\n%s\n" % (kname, ", ".join(["n"] + params), body)
            # the serial twin (the same loop, the same values: the blocks of a reduction are fixed) runs the
            # calls while a parallel kernel builds in the background
            twin = (lambda: kernel_of(False)[0]) if parallel else None
            return _kernel(kname, ksrc, sorted(fns), parallel, example, twin) + (kname, ksrc)
        kernel, hit, kname, ksrc = kernel_of(parallel)
    ns["K%d" % k] = kernel
    # the call in the plan
    call = ["%d" % g.size]
    alloc = "XP.empty" if device else "np.empty"
    for v, kind in zip(inputs, kinds):
        if kind[0] == "copy":
            call.append("XP.reshape(XP.ascontiguous(XP.broadcast_to(v%d, %r)), (-1,))" % (v, g.shape) if device else
                        "np.ascontiguousarray(np.broadcast_to(v%d, %r)).reshape(-1)" % (v, g.shape))
        else:
            call.append(_flat(graph, v, device))
    for v in g.outputs:
        shape, dt = graph.meta(v)
        u, in_place = (reuse or {}).get(v, (None, False))
        if u is None:
            ns["D%d" % v] = dt
            lines.append("    v%d = %s(%r, D%d)" % (v, alloc, shape, v))
        else:
            src = "v%d" % u if graph.meta(u)[0] == shape else (
                "XP.reshape(v%d, %r)" if device else "v%d.reshape(%r)") % (u, shape)
            lines.append("    v%d = %s  # %s v%d's buffer" % (v, src, "in place: writes over" if in_place else
                                                                "reuses", u))
            if not in_place:
                lines.append("    del v%d" % u)
        call.append(_flat(graph, v, device))
    for idx, _, _ in g.reductions:
        v = graph.nodes[idx].outs[0]
        shape, dt = graph.meta(v)
        ns["D%d" % v] = dt
        lines.append("    v%d = np.empty(%r, D%d)" % (v, shape, v))
        call.append("v%d.reshape(-1)" % v)
    what = " ".join([graph.nodes[i].op.name for i, _, _ in g.members] +
                    [graph.nodes[i].op.name for i, _, _ in g.reductions])
    if device:
        lines.append("    XP.launch_fused(K%d, %s)  # fused: %s" % (k, ", ".join(call), what))
    else:
        lines.append("    K%d(%s)  # fused: %s" % (k, ", ".join(call), what))
    return ksrc, hit


# A loop with full reductions runs over blocks of this many elements: the block's values go to a buffer
# of their own dtype, which a second loop sums into LANES float64 partial sums (as the eager sums of
# float32 accumulate). A running sum in the element loop, or a float64 buffer, would keep LLVM from
# vectorizing the element loop, transcendental math included; independent lanes vectorize the sum.
BLOCK = 2048
LANES = 16


def _blocked_reductions(graph, g, name_of, body, rng, views):
    """The loop of a group with reductions (``body`` is the element loop's lines, indexed by j within the
    block, through the block's ``views``)."""
    k = len(g.reductions)
    lines = ["    nb = (n + %d) // %d" % (BLOCK - 1, BLOCK)]
    lines += ["    part%d = np.empty(nb)" % j for j in range(k)]
    lines += ["    for b in %s(nb):" % rng,
              "        lo = b * %d" % BLOCK,
              "        hi = min(n, lo + %d)" % BLOCK,
              "        m = hi - lo"]
    lines += ["        buf%d = np.empty(%d, %s)" % (j, BLOCK, NUMPY_CASTS[graph.meta(v)[1]])
              for j, (_, _, v) in enumerate(g.reductions)]
    lines += ["        " + ln for ln in views]
    lines += ["        for j in range(m):"] + ["    " + ln for ln in body]
    lines += ["            buf%d[j] = %s" % (r, name_of[v]) for r, (_, _, v) in enumerate(g.reductions)]
    for j in range(k):
        lines += ["        lane = np.zeros(%d)" % LANES,
                  "        for q in range(0, m - %d, %d):" % (LANES - 1, LANES),
                  "            for l in range(%d):" % LANES,
                  "                lane[l] += buf%d[q + l]" % j,
                  "        s = 0.0",
                  "        for q in range(m - m %% %d, m):" % LANES,
                  "            s += buf%d[q]" % j,
                  "        for l in range(%d):" % LANES,
                  "            s += lane[l]",
                  "        part%d[b] = s" % j]
    for j, (_, kind, _) in enumerate(g.reductions):
        lines += ["    acc = 0.0", "    for b in range(nb):", "        acc += part%d[b]" % j,
                  "    r%d[0] = acc%s" % (j, " / n" if kind == "mean" else "")]
    return lines


def _column_reductions(graph, g, name_of, body, rng, views):
    """The loop of a group with reductions over leading dims: tiles of the ``g.columns`` columns (threads
    take tiles), each running down the rows with a float64 sum per column. A column's sum adds its rows in
    order whatever the tiles, so the serial and parallel builds give the same values. ``body`` and
    ``views`` are as in _blocked_reductions, over a tile's row segment [lo, hi)."""
    cols = g.columns
    tile = max(16, -(-cols // (8 * 16)) * 16)  # up to 8 tiles: a few per thread, whole vectors each
    lines = ["    rows = n // %d" % cols,
             "    for t in %s(%d):" % (rng, -(-cols // tile)),
             "        c0 = t * %d" % tile,
             "        m = min(%d, c0 + %d) - c0" % (cols, tile)]
    lines += ["        acc%d = np.zeros(m)" % r for r in range(len(g.reductions))]
    lines += ["        for row in range(rows):",
              "            lo = row * %d + c0" % cols,
              "            hi = lo + m"]
    lines += ["            " + ln for ln in views]
    lines += ["            for j in range(m):"] + ["        " + ln for ln in body]
    lines += ["                acc%d[j] += %s" % (r, name_of[v]) for r, (_, _, v) in enumerate(g.reductions)]
    for r, (_, kind, _) in enumerate(g.reductions):
        lines += ["        for j in range(m):",
                  "            r%d[c0 + j] = acc%d[j]%s" % (r, r, " / rows" if kind == "mean" else "")]
    return lines


def _flat(graph, v, device=False):
    """The plan's expression for value ``v`` as a flat array (layouts are guarded: known here)."""
    a = graph.arrays[v]
    if device:
        flat = "v%d" % v if a.ndim == 1 else "XP.reshape(v%d, (-1,))" % v
        return flat if cuda_backend().is_contiguous(a) else "XP.reshape(XP.ascontiguous(v%d), (-1,))" % v
    return "v%d" % v if a.ndim == 1 and a.flags.c_contiguous else "v%d.reshape(-1)" % v


def _literal(c):
    """A constant operand as source (typed as dispatch types it: the compute dtype)."""
    c = np.asarray(c).reshape(())[()]
    if isinstance(c, (bool, np.bool_)):
        return repr(bool(c))
    cast = NUMPY_CASTS.get(np.dtype(type(c)), "np.float64")
    x = float(c)
    text = "np.nan" if x != x else ("np.inf" if x > 0 else "-np.inf") if math.isinf(x) else repr(
        x if np.dtype(type(c)).kind == "f" else int(c))
    return "%s(%s)" % (cast, text)


_OPTIONS = dict(error_model="numpy", fastmath=config.FASTMATH, nogil=True)  # of every generated CPU loop


def _kernel(kname, ksrc, fns, parallel, example, serial=None):
    """The compiled kernel for ``ksrc``: from this process, numba's disk cache, or a fresh compile.

    A parallel kernel given ``serial`` (a function returning its serial twin: the same loop over range)
    that is not in the cache compiles in the background while the twin runs (kernels/_background.py).
    Returns (dispatcher, whether it came from the cache)."""
    d = _KERNELS.get(kname)
    if d is not None:
        return d, 1
    header = "import numpy as np\nfrom numba import prange\nfrom jitgrad.kernels.scalars import SCALARS\n" + \
        "".join("F_%s = SCALARS[%r]\n" % (f, f) for f in fns) + "\n\n"
    src = header + ksrc
    path = None
    if config.CACHE:
        try:
            os.makedirs(CACHE_DIR, exist_ok=True)
            path = os.path.join(CACHE_DIR, kname + ".py")
            if not os.path.exists(path):
                tmp = path + ".%d.tmp" % os.getpid()
                with open(tmp, "w") as f:
                    f.write(src)
                os.replace(tmp, path)
        except OSError:
            path = None
    sig = tuple(numba.typeof(x) for x in example)
    if serial is not None and path is not None and _background.ENABLED:
        d = _background.Dispatcher(_function(kname, path), dict(_OPTIONS, parallel=True, nopython=True), serial,
                                   (__name__, "_from_file", (kname, path, True)))
        d.enable_caching()
        hit = d._load(sig) is not None
        if not hit:  # the plan's first call hands it to the worker and runs the twin, compiled now
            serial()
    else:
        if path is not None:
            d = _from_file(kname, path, parallel)
        else:
            ns = {}
            exec(compile(src, "<jitgrad fused %s>" % kname, "exec"), ns)
            d = njit(parallel=parallel, **_OPTIONS)(ns[kname])
        d.compile(sig)
        hit = sum(d.stats.cache_hits.values()) if path is not None else 0
    _KERNELS[kname] = d
    if config.LOG_COMPILES and not hit:
        print("jitgrad: %s fused kernel %s" % ("compiling" if isinstance(d, _background.Dispatcher) else "compiled",
                                               kname), file=sys.stderr, flush=True)
    return d, hit


def _function(kname, path):
    """The generated function ``kname`` of the source file ``path``, imported as a module registered under its
    name: numba's cache finds a kernel's module by name when it loads it."""
    spec = importlib.util.spec_from_file_location("jitgrad_" + kname, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return getattr(mod, kname)


def _from_file(kname, path, parallel):
    """Kernel ``kname`` of the cached source ``path``, compiled lazily with numba's cache (also how the
    background worker makes a parallel one)."""
    return njit(cache=True, parallel=parallel, **_OPTIONS)(_function(kname, path))
