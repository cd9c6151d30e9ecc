"""Recurrent layers: RNN, LSTM, GRU (multi-layer, bidirectional, LSTM projections, packed sequences)
and the cells RNNCell, LSTMCell, GRUCell, with PyTorch's parameters, init, checks and reprs.

Each direction of each layer is one op-table node (ops/rnn.py): the input gates of every step come
from one GEMM (F.linear over the whole sequence), the recurrence runs in the layer's entry.
"""
import math
import numbers
import warnings

from ... import _factories as Fa
from ...ops.join import cat, stack
from ...ops.rnn import gru_cell_step, lstm_cell_step, rnn_layer, rnn_relu_cell_step, rnn_tanh_cell_step
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from ..utils.rnn import PackedSequence

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


class RNNBase(Module):
    """The layers' shared machinery: parameters weight_ih_l{k}[_reverse] ..., init, checks, the forward."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an element "
                             "being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout expects "
                          "num_layers greater than 1, but got dropout=%s and num_layers=%s" % (dropout, num_layers),
                          stacklevel=2)
        for name, value, kind in (("bias", bias, bool), ("batch_first", batch_first, bool),
                                  ("input_size", input_size, int), ("hidden_size", hidden_size, int)):
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise TypeError("%s should be of type %s, got: %s" % (name, kind.__name__, type(value).__name__))
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        gate_size = _GATES[mode] * hidden_size
        directions = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for direction in range(directions):
                layer_input = input_size if layer == 0 else real_hidden * directions
                shapes = [(gate_size, layer_input), (gate_size, real_hidden)]
                names = ["weight_ih_l{}{}", "weight_hh_l{}{}"]
                if bias:
                    shapes += [(gate_size,), (gate_size,)]
                    names += ["bias_ih_l{}{}", "bias_hh_l{}{}"]
                if proj_size > 0:
                    shapes.append((proj_size, hidden_size))
                    names.append("weight_hr_l{}{}")
                names = [n.format(layer, "_reverse" if direction else "") for n in names]
                for name, shape in zip(names, shapes):
                    setattr(self, name, Parameter(Fa.empty(shape, dtype=dtype, device=device)))
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self):
        """A no-op: the weights are used where they are (PyTorch packs them for cuDNN)."""

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    # ------------------------------------------------------------------ checks (PyTorch's messages)
    def _check_input(self, input, packed):
        w = self._flat_weights[0]
        if input.dtype is not w.dtype:
            raise ValueError("RNN input dtype (%s) does not match weight dtype (%s). Convert input: input.to(%s), or "
                             "convert model: model.to(%s)" % (input.dtype, w.dtype, w.dtype, input.dtype))
        expected = 2 if packed else 3
        if input.ndim != expected:
            raise RuntimeError("input must have %d dimensions, got %d" % (expected, input.ndim))
        if self.input_size != input.shape[-1]:
            raise RuntimeError("input.size(-1) must be equal to input_size. Expected %d, got %d"
                               % (self.input_size, input.shape[-1]))

    def _expected_hidden(self, batch, size):
        return (self.num_layers * (2 if self.bidirectional else 1), batch, size)

    @staticmethod
    def _check_hidden(hx, expected, msg="Expected hidden size {}, got {}"):
        if tuple(hx.shape) != expected:
            raise RuntimeError(msg.format(expected, list(hx.shape)))

    # ------------------------------------------------------------------ the forward
    def forward(self, input, hx=None):
        lstm = self.mode == "LSTM"
        packed = isinstance(input, PackedSequence)
        batched = True
        if packed:
            data, batch_sizes, sorted_indices, unsorted_indices = input
            sizes = tuple(int(b) for b in batch_sizes.tolist())
            B = sizes[0]
        else:
            sorted_indices = unsorted_indices = None
            if input.ndim not in (2, 3):
                name = {"LSTM": "LSTM", "GRU": "GRU"}.get(self.mode, "RNN")
                raise ValueError("%s: Expected input to be 2D or 3D, got %dD %sinstead"
                                 % (name, input.ndim, "" if lstm or name == "GRU" else "tensor "))
            batched = input.ndim == 3
            batch_dim = 0 if self.batch_first else 1
            if not batched:
                input = input.unsqueeze(batch_dim)
                hx = self._unbatched_hidden(hx)
            else:
                self._check_batched_hidden(hx)
        h0, c0 = (hx if hx is not None else (None, None)) if lstm else (hx, None)
        if packed:
            self._check_input(data, True)
        else:
            self._check_input(input, False)
            x = input.transpose(0, 1) if self.batch_first else input
            T, B = x.shape[0], x.shape[1]
            sizes = (B,) * T
            data = x.reshape(T * B, x.shape[2])
        h0, c0 = self._initial_states(h0, c0, data, B, sorted_indices)
        out, h_n, c_n = self._run(data, h0, c0, sizes)
        if packed:
            output = PackedSequence(out, batch_sizes, sorted_indices, unsorted_indices)
            if unsorted_indices is not None:
                h_n = h_n.index_select(1, unsorted_indices)
                c_n = c_n.index_select(1, unsorted_indices) if lstm else None
        else:
            output = out.reshape(T, B, out.shape[1])
            if self.batch_first:
                output = output.transpose(0, 1)
            if not batched:
                output = output.squeeze(batch_dim)
                h_n = h_n.squeeze(1)
                c_n = c_n.squeeze(1) if lstm else None
        return (output, (h_n, c_n)) if lstm else (output, h_n)

    def _unbatched_hidden(self, hx):
        if hx is None:
            return None
        if self.mode == "LSTM":
            if hx[0].ndim != 2 or hx[1].ndim != 2:
                raise RuntimeError("For unbatched 2-D input, hx and cx should also be 2-D but got (%d-D, %d-D) tensors"
                                   % (hx[0].ndim, hx[1].ndim))
            return hx[0].unsqueeze(1), hx[1].unsqueeze(1)
        if hx.ndim != 2:
            raise RuntimeError("For unbatched 2-D input, hx should also be 2-D but got %d-D tensor" % hx.ndim)
        return hx.unsqueeze(1)

    def _check_batched_hidden(self, hx):
        if hx is None:
            return
        if self.mode == "LSTM":
            if hx[0].ndim != 3 or hx[1].ndim != 3:
                raise RuntimeError("For batched 3-D input, hx and cx should also be 3-D but got (%d-D, %d-D) tensors"
                                   % (hx[0].ndim, hx[1].ndim))
        elif hx.ndim != 3:
            raise RuntimeError("For batched 3-D input, hx should also be 3-D but got %d-D tensor" % hx.ndim)

    def _initial_states(self, h0, c0, data, B, sorted_indices):
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        lstm = self.mode == "LSTM"
        if h0 is None:
            h0 = Fa.zeros(self._expected_hidden(B, real_hidden), dtype=data.dtype, device=data.device)
            if lstm:
                c0 = Fa.zeros(self._expected_hidden(B, self.hidden_size), dtype=data.dtype, device=data.device)
        elif sorted_indices is not None:
            h0 = h0.index_select(1, sorted_indices)
            c0 = c0.index_select(1, sorted_indices) if lstm else None
        if lstm:
            self._check_hidden(h0, self._expected_hidden(B, real_hidden), "Expected hidden[0] size {}, got {}")
            self._check_hidden(c0, self._expected_hidden(B, self.hidden_size), "Expected hidden[1] size {}, got {}")
        else:
            self._check_hidden(h0, self._expected_hidden(B, real_hidden))
        return h0, c0

    def _run(self, data, h0, c0, sizes):
        """Every layer and direction over the packed rows ``data``: (output rows, h_n, c_n)."""
        directions = 2 if self.bidirectional else 1
        lstm = self.mode == "LSTM"
        h_list, c_list = [], []
        layer_input = data
        for layer in range(self.num_layers):
            outs = []
            for direction in range(directions):
                k = layer * directions + direction
                params = [getattr(self, n) for n in self._all_weights[k]]
                w_ih, w_hh = params[0], params[1]
                b_ih, b_hh = (params[2], params[3]) if self.bias else (None, None)
                w_hr = params[-1] if self.proj_size > 0 else None
                igates = F.linear(layer_input, w_ih, b_ih)
                out, h_n, c_n = rnn_layer(self.mode, igates, h0[k], c0[k] if lstm else None, w_hh, b_hh, w_hr,
                                          sizes, direction == 1)
                outs.append(out)
                h_list.append(h_n)
                c_list.append(c_n)
            layer_input = outs[0] if directions == 1 else cat(outs, 1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        return layer_input, stack(h_list, 0), stack(c_list, 0) if lstm else None


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError("Unknown nonlinearity '%s'. Select from 'tanh' or 'relu'." % self.nonlinearity)
        super().__init__(mode, *args, **kwargs)


class LSTM(RNNBase):
    """Long short-term memory, with gates (i, f, g, o) and an optional projection of h (proj_size)."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    """Gated recurrent unit, with gates (r, z, n)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


