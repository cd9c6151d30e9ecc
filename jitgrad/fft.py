"""torch.fft: discrete Fourier transforms, differentiable, batched over the dims they do not transform, in
float32/complex64 and float64/complex128 (pocketfft through rocket-fft on the CPU; see docs/fft.md)."""
from .ops.fft import (__all__, fft, fft2, fftfreq, fftn, fftshift, hfft, hfft2, hfftn, ifft, ifft2, ifftn,  # noqa: F401
                      ifftshift, ihfft, ihfft2, ihfftn, irfft, irfft2, irfftn, rfft, rfft2, rfftfreq, rfftn)
