"""Fine-tuning as in the autograd notes: pretrain, freeze, replace the head, train only the head.

    python examples/finetune.py

1. Pretrain a small network (feature extractor + ``fc`` head) to tell the ten digits apart.
2. Freeze it (``requires_grad = False`` on every parameter), replace ``model.fc`` with a new
   layer for a new task (is the digit even or odd?) and optimize only
   ``filter(lambda p: p.requires_grad, model.parameters())``.
3. Check that the frozen parameters did not change, and that the frozen part recorded nothing:
   its output has no ``grad_fn``, and the backward graph holds only the head's and the loss's nodes.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import jitgrad as jg  # noqa: E402
import jitgrad.nn as nn  # noqa: E402
from jitgrad import optim  # noqa: E402

from _digits import accuracy, arguments, fit, load_digits  # noqa: E402


class Net(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU())
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        return self.fc(self.features(x))


def graph_nodes(tensor):
    """Names of the nodes of ``tensor``'s backward graph (each node once)."""
    seen, stack, names = set(), [tensor.grad_fn], []
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.append(node.name())
        stack.extend(edge[0] for edge in node.next_functions if edge is not None)
    return sorted(names)


def main(argv=None):
    args = arguments(__doc__.splitlines()[0], epochs=10, lr=0.05, out="finetune_digits.jg", argv=argv)
    jg.manual_seed(args.seed)
    X_train, X_test, y_train, y_test = load_digits(args.seed)
    odd_train, odd_test = y_train % 2, y_test % 2  # the new task's labels

    print("1. pretraining: which digit is it (10 classes)?")
    model = Net(classes=10)
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=1e-4)
    fit(model, optimizer, X_train, y_train, X_test, y_test, args.epochs, args.batch_size, args.seed)
    jg.save(model.state_dict(), args.out)
    print("saved the pretrained weights to", args.out)

    print("2. freezing the network, replacing the head, training the head: is the digit odd (2 classes)?")
    model = Net(classes=10)
    model.load_state_dict(jg.load(args.out))
    for param in model.parameters():
        param.requires_grad = False
    # Parameters of newly constructed modules have requires_grad=True by default
    model.fc = nn.Linear(64, 2)
    frozen = {name: p.detach().clone() for name, p in model.features.named_parameters()}
    print("trainable:", [name for name, p in model.named_parameters() if p.requires_grad])
    optimizer = optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=args.lr, momentum=0.9,
                          weight_decay=1e-4, nesterov=True)
    fit(model, optimizer, X_train, odd_train, X_test, odd_test, args.epochs, args.batch_size, args.seed)
    acc = accuracy(model, X_test, odd_test)

    print("3. checks")
    unchanged = all(np.array_equal(p.numpy(), frozen[name].numpy()) for name, p in model.features.named_parameters())
    print("frozen parameters unchanged:", unchanged)
    x, target = jg.from_numpy(X_train[:8]), jg.from_numpy(odd_train[:8])
    hidden = model.features(x)
    print("frozen part's output: requires_grad=%s, grad_fn=%s" % (hidden.requires_grad, hidden.grad_fn))
    loss = nn.functional.cross_entropy(model(x), target)
    nodes = graph_nodes(loss)
    print("backward graph of the fine-tuning loss (%d nodes): %s" % (len(nodes), ", ".join(nodes)))
    for p in model.parameters():
        p.requires_grad = True
    full = graph_nodes(nn.functional.cross_entropy(model(x), target))
    print("the same loss with nothing frozen records %d nodes" % len(full))
    if not unchanged or hidden.grad_fn is not None or len(nodes) >= len(full):
        raise RuntimeError("the frozen part was updated or recorded")
    print("fine-tuned head: held-out accuracy on odd/even %.2f%%" % (100 * acc))
    return {"accuracy": acc, "unchanged": unchanged, "nodes": nodes, "full_nodes": full}


if __name__ == "__main__":
    main()
