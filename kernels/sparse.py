"""Sparse-matrix kernels on index and value arrays: COO coalescing, COO <-> CSR, CSR times dense (SpMM), the
sampled product that gives a sparse operand's gradient (SDDMM), scatter to dense and segment softmax.

A COO tensor here is a (sparse_dim, nnz) int64 index array and an (nnz, *dense) value array; the kernels see
its coordinates flattened to one int64 key per entry (row-major over the sparse dims) and its values as
(nnz, K). A CSR matrix is (crow (rows + 1,), col (nnz,), values (nnz,)). Loops over rows or entries run
parallel above config.PARALLEL_THRESHOLD (each thread writes rows of its own, so both builds agree).
"""
import numpy as np
from numba import prange

from . import config
from ._jit import compiled, twins


def linear_keys(indices, sizes):
    """One int64 key per column of ``indices`` (sparse_dim, nnz): its row-major position in ``sizes``."""
    key = np.zeros(indices.shape[1], np.int64)
    for d, n in enumerate(sizes):
        key = key * n + indices[d]
    return key


def unravel_keys(keys, sizes):
    """The (len(sizes), nnz) indices of row-major keys (linear_keys' inverse)."""
    out = np.empty((len(sizes), keys.shape[0]), np.int64)
    for d in range(len(sizes) - 1, -1, -1):
        out[d] = keys % sizes[d] if sizes[d] else 0
        keys = keys // sizes[d] if sizes[d] else keys
    return out


def _merge_sorted(keys, order, values):
    """Entries taken in ``order`` (sorted by key): equal keys summed. Returns the unique keys, their summed
    values and, per input entry, the position of its key among the unique ones."""
    n = keys.shape[0]
    ukeys = np.empty(n, np.int64)
    uvals = np.zeros((n, values.shape[1]), values.dtype)
    where = np.empty(n, np.int64)
    m = -1
    last = 0
    for p in range(n):
        e = order[p]
        k = keys[e]
        if m < 0 or k != last:
            m += 1
            ukeys[m] = k
            last = k
        for j in range(values.shape[1]):
            uvals[m, j] += values[e, j]
        where[e] = m
    return ukeys[:m + 1], uvals[:m + 1], where


merge_sorted = compiled(_merge_sorted)


def coalesce(keys, values):
    """Sort entries by key and sum duplicates: (unique keys, values (u, K), position of each entry's key)."""
    order = np.argsort(keys, kind="stable")
    if values.dtype == np.bool_:  # (summing booleans is or-ing them, as PyTorch's coalesce does)
        k, v, w = merge_sorted(keys, order, values.astype(np.uint8))
        return k, v.astype(np.bool_), w
    return merge_sorted(keys, order, values)


def _row_pointers(rows, n_rows):
    """CSR row pointers of sorted row indices."""
    crow = np.zeros(n_rows + 1, np.int64)
    for p in range(rows.shape[0]):
        crow[rows[p] + 1] += 1
    for i in range(n_rows):
        crow[i + 1] += crow[i]
    return crow


row_pointers = compiled(_row_pointers)


def csr_rows(crow):
    """The row of each entry of a CSR matrix (CSR -> COO)."""
    return np.repeat(np.arange(crow.shape[0] - 1, dtype=np.int64), np.diff(crow))


def _transpose_csr(crow, col, n_cols):
    """The CSR pattern of the transpose: (its row pointers, its column indices, the entry each came from)."""
    nnz = col.shape[0]
    tcrow = np.zeros(n_cols + 1, np.int64)
    for p in range(nnz):
        tcrow[col[p] + 1] += 1
    for j in range(n_cols):
        tcrow[j + 1] += tcrow[j]
    fill = tcrow[:-1].copy()
    tcol = np.empty(nnz, np.int64)
    src = np.empty(nnz, np.int64)
    for i in range(crow.shape[0] - 1):
        for p in range(crow[i], crow[i + 1]):
            q = fill[col[p]]
            fill[col[p]] += 1
            tcol[q] = i
            src[q] = p
    return tcrow, tcol, src


transpose_csr = compiled(_transpose_csr)


def _spmm(crow, col, val, dense, out):
    """out = A @ dense for CSR A: one row of out per thread."""
    for i in prange(crow.shape[0] - 1):
        for j in range(out.shape[1]):
            out[i, j] = 0
        for p in range(crow[i], crow[i + 1]):
            v = val[p]
            c = col[p]
            for j in range(out.shape[1]):
                out[i, j] += v * dense[c, j]


_spmm_ser, _spmm_par = twins(_spmm)


def spmm(crow, col, val, dense):
    """CSR (n, k) times dense (k, m) -> dense (n, m) in the values' dtype."""
    out = np.empty((crow.shape[0] - 1, dense.shape[1]), val.dtype)
    kernel = _spmm_par if val.shape[0] * dense.shape[1] >= config.PARALLEL_THRESHOLD else _spmm_ser
    kernel(crow, col, val, np.ascontiguousarray(dense), out)
    return out


