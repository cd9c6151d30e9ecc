"""The fused losses: each loss is one entry (PyTorch's node name) whose forward and backward are one
kernel of kernels/loss.py, reduction included.

The public functions (nn/_loss_functions.py) check arguments and call ``pointwise_loss`` or
``nll_loss`` here. Weights are params, not inputs: PyTorch's nodes have no edge to them and refuse a
weight that requires grad. Each VJP formula is written over table ops, so double backward works;
the fused kernels serve the plain backward. (l1_loss has no entry: PyTorch composes it, abs then the
reduction, and so does nn/_loss_functions.py.)
"""
import numpy as np

from .._device import backend
from .._grad_mode import STATE
from .._op import Op, dispatch
from .._tensor import Tensor
from ..kernels.loss import KINDS
from ._table import COMPLEX, _arr, _noncontig, no_kernel, register
from .elementwise import where
from .unary import SOFTPLUS

MSE, SMOOTH_L1, HUBER, BCE, BCE_LOGITS = (KINDS[n] for n in (
    "mse_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits"))


def _array(t, dtype=None):
    """The data of tensor ``t`` (None stays None), in ``dtype`` where given: a float16/bfloat16 class
    weight joins a kernel that computes in float32."""
    if t is None:
        return None
    d = t._data
    return d if dtype is None or d.dtype == dtype else backend(d).astype(d, dtype)


def _check_no_grad(fn_name, **weights):
    for name, w in weights.items():
        if w is not None and w._requires_grad and STATE.grad_enabled:
            raise RuntimeError("The function '%s' is not differentiable with respect to argument '%s'. This input "
                               "cannot have requires_grad True." % (fn_name, name))


# ---------------------------------------------------------------------- pointwise losses
def pointwise_loss(name, input, target, reduction, beta=0.0, weight=None, pos_weight=None):
    """Loss ``name`` (a key of kernels.loss.KINDS) of input against target, one node."""
    _check_no_grad(name, weight=weight, pos_weight=pos_weight)
    return dispatch(POINTWISE[name], (input, target),
                    {"reduction": reduction, "beta": float(beta), "weight": weight, "pos_weight": pos_weight})


def _pointwise_forward(kind):
    def forward(xp, dt, x, t, reduction, beta, weight, pos_weight):
        return xp.loss.pointwise_loss(kind, x, t, _array(weight), _array(pos_weight), beta, reduction)
    return forward


def _fused(kind, wrt_target):
    def vjp(g, s):
        x, t = s.self, s.target
        return Tensor._wrap(backend(g._data).loss.pointwise_loss_vjp(
            kind, g._data, x._data, t._data, _array(s.weight), _array(s.pos_weight), s.beta, s.reduction, wrt_target))
    return vjp


def _derivative(kind, x, t, s, wrt_target):
    """d loss / d x (or d t) over table ops, unweighted."""
    if kind <= HUBER:
        d = x - t
        if kind == MSE:
            r = d * 2
        elif kind == SMOOTH_L1:
            r = where(d.abs() < s.beta, d / s.beta, d.sign())
        else:
            r = d.clamp(-s.beta, s.beta)
        return -r if wrt_target else r
    if kind == BCE:
        if wrt_target:
            return (-x).log1p() - x.log()
        return (x - t) / ((1 - x) * x).clamp_min(1e-12)
    pw = s.pos_weight
    if wrt_target:
        return -x if pw is None else (pw - 1) * dispatch(SOFTPLUS, (-x,), {"beta": 1.0, "threshold": 20.0}) - x
    return x.sigmoid() - t if pw is None else (pw * t + 1 - t) * x.sigmoid() - pw * t


def _formula(kind, wrt_target):
    def vjp(g, s):
        x, t = s.self, s.target
        r = _derivative(kind, x, t, s, wrt_target)
        if s.weight is not None:
            r = r * s.weight
        return (g / r.numel() if s.reduction == "mean" else g) * r
    return vjp


# ---------------------------------------------------------------------- nll_loss
def nll_loss(input, target, weight, ignore_index, reduction):
    """-weight[t] * input[t] along the class dim, one node; 'mean' divides by the summed weight of the targets
    not ignored, which the kernel computes from the targets at each call. A 4-D input is nll_loss2d, as in
    PyTorch (other N-D inputs are viewed as 4-D by the caller)."""
    _check_no_grad("nll_loss_forward" if input.ndim < 4 else "nll_loss2d_forward", weight=weight)
    return dispatch(NLL if input.ndim < 4 else NLL2D, (input,), {"target": target, "weight": weight,
                                                                "ignore_index": int(ignore_index), "reduction": reduction})


