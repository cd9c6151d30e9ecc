"""What the generated op tests can't express for the sorting, selection, scan, special, linalg, padding,
resampling and fold ops: named-tuple returns, PyTorch's error messages, tie order and stability,
unique's options, einsum equations, second derivatives (gradgradcheck), in-place and view semantics,
and the nn.functional / nn forms, side by side with PyTorch where it is installed."""
import re

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck, gradgradcheck

F = jg.nn.functional


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def T(a, grad=False):
    return jg.tensor(np.asarray(a), requires_grad=grad)


def both(torch, fn, *arrays, grads=True):
    """fn run on jitgrad and on torch tensors made from ``arrays``: values (and input gradients of the sum
    of float outputs) compared."""
    def run(lib, make):
        xs = [make(a) for a in arrays]
        out = fn(lib, *xs)
        outs = list(out) if isinstance(out, tuple) else [out]
        vals = [o.detach().numpy() for o in outs]
        floats = [o for o in outs if o.dtype in (lib.float32, lib.float64) and o.requires_grad]
        gs = []
        if grads and floats:
            sum(o.sum() for o in floats).backward()
            gs = [x.grad.numpy() for x in xs if x.requires_grad]
        return vals, gs
    fl = lambda a: np.asarray(a).dtype.kind == "f"  # noqa: E731
    jv, jgs = run(jg, lambda a: jg.tensor(np.asarray(a), requires_grad=fl(a)))
    tv, tgs = run(torch, lambda a: torch.tensor(np.asarray(a), requires_grad=fl(a)))
    assert len(jv) == len(tv)
    for a, b in zip(jv, tv):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-12, equal_nan=True)
    for a, b in zip(jgs, tgs):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-12)


def raises_like(torch, fn, *arrays):
    """jitgrad raises the exception class and message that torch raises."""
    with pytest.raises(Exception) as expected:
        fn(torch, *[torch.tensor(np.asarray(a)) for a in arrays])
    with pytest.raises(expected.type, match="^" + re.escape(str(expected.value).split("\n")[0])):
        fn(jg, *[jg.tensor(np.asarray(a)) for a in arrays])


def _f(lib):
    return lib.nn.functional


# ---------------------------------------------------------------------- named tuples
@pytest.mark.parametrize("name,call", [("sort", lambda x: x.sort()), ("topk", lambda x: x.topk(2)),
                                       ("kthvalue", lambda x: x.kthvalue(2)), ("median", lambda x: x.median(1)),
                                       ("cummax", lambda x: x.cummax(1)), ("cummin", lambda x: jg.cummin(x, 0)),
                                       ("max", lambda x: x.max(1))])
def test_values_indices_named_tuples(name, call):
    x = T([[3.0, 1.0, 2.0], [0.5, 4.0, 4.0]])
    out = call(x)
    values, indices = out
    assert out.values is values and out.indices is indices and indices.dtype is jg.int64
    assert repr(out).startswith("jitgrad.return_types.%s(\nvalues=" % name)


# ---------------------------------------------------------------------- sort, topk and order statistics vs torch
def test_sort_is_stable_both_ways_with_ties_and_nan(torch):
    ints = np.array([[3, 1, 3, 1, 2, 3, 1], [0, 0, 0, 1, 1, 0, 1]])
    floats = np.array([2.0, np.nan, 1.0, 2.0, -np.inf, np.nan, 1.0, np.inf])
    for x in (ints, floats, ints.astype(bool)):
        for desc in (False, True):
            both(torch, lambda L, t: L.sort(t, descending=desc, stable=True), x)
            both(torch, lambda L, t: L.argsort(t, dim=0 if t.ndim == 1 else 1, descending=desc, stable=True), x)
    both(torch, lambda L, t: t.sort(0, True), np.random.default_rng(0).standard_normal((4, 3)))


EDGES = np.array([-2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, 1e30, np.inf, -np.inf, np.nan])
INVERSE_AND_LOGS = {"asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
                    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "log2": np.log2, "log10": np.log10,
                    "exp2": np.exp2, "isinf": np.isinf, "isposinf": np.isposinf, "isneginf": np.isneginf,
                    "isfinite": np.isfinite}


@pytest.mark.parametrize("name", sorted(INVERSE_AND_LOGS))
def test_inverse_trig_logs_and_predicates_at_their_edges(name):
    """Poles, domain edges, infinities, NaN and signed zeros: NumPy's values (NaN outside a domain, no error),
    in float32 and float64; integers and bools compute in the default float dtype (predicates give bool)."""
    with np.errstate(all="ignore"):
        for dt in (np.float32, np.float64):
            got = getattr(jg, name)(T(EDGES.astype(dt))).numpy()
            want = INVERSE_AND_LOGS[name](EDGES.astype(dt))
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=2e-7 if dt == np.float32 else 1e-15, equal_nan=True)
        for x in (np.array([-3, 0, 1, 5]), np.array([True, False])):
            got = getattr(jg, name)(T(x))
            assert got.dtype == (jg.bool if name.startswith("is") else jg.float32)
            np.testing.assert_allclose(got.numpy(), INVERSE_AND_LOGS[name](x.astype(np.float32)), rtol=2e-7,
                                       equal_nan=True)


