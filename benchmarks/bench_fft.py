"""asv benchmarks of torch.fft (see workloads.py): rfft then irfft of 2^20 float32 values, and a batched 2-D FFT
of 64 x 256 x 256 complex64 values, forward and backward."""
from .bench_workloads import _Workload


class RfftIrfft1M(_Workload):
    """irfft(rfft(x)) of 2^20 float32 values."""
    name = "rfft_irfft_1m"


class Fft2Batched(_Workload):
    """fft2 of 64 x 256 x 256 complex64 values, forward and backward."""
    name = "fft2_64x256"