def _nll_forward(xp, dt, x, target, weight, ignore_index, reduction):
    return xp.loss.nll_loss(x, target._data, _array(weight, x.dtype), ignore_index, reduction)


def _nll_fused(g, s):
    return Tensor._wrap(backend(g._data).loss.nll_loss_vjp(g._data, s.self_shape, s.target._data, _array(s.weight),
                                                          s.ignore_index, s.reduction))


def _nll_grad(g, s):
    """nll_loss_backward: a node of its own (PyTorch's), whose target is an operand like the forward's."""
    return nll_loss_backward(g, s.target, s.self_shape, s.weight, s.ignore_index, s.reduction)


def nll_loss_backward(grad, target, input_shape, weight=None, ignore_index=-100, reduction="mean"):
    """The gradient of nll_loss in its input: ``grad`` at each target class times -weight[t] (over the
    total weight for 'mean'), zero elsewhere."""
    return dispatch(NLL_BACKWARD, (grad,), {"target": target, "input_shape": tuple(input_shape), "weight": weight,
                                           "ignore_index": int(ignore_index), "reduction": reduction})


def _nll_backward_forward(xp, dt, g, target, input_shape, weight, ignore_index, reduction):
    return xp.loss.nll_loss_vjp(g, input_shape, target._data, _array(weight, g.dtype), ignore_index, reduction)


def _nll_backward_grad(gg, s):
    """nll_loss_backward is linear in its gradient: its VJP picks gg at the targets, as nll_loss does."""
    return nll_loss(gg, s.target, s.weight, s.ignore_index, s.reduction)


# ---------------------------------------------------------------------- references and samples
def _np_pointwise(kind):
    def ref(x, t, reduction="mean", beta=1.0, weight=None, pos_weight=None):
        d = x - t
        a = np.abs(d)
        if kind == MSE:
            loss = d * d
        elif kind == SMOOTH_L1:
            loss = np.where(a < beta, 0.5 * d * d / beta, a - 0.5 * beta)
        elif kind == HUBER:
            loss = np.where(a < beta, 0.5 * d * d, beta * (a - 0.5 * beta))
        elif kind == BCE:
            loss = -(t * np.maximum(np.log(x), -100) + (1 - t) * np.maximum(np.log1p(-x), -100))
        else:
            pw = 1 if pos_weight is None else pos_weight
            loss = (1 - t) * x + (1 + (pw - 1) * t) * np.logaddexp(0, -x)
        if weight is not None:
            loss = loss * weight
        return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()
    return ref


def _pointwise_samples(kind):
    lo, hi = (0.05, 0.95) if kind == BCE else (-2.0, 2.0)
    tlo, thi = (0.0, 1.0) if kind >= BCE else (-2.0, 2.0)

    def samples(rng, dtype):
        if np.dtype(dtype).kind != "f":
            return []
        X = lambda *s: _arr(rng, s, lo, hi, dtype)  # noqa: E731
        T = lambda *s: _arr(rng, s, tlo, thi, dtype)  # noqa: E731
        out = [((X(), T()), {"reduction": "none"}), ((X(4), T(4)), {}), ((X(2, 3), T(2, 3)), {"reduction": "sum"}),
               ((X(2, 3), T(2, 3)), {"reduction": "none"}),
               ((_noncontig(rng, (3, 2), lo, hi, dtype), T(3, 2)), {"reduction": "mean"})]
        if kind < BCE:
            out.append(((X(2, 3), T(3)), {"reduction": "mean"}))  # the target broadcasts (with a warning)
        if kind in (SMOOTH_L1, HUBER):
            out.append(((X(2, 3), T(2, 3)), {"beta": 0.5}))
        return out
    return samples


def _call(kind):
    """The public function a sample is applied to (beta is smooth_l1's beta, huber's delta)."""
    name = next(n for n, k in KINDS.items() if k == kind)

    def call(input, target, reduction="mean", beta=1.0):
        return pointwise_loss(name, input, target, reduction, beta)
    call.__name__ = name
    return call


def _np_nll(x, t, reduction="mean", ignore_index=-100):
    xs = np.moveaxis(x, 1, -1) if x.ndim > 1 else x
    valid = t != ignore_index
    picked = np.where(valid, -np.take_along_axis(xs, np.where(valid, t, 0)[..., None], -1)[..., 0], 0)
    if reduction == "none":
        return picked
    return picked.sum() if reduction == "sum" else picked.sum() / valid.sum()