@pytest.mark.parametrize("name", sorted(INVERSE_AND_LOGS))
def test_inverse_trig_logs_and_predicates_match_torch(name, torch):
    x = np.concatenate([EDGES, np.random.default_rng(3).uniform(-0.99, 0.99, 8)])
    both(torch, lambda L, t: getattr(L, name)(t), x, grads=False)
    if not name.startswith("is"):
        inside = np.random.default_rng(4).uniform(1.1, 2.0, 6) if name == "acosh" else \
            np.random.default_rng(4).uniform(0.1, 0.9, 6)
        both(torch, lambda L, t: getattr(t, name)() * 2, inside)  # values and gradients
        alias = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh", "acosh": "arccosh",
                 "atanh": "arctanh"}.get(name)
        if alias:
            both(torch, lambda L, t: getattr(L, alias)(t) + getattr(t, alias)(), inside)


@pytest.mark.parametrize("kind", ["distinct", "ties in some rows", "nan and signed zeros", "ints", "bools"])
def test_sort_and_topk_match_a_stable_sort_row_by_row(kind):
    """sort/topk take NumPy's fast (unstable) sort for the rows without ties and a stable sort for the rest:
    every row, either way, is ordered as one stable sort orders it (ties in their original order)."""
    from jitgrad.ops.sorting import stable_order
    rng = np.random.default_rng(7)
    x = rng.permutation(5 * 6 * 40).reshape(5, 6, 40).astype(np.float32) / 7
    if kind == "ties in some rows":
        x[1, 2, 5] = x[1, 2, 30]
        x[3, :, 0] = x[3, :, 1]
    elif kind == "nan and signed zeros":
        x[0, 0, :3] = np.nan
        x[2, 1, 4], x[2, 1, 9] = 0.0, -0.0
        x[4, 5, 7] = np.nan
    elif kind == "ints":
        x = rng.integers(0, 50, (5, 6, 40))
    elif kind == "bools":
        x = rng.integers(0, 2, (5, 6, 40)).astype(bool)
    for dim in (0, 1, 2):
        for desc in (False, True):
            order = stable_order(x, dim, desc)
            values, indices = jg.sort(T(x), dim, descending=desc)
            np.testing.assert_array_equal(indices.numpy(), order)
            np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, order, dim))
            if x.dtype != np.bool_:
                k = min(3, x.shape[dim])
                top = jg.topk(T(x), k, dim, largest=desc)
                first = np.take(order, range(k), axis=dim)
                np.testing.assert_array_equal(top.indices.numpy(), first)
                np.testing.assert_array_equal(top.values.numpy(), np.take_along_axis(x, first, dim))


def test_topk_values_and_gradients_match_torch(torch):
    x = np.random.default_rng(1).standard_normal((3, 6))
    for kw in ({}, {"largest": False}, {"dim": 0}, {"dim": 0, "largest": False, "sorted": True}):
        both(torch, lambda L, t: L.topk(t, 2, **kw), x)
    # ties: the values agree with torch and the indices name equal values
    v, i = jg.topk(T([1.0, 3.0, 3.0, 2.0]), 2)
    assert v.tolist() == [3.0, 3.0] and sorted(i.tolist()) == [1, 2]


def test_kthvalue_median_match_torch(torch):
    x = np.random.default_rng(2).standard_normal((3, 5))
    both(torch, lambda L, t: L.kthvalue(t, 2), x)
    both(torch, lambda L, t: t.kthvalue(3, 0, True), x)
    both(torch, lambda L, t: L.median(t, 1), x)
    both(torch, lambda L, t: t.median(0, keepdim=True), x)
    both(torch, lambda L, t: t.median(), x)  # the lower median
    both(torch, lambda L, t: t.median(), np.arange(6.0))
    both(torch, lambda L, t: t.median(), np.array([1.0, np.nan, 0.0]), grads=False)
    both(torch, lambda L, t: t.median(1), np.array([[1.0, np.nan, 0.0, np.nan], [1.0, 2.0, 3.0, 4.0]]), grads=False)
    both(torch, lambda L, t: t.median(), np.array([[3, 1], [2, 5]]))
    assert np.isnan(jg.tensor([]).median().item())
    # ties split evenly among equal elements for median() (PyTorch's evenly_distribute_backward)
    x = T([2.0, 1.0, 2.0, 3.0], True)
    x.median().backward()
    assert x.grad.tolist() == [0.5, 0.0, 0.5, 0.0]


def test_order_errors_match_torch(torch):
    x = np.arange(6.0).reshape(2, 3)
    raises_like(torch, lambda L, t: t.topk(4), x)
    raises_like(torch, lambda L, t: t.kthvalue(4), x)
    raises_like(torch, lambda L, t: t.kthvalue(0), x)
    raises_like(torch, lambda L, t: L.zeros(0, 3).median(0), x)
    raises_like(torch, lambda L, t: t.bool().topk(1), x)
    raises_like(torch, lambda L, t: t.bool().median(), x)


