"""jitgrad in one screen: build a graph, look at it, backpropagate, train a tiny model."""
import time

import jitgrad as jg

# 1. The graph of the autograd notes: leaves, grad_fn, retain_grad, backward.
inp = jg.ones(2, 2)
w1, w2, w3 = (jg.tensor(v, requires_grad=True) for v in (2.0, 3.0, 4.0))
l1 = inp * w1
l2 = l1 + w2
l3 = l1 * w3
l4 = l2 * l3
loss = l4.mean()
l1.retain_grad()
loss.backward()
print("w1.grad, w2.grad, w3.grad:", w1.grad, w2.grad, w3.grad)
print("l1.grad:", l1.grad)
print("loss.grad_fn:", loss.grad_fn)


def show(node, depth=0):
    """Print the backward graph below ``node``."""
    if node is None:
        return
    name = node.name() if hasattr(node, "name") else type(node).__name__
    print("  " * depth + name)
    for nxt, _ in (n for n in node.next_functions if n is not None):
        show(nxt, depth + 1)


print("backward graph of loss:")
show(loss.grad_fn)

# A picture of a model's backward graph: Graphviz DOT text (rendered to PNG when Graphviz is installed).
import jitgrad.viz  # noqa: E402

model = jg.nn.Sequential(jg.nn.Linear(3, 4), jg.nn.Tanh(), jg.nn.Linear(4, 1))
dot = jitgrad.viz.to_dot((model(jg.randn(2, 3)) ** 2).mean(), params=dict(model.named_parameters()))
print("graph of a small model: %d lines of DOT, first ones:" % len(dot.splitlines()))
print("\n".join(dot.splitlines()[:6]))
try:
    print("rendered:", dot.render("demo_graph.png"))
except Exception as e:  # no Graphviz: the DOT text above is the picture
    print("(not rendered: %s)" % str(e).splitlines()[0])

# 2. In-place correctness: modifying a saved tensor is caught at backward time.
a = jg.tensor([1.0, 3.0], requires_grad=True)
b = a + 2
out = (b * b).mean()
b[0] = 1000.0
try:
    out.backward()
except RuntimeError as e:
    print("in-place check:", str(e).split(" Hint")[0])

# 3. Train a small two-layer network on y = sin(x0) + x1 * x2 with plain tensors and SGD.
jg.manual_seed(0)
X = jg.randn(256, 3)
y = (X[:, 0].sin() + X[:, 1] * X[:, 2]).unsqueeze(1)
W1 = (jg.randn(3, 32) * 0.5).requires_grad_()
b1 = jg.zeros(32, requires_grad=True)
W2 = (jg.randn(32, 1) * 0.1).requires_grad_()
b2 = jg.zeros(1, requires_grad=True)
params = [W1, b1, W2, b2]
t0 = time.perf_counter()
for step in range(301):
    pred = (X @ W1 + b1).tanh() @ W2 + b2
    loss = ((pred - y) ** 2).mean()
    for p in params:
        p.grad = None
    loss.backward()
    with jg.no_grad():
        for p in params:
            p -= 0.1 * p.grad
    if step % 50 == 0:
        print("step %3d  loss %.5f" % (step, loss.item()))
print("trained in %.2f s (the first steps include kernel compilation)" % (time.perf_counter() - t0))
