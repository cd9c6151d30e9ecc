"""An MLP on scikit-learn's 8x8 digits: train, report accuracy and time, save, reload, re-check.

    python examples/mlp_digits.py            # 64-128-64-10 MLP, SGD with Nesterov momentum
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jitgrad as jg  # noqa: E402
import jitgrad.nn as nn  # noqa: E402
from jitgrad import optim  # noqa: E402

from _digits import arguments, fit, load_digits, report, save_and_reload  # noqa: E402

TARGET = 0.95


def make_model():
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))


def main(argv=None):
    args = arguments(__doc__.splitlines()[0], epochs=20, lr=0.05, out="mlp_digits.jg", argv=argv)
    jg.manual_seed(args.seed)
    X_train, X_test, y_train, y_test = load_digits(args.seed)
    model = make_model()
    print(model)
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=1e-4)
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    seconds = fit(model, optimizer, X_train, y_train, X_test, y_test, args.epochs, args.batch_size, args.seed,
                  scheduler)
    acc = save_and_reload(model, make_model, args.out, X_test, y_test)
    report("MLP", acc, seconds, TARGET)
    return {"accuracy": acc, "seconds": seconds}


if __name__ == "__main__":
    main()
