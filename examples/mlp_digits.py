"""An MLP on scikit-learn's 8x8 digits: train, report accuracy and time, save, reload, re-check.

    python examples/mlp_digits.py            # 64-128-64-10 MLP, SGD with Nesterov momentum
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jitgrad.nn as nn  # noqa: E402

from _digits import train_example  # noqa: E402

TARGET = 0.95


def make_model():
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))


def main(argv=None):
    return train_example("MLP", __doc__, make_model, TARGET, epochs=20, out="mlp_digits.jg", argv=argv)


if __name__ == "__main__":
    main()
