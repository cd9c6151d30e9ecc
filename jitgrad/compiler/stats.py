"""Per-graph compile records, for jitgrad.jit_stats() and JITGRAD_LOG_COMPILES."""
import sys

from .._jit_stats import GRAPHS
from ..kernels import config


def record(name, variant):
    plans = [p for p in (variant.plan, variant.bplan) if p is not None]
    entry = {"function": name, "nodes": len(variant.graph.nodes),
             "backward_nodes": len(variant.bgraph.nodes) if variant.bgraph is not None else 0,
             "fused_groups": sum(len(p.groups) for p in plans),
             "tape_instructions": sum(p.instructions for p in plans),
             "compile_seconds": sum(p.seconds for p in plans),
             "kernels_from_cache": sum(p.cache_hits for p in plans)}
    GRAPHS.append(entry)
    if config.LOG_COMPILES:
        print("jitgrad: compiled graph %s (%d ops forward, %d backward, %d fused groups, %d tape instructions) in "
              "%.3f s" % (name, entry["nodes"], entry["backward_nodes"], entry["fused_groups"],
                          entry["tape_instructions"], entry["compile_seconds"]), file=sys.stderr, flush=True)
