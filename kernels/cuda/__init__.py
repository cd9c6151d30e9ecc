"""CUDA twins of jitgrad's kernels (numba-cuda, the 'cuda' extra): device arrays in, device arrays out.

Same names and signatures as the CPU kernels, so the op layer picks a module by device:

    elementwise  run(fn, out_dtype, *args, out=None): grid-stride kernels generated from the
                 scalar functions of kernels/scalars.py
    reduce       reduce / scan / softmax / softmax_vjp: block-parallel over the (A, R, B) layout
    matmul       matmul(a, b): tiled shared-memory GEMM with NumPy's rank and batch rules
    index        index_add / scatter_add / one_hot: scatters with atomic adds
    conv         im2col / col2im, convolutions (GEMMs through matmul)
    pool         max and average pooling
    memory       the caching device-memory pool (numba's EMM plugin interface)
    array        views, strided copies and gathers of device arrays
    backend      kernels/cpu.py's names over all of the above

Importing this package compiles nothing and does not touch the GPU; kernels compile on first
launch (with numba's on-disk cache). Launch shapes and tile sizes are set in _launch.py.
"""
