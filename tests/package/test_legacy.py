"""The legacy and convenience names PyTorch programs use: Variable, Tensor(...), FloatTensor & co,
Tensor.type, 0-d formatting, the default device, jitgrad.accelerator and jitgrad.backends flags."""
import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import Variable

TYPE_NAMES = ["FloatTensor", "LongTensor", "DoubleTensor", "BoolTensor", "IntTensor", "ByteTensor"]


def test_variable_returns_a_detached_tensor():
    t = jg.ones(2)
    v = Variable(t)
    assert type(v) is jg.Tensor and v is not t and not v.requires_grad and v.is_leaf
    t.add_(1)  # same data and version counter, as detach()
    assert v.tolist() == [2.0, 2.0] and v._version == t._version == 1
    w = Variable(t, requires_grad=True)
    assert w.requires_grad and w.is_leaf and not t.requires_grad
    (w * 3).sum().backward()
    assert w.grad.tolist() == [3.0, 3.0]
    x = jg.ones(2, requires_grad=True)
    z = Variable(x * 2)
    assert z.grad_fn is None and not z.requires_grad
    assert isinstance(t, Variable) and isinstance(z, Variable) and not isinstance([1], Variable)
    assert Variable().shape == (0,) and Variable().dtype is jg.float32


def test_variable_errors_and_volatile():
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
        Variable([1, 2])
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype can require gradients"):
        Variable(jg.ones(2, dtype=jg.int64), requires_grad=True)
    with pytest.warns(UserWarning, match="volatile was removed"):
        assert Variable(jg.ones(2), volatile=True).tolist() == [1.0, 1.0]


def test_tensor_constructor_forms():
    assert jg.Tensor([1, 2]).dtype is jg.float32 and jg.Tensor([1, 2]).tolist() == [1.0, 2.0]
    assert jg.Tensor(2, 3).shape == (2, 3) and jg.Tensor(2, 3).dtype is jg.float32
    assert jg.Tensor().shape == (0,)
    assert jg.Tensor((1, 2)).tolist() == [1.0, 2.0]  # a tuple is data, a Size is sizes
    assert jg.Tensor(jg.Size([2, 3])).shape == (2, 3)
    assert jg.Tensor(np.array([1, 2])).dtype is jg.float32
    assert jg.Tensor([True, False]).tolist() == [1.0, 0.0]
    assert jg.Tensor(2, 3, device="cpu").shape == (2, 3)
    a = jg.ones(2, dtype=jg.float64)
    b = jg.Tensor(a)  # an alias in a's own dtype
    assert b is not a and b.dtype is jg.float64 and np.shares_memory(b.numpy(), a.numpy())
    x = jg.ones(2, requires_grad=True)
    y = jg.Tensor(x)
    assert y.requires_grad and y.grad_fn is not None
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_tensor_subclass_constructor():
    class Tagged(jg.Tensor):
        pass

    t = Tagged([1.0, 2.0])
    assert type(t) is Tagged and t.tolist() == [1.0, 2.0] and isinstance(t, jg.Tensor)
    with pytest.raises(TypeError, match=r"got \(list, str\)"):  # as PyTorch: extra arguments reach new()
        Tagged([1.0], "x")


def test_tensor_constructor_errors():
    with pytest.raises(TypeError, match=r"new\(\): data must be a sequence \(got float\)"):
        jg.Tensor(2.5)
    with pytest.raises(TypeError, match=r"new\(\): invalid data type 'str'"):
        jg.Tensor("a")
    with pytest.raises(TypeError, match=r"new\(\) received an invalid combination of arguments - got \(list, dtype="):
        jg.Tensor([1, 2], dtype=jg.float64)
    with pytest.raises(TypeError, match="requires_grad=bool"):
        jg.Tensor([1, 2], requires_grad=True)


def test_tensor_constructor_follows_the_default_dtype():
    jg.set_default_dtype(jg.float64)
    try:
        assert jg.Tensor([1]).dtype is jg.float64 and jg.Tensor(2).dtype is jg.float64
        assert jg.FloatTensor([1]).dtype is jg.float32
    finally:
        jg.set_default_dtype(jg.float32)


@pytest.mark.parametrize("name", TYPE_NAMES)
def test_typed_constructors_and_isinstance(name):
    C = getattr(jg, name)
    d = C.dtype
    assert C([1, 0]).dtype is d and C(2).shape == (2,) and C(2, 3).shape == (2, 3) and C().shape == (0,)
    assert isinstance(C(2), C) and isinstance(C(2), jg.Tensor) and type(C(2)) is jg.Tensor
    assert isinstance(jg.ones(2), C) == (d is jg.float32)  # isinstance checks the dtype, as in PyTorch
    assert not issubclass(C, jg.Tensor) and not C.is_cuda and repr(C) == "<class 'jitgrad.%s'>" % name


def test_typed_constructor_values_and_errors():
    assert jg.LongTensor([1.5, 2.7]).tolist() == [1, 2]
    assert jg.BoolTensor([1, 0]).tolist() == [True, False]
    ones = jg.ones(2)
    assert np.shares_memory(jg.FloatTensor(ones).numpy(), ones.numpy())
    with pytest.raises(TypeError, match=r"expected TensorOptions\(dtype=float, .*\(got TensorOptions\(dtype=long int"):
        jg.FloatTensor(jg.ones(2, dtype=jg.int64))


