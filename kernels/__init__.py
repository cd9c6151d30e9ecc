"""jitgrad's kernels: pure array code (NumPy arrays in, NumPy arrays out), compiled by numba.

Nothing here knows about tensors or graphs. Importing compiles nothing: kernels compile on
first use and are cached on disk.
"""
