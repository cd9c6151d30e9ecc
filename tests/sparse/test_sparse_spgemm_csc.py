"""sparse @ sparse (SpGEMM) and the CSC layout, against SciPy.sparse, finite differences and PyTorch."""
import numpy as np
import pytest
import scipy.sparse as sp

import jitgrad as jg
from jitgrad.kernels import sparse as K


def _random(shape, density, seed):
    m = sp.random(*shape, density=density, format="csr", random_state=seed, dtype=np.float64)
    return m.toarray()


@pytest.mark.parametrize("shapes, density", [(((7, 5), (5, 6)), 0.3), (((1, 4), (4, 1)), 0.8), (((6, 3), (3, 0)), 0.5),
                                             (((40, 30), (30, 50)), 0.05)])
def test_spgemm_kernel_against_scipy(shapes, density):
    a, b = sp.csr_matrix(_random(shapes[0], density, 1)), sp.csr_matrix(_random(shapes[1], density, 2))
    i64 = lambda m: (m.indptr.astype(np.int64), m.indices.astype(np.int64), m.data)  # noqa: E731
    crow, col, val = K.spgemm(*i64(a), *i64(b), shapes[1][1])
    c = sp.csr_matrix((val, col, crow), shape=(shapes[0][0], shapes[1][1]))
    np.testing.assert_allclose(c.toarray(), (a @ b).toarray(), rtol=1e-13, atol=1e-13)
    assert all(np.all(np.diff(col[crow[i]:crow[i + 1]]) > 0) for i in range(len(crow) - 1))  # sorted, no repeats


@pytest.mark.parametrize("layout", ["to_sparse", "to_sparse_csr", "to_sparse_csc"])
@pytest.mark.parametrize("op", ["sparse.mm", "@"])
def test_sparse_times_sparse_values_and_layout(layout, op):
    A, B = _random((5, 4), 0.4, 3), _random((4, 3), 0.5, 4)
    a, b = getattr(jg.tensor(A), layout)(), getattr(jg.tensor(B), layout)()
    c = jg.sparse.mm(a, b) if op == "sparse.mm" else a @ b
    expected = {"to_sparse": jg.sparse_coo, "to_sparse_csr": jg.sparse_csr,
                "to_sparse_csc": jg.sparse_csc if op == "sparse.mm" else jg.sparse_csr}[layout]
    assert c.layout is expected
    np.testing.assert_allclose(c.to_dense().numpy(), A @ B, rtol=1e-13)
    if c.layout is jg.sparse_coo:
        assert c.is_coalesced()


def _grads(layout, op):
    A, B = _random((4, 3), 0.5, 5), _random((3, 5), 0.5, 6)
    a = getattr(jg.tensor(A), layout)().requires_grad_()
    b = getattr(jg.tensor(B), layout)().requires_grad_()
    c = jg.sparse.mm(a, b) if op == "sparse.mm" else a @ b
    W = np.arange(20.0).reshape(4, 5)
    (c.to_dense() * jg.tensor(W)).sum().backward()
    return A, B, W, a.grad, b.grad


def test_sparse_mm_of_coo_matrices_gives_gradients_on_each_operands_pattern():
    A, B, W, ga, gb = _grads("to_sparse", "sparse.mm")
    assert type(ga).__name__ == "SparseTensor" and ga.layout is jg.sparse_coo
    # (dL/dC is W on C's pattern: to_dense's gradient keeps the result's pattern)
    G = W * ((A @ B) != 0)
    np.testing.assert_allclose(ga.to_dense().numpy(), (G @ B.T) * (A != 0), rtol=1e-13)
    np.testing.assert_allclose(gb.to_dense().numpy(), (A.T @ G) * (B != 0), rtol=1e-13)
    assert ga._nnz() == np.count_nonzero(A) and gb._nnz() == np.count_nonzero(B)


@pytest.mark.parametrize("layout", ["to_sparse", "to_sparse_csr"])
def test_mm_of_sparse_matrices_gives_the_whole_sparse_product_as_gradient(layout):
    A, B, W, ga, gb = _grads(layout, "@")
    G = W * ((A @ B) != 0)
    assert ga.layout is gb.layout is getattr(jg.zeros(1, 1), layout)().layout
    np.testing.assert_allclose(ga.to_dense().numpy(), G @ B.T, rtol=1e-13)
    np.testing.assert_allclose(gb.to_dense().numpy(), A.T @ G, rtol=1e-13)


def test_spgemm_gradient_to_the_values_by_finite_differences():
    ind_a, ind_b = np.array([[0, 0, 1, 2], [0, 2, 1, 0]]), np.array([[0, 1, 2, 2], [1, 0, 0, 1]])
    dense = jg.tensor(np.array([[1.0, -2.0], [0.5, 3.0]]))

    def f(va, vb):
        a = jg.sparse_coo_tensor(ind_a, va, (3, 3))
        b = jg.sparse_coo_tensor(ind_b, vb, (3, 2))
        return (jg.sparse.mm(a, b).to_dense() ** 2) @ dense

    va = jg.tensor(np.array([1.0, 2.0, 3.0, -1.0]), requires_grad=True)
    vb = jg.tensor(np.array([0.5, 4.0, 5.0, -6.0]), requires_grad=True)
    assert jg.autograd.gradcheck(f, (va, vb))
    assert jg.autograd.gradcheck(lambda va, vb: (jg.sparse_coo_tensor(ind_a, va, (3, 3)) @
                                                 jg.sparse_coo_tensor(ind_b, vb, (3, 2))).to_dense().exp(), (va, vb))


