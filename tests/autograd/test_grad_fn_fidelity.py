"""grad_fn structure as PyTorch records it: split/chunk/unbind's one multi-output node, F.linear's
AddmmBackward0 edges, t/T/mT/H, the Scalar overloads' edges; the 60-minute blitz's next_functions walk."""
import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
import jitgrad.nn.functional as F


def _name(fn):
    return None if fn is None else type(fn).__name__


def _tree(fn):
    """(name, [children]) of a grad_fn, as next_functions lists them."""
    if fn is None:
        return None
    return (_name(fn), [_tree(nf) for nf, _ in fn.next_functions])


def _leaf(*shape):
    return jg.tensor(np.random.default_rng(0).standard_normal(shape), requires_grad=True)


SPLITS = [
    (lambda x: x.split(2), "SplitBackward0", 3),
    (lambda x: x.split([1, 5]), "SplitWithSizesBackward0", 2),
    (lambda x: jg.split(x, [2, 4]), "SplitWithSizesBackward0", 2),
    (lambda x: x.split_with_sizes([3, 3]), "SplitWithSizesBackward0", 2),
    (lambda x: x.chunk(4), "SplitBackward0", 3),
    (lambda x: x.unbind(1), "UnbindBackward0", 4),
    (lambda x: list(x), "UnbindBackward0", 6),
]


@pytest.mark.parametrize("f, name, k", SPLITS)
def test_split_family_records_one_node_for_every_output(f, name, k):
    x = _leaf(6, 4)
    outs = f(x)
    assert len(outs) == k
    assert {_name(o.grad_fn) for o in outs} == {name}
    assert len({id(o.grad_fn) for o in outs}) == 1
    assert [o.output_nr for o in outs] == list(range(k))
    assert _tree(outs[0].grad_fn) == (name, [("AccumulateGrad", [])])
    assert all(o._base is x for o in outs)  # views of the input


def test_tensor_split_records_slices_as_pytorch():
    outs = _leaf(6, 4).tensor_split(3)
    assert [_name(o.grad_fn) for o in outs] == ["SliceBackward0"] * 3 and [o.output_nr for o in outs] == [0, 0, 0]


def test_split_saved_attributes():
    a = _leaf(6, 4).split(2, dim=0)[0]
    assert a.grad_fn._saved_split_size == 2 and a.grad_fn._saved_dim == 0
    b = _leaf(6, 4).split([1, 3], dim=-1)[1]
    assert b.grad_fn._saved_split_sizes == (1, 3) and b.grad_fn._saved_dim == 1
    assert _leaf(2, 3).unbind(1)[0].grad_fn._saved_dim == 1


@pytest.mark.parametrize("f, rows", [(lambda x: x.split(2), [2, 3]), (lambda x: x.split([1, 2, 3]), [1, 2]),
                                     (lambda x: x.unbind(0), [1])])
def test_backward_through_some_outputs_fills_zeros_for_the_others(f, rows):
    x = _leaf(6, 3)
    (f(x)[1] * 3).sum().backward()
    expected = np.zeros((6, 3))
    expected[rows] = 3.0
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_split_errors_as_pytorch():
    with pytest.raises(RuntimeError, match="split expects at least a 1-dimensional tensor"):
        jg.tensor(1.0).split(1)
    with pytest.raises(RuntimeError, match="split expects split_size be non-negative, but got split_size=-1"):
        jg.ones(4).split(-1)
    with pytest.raises(RuntimeError, match=r"split_with_sizes expects split_sizes have only non-negative entries, but "
                                           r"got split_sizes=\[2, -1, 5\]"):
        jg.ones(6).split_with_sizes([2, -1, 5])
    with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum exactly to 4"):
        jg.ones(4, 3).split([2, 1])
    assert [tuple(t.shape) for t in jg.ones(0, 3).split(0)] == [(0, 3)]
    assert [tuple(t.shape) for t in jg.ones(5, 2).chunk(3)] == [(2, 2), (2, 2), (1, 2)]


def test_split_gradients_and_second_order():
    x = jg.tensor(np.random.default_rng(1).standard_normal((5, 3)), requires_grad=True)
    assert jg.autograd.gradcheck(lambda t: tuple(p.sin() for p in t.split([2, 3])), (x,))
    assert jg.autograd.gradgradcheck(lambda t: t.chunk(2, dim=1)[1] ** 2, (x,))
    assert jg.autograd.gradcheck(lambda t: t.unbind(1)[2].exp(), (x,))