# ---------------------------------------------------------------------- unique
@pytest.mark.parametrize("kw", [{}, {"sorted": False, "return_inverse": True}, {"return_inverse": True}, {"return_counts": True},
                                {"return_inverse": True, "return_counts": True}, {"sorted": True, "dim": 0},
                                {"dim": 1, "return_inverse": True, "return_counts": True}])
def test_unique_options_match_torch(torch, kw):
    x = np.array([[3, 1, 3], [1, 1, 2], [3, 1, 3]])
    both(torch, lambda L, t: L.unique(t, **kw), x)
    both(torch, lambda L, t: t.float().unique(**kw), x, grads=False)


def test_unique_of_a_scalar_and_empty(torch):
    both(torch, lambda L, t: L.unique(t, return_inverse=True, return_counts=True), np.array(5))
    both(torch, lambda L, t: L.unique(t, return_inverse=True), np.zeros(0), grads=False)


# ---------------------------------------------------------------------- scans
def test_cumprod_gradient_at_zeros_matches_torch(torch):
    x = np.array([[0.5, 0.0, 2.0, 0.0, 1.5], [1.5, -1.0, 0.0, 3.0, 0.5], [0.0, 2.0, 1.0, -1.0, 0.0],
                  [1.0, 2.0, 3.0, 4.0, 0.0]])
    both(torch, lambda L, t: L.cumprod(t, 1) * L.arange(1, 6, dtype=t.dtype), x)
    both(torch, lambda L, t: t.cumprod(0), x)
    xt = T(x, True)
    assert gradcheck(lambda t: t.cumprod(1), (xt,))
    assert gradgradcheck(lambda t: t.cumprod(1), (T(np.random.default_rng(3).uniform(0.5, 1.5, (2, 4)), True),))


def test_cummax_cummin_indices_match_torch(torch):
    x = np.array([1.0, 3.0, 3.0, 2.0, np.nan, 5.0, np.nan])
    both(torch, lambda L, t: L.cummax(t, 0), x, grads=False)
    both(torch, lambda L, t: L.cummin(t, 0), x, grads=False)
    both(torch, lambda L, t: L.cummin(t, 0), np.array([1, 3, 1, 0]))
    both(torch, lambda L, t: t.cummax(1), np.random.default_rng(4).standard_normal((3, 5)))
    assert jg.cumprod(T([True, True]), 0).dtype is jg.int64 and jg.cumprod(T([1, 2]), 0, dtype=jg.float64).dtype is jg.float64


# ---------------------------------------------------------------------- selections
def test_tril_triu_in_place_and_errors(torch):
    x = np.arange(12.0).reshape(3, 4)
    for k in (-1, 0, 2):
        both(torch, lambda L, t: (t.tril(k), L.triu(t, k)), x)
    t = T(x)
    assert t.tril_().tolist() == np.tril(x).tolist() and t.triu_(1).abs().sum().item() == 0
    raises_like(torch, lambda L, t: t.tril(), np.arange(3.0))
    assert jg.tensor(x, requires_grad=True).tril().grad_fn.name() == "TrilBackward0"


def test_roll_diag_diagonal_masked_select_match_torch(torch):
    x = np.random.default_rng(5).standard_normal((3, 4))
    both(torch, lambda L, t: L.roll(t, 1), x)
    both(torch, lambda L, t: t.roll((1, -2), (0, 1)), x)
    both(torch, lambda L, t: (L.diag(t), L.diag(t, 1), L.diag(t[0], -1)), x)
    both(torch, lambda L, t: (t.diagonal(), t.diagonal(-1), L.diagonal(t.reshape(1, 3, 4), 1, 1, 2)), x)
    both(torch, lambda L, t: L.masked_select(t, t > 0), x)
    both(torch, lambda L, t: t.masked_select(L.tensor([True, False, True, True])), x)
    raises_like(torch, lambda L, t: t.roll((1, 2), 0), x)
    raises_like(torch, lambda L, t: L.diag(t.reshape(1, 3, 4)), x)
    raises_like(torch, lambda L, t: t.diagonal(0, 1, 1), x)


def test_diagonal_is_a_writable_view():
    x = jg.zeros(3, 3)
    d = x.diagonal()
    d.add_(1.0)
    assert x.tolist() == np.eye(3).tolist() and x._version == d._version == 1
    y = jg.ones(2, 3, requires_grad=True)
    z = y * 2
    z.diagonal(1).mul_(3.0)  # an in-place change through the view is part of z's graph
    z.sum().backward()
    assert y.grad.tolist() == [[2.0, 6.0, 2.0], [2.0, 2.0, 6.0]]