def _spgemm_count(acrow, acol, bcrow, bcol, n_cols):
    """Gustavson's SpGEMM, first pass: the row pointers of A @ B (the distinct columns each row reaches)."""
    n = acrow.shape[0] - 1
    crow = np.zeros(n + 1, np.int64)
    mark = np.full(n_cols, -1, np.int64)
    for i in range(n):
        k = 0
        for p in range(acrow[i], acrow[i + 1]):
            r = acol[p]
            for q in range(bcrow[r], bcrow[r + 1]):
                c = bcol[q]
                if mark[c] != i:
                    mark[c] = i
                    k += 1
        crow[i + 1] = crow[i] + k
    return crow


def _spgemm_fill(acrow, acol, aval, bcrow, bcol, bval, crow, col, val, n_cols):
    """Second pass: each row's sums in a dense accumulator, written out with the columns in order."""
    acc = np.zeros(n_cols, val.dtype)
    mark = np.full(n_cols, -1, np.int64)
    for i in range(acrow.shape[0] - 1):
        k = crow[i]
        for p in range(acrow[i], acrow[i + 1]):
            r = acol[p]
            v = aval[p]
            for q in range(bcrow[r], bcrow[r + 1]):
                c = bcol[q]
                if mark[c] != i:
                    mark[c] = i
                    col[k] = c
                    k += 1
                acc[c] += v * bval[q]
        row = col[crow[i]:k]
        row.sort()
        for t in range(crow[i], k):
            val[t] = acc[col[t]]
            acc[col[t]] = 0


spgemm_count = compiled(_spgemm_count)
spgemm_fill = compiled(_spgemm_fill)


def spgemm(acrow, acol, aval, bcrow, bcol, bval, n_cols):
    """CSR (n, k) times CSR (k, m) -> CSR (crow, col, values) of (n, m), columns sorted in each row; every
    product the patterns reach is an entry (explicit zeros included, as PyTorch's)."""
    crow = spgemm_count(acrow, acol, bcrow, bcol, n_cols)
    nnz = crow[-1]
    col = np.empty(nnz, np.int64)
    val = np.empty(nnz, np.result_type(aval.dtype, bval.dtype))
    spgemm_fill(acrow, acol, aval, bcrow, bcol, bval, crow, col, val, n_cols)
    return crow, col, val


def _sddmm(rows, cols, a, b, out):
    """out[p] = a[rows[p]] . b[cols[p]]: (a @ b.T) sampled at the entries of a sparsity pattern."""
    for p in prange(rows.shape[0]):
        s = out[p] * 0
        r, c = rows[p], cols[p]
        for j in range(a.shape[1]):
            s += a[r, j] * b[c, j]
        out[p] = s


# reassociation lets numba vectorize each dot product (a chain of dependent adds is 2-3x slower); the order it
# picks depends on the row length only (the loop writes no array), so every call gives the same bits
_sddmm_ser, _sddmm_par = twins(_sddmm, fastmath=config.FOLD_FASTMATH)


def sddmm(rows, cols, a, b):
    """(a @ b.T)[rows, cols] without forming the product."""
    out = np.zeros(rows.shape[0], np.result_type(a.dtype, b.dtype))
    kernel = _sddmm_par if rows.shape[0] * a.shape[1] >= config.PARALLEL_THRESHOLD else _sddmm_ser
    kernel(rows, cols, np.ascontiguousarray(a), np.ascontiguousarray(b), out)
    return out


def _scatter_add(out, keys, values):
    """out[keys[p]] += values[p] (rows of (n, K) arrays; keys may repeat)."""
    for p in range(keys.shape[0]):
        k = keys[p]
        for j in range(values.shape[1]):
            out[k, j] += values[p, j]


scatter_add = compiled(_scatter_add)


def to_dense(keys, values, n_sparse):
    """The dense (n_sparse, K) array of COO entries (duplicates summed)."""
    out = np.zeros((n_sparse, values.shape[1]), values.dtype)
    if values.dtype == np.bool_:
        np.logical_or.at(out, keys, values)  # (or-ed, as PyTorch sums booleans)
        return out
    scatter_add(out, keys, values)
    return out


def _segments(groups):
    """The order that sorts ``groups``, the start of each run of equal keys in it, and each sorted entry's run."""
    order = np.argsort(groups, kind="stable")
    g = groups[order]
    new = np.r_[True, g[1:] != g[:-1]]
    return order, np.flatnonzero(new), np.cumsum(new) - 1


def segment_softmax(groups, values, log):
    """Softmax (or log-softmax) of ``values`` (nnz, K) over the entries that share a group key (each of the K
    columns apart), the implicit zeros left out, as torch.sparse.softmax."""
    if groups.size == 0:
        return values.copy()
    order, starts, run = _segments(groups)
    v = values[order]
    shifted = v - np.maximum.reduceat(v, starts, axis=0)[run]
    e = np.exp(shifted)
    total = np.add.reduceat(e, starts, axis=0)[run]
    out = np.empty_like(values)
    out[order] = shifted - np.log(total) if log else e / total
    return out


def segment_sum(groups, values):
    """Per entry, the sum of ``values`` (nnz, K) over the entries sharing its group key."""
    if groups.size == 0:
        return values.copy()
    order, starts, run = _segments(groups)
    out = np.empty_like(values)
    out[order] = np.add.reduceat(values[order], starts, axis=0)[run]
    return out
