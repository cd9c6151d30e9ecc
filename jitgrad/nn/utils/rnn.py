"""Packed sequences: PackedSequence, pack_padded_sequence, pad_packed_sequence, pad_sequence, pack_sequence.

A packed sequence stores the steps of a batch of sequences of different lengths one after another,
step t holding the ``batch_sizes[t]`` sequences still running, longest first. Packing and
unpacking are one gather each (index_select on the flattened steps), so gradients flow through them.
"""
from collections import namedtuple

import numpy as np

from ... import _factories as Fa
from ..._tensor import Tensor
from ...ops.join import cat, stack
from ...ops.layers import pad


class PackedSequence(namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """(data, batch_sizes, sorted_indices, unsorted_indices) as PyTorch's: see pack_padded_sequence."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = _invert(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        move = [t if t is None else t.to(data.device) for t in (self.sorted_indices, self.unsorted_indices)]
        return type(self)(data, self.batch_sizes, *move)

    def cuda(self, *args, **kwargs):
        return self.to("cuda")

    def cpu(self):
        return self.to("cpu")

    def double(self):
        return type(self)(self.data.double(), self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def float(self):
        return type(self)(self.data.float(), self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    @property
    def is_cuda(self):
        return self.data.is_cuda


def _invert(permutation):
    p = _lengths(permutation)
    inv = np.empty_like(p)
    inv[p] = np.arange(p.size)
    return _long(inv)


def _lengths(lengths):
    if isinstance(lengths, Tensor):
        return lengths.detach().cpu().numpy().astype(np.int64).reshape(-1)
    return np.asarray(lengths, dtype=np.int64).reshape(-1)


def _long(a):
    return Tensor._wrap(np.ascontiguousarray(a, dtype=np.int64))


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch (T, B, *) (or (B, T, *) with batch_first) of sequences of ``lengths``."""
    n = _lengths(lengths)
    batch = input.shape[0 if batch_first else 1]
    if n.size != batch:
        raise RuntimeError("Expected `len(lengths)` to be equal to batch_size, but got %d (batch_size=%d)"
                           % (n.size, batch))
    if enforce_sorted:
        if np.any(n[1:] > n[:-1]):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You "
                               "can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                               "sidestep this requirement if you do not need ONNX exportability.")
        sorted_indices = None
    else:
        order = np.argsort(-n, kind="stable")
        sorted_indices = _long(order)
        n = n[order]
        input = input.index_select(0 if batch_first else 1, sorted_indices.to(input.device))
    if n.size and n.min() <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' that is "
                           "<= 0")
    if batch_first:
        input = input.transpose(0, 1)
    T = input.shape[0]
    if n.size and n.max() > T:
        raise RuntimeError("pack_padded_sequence: a length (%d) exceeds the padded sequence length (%d)" % (n.max(), T))
    batch_sizes = np.array([(n > t).sum() for t in range(int(n.max()) if n.size else 0)], dtype=np.int64)
    rows = np.concatenate([t * batch + np.arange(bs) for t, bs in enumerate(batch_sizes)]) if batch_sizes.size else \
        np.zeros(0, np.int64)
    flat = input.reshape((T * batch,) + tuple(input.shape[2:]))
    data = flat.index_select(0, _long(rows).to(input.device))
    return PackedSequence(data, _long(batch_sizes), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """(padded (T, B, *) or (B, T, *), lengths): the inverse of pack_padded_sequence."""
    data, batch_sizes, sorted_indices, unsorted_indices = sequence
    bs = _lengths(batch_sizes)
    T, B = bs.size, int(bs[0]) if bs.size else 0
    if total_length is not None:
        if total_length < T:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, but "
                             "got total_length=%d and max sequence length being %d" % (total_length, T))
        T = total_length
    N = data.shape[0]
    rows = np.full((T, B), N, np.int64)  # row N: the padding row
    off = 0
    for t, b in enumerate(bs):
        rows[t, :b] = np.arange(off, off + b)
        off += b
    fill = Fa.full((1,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    padded = cat([data, fill], 0).index_select(0, _long(rows.reshape(-1)).to(data.device))
    padded = padded.reshape((T, B) + tuple(data.shape[1:]))
    lengths = np.array([(bs > b).sum() for b in range(B)], dtype=np.int64)
    if unsorted_indices is not None:
        padded = padded.index_select(1, unsorted_indices.to(data.device))
        lengths = lengths[_lengths(unsorted_indices)]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, _long(lengths)


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack sequences of shapes (L_i, *) into (max L, B, *) (or (B, max L, *)), padded with padding_value."""
    if padding_side not in ("left", "right"):
        raise ValueError("Expected padding_side to be one of left or right, but got %s." % padding_side)
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    sequences = list(sequences)
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        extra = longest - s.shape[0]
        widths = [0, 0] * (s.ndim - 1) + ([0, extra] if padding_side == "right" else [extra, 0])
        padded.append(pad(s, widths, value=padding_value) if extra else s)
    return stack(padded, 0 if batch_first else 1)


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of sequences (L_i, *): pad_sequence, then pack_padded_sequence."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences of a padded batch, each cut to its length."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [s[:int(n)] for s, n in zip(padded_sequences.unbind(0), _lengths(lengths))]


def unpack_sequence(packed_sequences):
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