def test_bincount_matches_torch(torch):
    x = np.array([1, 4, 1, 0, 4, 4])
    both(torch, lambda L, t: L.bincount(t), x)
    both(torch, lambda L, t: L.bincount(t, minlength=8), x)
    both(torch, lambda L, t: t.bincount(L.tensor([0.5, 1.0, 2.0, 0.0, 1.0, 1.0]), 3), x, grads=False)
    both(torch, lambda L, t: t.bincount(L.tensor([1, 2, 3, 4, 5, 6])), x)
    raises_like(torch, lambda L, t: L.bincount(t - 2), x)
    raises_like(torch, lambda L, t: L.bincount(t.reshape(2, 3)), x)
    raises_like(torch, lambda L, t: L.bincount(t.float()), x)
    raises_like(torch, lambda L, t: L.bincount(t, minlength=-1), x)
    raises_like(torch, lambda L, t: L.bincount(t, L.ones(2)), x)
    raises_like(torch, lambda L, t: L.bincount(t.bool()), x)


def test_where_one_argument_and_nonzero(torch):
    x = np.array([[0.0, 1.5], [2.0, 0.0]])
    both(torch, lambda L, t: L.where(t != 0), x)
    both(torch, lambda L, t: L.nonzero(t, as_tuple=True), x)
    both(torch, lambda L, t: t.nonzero(), x)


def test_clamp_with_tensor_bounds_matches_torch(torch):
    x = np.array([1, 5, 9])
    both(torch, lambda L, t: L.clamp(t, L.tensor([2, 2, 2]), L.tensor([6, 6, 6])), x)
    both(torch, lambda L, t: t.clip(max=L.tensor(4)), x)
    both(torch, lambda L, t: t.clamp(min=L.tensor([2.5, 2.0, 2.0])), x)
    both(torch, lambda L, t: t.float().clamp(min=L.tensor([2.0, 2.0, 2.0], dtype=L.float64)), x)
    both(torch, lambda L, t: L.clamp(t, L.tensor([0.0, 6.0, 0.0]), L.tensor([3.0, 7.0, 8.5])), np.array([1.0, 5.0, 9.0]))


# ---------------------------------------------------------------------- special functions and activations
def test_special_functions_match_torch(torch):
    x = np.linspace(-0.99, 0.99, 9)
    both(torch, lambda L, t: (L.erfc(t), L.erfinv(t), t.erfinv().erf()), x)
    both(torch, lambda L, t: L.erfinv(t), np.array([-1.0, 1.0, 1.5, 0.0]), grads=False)
    both(torch, lambda L, t: L.logaddexp(t, t.flip(0)), x * 50)
    both(torch, lambda L, t: L.logaddexp(t, t), np.array([-np.inf, np.inf, 0.0]), grads=False)
    both(torch, lambda L, t: (L.lerp(t, t.flip(0), 0.3), t.lerp(t * 2, L.tensor(0.75)), L.lerp(t, t * 2, t)), x)
    raises_like(torch, lambda L, t: L.lerp(t, t, 0.5), np.array([1, 2]))
    raises_like(torch, lambda L, t: L.lerp(t, t.double(), 0.5), np.array([1.0, 2.0], dtype=np.float32))
    raises_like(torch, lambda L, t: L.logaddexp(t, 2), x)
    raises_like(torch, lambda L, t: L.logaddexp(t, t), np.array([1, 2]))


@pytest.mark.parametrize("name", ["hardswish", "hardsigmoid", "mish", "logsigmoid", "silu"])
def test_activations_match_torch(torch, name):
    x = np.array([-5.0, -3.0, -2.5, -0.3, 0.0, 0.4, 2.9, 3.0, 4.0, 30.0])
    both(torch, lambda L, t: getattr(_f(L), name)(t), x)
    raises_like(torch, lambda L, t: getattr(_f(L), name)(t), np.array([1, 2]))
    module = {"hardswish": "Hardswish", "hardsigmoid": "Hardsigmoid", "mish": "Mish", "logsigmoid": "LogSigmoid",
              "silu": "SiLU"}[name]
    both(torch, lambda L, t: getattr(L.nn, module)()(t), x)
    if name != "logsigmoid":  # PyTorch has no in-place log-sigmoid
        t = T(x)
        out = getattr(F, name)(t, inplace=True)
        assert out is t and np.allclose(t.numpy(), torch.nn.functional.__dict__[name](torch.tensor(x)).numpy())
    assert getattr(F, name)(T(x, True)).grad_fn.name() == type(
        getattr(torch.nn.functional, name)(torch.tensor(x, requires_grad=True)).grad_fn).__name__


def test_glu_matches_torch(torch):
    x = np.random.default_rng(6).standard_normal((2, 4, 6))
    for dim in (-1, 1, 0):
        both(torch, lambda L, t: _f(L).glu(t, dim), x)
    both(torch, lambda L, t: L.nn.GLU(1)(t), x)
    raises_like(torch, lambda L, t: _f(L).glu(t, 1), np.zeros((2, 3)))
    raises_like(torch, lambda L, t: _f(L).glu(t), np.array(1.0))
    raises_like(torch, lambda L, t: _f(L).glu(t), np.array([1, 2]))
    assert F.glu(jg.zeros(0, 4)).shape == (0, 2)


