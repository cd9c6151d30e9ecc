"""A one-dimensional Fourier neural operator layer (Li et al., 2021) learning the solution operator of the heat
equation on a periodic grid: u(x, 0) -> u(x, t). The spectral convolution is rfft -> multiply the lowest modes by
complex weights -> irfft; a pointwise linear path runs beside it.

Written against PyTorch's API: ``train(torch)`` runs unchanged on ``jitgrad`` (imported as torch below) and on
``torch`` itself, and tests/fft/test_spectral_layer.py compares the two losses step by step.

    python examples/fno_1d.py --steps 200
"""
import argparse

import numpy as np

import jitgrad as torch


def heat_data(n_samples=64, grid=64, t=0.01, seed=0):
    """Random smooth periodic initial states and the exact heat-equation solution at time t (each Fourier mode k
    decays by exp(-(2 pi k)^2 t)), float32."""
    rng = np.random.default_rng(seed)
    k = np.fft.rfftfreq(grid, 1.0 / grid)
    spectrum = (rng.standard_normal((n_samples, k.size)) + 1j * rng.standard_normal((n_samples, k.size))) / (1 + k) ** 2
    u0 = np.fft.irfft(spectrum, n=grid) * grid
    ut = np.fft.irfft(spectrum * np.exp(-(2 * np.pi * k) ** 2 * t), n=grid) * grid
    return u0.astype(np.float32), ut.astype(np.float32)


def spectral_conv(torch, x, weights, modes):
    """The spectral convolution of x (batch, in_channels, grid) by complex weights (in, out, modes)."""
    x_ft = torch.fft.rfft(x)
    out_ft = torch.zeros(x.shape[0], weights.shape[1], x.shape[-1] // 2 + 1, dtype=weights.dtype)
    out_ft[:, :, :modes] = torch.einsum("bix,iox->box", x_ft[:, :, :modes], weights)
    return torch.fft.irfft(out_ft, n=x.shape[-1])


def make_model(torch, channels=8, modes=12, seed=0):
    nn = torch.nn

    class SpectralConv1d(nn.Module):
        def __init__(self, in_channels, out_channels, modes):
            super().__init__()
            self.modes = modes
            rng = np.random.default_rng(seed)
            scale = 1.0 / (in_channels * out_channels)
            w = scale * (rng.random((in_channels, out_channels, modes)) + 1j * rng.random((in_channels, out_channels,
                                                                                            modes)))
            self.weights = nn.Parameter(torch.tensor(w.astype(np.complex64)))

        def forward(self, x):  # x: (batch, in_channels, grid)
            return spectral_conv(torch, x, self.weights, self.modes)

    class FNO1d(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(seed)
            self.lift = nn.Conv1d(1, channels, 1)
            self.spectral = SpectralConv1d(channels, channels, modes)
            self.pointwise = nn.Conv1d(channels, channels, 1)
            self.project = nn.Conv1d(channels, 1, 1)

        def forward(self, u):  # u: (batch, grid)
            h = self.lift(u.unsqueeze(1))
            h = torch.nn.functional.gelu(self.spectral(h) + self.pointwise(h))
            return self.project(h).squeeze(1)

    model = FNO1d()
    # the same starting weights in every library (their own initialisers draw different numbers)
    rng = np.random.default_rng(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name != "spectral.weights":
                p.copy_(torch.tensor((rng.standard_normal(tuple(p.shape)) * 0.3).astype(np.float32)))
    return model


def train(torch, steps=20, lr=0.01, seed=0):
    """Train the layer on heat-equation pairs with Adam; the loss of each step."""
    u0, ut = heat_data(seed=seed)
    x, y = torch.tensor(u0), torch.tensor(ut)
    model = make_model(torch, seed=seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args(argv)
    losses = train(torch, args.steps, args.lr)
    print("loss: first %.5f, last %.5f" % (losses[0], losses[-1]))
    return {"losses": losses}


if __name__ == "__main__":
    main()