def test_inplace_on_a_split_output_raises_as_pytorch():
    y = _leaf(6, 4) * 1
    b = y.split(2)[1]
    msg = "Output 1 of Split is a view and is being modified inplace. This view is the output of a function that " \
          "returns multiple views."
    with pytest.raises(RuntimeError, match=msg):
        b.mul_(2)
    with pytest.raises(RuntimeError, match="Output 1 of Unbind is a view"):
        y.unbind()[1].add_(1)
    with pytest.raises(RuntimeError, match="Output 0 of Select is a view"):
        y.split(2)[1][0] = 1.0
    with pytest.raises(RuntimeError, match="Output 1 of Split"):  # (before the leaf check, as PyTorch)
        _leaf(6, 4).split(2)[1].mul_(2)
    with jg.no_grad():
        c = y.split(2)[1]
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode and is being modified inplace with grad "
                                           "mode enabled. Given that this use case is ambiguous"):
        c.mul_(2)


def test_inplace_on_a_split_output_without_grad_writes_the_base():
    z = jg.zeros(6, 4)
    a, b, c = z.split(2)
    b.add_(1)
    assert z._version == 1 and z.sum().item() == 8
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode and is being modified inplace with grad "
                                           "mode enabled. This view is the output of a function that returns multiple"):
        a.copy_(_leaf(2, 4))
    with jg.no_grad():
        y = _leaf(6, 4) * 1
        y.split(3)[0].mul_(2)  # (inside no_grad: allowed)


def test_split_under_compile_and_vmap():
    x = _leaf(6, 4)
    f = jg.compile(lambda t: sum(p.exp().sum() for p in t.split([2, 4])))
    np.testing.assert_allclose(f(x).item(), x.exp().sum().item(), rtol=1e-12)
    out = jg.vmap(lambda t: t.split(2)[1])(x.detach())
    np.testing.assert_array_equal(out.numpy(), x.detach().numpy()[:, 2:4])


# ---------------------------------------------------------------------- F.linear, t, T, mT, H
AT = ("AccumulateGrad", [])
T_W = ("TBackward0", [AT])


@pytest.mark.parametrize("make, tree", [
    (lambda x, w, b: F.linear(x.detach(), w, b), ("AddmmBackward0", [AT, None, T_W])),
    (lambda x, w, b: F.linear(x * 1, w, b), ("AddmmBackward0", [AT, ("MulBackward0", [AT, None]), T_W])),
    (lambda x, w, b: F.linear(x.detach(), w), ("MmBackward0", [None, T_W])),
    (lambda x, w, b: F.linear(x.detach().reshape(2, 1, 4), w, b), ("ViewBackward0", [("AddmmBackward0", [AT, None, T_W])])),
    (lambda x, w, b: F.linear(x.detach().reshape(2, 1, 4), w), ("UnsafeViewBackward0", [("MmBackward0", [None, T_W])])),
    (lambda x, w, b: x.detach() @ w.t(), ("MmBackward0", [None, T_W])),
])
def test_linear_records_addmm_over_bias_input_and_the_weights_transpose(make, tree):
    x, w, b = _leaf(2, 4), _leaf(3, 4), _leaf(3)
    y = make(x, w, b)
    assert _tree(y.grad_fn) == tree
    y.sum().backward()
    rows = x.detach().numpy().reshape(-1, 4)
    np.testing.assert_allclose(w.grad.numpy(), np.ones((3, len(rows))) @ rows, rtol=1e-12)


def test_transpose_spellings():
    w = _leaf(3, 4)
    assert _name(w.t().grad_fn) == "TBackward0" and _name(_leaf(3).t().grad_fn) == "TBackward0"
    assert _name(w.T.grad_fn) == "PermuteBackward0" and _name(w.mT.grad_fn) == "TransposeBackward0"
    assert _name(w.H.grad_fn) == "TransposeBackward0" and _name(w.mH.grad_fn) == "TransposeBackward0"
    assert _name(w.adjoint().grad_fn) == "TransposeBackward0"
    with pytest.warns(UserWarning):
        assert _name(_leaf(3).T.grad_fn) == "PermuteBackward0"
    with pytest.raises(RuntimeError, match="tensor.H is only supported on matrices"):
        _leaf(2, 3, 4).H
    with pytest.raises(RuntimeError, match="tensor.mH is only supported on matrices or batches of matrices. Got 1-D"):
        _leaf(3).mH
    z = jg.tensor(np.array([[1 + 2j, 3j]]), requires_grad=True)
    np.testing.assert_array_equal(z.H.detach().resolve_conj().numpy(), np.array([[1 - 2j], [-3j]]))
    assert jg.autograd.gradcheck(lambda t: t.t() * 2, (jg.tensor(np.ones((2, 3)), requires_grad=True),))