# ---------------------------------------------------------------------- addmm family, einsum, linear
def test_addmm_family_matches_torch(torch):
    r = np.random.default_rng(7).standard_normal
    both(torch, lambda L, c, a, b: (L.addmm(c, a, b), L.addmm(c, a, b, beta=0.5, alpha=-2)), r((2, 4)), r((2, 3)), r((3, 4)))
    both(torch, lambda L, c, a, b: L.baddbmm(c, a, b, alpha=0.5), r((1, 4)), r((2, 2, 3)), r((2, 3, 4)))
    both(torch, lambda L, c, a, b: L.addbmm(c, a, b, beta=2), r((2, 4)), r((3, 2, 3)), r((3, 3, 4)))
    both(torch, lambda L, c, a, b: c.addmv(a, b), r((2,)), r((2, 3)), r((3,)))
    # beta = 0 ignores the input, NaN included
    out = jg.addmm(T([[np.nan]]), T([[1.0, 2.0]]), T([[3.0], [4.0]]), beta=0)
    assert out.tolist() == [[11.0]]
    c = T(r((2, 4)))
    assert c.addmm_(T(r((2, 3))), T(r((3, 4)))) is c and c._version == 1
    raises_like(torch, lambda L, c, a, b: L.addmm(c, a, b), r((2, 4)), r((2, 3)), r((2, 4)))
    raises_like(torch, lambda L, c, a, b: L.baddbmm(c, a, b), r((2, 4)), r((2, 2, 3)), r((3, 3, 4)))


EINSUM = [("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
          ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]), ("i,i->", [(3,), (3,)]),
          ("i,j->ij", [(3,), (2,)]), ("...ij,...jk->...ik", [(2, 2, 3), (3, 4)]),
          ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
          ("iij->j", [(2, 2, 3)]), ("i...->...", [(2, 3, 4)]), ("ab,cd->abcd", [(2, 1), (1, 3)]),
          ("ijk,ik->j", [(2, 3, 4), (2, 4)]), ("i,i,i->i", [(3,), (3,), (3,)]), ("b i d, b j d -> b i j", [(2, 3, 2), (2, 4, 2)]),
          ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 4)])]


@pytest.mark.parametrize("eq,shapes", EINSUM)
def test_einsum_matches_torch_and_its_gradients_check(torch, eq, shapes):
    rng = np.random.default_rng(len(eq))
    xs = [rng.standard_normal(s) for s in shapes]
    both(torch, lambda L, *t: L.einsum(eq, *t), *xs)
    ts = [T(x, True) for x in xs]
    assert gradcheck(lambda *a: jg.einsum(eq, *a), ts)
    if len(xs) == 2:
        assert gradgradcheck(lambda *a: jg.einsum(eq, *a), ts)
    assert jg.einsum(eq, ts).shape == jg.einsum(eq, *ts).shape  # operands as one list


def test_einsum_errors_match_torch(torch):
    raises_like(torch, lambda L, a, b: L.einsum("ij,jk->ik", a), np.ones((2, 3)), np.ones((3, 4)))
    raises_like(torch, lambda L, a, b: L.einsum("ij->ik", a), np.ones((2, 3)), np.ones(1))
    raises_like(torch, lambda L, a, b: L.einsum("ijk->i", a), np.ones((2, 3)), np.ones(1))


def test_linear_records_torch_node_names(torch):
    names = []
    for lib in (jg, torch):
        x, w, b = lib.ones(2, 3, requires_grad=True), lib.ones(4, 3, requires_grad=True), lib.ones(4, requires_grad=True)
        f = lib.nn.functional.linear
        names.append([f(x, w, b).grad_fn.name(), f(x, w).grad_fn.name(), f(x[0], w, b).grad_fn.name(),
                      f(x[0], w, b).grad_fn.next_functions[0][0].name(), f(x.view(1, 2, 3), w, b).grad_fn.name(),
                      f(x.view(1, 2, 3), w, b).grad_fn.next_functions[0][0].name()])
    assert names[0] == names[1]


# ---------------------------------------------------------------------- padding, interpolation, fold
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape,pad", [((2, 5), (2, 1)), ((1, 2, 4), (3, 0)), ((2, 3, 4), (1, 2, 2, 1)),
                                       ((1, 2, 3, 4), (0, 3, 2, 2)), ((1, 2, 3, 3, 4), (1, 1, 2, 0, 1, 2)),
                                       ((2, 3, 3, 4), (1, 1, 1, 1, 2, 2)), ((1, 2, 4), (-1, 2))])
def test_pad_modes_match_torch(torch, mode, shape, pad):
    x = np.random.default_rng(8).standard_normal(shape)
    both(torch, lambda L, t: _f(L).pad(t, pad, mode=mode), x)
    assert gradgradcheck(lambda t: F.pad(t, pad, mode=mode), (T(x, True),))


