"""The backend protocol: what the op table, the engine and the compiler call on a device's array module.

A backend is a module (kernels/cpu.py; kernels/cuda/backend.py, the CUDA twin) that holds every function
of ``Backend`` below, taking the same positional parameters, and the submodules ``conv``, ``pool`` and
``loss`` with the functions SUBMODULES names. Arrays are the device's own (NumPy arrays on the CPU, numba
device arrays on CUDA); dtypes are NumPy dtypes. The conformance tests (tests/package/test_backend_protocol.py)
check both backends against this protocol and run each function on both against NumPy.

What one backend has beyond it serves one device alone: the CPU's ``flat_loop`` (the eager fast path's
serial loops) and ``ndarray``; a device's ``fused_kernel``/``launch_fused`` (the compiler's kernels),
``raise_pending`` (device-side checks) and ``holds_its_memory_alone`` (the caching pool).
"""
from typing import Protocol


class Backend(Protocol):
    name: str  # the device type: "cpu", "cuda"

    # ---------------------------------------------------------------- arrays: making, moving, viewing
    def empty(self, shape, dtype): """An uninitialised C-contiguous array."""
    def zeros(self, shape, dtype): """Zeros."""
    def full(self, shape, fill_value, dtype): """``fill_value`` everywhere."""
    def from_host(self, x): """A NumPy array on this device."""
    def to_host(self, x): """This device's array as a NumPy array."""
    def astype(self, x, dtype): """A copy in ``dtype``."""
    def copy(self, x): """A C-contiguous copy."""
    def copyto(self, dst, src): """``dst[...] = src`` (broadcast)."""
    def address(self, a): """The address of the first element (Tensor.data_ptr)."""
    def is_contiguous(self, a): """Whether ``a`` is C-contiguous."""
    def may_share_memory(self, a, b): """Whether ``a`` and ``b`` may overlap."""
    def reshape(self, a, shape): """``a`` in ``shape`` (a view where the strides allow, else a copy)."""
    def view(self, x, shape): """``x`` in ``shape`` sharing its memory, or None where the strides do not allow it."""
    def transpose(self, a, axes): """A view with the dims permuted."""
    def swapaxes(self, a, d0, d1): """A view with two dims swapped."""
    def expand_dims(self, a, axis): """A view with a size-1 dim inserted."""
    def broadcast_to(self, array, shape): """A read-only view broadcast to ``shape``."""
    def diagonal(self, x, offset, dim1, dim2): """The writable view of a diagonal, moved to the last dim."""
    def flip(self, x, dims): """A copy reversed along ``dims``."""
    def getitem(self, x, key): """``x[key]`` for a NumPy-style key (an all-integer key gives a 0-d view)."""
    def setitem(self, x, key, value): """``x[key] = value``."""
    def take(self, a, indices, axis): """Elements at ``indices`` along ``axis``."""
    def take_along_axis(self, arr, indices, axis): """NumPy's take_along_axis."""
    def tile(self, A, reps): """NumPy's tile."""
    def concatenate(self, arrays, axis): """Join along an existing dim."""
    def stack(self, arrays, axis): """Join along a new dim."""

    # ---------------------------------------------------------------- math
    def run(self, fn, out_dtype, *args, out=None): """Scalar function ``fn`` of kernels/scalars.py, broadcast."""
    def reduce(self, kind, x, dims): """sum/prod/amax/amin/argmax/argmin/logsumexp over ``dims`` (kept as size 1)."""
    def scan(self, kind, x, dim): """cumsum/cumprod/cummax/cummin/logcumsumexp along ``dim``."""
    def matmul(self, a, b): """NumPy's matmul (GEMM)."""
    def outer(self, a, b): """The outer product."""
    def softmax(self, x, dim, log): """(log-)softmax along ``dim``."""
    def softmax_vjp(self, g, y, dim, log): """Its gradient, given the result ``y``."""
    def attention_softmax(self, s, mask, scale, causal): """softmax(scale * s + mask) over the last dim."""
    def attention_softmax_vjp(self, dp, p, scale): """Its gradient in ``s``."""
    def layer_norm(self, x, w, b, eps): """(y, mean, rstd) of layer normalization over the rows of (M, N) ``x``."""
    def layer_norm_vjp(self, g, x, w, mean, rstd, weights): """(dx, dw, db) given y's gradient (dw, db: None unless
        ``weights``)."""
    def index_add(self, out, key, values): """``out[key] += values``, repeated indices accumulating."""
    def scatter_add(self, out, dim, index, src): """``out.scatter_add_(dim, index, src)``."""
    def one_hot(self, x, out): """``out[i, x[i]] = 1`` (``out`` zeros)."""
    def multinomial(self, probs, draws, n, replacement): """``n`` categories per row of ``probs``."""

    # ---------------------------------------------------------------- recurrent cells and layers
    def rnn_cell(self, ig, hg, bias, relu): """An Elman step."""
    def rnn_cell_vjp(self, hy, ghy, relu): """Its gradient."""
    def lstm_cell(self, ig, hg, bias, cx): """(workspace, h', c') of an LSTM step."""
    def lstm_cell_vjp(self, ws, cx, ghy, gcy): """(gate gradients, c gradient)."""
    def gru_cell(self, ig, hg, bias, hx): """(workspace, h') of a GRU step."""
    def gru_cell_vjp(self, ws, hx, ghy): """(input-gate, hidden-gate, direct h gradients)."""
    def rnn_layer(self, mode, ig, h0, c0, w_hh, b_hh, w_hr, batch_sizes, reverse): """A whole layer's steps."""
    def rnn_layer_vjp(self, mode, ws, w_hh, w_hr, g_out, g_hn, g_cn, batch_sizes, reverse, has_bias):
        """Its gradients."""


FUNCTIONS = tuple(n for n in vars(Backend) if not n.startswith("_"))  # (in the order above)

# submodule -> the functions the op table calls on it
SUBMODULES = {"conv": ("im2col", "col2im"),
              "pool": ("max_pool2d", "max_pool2d_backward", "window_avg", "window_avg_backward"),
              "loss": ("pointwise_loss", "pointwise_loss_vjp", "nll_loss", "nll_loss_vjp")}
