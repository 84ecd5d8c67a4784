"""ug.from_native, Tensor.native() and DLPack, on every target: the frameworks' own tensors in
and out of unigraph, sharing memory where the framework allows, and a clear error for
`.native()` inside a static trace."""

import numpy as np
import pytest

import unigraph as ug
from tests.conftest import FORWARD_TARGETS, TARGETS
from unigraph.config import Target
from unigraph.plugins import get_backend

_NATIVE_TYPE = {"numpy": "numpy.ndarray", "torch": "torch.Tensor",
                "tensorflow": "tensorflow.python.framework.ops.EagerTensor",
                "paddle": "paddle.Tensor", "onnxruntime": "numpy.ndarray"}


def _type_name(obj) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}".replace("paddle.base.core.eager.", "paddle.")


def _torch():
    import torch

    return torch


def _address(obj):
    """The address of a native tensor's first element, or None where it is not exposed."""
    if isinstance(obj, np.ndarray):
        return obj.__array_interface__["data"][0]
    if hasattr(obj, "data_ptr"):
        return obj.data_ptr()
    return None


def _native_of(framework: str, values):
    """A native tensor of `framework` holding float32 `values`."""
    array = np.asarray(values, np.float32)
    if framework == "numpy":
        return array
    return get_backend(framework).to_native(array)


@pytest.mark.parametrize("target", TARGETS)
def test_native_is_the_framework_tensor_and_round_trips(target):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        x = ug.tensor([1.0, -2.0, 3.5])
        native = x.native()
        assert _type_name(native) == _NATIVE_TYPE[t.backend]
        back = ug.from_native(native)
        assert back.dtype == "float32" and back.shape == (3,)
        np.testing.assert_array_equal((back * 2).numpy(), [2.0, -4.0, 7.0])
        # Same framework: the very memory, not a copy.
        if _address(native) is not None:
            assert _address(back.native()) == _address(native)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("source", ["numpy", "torch", "tensorflow", "paddle"])
def test_from_native_of_every_framework_lands_on_the_current_target(target, source):
    t = Target.parse(target)
    native = _native_of(source, [[0.5, 1.0], [2.0, 4.0]])
    with ug.use_backend(t.backend, t.mode):
        x = ug.from_native(native)
        assert _type_name(x.native()) == _NATIVE_TYPE[t.backend]
        assert x.shape == (2, 2) and x.dtype == "float32"
        np.testing.assert_array_equal(ug.sum(x, axis=0).numpy(), [2.5, 5.0])


@pytest.mark.parametrize("target", TARGETS)
def test_from_native_shares_memory_with_a_torch_tensor(target):
    torch = _torch()
    t = Target.parse(target)
    source = torch.arange(4, dtype=torch.float32)
    with ug.use_backend(t.backend, t.mode):
        x = ug.from_native(source)
        source.add_(10)  # in place: a shared tensor sees it, a copy would not
        np.testing.assert_array_equal(x.numpy(), [10.0, 11.0, 12.0, 13.0])


@pytest.mark.parametrize("target", TARGETS)
def test_from_native_of_a_misaligned_array(target):
    # TensorFlow aborts the process on a DLPack buffer not aligned to 64 bytes (quirk
    # "from_dlpack"): such a buffer must arrive as a copy, with its values.
    t = Target.parse(target)
    buffer = np.arange(20, dtype=np.float32)
    start = next(i for i in range(16) if buffer[i:].ctypes.data % 64 == 4)
    view = buffer[start:start + 4]
    with ug.use_backend(t.backend, t.mode):
        x = ug.from_native(view)
        assert ug.sum(x).item() == float(sum(range(start, start + 4)))


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_dlpack_both_ways(target):
    torch = _torch()
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        x = ug.tensor(np.array([[1, 2, 3]], np.int32))
        assert x.__dlpack_device__() == (1, 0)
        np.testing.assert_array_equal(np.from_dlpack(x), [[1, 2, 3]])
        as_torch = torch.from_dlpack(x)
        assert as_torch.dtype == torch.int32
        np.testing.assert_array_equal(as_torch.numpy(), [[1, 2, 3]])
        y = ug.from_dlpack(torch.tensor([True, False]))
        assert y.dtype == "bool"
        np.testing.assert_array_equal(ug.logical_not(y).numpy(), [False, True])
        z = ug.from_dlpack(x)
        np.testing.assert_array_equal((z + 1).numpy(), [[2, 3, 4]])


@pytest.mark.parametrize("target", TARGETS)
def test_native_inside_a_function(target):
    t = Target.parse(target)

    @ug.function
    def f(x):
        native = x.native()  # the line the error names
        return ug.from_native(native) + 1

    with ug.use_backend(t.backend, t.mode):
        x = ug.tensor([1.0, 2.0])
        if t.mode == "eager":
            np.testing.assert_array_equal(f(x).numpy(), [2.0, 3.0])
        else:
            with pytest.raises(ug.TracingError, match=r"\.native\(\)` on a symbolic tensor "
                                                      r"at .*test_interop\.py:\d+"):
                f(x)


@pytest.mark.parametrize("target", TARGETS)
def test_from_native_constant_in_a_static_function(target):
    # A framework tensor captured by a traced function is a constant of the graph.
    t = Target.parse(target)
    weights = np.array([1.0, 10.0], np.float32)

    @ug.function
    def f(x):
        return x * ug.from_native(weights)

    with ug.use_backend(t.backend, t.mode):
        np.testing.assert_array_equal(f(ug.tensor([2.0, 3.0])).numpy(), [2.0, 30.0])


def test_from_native_errors_name_the_value_and_the_fix():
    with pytest.raises(TypeError, match=r"ug.from_native at .*test_interop\.py:\d+: "
                                        r"builtins.list .* use ug.tensor"):
        ug.from_native([1, 2])
    torch = _torch()
    with pytest.raises(TypeError, match=r"complex64 is not supported.*cast it in"):
        ug.from_native(torch.zeros(2, dtype=torch.complex64))
    with pytest.raises(TypeError, match="does not implement __dlpack__"):
        ug.from_dlpack([1.0])


def test_from_native_detaches_torch_autograd():
    torch = _torch()
    source = torch.ones(2, requires_grad=True)
    with ug.use_backend("torch", "eager"):
        x = ug.from_native(source)
        assert not x.native().requires_grad
        grad = ug.grad(lambda v: ug.sum(v * v))(x)
    np.testing.assert_array_equal(grad.numpy(), [2.0, 2.0])
    assert source.grad is None


@pytest.mark.parametrize("target", TARGETS)
def test_torch_as_tensor_and_np_asarray(target):
    torch = _torch()
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        x = ug.tensor([[1.5, -2.0]])
        assert torch.as_tensor(x).tolist() == [[1.5, -2.0]]
        assert np.asarray(x).tolist() == [[1.5, -2.0]] and np.asarray(x).dtype == np.float32
