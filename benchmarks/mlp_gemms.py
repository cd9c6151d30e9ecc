"""The eight GEMMs of one mlp_step (784-512-256-10, batch 256, float32: three forward, five backward; the
input takes no gradient), each timed alone in NumPy (the BLAS jitgrad calls) and in PyTorch: the floor
under both libraries' training step. The first line names the kernels OpenBLAS chose for this CPU (its
OPENBLAS_CORETYPE environment variable picks others: AVX2 "Haswell" kernels run at half the speed of AVX-512
"SkylakeX" ones on a CPU that has both).

    python benchmarks/mlp_gemms.py
"""
import os
import time

import numpy as np

from workloads import blas_kernels


def gemms(mm, t, arrays):
    x, w1, h1, w2, h2, w3, g3 = arrays
    return {"x @ W1.T": lambda: mm(x, t(w1)), "h1 @ W2.T": lambda: mm(h1, t(w2)), "h2 @ W3.T": lambda: mm(h2, t(w3)),
            "g3.T @ h2 (dW3)": lambda: mm(t(g3), h2), "g3 @ W3 (dh2)": lambda: mm(g3, w3),
            "g2.T @ h1 (dW2)": lambda: mm(t(h2), h1), "g2 @ W2 (dh1)": lambda: mm(h2, w2),
            "g1.T @ x (dW1)": lambda: mm(t(h1), x)}


def median_ms(fn, repeats=51):
    for _ in range(5):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[repeats // 2] * 1e3


def main():
    rng = np.random.default_rng(0)
    shapes = [(256, 784), (512, 784), (256, 512), (256, 512), (256, 256), (10, 256), (256, 10)]
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    columns = {"NumPy": gemms(np.matmul, lambda a: a.T, arrays)}
    try:
        import torch
        torch.set_num_threads(2)
        columns["PyTorch"] = gemms(torch.matmul, lambda a: a.t(), [torch.from_numpy(a) for a in arrays])
    except ImportError:
        pass
    names = list(columns)
    print("%s; OPENBLAS_CORETYPE=%s\n" % (blas_kernels(), os.environ.get("OPENBLAS_CORETYPE", "(unset)")))
    print("| GEMM | " + " | ".join("%s (ms)" % n for n in names) + " |")
    print("|---|" + "---:|" * len(names))
    totals = dict.fromkeys(names, 0.0)
    for gemm in columns["NumPy"]:
        row = []
        for n in names:
            ms = median_ms(columns[n][gemm])
            totals[n] += ms
            row.append("%.3f" % ms)
        print("| %s | %s |" % (gemm, " | ".join(row)))
    print("| total | %s |" % " | ".join("%.3f" % totals[n] for n in names))


if __name__ == "__main__":
    main()