def test_pad_errors_and_modules_match_torch(torch):
    x = np.ones((1, 2, 3))
    for mode in ("reflect", "replicate", "circular"):
        raises_like(torch, lambda L, t: _f(L).pad(t, (1, 1), mode=mode), np.ones(3))
        raises_like(torch, lambda L, t: _f(L).pad(t, (1, 1), mode=mode, value=1.0), x)
        raises_like(torch, lambda L, t: _f(L).pad(t, (1, 1, 1, 1, 1, 1), mode=mode), np.ones((1, 1, 2, 3, 3, 3)))
    raises_like(torch, lambda L, t: _f(L).pad(t, (3, 3), mode="reflect"), x)
    raises_like(torch, lambda L, t: _f(L).pad(t, (4, 1), mode="circular"), x)
    raises_like(torch, lambda L, t: _f(L).pad(t, (1, 1), mode="foo"), x)
    both(torch, lambda L, t: (L.nn.ReflectionPad1d(2)(t), L.nn.ReplicationPad2d((1, 0, 2, 1))(t),
                              L.nn.ZeroPad2d(1)(t), L.nn.ConstantPad1d((1, 2), 3.5)(t)), x)
    assert repr(jg.nn.ConstantPad1d((1, 2), 3.5)) == repr(torch.nn.ConstantPad1d((1, 2), 3.5))
    assert F.pad(T(x, True), (1, 1), mode="reflect").grad_fn.name() == "ReflectionPad1DBackward0"


@pytest.mark.parametrize("shape,kw", [((1, 2, 3, 4), {"size": (5, 7)}), ((1, 2, 3, 4), {"scale_factor": 1.5}),
                                      ((2, 2, 5), {"scale_factor": 1.7}), ((2, 2, 5), {"size": 8}),
                                      ((1, 1, 2, 3, 2), {"scale_factor": 2}),
                                      ((1, 2, 3, 4), {"size": (5, 7), "mode": "bilinear"}),
                                      ((1, 2, 6, 6), {"size": (3, 4), "mode": "bilinear"}),
                                      ((1, 2, 3, 4), {"scale_factor": (2.3, 0.6), "mode": "bilinear", "align_corners": True}),
                                      ((2, 2, 5), {"size": 9, "mode": "linear", "align_corners": False}),
                                      ((1, 1, 2, 3, 2), {"size": (3, 5, 4), "mode": "trilinear"}),
                                      ((1, 2, 3, 4), {"scale_factor": 1.7, "mode": "bilinear", "recompute_scale_factor": True}),
                                      ((2, 2, 5), {"scale_factor": 1.7, "mode": "nearest-exact"}),
                                      ((1, 2, 5, 4), {"size": (3, 7), "mode": "nearest-exact"}),
                                      ((1, 2, 5, 7), {"size": (3, 4), "mode": "area"})])
def test_interpolate_matches_torch(torch, shape, kw):
    x = np.random.default_rng(9).standard_normal(shape)
    both(torch, lambda L, t: _f(L).interpolate(t, **kw), x)
    assert gradgradcheck(lambda t: F.interpolate(t, **kw), (T(x, True),))


def test_interpolate_errors_and_upsample_match_torch(torch):
    x = np.ones((1, 2, 3, 4))
    raises_like(torch, lambda L, t: _f(L).interpolate(t, size=(5, 7), scale_factor=2), x)
    raises_like(torch, lambda L, t: _f(L).interpolate(t), x)
    raises_like(torch, lambda L, t: _f(L).interpolate(t, size=5, align_corners=True), x)
    raises_like(torch, lambda L, t: _f(L).interpolate(t[0], size=5, mode="bilinear"), x)
    raises_like(torch, lambda L, t: _f(L).interpolate(t, size=(5, 6, 7)), x)
    raises_like(torch, lambda L, t: _f(L).interpolate(t, size=5, mode="foo"), x)
    raises_like(torch, lambda L, t: _f(L).interpolate(t[0].long(), size=5), x)
    both(torch, lambda L, t: (L.nn.Upsample(scale_factor=2)(t), L.nn.Upsample(size=(4, 6), mode="bilinear",
                                                                                align_corners=True)(t)), x)
    for m in (lambda L: L.nn.Upsample(scale_factor=2), lambda L: L.nn.Upsample(size=3, mode="bilinear")):
        assert repr(m(jg)) == repr(m(torch))


@pytest.mark.parametrize("shape,args,kw", [((1, 2, 4, 4), (2,), {}), ((2, 3, 3), ((2, 1),), {"stride": (1, 2), "padding": 1}),
                                           ((1, 1, 5, 4), (2,), {"dilation": (2, 1), "padding": (0, 1), "stride": 2})])
def test_unfold_fold_match_torch(torch, shape, args, kw):
    x = np.random.default_rng(10).standard_normal(shape)
    both(torch, lambda L, t: _f(L).unfold(t, *args, **kw), x)
    cols = _f(torch).unfold(torch.tensor(x), *args, **kw).numpy()
    both(torch, lambda L, t: _f(L).fold(t, shape[-2:], *args, **kw), cols)
    both(torch, lambda L, t: L.nn.Fold(shape[-2:], *args, **kw)(L.nn.Unfold(*args, **kw)(t)), x)
    assert gradgradcheck(lambda t: F.unfold(t, *args, **kw), (T(x, True),))
    assert gradgradcheck(lambda t: F.fold(t, shape[-2:], *args, **kw), (T(cols, True),))