# ---------------------------------------------------------------------- cells
class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(Fa.empty((num_chunks * hidden_size, input_size), dtype=dtype, device=device))
        self.weight_hh = Parameter(Fa.empty((num_chunks * hidden_size, hidden_size), dtype=dtype, device=device))
        if bias:
            self.bias_ih = Parameter(Fa.empty(num_chunks * hidden_size, dtype=dtype, device=device))
            self.bias_hh = Parameter(Fa.empty(num_chunks * hidden_size, dtype=dtype, device=device))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _prepare(self, name, input, states):
        """(2-D input, 2-D states, whether the input was batched), with PyTorch's checks."""
        if input.ndim not in (1, 2):
            raise ValueError("%s: Expected input to be 1D or 2D, got %dD instead" % (name, input.ndim))
        for k, h in enumerate(states):
            if h is not None and h.ndim not in (1, 2):
                what = "hidden" if len(states) == 1 else "hx[%d]" % k
                raise ValueError("%s: Expected %s to be 1D or 2D, got %dD instead" % (name, what, h.ndim))
        batched = input.ndim == 2
        if not batched:
            input = input.unsqueeze(0)
        B = input.shape[0]
        out = []
        for h in states:
            if h is None:
                h = Fa.zeros((B, self.hidden_size), dtype=input.dtype, device=input.device)
            elif not batched:
                h = h.unsqueeze(0)
            out.append(h)
        if input.shape[1] != self.input_size:
            raise RuntimeError("input has inconsistent input_size: got %d expected %d" % (input.shape[1],
                                                                                          self.input_size))
        for k, h in enumerate(out):
            if h.shape[0] != B:
                raise RuntimeError("Input batch size %d doesn't match hidden%d batch size %d" % (B, k, h.shape[0]))
            if h.shape[1] != self.hidden_size:
                raise RuntimeError("hidden%d has inconsistent hidden_size: got %d, expected %d"
                                   % (k, h.shape[1], self.hidden_size))
        return input, out, batched

    def _input_gates(self, input):
        return F.linear(input, self.weight_ih, self.bias_ih)


class RNNCell(RNNCellBase):
    """One step of an Elman RNN: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        input, (hx,), batched = self._prepare("RNNCell", input, [hx])
        if self.nonlinearity == "tanh":
            step = rnn_tanh_cell_step
        elif self.nonlinearity == "relu":
            step = rnn_relu_cell_step
        else:
            raise RuntimeError("Unknown nonlinearity: %s" % self.nonlinearity)
        h = step(self._input_gates(input), hx, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step: (h', c') from x and (h, c)."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        states = [None, None] if hx is None else list(hx)
        input, (h, c), batched = self._prepare("LSTMCell", input, states)
        h, c = lstm_cell_step(self._input_gates(input), h, self.weight_hh, self.bias_hh, c)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step: h' from x and h."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        input, (hx,), batched = self._prepare("GRUCell", input, [hx])
        h = gru_cell_step(self._input_gates(input), hx, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)
