"""Sparse tensors (jitgrad.sparse): COO/CSR construction and conversion against NumPy/SciPy, the kernels against
scipy.sparse, ops and gradients against dense references and finite differences, gradient layouts, errors,
printing, and a 2-layer graph convolutional network; PyTorch comparisons are marked torch."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import jitgrad as jg
from jitgrad.autograd import gradcheck
from jitgrad.kernels import sparse as K

# A 3x3 pattern with a duplicate coordinate (0, 1) and entries out of order
IND = np.array([[0, 0, 1, 2, 2], [1, 1, 0, 2, 0]])
VAL = np.array([1.0, 2.0, 3.0, -1.5, 0.5])


def dense_of(ind, val, shape):
    return sp.coo_matrix((val, (ind[0], ind[1])), shape=shape).toarray()  # (duplicates summed)


def coo(values=VAL, requires_grad=False):
    v = jg.tensor(values, requires_grad=requires_grad)
    return jg.sparse_coo_tensor(jg.tensor(IND), v, (3, 3)), v


def rand_sparse(rng, n, m, density):
    a = sp.random(n, m, density=density, format="coo", random_state=rng, dtype=np.float64)
    return a, jg.sparse_coo_tensor(np.stack([a.row, a.col]).astype(np.int64), a.data, (n, m))


# ---------------------------------------------------------------------- construction, metadata, conversion
def test_coo_metadata_and_to_dense():
    s, _ = coo()
    assert s.layout is jg.sparse_coo and s.is_sparse and not s.is_sparse_csr
    assert (s.sparse_dim(), s.dense_dim(), s._nnz(), s.ndim, s.numel()) == (2, 0, 5, 2, 9)
    assert s.shape == (3, 3) and s.dtype is jg.float64 and s.device == jg.device("cpu")
    assert not s.is_coalesced() and s.stride() == (0, 0) and not s.is_contiguous()
    np.testing.assert_array_equal(s.to_dense().numpy(), dense_of(IND, VAL, (3, 3)))
    assert isinstance(s, jg.Tensor) and jg.is_tensor(s)
    assert jg.tensor([1.0]).layout is jg.strided and not jg.tensor([1.0]).is_sparse


def test_size_inferred_and_dense_dims():
    s = jg.sparse_coo_tensor([[0, 3], [1, 0]], [1.0, 2.0])
    assert s.shape == (4, 2)
    h = jg.sparse_coo_tensor(jg.tensor([[0, 2]]), jg.tensor([[1.0, 2.0], [3.0, 4.0]]), (3, 2))
    assert (h.sparse_dim(), h.dense_dim()) == (1, 1)
    np.testing.assert_array_equal(h.to_dense().numpy(), [[1, 2], [0, 0], [3, 4]])
    e = jg.sparse_coo_tensor(np.zeros((2, 0), np.int64), np.zeros(0), (2, 3))
    assert e._nnz() == 0 and e.to_dense().numpy().tolist() == [[0, 0, 0]] * 2


def test_coalesce_sorts_and_sums_duplicates():
    s, _ = coo()
    c = s.coalesce()
    assert c.is_coalesced() and c.coalesce() is c
    a = sp.coo_matrix((VAL, (IND[0], IND[1])), shape=(3, 3)).tocsr()
    a.sum_duplicates()
    rows = np.repeat(np.arange(3), np.diff(a.indptr))
    np.testing.assert_array_equal(c.indices().numpy(), np.stack([rows, a.indices]))
    np.testing.assert_array_equal(c.values().detach().numpy(), a.data)
    np.testing.assert_array_equal(s._indices().numpy(), IND)  # the raw entries stay as given
    assert jg.sparse_coo_tensor(IND, VAL, (3, 3), is_coalesced=True).is_coalesced()
    ints = jg.sparse_coo_tensor(IND, np.arange(5), (3, 3))
    assert ints.dtype is jg.int64 and ints.sum().item() == 10
    np.testing.assert_array_equal(ints.to_dense().numpy(), dense_of(IND, np.arange(5), (3, 3)))
    bools = jg.sparse_coo_tensor(IND, jg.tensor([False, True, False, True, False]), (3, 3))
    np.testing.assert_array_equal(bools.to_dense().numpy(), dense_of(IND, [0, 1, 0, 1, 0], (3, 3)) != 0)


def test_to_sparse_round_trips():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 5)) * (rng.random((4, 5)) < 0.4)
    s = jg.tensor(x).to_sparse()
    assert s.is_coalesced() and s._nnz() == np.count_nonzero(x)
    np.testing.assert_array_equal(s.to_dense().numpy(), x)
    h = jg.tensor(x).to_sparse(1)  # hybrid: a row is an entry when any of its elements is nonzero
    assert (h.sparse_dim(), h.dense_dim(), h._nnz()) == (1, 1, int((x != 0).any(1).sum()))
    np.testing.assert_array_equal(h.to_dense().numpy(), x)
    x3 = rng.standard_normal((2, 3, 4)) * (rng.random((2, 3, 4)) < 0.3)
    np.testing.assert_array_equal(jg.tensor(x3).to_sparse().to_dense().numpy(), x3)
    np.testing.assert_array_equal(jg.tensor(x3).to_sparse(2).to_dense().numpy(), x3)
    t = jg.tensor(x)
    assert t.to_dense() is t and t.sparse_dim() == 0 and t.dense_dim() == 2


def test_csr_against_scipy():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 4)) * (rng.random((5, 4)) < 0.5)
    c = jg.tensor(x).to_sparse_csr()
    ref = sp.csr_matrix(x)
    assert c.layout is jg.sparse_csr and c.is_sparse_csr and not c.is_sparse and c._nnz() == ref.nnz
    np.testing.assert_array_equal(c.crow_indices().numpy(), ref.indptr)
    np.testing.assert_array_equal(c.col_indices().numpy(), ref.indices)
    np.testing.assert_array_equal(c.values().detach().numpy(), ref.data)
    np.testing.assert_array_equal(c.to_dense().numpy(), x)
    s, _ = coo()
    np.testing.assert_array_equal(s.to_sparse_csr().to_dense().numpy(), dense_of(IND, VAL, (3, 3)))
    np.testing.assert_array_equal(s.to_sparse_csr().to_sparse().to_dense().numpy(), dense_of(IND, VAL, (3, 3)))
    m = jg.sparse_csr_tensor(ref.indptr, ref.indices, ref.data, (5, 4))
    np.testing.assert_array_equal(m.to_dense().numpy(), x)
    assert jg.sparse_csr_tensor([0, 1, 2], [0, 1], [1.0, 2.0]).shape == (2, 2)


# ---------------------------------------------------------------------- kernels against scipy.sparse
@pytest.mark.parametrize("shape", [(30, 20, 5), (300, 200, 300)])  # the second one runs the parallel build
def test_kernels_against_scipy(shape):
    n, k, m = shape
    rng = np.random.default_rng(3)
    a = sp.random(n, k, density=0.05, format="csr", random_state=rng)
    crow, col = a.indptr.astype(np.int64), a.indices.astype(np.int64)
    d, g = rng.standard_normal((k, m)), rng.standard_normal((n, m))
    np.testing.assert_allclose(K.spmm(crow, col, a.data, d), a @ d, rtol=1e-12, atol=1e-12)
    rows = K.csr_rows(crow)
    np.testing.assert_allclose(K.sddmm(rows, col, g, d), (g @ d.T)[rows, col], rtol=1e-12, atol=1e-12)
    tcrow, tcol, src = K.transpose_csr(crow, col, k)
    at = a.T.tocsr()
    np.testing.assert_array_equal(tcrow, at.indptr)
    np.testing.assert_array_equal(tcol, at.indices)
    np.testing.assert_allclose(K.spmm(tcrow, tcol, a.data[src], g), a.T @ g, rtol=1e-12, atol=1e-12)


def test_coalesce_kernel():
    keys = np.array([7, 2, 7, 0, 2])
    vals = np.arange(10.0).reshape(5, 2)
    u, v, where = K.coalesce(keys, vals)
    np.testing.assert_array_equal(u, [0, 2, 7])
    np.testing.assert_array_equal(v, [[6, 7], [10, 12], [4, 6]])
    np.testing.assert_array_equal(where, [2, 1, 2, 0, 1])
    np.testing.assert_array_equal(K.row_pointers(np.array([0, 0, 2]), 4), [0, 2, 2, 3, 3])


# ---------------------------------------------------------------------- ops against dense references
def test_products_against_dense():
    rng = np.random.default_rng(4)
    a, s = rand_sparse(rng, 40, 30, 0.1)
    d = rng.standard_normal((30, 6))
    ref = a.toarray() @ d
    dt = jg.tensor(d)
    for out in (jg.sparse.mm(s, dt), s @ dt, jg.mm(s, dt), jg.spmm(s, dt), jg.matmul(s, dt),
                jg.sparse.mm(s.to_sparse_csr(), dt), s.to_sparse_csr() @ dt):
        assert out.layout is jg.strided
        np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-12, atol=1e-12)
    w = rng.standard_normal((6, 40))
    np.testing.assert_allclose((jg.tensor(w) @ s).numpy(), w @ a.toarray(), rtol=1e-12, atol=1e-12)
    v = rng.standard_normal(30)
    np.testing.assert_allclose((s @ jg.tensor(v)).numpy(), a.toarray() @ v, rtol=1e-12, atol=1e-12)
    c = rng.standard_normal((40, 1))
    np.testing.assert_allclose(jg.sparse.addmm(jg.tensor(c), s, jg.tensor(d), beta=0.5, alpha=2.0).numpy(),
                               0.5 * c + 2.0 * ref, rtol=1e-12, atol=1e-12)


def test_elementwise_and_shape_ops():
    s, _ = coo()
    x = dense_of(IND, VAL, (3, 3))
    coo_, dense = jg.sparse_coo, jg.strided
    for out, ref, lay in ((s * 2, x * 2, coo_), (2 * s, x * 2, coo_), (s / 4, x / 4, coo_), (-s, -x, coo_),
                          (s + s * 3, 4 * x, coo_), (s - s / 2, x / 2, coo_), (jg.add(s, s, alpha=2), 3 * x, coo_),
                          (jg.ones(3, 3) + s, 1 + x, dense), (jg.ones(3, 3) - s, 1 - x, dense), (s.t(), x.T, coo_),
                          (s.transpose(0, 1), x.T, coo_), (s.double(), x, coo_), (s.clone(), x, coo_)):
        assert out.layout is lay
        np.testing.assert_allclose(out.to_dense().detach().numpy(), ref)
    x3 = np.arange(24.0).reshape(2, 3, 4) * (np.arange(24).reshape(2, 3, 4) % 3 == 0)
    np.testing.assert_array_equal(jg.tensor(x3).to_sparse().transpose(0, 2).to_dense().numpy(), x3.transpose(2, 1, 0))


@pytest.mark.parametrize("dims", [None, 0, 1, (0, 1), 2, (0, 2), (1, 2)])
def test_sum_against_numpy(dims):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 3, 2)) * (rng.random((4, 3, 1)) < 0.5)
    h = jg.tensor(x).to_sparse(2)  # hybrid: two sparse dims, one dense
    out = jg.sparse.sum(h) if dims is None else jg.sparse.sum(h, dims)
    np.testing.assert_allclose(out.to_dense().numpy(), x.sum(axis=dims), rtol=1e-12, atol=1e-12)
    s, _ = coo()
    assert s.sum().item() == pytest.approx(VAL.sum())
    np.testing.assert_allclose(s.sum(1).to_dense().numpy(), dense_of(IND, VAL, (3, 3)).sum(1))


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dim", [0, 1])
def test_softmax_against_dense(dim, log):
    s, _ = coo()
    c = s.coalesce()
    x = np.full((3, 3), -np.inf)
    x[tuple(c.indices().numpy())] = c.values().detach().numpy()
    e = np.exp(x - x.max(dim, keepdims=True))
    ref = e / e.sum(dim, keepdims=True)
    out = (jg.sparse.log_softmax if log else jg.sparse.softmax)(s, dim)
    assert out.layout is jg.sparse_coo
    got = out.values().detach().numpy()
    want = ref[tuple(c.indices().numpy())]
    np.testing.assert_allclose(got, np.log(want) if log else want, rtol=1e-12)


# ---------------------------------------------------------------------- gradients
def _gc(fn, *inputs):
    assert gradcheck(fn, inputs)


def test_gradcheck_products():
    rng = np.random.default_rng(6)
    v = jg.tensor(VAL, requires_grad=True)
    d = jg.tensor(rng.standard_normal((3, 2)), requires_grad=True)
    c = jg.tensor(rng.standard_normal((3, 1)), requires_grad=True)
    build = lambda v: jg.sparse_coo_tensor(IND, v, (3, 3))  # noqa: E731
    _gc(lambda v, d: jg.sparse.mm(build(v), d), v, d)
    _gc(lambda v, d: build(v) @ d, v, d)
    _gc(lambda v, d: d.t() @ build(v), v, d)
    _gc(lambda v, d: build(v) @ d[:, 0], v, d)
    _gc(lambda c, v, d: jg.sparse.addmm(c, build(v), d, beta=0.5, alpha=-2.0), c, v, d)
    _gc(lambda v, d: jg.sparse.mm(build(v).to_sparse_csr(), d), v, d)
    _gc(lambda v, d: build(v).to_sparse_csr() @ d, v, d)
    crow, col = np.array([0, 2, 2, 3]), np.array([0, 2, 1])
    _gc(lambda w, d: jg.sparse.mm(jg.sparse_csr_tensor(crow, col, w, (3, 3)), d), v[:3].detach().requires_grad_(), d)


def test_gradcheck_structure_ops():
    v = jg.tensor(VAL, requires_grad=True)
    build = lambda v: jg.sparse_coo_tensor(IND, v, (3, 3))  # noqa: E731
    w = jg.tensor(np.arange(9.0).reshape(3, 3) - 4)  # weights the dense result, so each entry's gradient differs
    _gc(lambda v: build(v).to_dense() * w, v)
    _gc(lambda v: build(v).coalesce().values() ** 2, v)
    _gc(lambda v: (build(v) * 3 + build(v) / 2 - build(v)).to_dense() * w, v)
    _gc(lambda v: (-build(v)).t().to_dense() * w, v)
    _gc(lambda v: jg.sparse.sum(build(v), 1).to_dense() ** 2, v)
    _gc(lambda v: jg.sparse.sum(build(v)) ** 2, v)
    _gc(lambda v: build(v).sum() ** 2, v)
    _gc(lambda v: (w + build(v)) ** 2, v)
    _gc(lambda v: jg.sparse.softmax(build(v), 1).to_dense() * w, v)
    _gc(lambda v: jg.sparse.log_softmax(build(v), 0).to_dense() * w, v)
    _gc(lambda v: build(v).to_sparse_csr().to_dense() * w, v)
    _gc(lambda v: build(v).double().to_dense() * w, v)
    h = jg.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    _gc(lambda h: jg.sparse.sum(jg.sparse_coo_tensor([[0, 2, 0]], h, (4, 2)), 0) ** 2, h)
    # (no zeros in x: to_sparse's pattern is where x is nonzero, and the gradient is masked to it, as in PyTorch)
    x = jg.tensor(np.array([[1.0, 0.5], [2.0, -3.0]]), requires_grad=True)
    _gc(lambda x: jg.sparse.mm(x.to_sparse(), w[:2, :2]), x)
    _gc(lambda x: x.to_sparse_csr() @ w[:2, :2], x)


def test_gradient_layouts():
    d = jg.tensor(np.ones((3, 2)), requires_grad=True)
    s = jg.sparse_coo_tensor(IND, VAL, (3, 3), requires_grad=True)
    jg.sparse.mm(s, d).sum().backward()  # torch.sparse.mm: sparse, on the (coalesced) pattern
    assert s.grad.layout is jg.sparse_coo and s.grad._nnz() == 4
    np.testing.assert_allclose(s.grad.to_dense().numpy(), (np.ones((3, 2)) @ np.ones((2, 3))) * (dense_of(
        IND, VAL, (3, 3)) != 0))
    s.grad = None
    (s @ d).sum().backward()  # mm / @: dense
    assert s.grad.layout is jg.strided
    np.testing.assert_allclose(s.grad.numpy(), np.full((3, 3), 2.0))
    s.grad = None
    s.to_dense().sum().backward()
    assert s.grad.layout is jg.sparse_coo
    s.sum().backward()  # sparse + dense gradients accumulate to a dense one
    assert s.grad.layout is jg.strided
    np.testing.assert_allclose(s.grad.numpy(), np.ones((3, 3)) + (dense_of(IND, VAL, (3, 3)) != 0))
    s.grad = None
    out = jg.sparse.mm(s, d) + jg.sparse.mm(s * 2, d)  # two sparse gradients in one backward: summed, sparse
    out.sum().backward()
    assert s.grad.layout is jg.sparse_coo
    np.testing.assert_allclose(s.grad.to_dense().numpy(), 6.0 * (dense_of(IND, VAL, (3, 3)) != 0))
    x = jg.tensor(np.eye(3), requires_grad=True)
    (x.to_sparse() @ d).sum().backward()
    assert x.grad.layout is jg.strided
    c = jg.tensor(np.eye(2)).to_sparse_csr().requires_grad_()
    jg.sparse.mm(c, d[:2]).sum().backward()
    assert c.grad.layout is jg.sparse_csr and c.grad.values().tolist() == [2.0, 2.0]


def test_gradients_of_duplicate_entries():
    s, v = coo(requires_grad=True)
    w = np.arange(9.0).reshape(3, 3)
    (s.to_dense() * jg.tensor(w)).sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), w[IND[0], IND[1]])  # each duplicate gets its coordinate's gradient


# ---------------------------------------------------------------------- errors
def test_errors():
    s, _ = coo()
    with pytest.raises(NotImplementedError, match="aten::exp' with arguments from the 'SparseCPU' backend"):
        s.exp()
    with pytest.raises(NotImplementedError, match="aten::exp' with arguments from the 'SparseCsrCPU' backend"):
        s.to_sparse_csr().exp()
    with pytest.raises(RuntimeError, match="Cannot get indices on an uncoalesced tensor"):
        s.indices()
    with pytest.raises(RuntimeError, match="Cannot get values on an uncoalesced tensor"):
        s.values()
    with pytest.raises(RuntimeError, match=r"add\(sparse, dense\) is not supported. Use add\(dense, sparse\)"):
        s + jg.ones(3, 3)
    with pytest.raises(TypeError, match="can't convert Sparse layout tensor to numpy"):
        s.numpy()
    with pytest.raises(RuntimeError, match="Cannot access data pointer"):
        s.data_ptr()
    with pytest.raises(RuntimeError, match="indices expected sparse coordinate tensor layout but got Strided"):
        jg.ones(2).indices()
    with pytest.raises(RuntimeError, match="crow_indices expected sparse row compressed tensor layout but got Sparse"):
        s.crow_indices()
    with pytest.raises(RuntimeError, match="found negative index -1 for dim 0"):
        jg.sparse_coo_tensor([[-1], [0]], [1.0], (2, 2))
    with pytest.raises(RuntimeError, match="size is inconsistent with indices: for dim 0, size is 2 but found index 5"):
        jg.sparse_coo_tensor([[5], [0]], [1.0], (2, 2))
    with pytest.raises(RuntimeError, match="indices and values must have same nnz"):
        jg.sparse_coo_tensor([[0, 1], [0, 1]], [1.0], (2, 2))
    with pytest.raises(RuntimeError, match=r"'len\(size\) == sparse_dim \+ dense_dim' is not satisfied"):
        jg.sparse_coo_tensor([[0], [0]], [1.0], (2,))
    with pytest.raises(RuntimeError, match="crow_indices\\[..., -1\\] == nnz"):
        jg.sparse_csr_tensor([0, 1, 3], [0, 1], [1.0, 2.0], (2, 2))
    with pytest.raises(RuntimeError, match="addmm: Argument #3 \\(dense\\): Expected dim 0 size 3, got 2"):
        jg.sparse.mm(s, jg.ones(2, 2, dtype=jg.float64))
    with pytest.raises(RuntimeError, match="addmm: computation on CPU is not implemented for Sparse \\+ Sparse @ SparseCsr"):
        jg.sparse.mm(s, s.to_sparse_csr())
    with pytest.raises(NotImplementedError, match="CPU tensors"):
        jg.sparse_coo_tensor(IND, VAL, (3, 3), device="cuda")
    with pytest.raises(RuntimeError, match="sparse transpose: transposed dimensions must be sparse"):
        jg.zeros(2, 3, 4).to_sparse(1).transpose(1, 2)


def test_copies_pickling_and_saving():
    import copy
    import io
    import pickle
    s = jg.sparse_coo_tensor(IND, VAL, (3, 3), requires_grad=True)
    for c in (copy.deepcopy(s), pickle.loads(pickle.dumps(s))):
        assert c.layout is jg.sparse_coo and c.requires_grad and c.is_leaf
        np.testing.assert_array_equal(c.detach().to_dense().numpy(), dense_of(IND, VAL, (3, 3)))
    d = s.detach()
    assert d.layout is jg.sparse_coo and not d.requires_grad and d._values()._data is s._values()._data
    with pytest.raises(NotImplementedError, match="can't save .* layout jitgrad.sparse_coo"):
        jg.save(s, io.BytesIO())


# ---------------------------------------------------------------------- printing
def test_repr():
    s = jg.sparse_coo_tensor([[0, 1], [2, 0]], [3.0, 4.0], (2, 3))
    assert repr(s) == ("tensor(indices=tensor([[0, 1],\n"
                       "                       [2, 0]]),\n"
                       "       values=tensor([3., 4.]),\n"
                       "       size=(2, 3), nnz=2, layout=jitgrad.sparse_coo)")
    e = jg.sparse_coo_tensor(np.zeros((2, 0), np.int64), jg.zeros(0), (2, 3))
    assert repr(e) == ("tensor(indices=tensor([], size=(2, 0)),\n"
                       "       values=tensor([], size=(0,)),\n"
                       "       size=(2, 3), nnz=0, layout=jitgrad.sparse_coo)")
    c = jg.tensor([[1.0, 0], [0, 2]]).to_sparse_csr()
    assert repr(c) == ("tensor(crow_indices=tensor([0, 1, 2]),\n"
                       "       col_indices=tensor([0, 1]),\n"
                       "       values=tensor([1., 2.]), size=(2, 2), nnz=2, layout=jitgrad.sparse_csr)")
    assert repr(s.requires_grad_() * 2).endswith("layout=jitgrad.sparse_coo, grad_fn=<MulBackward0>)")


# ---------------------------------------------------------------------- a real program: a graph convolutional network
GCN = """
def gcn_losses(torch, adj_indices, adj_values, n, x, y, w1, w2, steps, sparse):
    adj = torch.sparse_coo_tensor(adj_indices, adj_values, (n, n)).coalesce()
    if not sparse:
        adj = adj.to_dense()
    W1 = torch.nn.Parameter(torch.tensor(w1))
    W2 = torch.nn.Parameter(torch.tensor(w2))
    opt = torch.optim.SGD([W1, W2], lr=0.5)
    X, Y = torch.tensor(x), torch.tensor(y)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        h = torch.relu(torch.sparse.mm(adj, X @ W1) if sparse else adj @ (X @ W1))
        logits = adj @ (h @ W2)
        loss = torch.nn.functional.cross_entropy(logits, Y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
"""


def _gcn_problem(n=60, features=8, hidden=16, classes=3, seed=7):
    """A random graph with self-loops, normalized D^-1/2 (A + I) D^-1/2, with node features and labels."""
    rng = np.random.default_rng(seed)
    a = sp.random(n, n, density=0.05, random_state=rng, format="csr")
    a = ((a + a.T + sp.eye(n)) > 0).astype(np.float64)
    dinv = 1 / np.sqrt(np.asarray(a.sum(1)).ravel())
    norm = sp.diags(dinv) @ a @ sp.diags(dinv)
    norm = norm.tocoo()
    ind = np.stack([norm.row, norm.col]).astype(np.int64)
    x = rng.standard_normal((n, features))
    y = rng.integers(0, classes, n)
    w1 = rng.standard_normal((features, hidden)) * 0.3
    w2 = rng.standard_normal((hidden, classes)) * 0.3
    return ind, norm.data, n, x, y, w1, w2


def _gcn():
    ns = {}
    exec(GCN, ns)
    return ns["gcn_losses"]


def test_gcn_sparse_equals_dense_adjacency():
    losses = _gcn()
    problem = _gcn_problem()
    sparse = losses(jg, *problem, steps=5, sparse=True)
    dense = losses(jg, *problem, steps=5, sparse=False)
    np.testing.assert_allclose(sparse, dense, rtol=1e-12)
    assert sparse[-1] < sparse[0]


# ---------------------------------------------------------------------- PyTorch
def _torch():
    torch = pytest.importorskip("torch")
    warnings.filterwarnings("ignore", message="Sparse invariant checks")
    return torch


@pytest.mark.torch
def test_gcn_matches_pytorch():
    torch = _torch()
    losses = _gcn()
    problem = _gcn_problem()
    np.testing.assert_allclose(losses(jg, *problem, steps=5, sparse=True), losses(torch, *problem, steps=5,
                                                                                  sparse=True), rtol=1e-10)


CASES = {  # name -> f(lib, s, d): s a 3x3 COO tensor built from values requiring grad, d a dense (3, 2) leaf
    "sparse.mm": lambda t, s, d: t.sparse.mm(s, d),
    "matmul": lambda t, s, d: s @ d,
    "mm": lambda t, s, d: t.mm(s, d),
    "dense@sparse": lambda t, s, d: d.t() @ s,
    "mv": lambda t, s, d: s @ d[:, 0],
    "addmm": lambda t, s, d: t.sparse.addmm(d[:, :1] * 1, s, d, beta=0.5, alpha=2.0),
    "to_dense": lambda t, s, d: s.to_dense(),
    "values": lambda t, s, d: s.coalesce().values(),
    "sparse.sum dim": lambda t, s, d: t.sparse.sum(s, 0),
    "sparse.sum": lambda t, s, d: t.sparse.sum(s),
    "sum": lambda t, s, d: s.sum(),
    "mul t": lambda t, s, d: (s * 3).t(),
    "add": lambda t, s, d: s + s * 2,
    "sub div": lambda t, s, d: s - s / 2,
    "dense+sparse": lambda t, s, d: (d @ d.t()) + s,
    "softmax": lambda t, s, d: t.sparse.softmax(s, 1),
    "log_softmax": lambda t, s, d: t.sparse.log_softmax(s, 0),
    "csr @": lambda t, s, d: s.to_sparse_csr() @ d,
    "csr sparse.mm": lambda t, s, d: t.sparse.mm(s.to_sparse_csr(), d),
    "csr to_dense": lambda t, s, d: s.to_sparse_csr().to_dense(),
    "csr to coo": lambda t, s, d: s.to_sparse_csr().to_sparse(),
    "to_sparse @": lambda t, s, d: (d @ d.t()).to_sparse() @ d,
    "to_sparse sparse.mm": lambda t, s, d: t.sparse.mm((d @ d.t()).to_sparse(), d),
    "to_sparse_csr sparse.mm": lambda t, s, d: t.sparse.mm((d @ d.t()).to_sparse_csr(), d),
    "double": lambda t, s, d: s.double(),
}


def _layout_name(x):
    return str(x.layout).split(".")[-1]


@pytest.mark.torch
@pytest.mark.parametrize("case", sorted(CASES))
def test_values_grads_and_layouts_match_pytorch(case):
    torch = _torch()
    fn = CASES[case]
    rng = np.random.default_rng(8)
    d0, w = rng.standard_normal((3, 2)), None
    res = {}
    for lib in (jg, torch):
        v = lib.tensor(VAL, requires_grad=True)
        d = lib.tensor(d0, requires_grad=True)
        out = fn(lib, lib.sparse_coo_tensor(lib.tensor(IND), v, (3, 3)), d)
        dense = out.to_dense() if _layout_name(out) != "strided" else out
        w = rng.standard_normal(tuple(dense.shape)) if w is None else w
        (dense * lib.tensor(w)).sum().backward()
        res[lib] = (_layout_name(out), type(out.grad_fn).__name__, dense.detach().numpy(),
                    None if v.grad is None else v.grad.numpy(), None if d.grad is None else d.grad.numpy())
    (lj, nj, oj, vj, dj), (lt, nt, ot, vt, dt) = res[jg], res[torch]
    assert (lj, nj) == (lt, nt)
    np.testing.assert_allclose(oj, ot, rtol=1e-12, atol=1e-12)
    for a, b in ((vj, vt), (dj, dt)):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


LEAF_CASES = {  # name -> the loss of a sparse leaf s (3x3, duplicates) and a dense (3, 2) d
    "sparse.mm": lambda t, s, d: t.sparse.mm(s, d).pow(2).sum(),
    "matmul": lambda t, s, d: (s @ d).pow(2).sum(),
    "to_dense": lambda t, s, d: (s.to_dense() ** 2).sum(),
    "coalesce": lambda t, s, d: (s.coalesce().to_dense() ** 2).sum(),
    "sparse.sum dim": lambda t, s, d: (t.sparse.sum(s, 1).to_dense() ** 2).sum(),
    "sum": lambda t, s, d: s.sum(),
    "t": lambda t, s, d: (s.t().to_dense() * d.sum()).sum(),
    "softmax": lambda t, s, d: (t.sparse.softmax(s, 1).to_dense() ** 2).sum(),
}


@pytest.mark.torch
@pytest.mark.parametrize("case", sorted(LEAF_CASES))
def test_sparse_leaf_gradients_match_pytorch(case):
    torch = _torch()
    grads = {}
    for lib in (jg, torch):
        s = lib.sparse_coo_tensor(lib.tensor(IND), lib.tensor(VAL), (3, 3), requires_grad=True)
        d = lib.tensor(np.arange(6.0).reshape(3, 2))
        LEAF_CASES[case](lib, s, d).backward()
        g = s.grad
        grads[lib] = (_layout_name(g), (g.to_dense() if _layout_name(g) != "strided" else g).numpy())
    assert grads[jg][0] == grads[torch][0]
    np.testing.assert_allclose(grads[jg][1], grads[torch][1], rtol=1e-12)


@pytest.mark.torch
def test_repr_and_metadata_match_pytorch():
    torch = _torch()

    def norm(r):
        return " ".join(r.replace("torch.", "jitgrad.").split())
    for make in (lambda t: t.sparse_coo_tensor(t.tensor(IND), t.tensor(VAL), (3, 3)),
                 lambda t: t.sparse_coo_tensor(t.tensor(IND), t.tensor(VAL, dtype=t.float32), (3, 3)).coalesce(),
                 lambda t: t.sparse_coo_tensor(t.tensor(IND), t.tensor(VAL), (3, 3), requires_grad=True) * 2,
                 lambda t: t.tensor([[1.0, 0], [0, 2]]).to_sparse(1),
                 lambda t: t.tensor([[1.5, 0], [0, 2]]).to_sparse_csr(),
                 lambda t: t.sparse_coo_tensor(t.zeros(2, 0, dtype=t.int64), t.zeros(0), (2, 3))):
        a, b = make(jg), make(torch)
        assert norm(repr(a)) == norm(repr(b))
        assert (a.shape == b.shape, a.is_sparse, a.is_sparse_csr, a._nnz(), a.sparse_dim(), a.dense_dim()) == \
            (True, b.is_sparse, b.is_sparse_csr, b._nnz(), b.sparse_dim(), b.dense_dim())
        assert _layout_name(a) == _layout_name(b)
        if a.layout is jg.sparse_coo:
            assert a.stride() == b.stride()


@pytest.mark.torch
def test_errors_match_pytorch():
    torch = _torch()
    calls = [
        lambda t, s: s.indices(),
        lambda t, s: s.values(),
        lambda t, s: s + t.ones(3, 3, dtype=t.float64),
        lambda t, s: s.numpy(),
        lambda t, s: s.data_ptr(),
        lambda t, s: t.ones(2).indices(),
        lambda t, s: t.ones(2).is_coalesced(),
        lambda t, s: t.ones(2).coalesce(),
        lambda t, s: s.crow_indices(),
        lambda t, s: s.to_sparse_csr().indices(),
        lambda t, s: t.sparse_coo_tensor([[0, 1], [0, 1]], [1.0], (2, 2)),
        lambda t, s: t.sparse_coo_tensor([[0], [0]], [1.0], (2,)),
        lambda t, s: t.sparse_coo_tensor([[-1], [0]], [1.0], (2, 2), check_invariants=True),
        lambda t, s: t.sparse_coo_tensor([[5], [0]], [1.0], (2, 2), check_invariants=True),
        lambda t, s: t.sparse.mm(s, t.ones(2, 2, dtype=t.float64)),
        lambda t, s: s.to_sparse(1),
        lambda t, s: t.zeros(2, 3, 4).to_sparse(1).transpose(1, 2),
        lambda t, s: s.exp(),
    ]
    for call in calls:
        errors = []
        for lib in (jg, torch):
            with pytest.raises(Exception) as info:
                call(lib, lib.sparse_coo_tensor(lib.tensor(IND), lib.tensor(VAL), (3, 3)))
            errors.append(info.value)
        assert type(errors[0]) is type(errors[1])
        head = str(errors[1]).split(". This could")[0]  # (the backend error's long tail is PyTorch's own)
        assert str(errors[0]).startswith(head)