def test_fold_errors_match_torch(torch):
    raises_like(torch, lambda L, t: _f(L).unfold(t, 5), np.ones((1, 2, 4, 4)))
    raises_like(torch, lambda L, t: _f(L).fold(t, (3, 3), 1), np.ones((1, 1, 2, 2)))
    raises_like(torch, lambda L, t: _f(L).fold(t, (4, 4), 3), np.ones((1, 8, 9)))
    raises_like(torch, lambda L, t: _f(L).fold(t, (5, 5), 2), np.ones((1, 8, 9)))
    raises_like(torch, lambda L, t: _f(L).unfold(t, 1), np.ones((1, 1, 2, 2), dtype=np.int64))


# ---------------------------------------------------------------------- distances and normalisation
def test_normalize_cosine_similarity_pairwise_distance_match_torch(torch):
    r = np.random.default_rng(11).standard_normal
    a, b = r((3, 4)), r((3, 4))
    tiny = np.array([[1e-9, 2e-9], [1.0, 2.0]])
    both(torch, lambda L, x, y: _f(L).cosine_similarity(x, y), a, b)
    both(torch, lambda L, x, y: _f(L).cosine_similarity(x, y, dim=0, eps=1e-3), a, b)
    both(torch, lambda L, x, y: _f(L).cosine_similarity(x, y[0]), a, b)  # broadcast
    both(torch, lambda L, x, y: _f(L).cosine_similarity(x, y, 1, 1e-8), tiny, np.array([[3.0, 1.0], [0.5, 1.0]]))
    both(torch, lambda L, x, y: (_f(L).pairwise_distance(x, y), _f(L).pairwise_distance(x, y, 1, keepdim=True),
                                 _f(L).pairwise_distance(x[0], y[0], 3.0)), a, b)
    both(torch, lambda L, x, y: (_f(L).normalize(x), _f(L).normalize(x, 1, 0), _f(L).normalize(y * 1e-13)), a, b)
    both(torch, lambda L, x, y: (L.nn.CosineSimilarity(0)(x, y), L.nn.PairwiseDistance(1.0)(x, y)), a, b)
    raises_like(torch, lambda L, x, y: _f(L).cosine_similarity(x, y), np.array([1, 2]), np.array([1, 0]))
    for fn in (lambda x, y: F.cosine_similarity(x, y), lambda x, y: F.pairwise_distance(x, y),
               lambda x, y: F.normalize(x) * y):
        assert gradgradcheck(fn, (T(a, True), T(b, True)))


# ---------------------------------------------------------------------- second derivatives of the new entries
GRADGRAD = {
    "erfc": lambda x: jg.erfc(x), "erfinv": lambda x: jg.erfinv(x * 0.4), "logaddexp": lambda x: jg.logaddexp(x, x * x),
    "lerp": lambda x: jg.lerp(x, x.exp(), x.sigmoid()), "hardswish": lambda x: F.hardswish(x * 2),
    "hardsigmoid": lambda x: F.hardsigmoid(x) * x, "mish": lambda x: F.mish(x), "logsigmoid": lambda x: F.logsigmoid(x),
    "glu": lambda x: F.glu(x[:2], 0), "sort": lambda x: x.sort(1)[0] ** 2, "topk": lambda x: x.topk(2)[0] ** 2,
    "kthvalue": lambda x: x.kthvalue(2, 0)[0] ** 2, "median": lambda x: x.median(1)[0] ** 2 + x.median() ** 2,
    "cummax": lambda x: x.cummax(1)[0] ** 2, "cummin": lambda x: x.cummin(0)[0] ** 2,
    "tril": lambda x: x.tril(1) ** 2, "triu": lambda x: x.triu(-1) ** 2, "roll": lambda x: x.roll(1, 1) ** 2,
    "diag": lambda x: jg.diag(x, 1) ** 2, "diagonal": lambda x: x.diagonal(-1) ** 2,
    "masked_select": lambda x: x.masked_select(x > 0) ** 2,
    "addmm": lambda x: jg.addmm(x[0], x, x.t() @ x, beta=0.5) ** 2, "baddbmm": lambda x: jg.baddbmm(x, x[None], x.t()[None]) ** 2,
}


@pytest.mark.parametrize("name", sorted(GRADGRAD))
def test_gradgradcheck_of_new_entries(name):
    x = T(np.random.default_rng(12).uniform(-1.5, 1.5, (3, 3)) + np.arange(9).reshape(3, 3) * 0.01, True)
    assert gradgradcheck(GRADGRAD[name], (x,))


def test_node_names_match_torch(torch):
    x = np.random.default_rng(13).standard_normal((3, 4))
    calls = [lambda L, t: t.sort()[0], lambda L, t: t.topk(2)[0], lambda L, t: t.median(), lambda L, t: t.median(1)[0],
             lambda L, t: t.kthvalue(2)[0], lambda L, t: t.cumprod(1), lambda L, t: t.cummax(1)[0],
             lambda L, t: t.tril(), lambda L, t: t.roll(1), lambda L, t: t.diagonal(), lambda L, t: t.masked_select(t > 0),
             lambda L, t: L.lerp(t, t, 0.3), lambda L, t: L.logaddexp(t, t), lambda L, t: L.erfinv(t * 0.1),
             lambda L, t: _f(L).glu(t), lambda L, t: L.addmm(t, t, L.eye(4, dtype=t.dtype)),
             lambda L, t: _f(L).interpolate(t[None, None], scale_factor=2),
             lambda L, t: _f(L).interpolate(t[None, None], scale_factor=2, mode="bilinear"),
             lambda L, t: _f(L).pad(t[None], (1, 1), mode="replicate"), lambda L, t: _f(L).unfold(t[None, None], 2),
             lambda L, t: _f(L).fold(t.reshape(1, 4, 3), (2, 4), 2)]
    for c in calls:
        a = c(jg, jg.tensor(x, requires_grad=True)).grad_fn.name()
        b = type(c(torch, torch.tensor(x, requires_grad=True)).grad_fn).__name__
        assert a == b, (a, b)


