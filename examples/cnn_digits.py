"""A small CNN on scikit-learn's 8x8 digits: train, report accuracy and time, save, reload, re-check.

    python examples/cnn_digits.py            # conv-pool-conv-pool-MLP, SGD with Nesterov momentum
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jitgrad.nn as nn  # noqa: E402

from _digits import train_example  # noqa: E402

TARGET = 0.97


def make_model():
    return nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # 16 x 4 x 4
        nn.Conv2d(16, 32, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 32 x 2 x 2
        nn.Flatten(), nn.Linear(32 * 2 * 2, 64), nn.ReLU(), nn.Linear(64, 10))


def main(argv=None):
    return train_example("CNN", __doc__, make_model, TARGET, epochs=15, out="cnn_digits.jg", image_shape=(1, 8, 8), argv=argv)


if __name__ == "__main__":
    main()