def test_spgemm_errors():
    a = jg.tensor(_random((2, 3), 0.6, 7)).to_sparse()
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x2\)"):
        jg.sparse.mm(a, jg.ones(4, 2, dtype=jg.float64).to_sparse())
    with pytest.raises(RuntimeError, match="not implemented for Sparse \\+ Sparse @ SparseCsr"):
        a @ jg.ones(3, 2, dtype=jg.float64).to_sparse_csr()
    with pytest.raises(RuntimeError, match="not implemented for SparseCsr \\+ SparseCsr @ Sparse"):
        a.to_sparse_csr() @ jg.ones(3, 2, dtype=jg.float64).to_sparse()


# ---------------------------------------------------------------------- CSC
D = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]])


def test_to_sparse_csc_holds_scipys_arrays():
    c = jg.tensor(D).to_sparse_csc()
    ref = sp.csc_matrix(D)
    assert c.layout is jg.sparse_csc and not c.is_sparse and not c.is_sparse_csr
    np.testing.assert_array_equal(c.ccol_indices().numpy(), ref.indptr)
    np.testing.assert_array_equal(c.row_indices().numpy(), ref.indices)
    np.testing.assert_array_equal(c.values().numpy(), ref.data)
    np.testing.assert_array_equal(c.to_dense().numpy(), D)
    assert jg.tensor(D).to_sparse(layout=jg.sparse_csc).layout is jg.sparse_csc
    for src in (jg.tensor(D).to_sparse(), jg.tensor(D).to_sparse_csr()):
        np.testing.assert_array_equal(src.to_sparse_csc().row_indices().numpy(), ref.indices)
    np.testing.assert_array_equal(c.to_sparse().to_dense().numpy(), D)
    np.testing.assert_array_equal(c.to_sparse_csr().crow_indices().numpy(), sp.csr_matrix(D).indptr)
    assert "ccol_indices=tensor([0, 1, 2, 3])" in repr(c) and "layout=jitgrad.sparse_csc" in repr(c)


def test_csc_transpose_is_csr_and_back():
    c = jg.tensor(D).to_sparse_csc()
    t = c.t()
    assert t.layout is jg.sparse_csr and t.shape == (3, 2)
    np.testing.assert_array_equal(t.to_dense().numpy(), D.T)
    assert t.t().layout is jg.sparse_csc


def test_sparse_csc_tensor_and_gradients():
    v = jg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    s = jg.sparse_csc_tensor([0, 1, 2, 3], [0, 1, 0], v, (2, 3))
    assert type(s.grad_fn).__name__ == "SparseCompressedTensorBackward0"
    ref = sp.csc_matrix((v.detach().numpy(), [0, 1, 0], [0, 1, 2, 3]), shape=(2, 3))
    np.testing.assert_array_equal(s.to_dense().detach().numpy(), ref.toarray())
    M = np.arange(6.0).reshape(3, 2)
    out = s @ jg.tensor(M)
    assert type(out.grad_fn).__name__ == "MmBackward0"
    np.testing.assert_allclose(out.detach().numpy(), ref @ M)
    assert jg.autograd.gradcheck(lambda v: jg.sparse_csc_tensor([0, 1, 2, 3], [0, 1, 0], v, (2, 3)) @ jg.tensor(M),
                                 (v,))
    np.testing.assert_allclose(jg.sparse.mm(s.detach(), jg.tensor(M)).numpy(), ref @ M)
    dense = jg.tensor(D, requires_grad=True)
    c = dense.to_sparse_csc()
    assert type(c.grad_fn).__name__ == "ToSparseCscBackward0"
    (c @ jg.ones(3, 2, dtype=jg.float64)).sum().backward()
    np.testing.assert_array_equal(dense.grad.numpy(), np.full((2, 3), 2.0))


def test_csc_errors():
    c = jg.tensor(D).to_sparse_csc()
    with pytest.raises(RuntimeError, match="crow_indices expected sparse row compressed tensor layout but got SparseCsc"):
        c.crow_indices()
    with pytest.raises(RuntimeError, match="ccol_indices expected sparse column compressed tensor layout but got Strided"):
        jg.tensor(D).ccol_indices()
    with pytest.raises(RuntimeError, match="indices expected sparse coordinate tensor layout but got SparseCsc"):
        c.indices()
    with pytest.raises(RuntimeError, match="ccol_indices\\[..., -1\\] == nnz"):
        jg.sparse_csc_tensor([0, 1, 2, 4], [0, 1, 0], [1.0, 2.0, 3.0], (2, 3))


@pytest.mark.torch
def test_spgemm_and_csc_match_pytorch():
    torch = pytest.importorskip("torch")
    A, B = _random((4, 3), 0.5, 8), _random((3, 5), 0.5, 9)
    for conv, op in [("to_sparse", "sparse.mm"), ("to_sparse", "@"), ("to_sparse_csr", "@")]:
        results = []
        for L in (torch, jg):
            a = getattr(L.tensor(A), conv)().requires_grad_()
            b = getattr(L.tensor(B), conv)().requires_grad_()
            c = L.sparse.mm(a, b) if op == "sparse.mm" else a @ b
            (c.to_dense() ** 2).sum().backward()
            results.append((type(c.grad_fn).__name__, str(c.layout).split(".")[1],
                            [np.asarray(t.to_dense().tolist()) for t in (c, a.grad, b.grad)]))
        assert results[0][:2] == results[1][:2], (conv, op)
        for ours, theirs in zip(results[1][2], results[0][2]):
            np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    for L in (torch, jg):
        c = L.tensor(D).to_sparse_csc()
        assert (c.ccol_indices().tolist(), c.row_indices().tolist(), c.values().tolist()) == \
            ([0, 1, 2, 3], [0, 1, 0], [1.0, 3.0, 2.0])