NAMES = ("erfc erfinv logaddexp lerp hardswish hardsigmoid mish logsigmoid glu sort argsort msort topk kthvalue median "
         "unique cumprod cummax cummin tril triu roll diag diagonal masked_select bincount addmm baddbmm addbmm addmv "
         "einsum where nonzero clamp clip").split()


@pytest.mark.parametrize("name", NAMES)
def test_exposure_matches_torch(torch, name):
    """jitgrad.<name>, Tensor.<name>, Tensor.<name>_ and F.<name> exist exactly where PyTorch has them (the
    activations' in-place forms are reached through F.<name>(x, inplace=True))."""
    assert hasattr(jg, name) == hasattr(torch, name), name
    assert hasattr(jg.Tensor, name) == hasattr(torch.Tensor, name), name
    if name not in ("hardswish", "hardsigmoid", "mish"):
        assert hasattr(jg.Tensor, name + "_") == hasattr(torch.Tensor, name + "_"), name
    assert hasattr(F, name) == hasattr(torch.nn.functional, name), name


def test_in_place_forms_match_torch(torch):
    x = np.random.default_rng(14).uniform(-0.9, 0.9, (3, 3))
    for call in (lambda t: t.erfc_(), lambda t: t.erfinv_(), lambda t: t.lerp_(t * 2, 0.25), lambda t: t.cumprod_(1),
                 lambda t: t.tril_(-1), lambda t: t.triu_(1), lambda t: t.addmm_(t.t().clone(), t.clone(), beta=0.5),
                 lambda t: t.clamp_(-0.5, 0.5)):  # (addmm_: operands not aliasing the output, whose result
                                                  # PyTorch leaves to its GEMM's order of reads and writes)
        a, b = jg.tensor(x), torch.tensor(x)
        assert call(a) is a
        call(b)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("nd,padding", [(1, 2), (2, 1), (2, (1, 2)), (2, "same")])
def test_conv_padding_modes_match_torch(torch, mode, nd, padding):
    rng = np.random.default_rng(15)
    x = rng.standard_normal((2, 3) + (6,) * nd)
    conv = {1: "Conv1d", 2: "Conv2d"}[nd]
    tm = getattr(torch.nn, conv)(3, 4, 3, padding=padding, padding_mode=mode).double()
    jm = getattr(jg.nn, conv)(3, 4, 3, padding=padding, padding_mode=mode).double()
    with torch.no_grad():
        jm.weight.data = jg.tensor(tm.weight.numpy())
        jm.bias.data = jg.tensor(tm.bias.numpy())
    both(torch, lambda L, t: (jm if L is jg else tm)(t), x)
    assert repr(jm) == repr(tm)
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for ConvTranspose2d'):
        jg.nn.ConvTranspose2d(3, 4, 3, padding_mode=mode)


SCALAR_OVERLOADS = [(lambda a: 1 - a, "RsubBackward1"), (lambda a: a - 1, "SubBackward0"), (lambda a: a - a, "SubBackward0"),
                    (lambda a: a ** 2.5, "PowBackward0"), (lambda a: 2 ** a, "PowBackward2"), (lambda a: a ** a, "PowBackward1"),
                    (lambda a: a.pow(jg.tensor(1.5, dtype=a.dtype)), "PowBackward1"), (lambda a: jg.pow(2, a), "PowBackward2")]


@pytest.mark.parametrize("k", range(len(SCALAR_OVERLOADS)))
def test_binary_nodes_named_by_overload(k):
    """PyTorch names the node by the overload called: a Python number on either side changes it."""
    fn, name = SCALAR_OVERLOADS[k]
    a = jg.tensor([0.5, 1.5], dtype=jg.float64, requires_grad=True)
    assert fn(a).grad_fn.name() == name
    assert jg.autograd.gradcheck(fn, (a,))  # the renamed node runs the entry's own formulas


def test_binary_node_names_match_torch(torch):
    x = np.array([0.5, 1.5])
    for fn, _ in SCALAR_OVERLOADS[:-2]:
        a, b = fn(jg.tensor(x, requires_grad=True)), fn(torch.tensor(x, requires_grad=True))
        assert a.grad_fn.name() == b.grad_fn.name()
    assert np.allclose(jg.rsub(jg.tensor(x), 3, alpha=2).numpy(), torch.rsub(torch.tensor(x), 3, alpha=2).numpy())
