"""asv benchmarks of whole workloads (see workloads.py), their compile cost and peak memory.

time_*: one forward+backward (+ optimizer step) after a warm-up call that compiles the kernels.
track_*: seconds for a fresh process to reach its first result, with an empty numba cache
(everything compiles) and with a warm one (kernels load from disk).
peakmem_*: peak resident memory of a training step.
"""
import os
import shutil
import tempfile

from . import coldstart, compile_time
from .workloads import COMPILED, WORKLOADS, library


class _Workload:
    """Builds the workload named by ``name`` (skipped when jitgrad lacks a layer it needs)."""
    name = None

    def setup(self, *params):
        import jitgrad
        self.step = WORKLOADS[self.name](jitgrad)  # NotImplementedError: asv skips the benchmark
        self.step()  # compile (or load from the cache) before timing

    def time_step(self, *params):
        self.step()


class Chain100(_Workload):
    """100 small ops on 16 elements, fwd+bwd: the per-op overhead."""
    name = "chain100"


class Mul16(_Workload):
    """``a * b`` on 16 elements, nothing recorded: the per-op overhead of dispatch."""
    name = "mul16"


class Mul16Grad(_Workload):
    """``a * b`` on 16 elements that require grad: dispatch plus recording the node."""
    name = "mul16_grad"


class Elementwise4M(_Workload):
    """sum(tanh(x*w+b)**2 * sigmoid(x)) on 4M float32 elements, fwd+bwd."""
    name = "elementwise_4m"


class MLPStep(_Workload):
    """MLP 784-512-256-10 training step, batch 256, SGD momentum."""
    name = "mlp_step"

    def peakmem_step(self):
        self.step()


class CNNStep(_Workload):
    """Two conv+relu+maxpool blocks (16, 32 channels) + linear on 64x1x28x28, training step."""
    name = "cnn_step"

    def peakmem_step(self):
        self.step()


class Reduction(_Workload):
    """sum / mean / max over axis 1 of 4096x4096 float32, fwd+bwd."""
    params = ["sum", "mean", "max"]
    param_names = ["kind"]

    def setup(self, kind):
        self.name = "reduction_" + kind
        super().setup(kind)


class Matmul(_Workload):
    """1024x1024 @ 1024x1024 float32, fwd+bwd."""
    name = "matmul_1024"


class LSTMStep(_Workload):
    """LSTM tagger training step: 2 layers, hidden 256, 64 steps, batch 32, AdamW."""
    name = "lstm_step"
    timeout = 300

    def peakmem_step(self):
        self.step()


class TransformerStep(_Workload):
    """4-layer causal transformer LM training step: d_model 128, 64 tokens, batch 32, AdamW."""
    name = "transformer_step"
    timeout = 300

    def peakmem_step(self):
        self.step()


class DataLoaderEpoch(_Workload):
    """An epoch of a DataLoader over 60000 28x28 float32 samples + labels, batch 64, shuffled, with 0 or 2
    worker processes."""
    params = [0, 2]
    param_names = ["num_workers"]
    timeout = 300

    def setup(self, num_workers):
        self.name = "dataloader_%dw" % num_workers
        super().setup(num_workers)


class CompileCost:
    """Seconds from a fresh process's start to its first result (import, build, first step)."""
    params = (["chain100", "elementwise_4m", "mlp_step"], ["empty", "warm"])
    param_names = ["workload", "numba_cache"]
    unit = "seconds"
    timeout = 900  # an empty cache compiles every kernel the workload meets
    number = 1
    repeat = 1

    def setup(self, workload, cache):
        library("jitgrad")
        self.cache_dir = tempfile.mkdtemp(prefix="jitgrad-numba-cache-")
        if cache == "warm":
            coldstart.first_step_seconds(workload, cache_dir=self.cache_dir, fill=True)  # (background builds too)

    def teardown(self, workload, cache):
        shutil.rmtree(self.cache_dir, ignore_errors=True)

    def track_first_result(self, workload, cache):
        return coldstart.first_step_seconds(workload, cache_dir=self.cache_dir)


class Compiled:
    """The workloads' jitgrad.compile forms (workloads.COMPILED), after a warm-up call that compiles them."""
    params = list(COMPILED)
    param_names = ["workload"]

    def setup(self, workload):
        import jitgrad
        self.step = WORKLOADS[workload](jitgrad, compiled=True)
        self.step()

    def time_step(self, workload):
        self.step()


class CompiledCompileCost:
    """Seconds a fresh process spends on its first compiled step, with an empty and a warm cache of
    generated kernels, and with every cache empty, numba's too (see compile_time.py)."""
    params = (list(COMPILED), ["empty", "warm", "all_empty"])
    param_names = ["workload", "compile_cache"]
    unit = "seconds"
    timeout = 900
    number = 1
    repeat = 1

    def setup(self, workload, cache):
        self.cache_dir = tempfile.mkdtemp(prefix="jitgrad-compile-cache-")
        self.graphs = os.path.join(self.cache_dir, "graphs")
        self.numba_cache = os.path.join(self.cache_dir, "numba") if cache == "all_empty" else None
        if cache == "warm":
            compile_time.first_call(workload, self.graphs)

    def teardown(self, workload, cache):
        shutil.rmtree(self.cache_dir, ignore_errors=True)

    def track_first_call(self, workload, cache):
        return compile_time.first_call(workload, self.graphs, self.numba_cache)[0]