@pytest.mark.parametrize("f, tree", [
    (lambda a: 1 - a, ("RsubBackward1", [AT])), (lambda a: a - 1, ("SubBackward0", [AT, None])),
    (lambda a: a ** 2, ("PowBackward0", [AT])), (lambda a: 2 ** a, ("PowBackward2", [AT])),
    (lambda a: a ** a, ("PowBackward1", [AT, AT])), (lambda a: 1 + a, ("AddBackward0", [AT, None])),
    (lambda a: 2 * a, ("MulBackward0", [AT, None])), (lambda a: jg.rsub(a, 2.0), ("RsubBackward1", [AT])),
    (lambda a: jg.rsub(a, a * 1), ("RsubBackward0", [AT, ("MulBackward0", [AT, None])])),
])
def test_scalar_overloads_have_pytorchs_edges(f, tree):
    a = _leaf(3)
    y = f(a)
    assert _tree(y.grad_fn) == tree
    assert jg.autograd.gradcheck(f, (jg.tensor(np.array([0.5, 1.5, 2.0]), requires_grad=True),))


class _Net(nn.Module):
    """The 60-minute blitz's LeNet."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = jg.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


# what PyTorch 2.13 prints for the blitz's walk (checked against it in the torch-marked test below)
BLITZ_CHAIN = ["MseLossBackward0", "AddmmBackward0", "AccumulateGrad"]
BLITZ_EDGES = ["AccumulateGrad", "ReluBackward0", "TBackward0"]


def _blitz(lib):
    lib.manual_seed(0)
    net = _Net() if lib is jg else _torch_net(lib)
    out = net(lib.randn(1, 1, 32, 32))
    loss = lib.nn.MSELoss()(out, lib.randn(10).view(1, -1))
    fn, chain = loss.grad_fn, []
    while fn is not None:
        chain.append(type(fn).__name__)
        fn = fn.next_functions[0][0] if fn.next_functions else None
    addmm = loss.grad_fn.next_functions[0][0]
    return chain, [type(nf).__name__ for nf, _ in addmm.next_functions], \
        type(addmm.next_functions[1][0].next_functions[0][0]).__name__


def test_blitz_walks_next_functions_as_in_pytorch():
    chain, edges, below_relu = _blitz(jg)
    assert chain == BLITZ_CHAIN and edges == BLITZ_EDGES and below_relu == "AddmmBackward0"


def _torch_net(torch):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(1, 6, 5)
            self.conv2 = torch.nn.Conv2d(6, 16, 5)
            self.fc1 = torch.nn.Linear(16 * 5 * 5, 120)
            self.fc2 = torch.nn.Linear(120, 84)
            self.fc3 = torch.nn.Linear(84, 10)

        def forward(self, x):
            TF = torch.nn.functional
            x = TF.max_pool2d(TF.relu(self.conv1(x)), (2, 2))
            x = TF.max_pool2d(TF.relu(self.conv2(x)), 2)
            x = torch.flatten(x, 1)
            x = TF.relu(self.fc1(x))
            x = TF.relu(self.fc2(x))
            return self.fc3(x)
    return Net()


@pytest.mark.torch
def test_blitz_walk_and_structures_match_pytorch():
    torch = pytest.importorskip("torch")
    assert _blitz(torch) == _blitz(jg)
    for lib_f in [lambda L, x, w, b: L.nn.functional.linear(x, w, b), lambda L, x, w, b: L.nn.functional.linear(x, w),
                  lambda L, x, w, b: L.nn.functional.linear(x.reshape(2, 1, 4), w, b),
                  lambda L, x, w, b: x.split(2, 1)[1], lambda L, x, w, b: x.unbind(0)[1],
                  lambda L, x, w, b: x.split([1, 3], 1)[0], lambda L, x, w, b: 1 - w, lambda L, x, w, b: 2 ** w,
                  lambda L, x, w, b: L.rsub(w, b.unsqueeze(1), alpha=2)]:
        trees = []
        for L in (torch, jg):
            x = L.ones(2, 4, requires_grad=True) * 1
            w, b = L.ones(3, 4, requires_grad=True), L.ones(3, requires_grad=True)
            trees.append(_tree(lib_f(L, x, w, b).grad_fn))
        assert trees[0] == trees[1]
