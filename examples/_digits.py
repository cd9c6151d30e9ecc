"""What the digits examples share: the data, a training loop with a text progress bar, evaluation,
and the save / reload check. scikit-learn's 8x8 digits ship with scikit-learn (no download):
``pip install -e ".[examples]"``.
"""
import argparse
import sys
import time

import numpy as np

import jitgrad as jg
import jitgrad.nn as nn


def load_digits(seed, image_shape=(64,)):
    """Train/test split (75/25, stratified, fixed seed) of the 1,797 digits, pixels scaled to [0, 1]."""
    from sklearn.datasets import load_digits as sk_load_digits
    from sklearn.model_selection import train_test_split
    digits = sk_load_digits()
    X = (digits.data / 16.0).astype(np.float32).reshape((-1,) + image_shape)
    y = digits.target.astype(np.int64)
    return train_test_split(X, y, test_size=0.25, random_state=seed, stratify=y)


def arguments(description, epochs, lr, out, argv=None):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--epochs", type=int, default=epochs)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=lr)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=out, help="where to save the trained weights")
    return p.parse_args(argv)


class ProgressBar:
    """``[#######.............]  35/42  loss 0.1234``, redrawn in place on a terminal, silent otherwise."""

    def __init__(self, total, width=30, stream=sys.stdout):
        self.total, self.width, self.stream = total, width, stream
        self.live = stream.isatty()

    def update(self, done, loss):
        if not self.live:
            return
        filled = self.width * done // self.total
        self.stream.write("\r[%s%s] %4d/%d  loss %.4f" % ("#" * filled, "." * (self.width - filled), done,
                                                          self.total, loss))
        self.stream.flush()

    def close(self):
        if self.live:
            self.stream.write("\r" + " " * (self.width + 40) + "\r")


def accuracy(model, X, y):
    """Fraction of ``X`` that ``model`` classifies as ``y`` (eval mode, no graph)."""
    model.eval()
    with jg.no_grad():
        pred = model(jg.from_numpy(X)).argmax(1).numpy()
    model.train()
    return float((pred == y).mean())


def fit(model, optimizer, X, y, X_test, y_test, epochs, batch_size, seed, scheduler=None):
    """Mini-batch training with cross-entropy; prints loss, accuracies and time per epoch."""
    loss_fn = nn.CrossEntropyLoss()
    rng = np.random.default_rng(seed)
    steps = -(-len(X) // batch_size)
    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        order = rng.permutation(len(X))
        bar = ProgressBar(steps)
        total = 0.0
        for step in range(steps):
            idx = order[step * batch_size:(step + 1) * batch_size]
            loss = loss_fn(model(jg.from_numpy(X[idx])), jg.from_numpy(y[idx]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(idx)
            bar.update(step + 1, loss.item())
        bar.close()
        if scheduler is not None:
            scheduler.step()
        print("epoch %2d/%d  loss %.4f  train acc %.2f%%  test acc %.2f%%  %.2f s"
              % (epoch, epochs, total / len(X), 100 * accuracy(model, X, y), 100 * accuracy(model, X_test, y_test),
                 time.perf_counter() - t0), flush=True)
    return time.perf_counter() - start


def save_and_reload(model, make_model, path, X_test, y_test):
    """Save the weights with jitgrad.save, load them into a fresh model and check it scores the same."""
    acc = accuracy(model, X_test, y_test)
    jg.save(model.state_dict(), path)
    fresh = make_model()
    fresh.load_state_dict(jg.load(path))
    reloaded = accuracy(fresh, X_test, y_test)
    print("saved weights to %s; reloaded into a fresh model: test acc %.2f%%" % (path, 100 * reloaded))
    if reloaded != acc:
        raise RuntimeError("the reloaded model scores %.4f, the trained one %.4f" % (reloaded, acc))
    return reloaded


def report(name, acc, seconds, target):
    print("%s: held-out accuracy %.2f%% (target %.0f%%: %s), training time %.1f s"
          % (name, 100 * acc, 100 * target, "met" if acc >= target else "NOT met", seconds))


def train_example(name, doc, make_model, target, *, epochs, out, image_shape=(64,), argv=None):
    """The examples' main(): train on the digits with SGD (Nesterov) and a cosine schedule, save,
    reload into a fresh model and check the accuracy again."""
    from jitgrad import optim
    args = arguments(doc.splitlines()[0], epochs=epochs, lr=0.05, out=out, argv=argv)
    jg.manual_seed(args.seed)
    X_train, X_test, y_train, y_test = load_digits(args.seed, image_shape=image_shape)
    model = make_model()
    print(model)
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=1e-4)
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    seconds = fit(model, optimizer, X_train, y_train, X_test, y_test, args.epochs, args.batch_size, args.seed,
                  scheduler)
    acc = save_and_reload(model, make_model, args.out, X_test, y_test)
    report(name, acc, seconds, target)
    return {"accuracy": acc, "seconds": seconds}
