"""Tensor layouts (``jitgrad.strided``, ``jitgrad.sparse_coo``, ``jitgrad.sparse_csr``) and what a sparse
tensor holds in place of an array (jitgrad/sparse/ builds sparse tensors; dispatch hands their ops there), and
the array of a lazy conjugate."""
import numpy as np


class layout:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "jitgrad." + self.name

    def __reduce__(self):  # (pickled by name: unpickling gives back the same object)
        return self.name


strided = layout("strided")
sparse_coo = layout("sparse_coo")
sparse_csr = layout("sparse_csr")
sparse_csc = layout("sparse_csc")


class SparseMeta:
    """A sparse tensor's ``_data``: the dense shape and dtype, which the code common to all tensors reads
    (shape, dim, numel, dtype, the engine's shape checks). It holds no values: dispatch sees its class and
    hands the op to jitgrad.sparse, and anything else that reaches for an array gets a clear error."""
    __slots__ = ("shape", "dtype", "ndim", "size", "layout")

    def __init__(self, shape, dtype, layout):
        self.shape, self.dtype, self.layout = tuple(shape), dtype, layout
        self.ndim = len(self.shape)
        n = 1
        for s in self.shape:
            n *= s
        self.size = n

    def __getattr__(self, name):
        if name.startswith("__"):  # (protocol lookups, NumPy's __array_interface__...: the attribute is absent)
            raise AttributeError(name)
        raise NotImplementedError("this operation is not supported on tensors with layout %r (it needs the "
                                  "tensor's strided array, '%s'): convert with to_dense() first" % (self.layout, name))


class ConjView(np.ndarray):
    """A complex tensor's lazy conjugate (PyTorch's conjugate bit): the ``_data`` of ``z.conj()``, a NumPy view of
    ``z``'s storage, whose values are the conjugates of what it stores. Shape views of it (NumPy's, which keep the
    subclass) stay lazy; dispatch hands every other op the resolved values (jitgrad/_conj.py), writes store the
    conjugate (_inplace._write). A real tensor's arrays are never of this class, so nothing on their paths checks
    for it beyond the class tests they already make."""
    __array_ufunc__ = None  # (NumPy math on the stored values would be the conjugates': resolve them first)

    def resolved(self):
        """The values it stands for, in an array of their own."""
        stored = self.view(np.ndarray)
        return np.conjugate(stored, out=np.empty_like(stored))  # (out: a 0-d one stays an array)


class NegView(np.ndarray):
    """A lazy negation (PyTorch's negative bit): the ``_data`` of ``z.conj().imag``, a NumPy view of the imaginary
    parts ``z`` stores, whose values are their negatives. It is handled as ConjView is (dispatch hands it to
    conj_dispatch: shape views stay lazy, other ops read the resolved values; writes store the negatives)."""
    __array_ufunc__ = None

    def resolved(self):
        stored = self.view(np.ndarray)
        return np.negative(stored, out=np.empty_like(stored))


LAZY = (ConjView, NegView)  # the array classes whose values are not the numbers they store
