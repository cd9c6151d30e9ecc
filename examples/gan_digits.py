"""A small GAN on scikit-learn's 8x8 digits: train, report both losses and time per epoch.

    python examples/gan_digits.py            # MLP generator 16-128-64, MLP discriminator 64-128-1, Adam

Each step trains the discriminator to tell real images (label 1) from generated ones (label 0),
then the generator to make the discriminator say 1 (the non-saturating loss), both with
binary_cross_entropy_with_logits. The models are written against an ``nn`` module so the same code
runs on PyTorch, which tests/package/test_examples.py uses to check the losses step by step.
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jitgrad as jg  # noqa: E402

from _digits import ProgressBar, arguments, load_digits  # noqa: E402

LATENT = 16


def make_models(nn, hidden=128):
    """(generator, discriminator): noise -> pixel values in [0, 1], image -> real-vs-fake logit."""
    generator = nn.Sequential(nn.Linear(LATENT, hidden), nn.ReLU(), nn.Linear(hidden, 64), nn.Sigmoid())
    discriminator = nn.Sequential(nn.Linear(64, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, 1))
    return generator, discriminator


def gan_step(F, lib, generator, discriminator, opt_g, opt_d, real, noise):
    """One discriminator step and one generator step; returns (discriminator loss, generator loss)."""
    ones, zeros = lib.ones(real.shape[0], 1), lib.zeros(real.shape[0], 1)
    fake = generator(noise)
    d_loss = (F.binary_cross_entropy_with_logits(discriminator(real), ones)
              + F.binary_cross_entropy_with_logits(discriminator(fake.detach()), zeros))
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    g_loss = F.binary_cross_entropy_with_logits(discriminator(fake), ones)
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
    return d_loss.item(), g_loss.item()


def optimizers(lib, generator, discriminator, lr):
    return (lib.optim.Adam(generator.parameters(), lr=lr, betas=(0.5, 0.999)),
            lib.optim.Adam(discriminator.parameters(), lr=lr, betas=(0.5, 0.999)))


def main(argv=None):
    args = arguments(__doc__.splitlines()[0], epochs=30, lr=2e-3, out="gan_digits.jg", argv=argv)
    jg.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    X, X_test, _, _ = load_digits(args.seed)
    generator, discriminator = make_models(jg.nn)
    print(generator, discriminator, sep="\n")
    opt_g, opt_d = optimizers(jg, generator, discriminator, args.lr)
    F = jg.nn.functional
    steps = -(-len(X) // args.batch_size)
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        order = rng.permutation(len(X))
        bar = ProgressBar(steps)
        d_total = g_total = 0.0
        for step in range(steps):
            real = jg.from_numpy(X[order[step * args.batch_size:(step + 1) * args.batch_size]])
            noise = jg.from_numpy(rng.standard_normal((real.shape[0], LATENT)).astype(np.float32))
            d_loss, g_loss = gan_step(F, jg, generator, discriminator, opt_g, opt_d, real, noise)
            d_total += d_loss
            g_total += g_loss
            bar.update(step + 1, d_loss)
        bar.close()
        print("epoch %2d/%d  discriminator loss %.3f  generator loss %.3f  %.2f s"
              % (epoch, args.epochs, d_total / steps, g_total / steps, time.perf_counter() - t0), flush=True)
    seconds = time.perf_counter() - start
    with jg.no_grad():
        fake = generator(jg.from_numpy(rng.standard_normal((len(X_test), LATENT)).astype(np.float32)))
        real_score = discriminator(jg.from_numpy(X_test)).sigmoid().mean().item()
        fake_score = discriminator(fake).sigmoid().mean().item()
    # the generated images' mean intensity against the real ones': a collapsed generator gives all-dark images
    ink = (fake.mean().item(), float(X_test.mean()))
    jg.save(generator.state_dict(), args.out)
    print("GAN: the discriminator scores held-out real images %.2f and generated ones %.2f; mean pixel %.3f "
          "(real %.3f); training time %.1f s; generator saved to %s"
          % (real_score, fake_score, ink[0], ink[1], seconds, args.out))
    return {"real_score": real_score, "fake_score": fake_score, "ink": ink, "seconds": seconds}


if __name__ == "__main__":
    main()