def _nll_call(input, target, reduction="mean", ignore_index=-100):
    return nll_loss(input, target, None, ignore_index, reduction)


def _np_nll_backward(g, t, input_shape, reduction="mean", ignore_index=-100):
    t = np.asarray(t)
    x = np.zeros(input_shape, g.dtype)
    xs = np.moveaxis(x, 1, -1) if x.ndim > 1 else x[None]
    valid = t != ignore_index
    total = valid.sum()
    scale = 1.0 / total if reduction == "mean" else 1.0
    gv = np.broadcast_to(g, t.shape) if reduction == "none" else np.broadcast_to(g, t.shape)
    for pos in np.ndindex(t.shape):
        if valid[pos]:
            (xs[pos] if x.ndim > 1 else xs[0])[t[pos]] = -gv[pos] * scale
    return x


def _nll_backward_samples(rng, dtype):
    if np.dtype(dtype).kind != "f":
        return []
    G = lambda *s: _arr(rng, s, -1.0, 1.0, dtype)  # noqa: E731
    return [((G(), np.array([0, 3, 1]), (3, 4)), {"reduction": "sum"}),
            ((G(), np.array([0, -100, 1]), (3, 4)), {}),
            ((G(2), np.array([2, 1]), (2, 3)), {"reduction": "none"}),
            ((G(2, 2, 2), rng.integers(0, 3, (2, 2, 2)), (2, 3, 2, 2)), {"reduction": "none"})]


def _nll_samples(four_d):
    def samples(rng, dtype):
        if np.dtype(dtype).kind != "f":
            return []
        X = lambda *s: _arr(rng, s, -2.0, 0.0, dtype)  # noqa: E731
        if four_d:
            return [((X(2, 3, 2, 2), rng.integers(0, 3, (2, 2, 2))), {"reduction": r}) for r in ("none", "mean")]
        return [((X(5), np.array(2)), {}), ((X(3, 4), np.array([0, 3, 1])), {"reduction": "sum"}),
                ((X(3, 4), np.array([0, -100, 1])), {}),
                ((_noncontig(rng, (2, 3), -2.0, 0.0, dtype), np.array([2, 1])), {"reduction": "none"})]
    return samples


# ---------------------------------------------------------------------- the entries
# PyTorch's CPU kernel of each pointwise loss, which its refusal of complex operands names
_KERNELS = {"mse_loss": "mse_cpu", "smooth_l1_loss": "smooth_l1_cpu", "huber_loss": "huber_cpu",
            "binary_cross_entropy": "binary_cross_entropy", "binary_cross_entropy_with_logits": "log_sigmoid_cpu"}


def _pointwise_entry(name, node):
    kind = KINDS[name]
    return register(Op(name, _pointwise_forward(kind), inputs=("self", "target"),
                       vjp=[_formula(kind, False), _formula(kind, True)],
                       fused=[_fused(kind, False), _fused(kind, True)], dtype="promote", node=node,
                       unsupported=no_kernel(_KERNELS[name], *COMPLEX),
                       call=_call(kind), ref=_np_pointwise(kind), samples=_pointwise_samples(kind)))


POINTWISE = {name: _pointwise_entry(name, node) for name, node in (
    ("mse_loss", "MseLossBackward0"), ("smooth_l1_loss", "SmoothL1LossBackward0"),
    ("huber_loss", "HuberLossBackward0"), ("binary_cross_entropy", "BinaryCrossEntropyBackward0"),
    ("binary_cross_entropy_with_logits", "BinaryCrossEntropyWithLogitsBackward0"))}
NLL, NLL2D = (register(Op(name, _nll_forward, vjp=[_nll_grad], fused=[_nll_fused], dtype="float", node=node,
                          call=_nll_call, ref=_np_nll, samples=samples))
               for name, node, samples in (("nll_loss", "NllLossBackward0", _nll_samples(False)),
                                           ("nll_loss2d", "NllLoss2DBackward0", _nll_samples(True))))
NLL_BACKWARD = register(Op("nll_loss_backward", _nll_backward_forward, inputs=("grad",), vjp=[_nll_backward_grad],
                           dtype="float", node="NllLossBackwardBackward0", call=nll_loss_backward,
                           ref=_np_nll_backward, samples=_nll_backward_samples, method=False, function=False))
