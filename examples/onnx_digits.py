"""Train a small CNN on the 8x8 digits, export it to ONNX and check onnxruntime's predictions against it.

    python examples/onnx_digits.py                   # writes cnn_digits.onnx (batch axis dynamic)

Needs the onnx extra (pip install -e ".[onnx]": onnx and onnxruntime) and scikit-learn for the digits.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jitgrad as jg  # noqa: E402
import jitgrad.nn as nn  # noqa: E402

from _digits import accuracy, fit, load_digits  # noqa: E402


def make_model():
    return nn.Sequential(
        nn.Conv2d(1, 8, kernel_size=3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),  # 8 x 4 x 4
        nn.Conv2d(8, 16, kernel_size=3, padding=1), nn.ReLU(), nn.AvgPool2d(2),                   # 16 x 2 x 2
        nn.Flatten(), nn.Linear(16 * 2 * 2, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 10))


def main(argv=None):
    import onnx
    import onnxruntime as ort
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--out", default="cnn_digits.onnx")
    args = p.parse_args(argv)
    jg.manual_seed(0)
    X_train, X_test, y_train, y_test = load_digits(0, image_shape=(1, 8, 8))
    model = make_model()
    opt = jg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    fit(model, opt, X_train, y_train, X_test, y_test, args.epochs, 32, 0)
    model.eval()
    jg.onnx.export(model, (jg.from_numpy(X_test[:2]),), args.out, input_names=["images"], output_names=["logits"],
                   dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}})
    onnx.checker.check_model(args.out)
    session = ort.InferenceSession(args.out, providers=["CPUExecutionProvider"])
    logits = session.run(None, {"images": X_test})[0]  # the whole test set: another batch size than exported
    with jg.no_grad():
        ours = model(jg.from_numpy(X_test)).numpy()
    agree = float((logits.argmax(1) == ours.argmax(1)).mean())
    onnx_acc = float((logits.argmax(1) == y_test).mean())
    diff = float(np.abs(logits - ours).max())
    print("jitgrad test acc %.2f%%, onnxruntime test acc %.2f%%, predictions agree on %.2f%%, max |logit diff| %.2e"
          % (100 * accuracy(model, X_test, y_test), 100 * onnx_acc, 100 * agree, diff))
    return {"accuracy": onnx_acc, "agree": agree, "max_diff": diff}


if __name__ == "__main__":
    main()
