"""A variational autoencoder on scikit-learn's 8x8 digits: train, report the loss and time per epoch.

    python examples/vae_digits.py            # 64-128-(8)-128-64 VAE, Adam, 30 epochs

The encoder gives the mean and log-variance of a Gaussian over an 8-dim code; a code drawn with the
reparameterisation trick (z = mu + sigma * eps) is decoded into pixel logits. The loss per image is
the reconstruction's binary cross-entropy with logits plus the KL divergence to N(0, I) (the negative
evidence lower bound). The model is written against an ``nn`` module and ``F`` so the same code runs
on PyTorch, which tests/package/test_examples.py uses to check the loss step by step.
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jitgrad as jg  # noqa: E402

from _digits import ProgressBar, arguments, load_digits  # noqa: E402


def make_model(nn, latent=8, hidden=128):
    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(64, hidden), nn.ReLU())
            self.mu = nn.Linear(hidden, latent)
            self.logvar = nn.Linear(hidden, latent)
            self.decoder = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, 64))

        def forward(self, x, eps):
            """(pixel logits, mu, logvar) of images ``x`` with standard-normal noise ``eps`` for the code."""
            h = self.encoder(x)
            mu, logvar = self.mu(h), self.logvar(h)
            return self.decoder(mu + (0.5 * logvar).exp() * eps), mu, logvar
    return VAE()


def vae_loss(F, logits, x, mu, logvar):
    """The negative ELBO per image: BCE of the reconstruction plus KL(q(z|x) || N(0, I))."""
    reconstruction = F.binary_cross_entropy_with_logits(logits, x, reduction="sum")
    kl = -0.5 * (1 + logvar - mu * mu - logvar.exp()).sum()
    return (reconstruction + kl) / x.shape[0]


def batch_loss(model, x, rng):
    """The loss of images ``x`` with fresh noise for the codes."""
    logits, mu, logvar = model(x, jg.from_numpy(rng.standard_normal((x.shape[0], 8)).astype(np.float32)))
    return vae_loss(jg.nn.functional, logits, x, mu, logvar)


def evaluate(model, X, rng):
    with jg.no_grad():
        return batch_loss(model, jg.from_numpy(X), rng).item()


def main(argv=None):
    args = arguments(__doc__.splitlines()[0], epochs=30, lr=2e-3, out="vae_digits.jg", argv=argv)
    jg.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    X, X_test, _, _ = load_digits(args.seed)
    model = make_model(jg.nn)
    print(model)
    optimizer = jg.optim.Adam(model.parameters(), lr=args.lr)
    steps = -(-len(X) // args.batch_size)
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        order = rng.permutation(len(X))
        bar = ProgressBar(steps)
        total = 0.0
        for step in range(steps):
            x = jg.from_numpy(X[order[step * args.batch_size:(step + 1) * args.batch_size]])
            loss = batch_loss(model, x, rng)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * x.shape[0]
            bar.update(step + 1, loss.item())
        bar.close()
        print("epoch %2d/%d  train loss %.2f  test loss %.2f  %.2f s"
              % (epoch, args.epochs, total / len(X), evaluate(model, X_test, rng), time.perf_counter() - t0),
              flush=True)
    seconds = time.perf_counter() - start
    test_loss = evaluate(model, X_test, rng)
    jg.save(model.state_dict(), args.out)
    print("VAE: held-out negative ELBO %.2f nats per image (an untrained model: %.2f), training time %.1f s; "
          "weights saved to %s" % (test_loss, 64 * np.log(2), seconds, args.out))
    return {"test_loss": test_loss, "seconds": seconds}


if __name__ == "__main__":
    main()
