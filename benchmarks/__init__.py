"""jitgrad's benchmarks: the asv suite (bench_*.py; see asv.conf.json at the repo root), the
workloads it shares with compare.py (workloads.py), and the comparison with PyTorch (compare.py)."""