def test_tensor_type():
    x = jg.ones(2)
    assert x.type() == "jitgrad.FloatTensor" and jg.ones(2, dtype=jg.int64).type() == "jitgrad.LongTensor"
    assert x.type("torch.LongTensor").dtype is jg.int64 and x.type("jitgrad.DoubleTensor").dtype is jg.float64
    assert x.type(jg.IntTensor).dtype is jg.int32 and x.type(jg.int64).dtype is jg.int64
    assert x.type("torch.FloatTensor") is x  # nothing to change: the tensor itself, as to()
    state = jg.get_rng_state()  # a generator's state is a ByteTensor, as in PyTorch
    assert isinstance(state, jg.ByteTensor) and state.type() == "jitgrad.ByteTensor"
    assert x.type("torch.ByteTensor").dtype is jg.uint8
    for bad in ("torch.Foo", "float"):
        with pytest.raises(ValueError, match="invalid type: '%s'" % bad):
            x.type(bad)


def test_format_of_0d_tensors():
    loss = jg.tensor(1.5, requires_grad=True) * 2
    assert "{:+.2f}".format(loss) == "+3.00" and f"{loss}" == "3.0" and "{:>4}".format(jg.tensor(3)) == "   3"
    assert "{}".format(jg.ones(2)) == str(jg.ones(2))
    with pytest.raises(TypeError, match="unsupported format string passed to Tensor.__format__"):
        "{:.2f}".format(jg.ones(2))


def test_default_device():
    assert jg.get_default_device() == jg.device("cpu")
    jg.set_default_device("cpu")
    try:
        assert jg.get_default_device() == "cpu" and jg.ones(2).device == "cpu"
    finally:
        jg.set_default_device(None)
    assert jg.get_default_device() == "cpu"
    with pytest.raises(RuntimeError, match="device type at start of device string: foo"):
        jg.set_default_device("foo")


def test_default_device_cuda_where_unavailable():
    if jg.cuda.is_available():
        pytest.skip("a GPU (or the simulator) is there: the refusal cannot be shown")
    jg.set_default_device("cuda")
    try:
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            jg.ones(2)
        assert jg.ones(2, device="cpu").device == "cpu"
    finally:
        jg.set_default_device(None)


def test_accelerator():
    assert jg.accelerator.is_available() == jg.cuda.is_available()
    assert jg.accelerator.device_count() == jg.cuda.device_count()
    cur = jg.accelerator.current_accelerator()
    assert (cur is None) == (not jg.cuda.is_available()) and (cur is None or cur.type == "cuda")


def test_backends_flags():
    import jitgrad.backends.cudnn as cudnn
    b = jg.backends
    assert (b.cudnn.benchmark, b.cudnn.deterministic, b.cudnn.enabled) == (False, False, True)
    assert not b.mps.is_available() and not b.mps.is_built() and not b.cudnn.is_available()
    assert b.cuda.matmul.allow_tf32 is False and b.mkldnn.enabled is True
    cudnn.benchmark = True
    try:
        assert b.cudnn.benchmark is True
    finally:
        cudnn.benchmark = False
    with b.cudnn.flags(enabled=False, deterministic=True):
        assert not b.cudnn.enabled and b.cudnn.deterministic
    assert b.cudnn.enabled and not b.cudnn.deterministic
    b.cuda.matmul.allow_tf32 = True
    b.cuda.matmul.allow_tf32 = False
    with pytest.raises(AttributeError, match="Unknown attribute foo"):
        b.cuda.matmul.foo = 1
    with pytest.raises(AttributeError, match="Unknown attribute foo"):
        b.cuda.matmul.foo


def test_legacy_names_as_pytorch():
    """The same calls side by side with PyTorch, where it is installed."""
    torch = pytest.importorskip("torch")
    from torch.autograd import Variable as TVariable
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for lib, V in ((torch, TVariable), (jg, Variable)):
            t = lib.ones(2)
            assert isinstance(t, V) and V(t, requires_grad=True).requires_grad and not t.requires_grad
    for name in TYPE_NAMES:
        for x_j, x_t in ((jg.ones(2), torch.ones(2)), (jg.ones(2, dtype=jg.int64), torch.ones(2, dtype=torch.long))):
            assert isinstance(x_j, getattr(jg, name)) == isinstance(x_t, getattr(torch, name))
        assert getattr(jg, name)([1.5, 0]).tolist() == getattr(torch, name)([1.5, 0]).tolist()
    assert jg.Tensor(2, 3).shape == tuple(torch.Tensor(2, 3).shape)
    assert jg.Tensor((1, 2)).tolist() == torch.Tensor((1, 2)).tolist()
    assert "{:+.3f}".format(jg.tensor(0.25, requires_grad=True) * 2) == \
        "{:+.3f}".format(torch.tensor(0.25, requires_grad=True) * 2)
    assert jg.ones(2).type("torch.LongTensor").tolist() == torch.ones(2).type("torch.LongTensor").tolist()
    for f in ("benchmark", "deterministic", "enabled"):
        assert getattr(jg.backends.cudnn, f) == getattr(torch.backends.cudnn, f)
    assert jg.backends.mps.is_available() == torch.backends.mps.is_available()
    assert jg.backends.cuda.matmul.allow_tf32 == torch.backends.cuda.matmul.allow_tf32
