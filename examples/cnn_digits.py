"""A small CNN on scikit-learn's 8x8 digits: train, report accuracy and time, save, reload, re-check.

    python examples/cnn_digits.py            # conv-pool-conv-pool-MLP, SGD with Nesterov momentum
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jitgrad as jg  # noqa: E402
import jitgrad.nn as nn  # noqa: E402
from jitgrad import optim  # noqa: E402

from _digits import arguments, fit, load_digits, report, save_and_reload  # noqa: E402

TARGET = 0.97


def make_model():
    return nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # 16 x 4 x 4
        nn.Conv2d(16, 32, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 32 x 2 x 2
        nn.Flatten(), nn.Linear(32 * 2 * 2, 64), nn.ReLU(), nn.Linear(64, 10))


def main(argv=None):
    args = arguments(__doc__.splitlines()[0], epochs=15, lr=0.05, out="cnn_digits.jg", argv=argv)
    jg.manual_seed(args.seed)
    X_train, X_test, y_train, y_test = load_digits(args.seed, image_shape=(1, 8, 8))
    model = make_model()
    print(model)
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=1e-4)
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    seconds = fit(model, optimizer, X_train, y_train, X_test, y_test, args.epochs, args.batch_size, args.seed,
                  scheduler)
    acc = save_and_reload(model, make_model, args.out, X_test, y_test)
    report("CNN", acc, seconds, TARGET)
    return {"accuracy": acc, "seconds": seconds}


if __name__ == "__main__":
    main()
