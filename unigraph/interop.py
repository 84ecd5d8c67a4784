"""Tensors in and out of the frameworks themselves: `ug.from_native`, `Tensor.native()` and
DLPack (`ug.from_dlpack`, `Tensor.__dlpack__`).

These are the feed/fetch boundary, so they may convert; each shares memory where the
framework allows (DLPack on CPU, the same tensor when the frameworks match) instead of
copying. Unlike `ug.tensor` (which copies in), a shared tensor sees later in-place writes to
the framework tensor it came from: copy first (`ug.tensor(t.numpy())`) to keep a snapshot.

Which framework a native tensor belongs to is read from its type's module, without importing
any framework that is not already imported.
"""

from __future__ import annotations

import sys

import numpy as np

from unigraph.dtypes import as_dtype
from unigraph.errors import TracingError
from unigraph.tensor import Tensor
from unigraph.tracing import user_source

# The framework module a native tensor's type comes from -> unigraph's backend name.
_FRAMEWORK_OF_MODULE = {"numpy": "numpy", "torch": "torch", "tensorflow": "tensorflow",
                        "paddle": "paddle"}


def _framework_of(obj) -> str | None:
    """'numpy', 'torch', 'tensorflow' or 'paddle' for a tensor of that framework, else None."""
    if isinstance(obj, np.ndarray):
        return "numpy"
    root = type(obj).__module__.split(".")[0]
    name = _FRAMEWORK_OF_MODULE.get(root)
    if name is None or root not in sys.modules:
        return None
    return name


# -- native tensor -> a plain native of the same framework (no autograd history) ------------
def _plain_numpy(array):
    return array


def _plain_torch(tensor):
    return tensor.detach()  # shares memory; the caller's autograd graph stays theirs


def _plain_tensorflow(tensor):
    tf = sys.modules["tensorflow"]
    # A tf.Variable is read once (a copy by TF's own rules); an eager tensor is itself.
    return tf.convert_to_tensor(tensor)


def _plain_paddle(tensor):
    return tensor.detach()  # shares memory, stop_gradient=True


_PLAIN = {"numpy": _plain_numpy, "torch": _plain_torch, "tensorflow": _plain_tensorflow,
          "paddle": _plain_paddle}


# -- any DLPack producer -> this framework's tensor (zero-copy on CPU) -----------------------
def _numpy_from_dlpack(obj):
    return np.from_dlpack(obj)


def _torch_from_dlpack(obj):
    return sys.modules["torch"].from_dlpack(obj)


# TensorFlow's kernels CHECK that a tensor's buffer is aligned to Eigen's 64 bytes and abort
# the process otherwise, and tf.experimental.dlpack.from_dlpack takes any pointer (quirk
# "from_dlpack" in unigraph_tensorflow.quirks). A misaligned buffer is copied instead.
_TF_ALIGNMENT = 64


def _tensorflow_from_dlpack(obj):
    tf = sys.modules["tensorflow"]
    if not hasattr(obj, "__dlpack__"):
        return tf.experimental.dlpack.from_dlpack(obj)  # a bare capsule: TF's own
    # The buffer seen through NumPy (CPU DLPack, zero-copy) to read its address.
    array = np.from_dlpack(obj)
    if array.ctypes.data % _TF_ALIGNMENT or not array.flags.writeable:
        # TF copies into an aligned buffer (a read-only one cannot be exported by DLPack).
        return tf.convert_to_tensor(array)
    return tf.experimental.dlpack.from_dlpack(array.__dlpack__())


def _paddle_from_dlpack(obj):
    return sys.modules["paddle"].utils.dlpack.from_dlpack(obj)


_FROM_DLPACK = {"numpy": _numpy_from_dlpack, "torch": _torch_from_dlpack,
                "tensorflow": _tensorflow_from_dlpack, "paddle": _paddle_from_dlpack}


def _dtype_name(native, backend) -> str:
    """The unigraph dtype of a native tensor, or an error naming it and the fix."""
    framework_dtype = native.dtype
    try:
        numpy_dtype = np.dtype(str(framework_dtype).replace("torch.", "").replace(
            "paddle.", "").replace("<dtype: '", "").rstrip("'>"))
        return as_dtype(numpy_dtype)
    except TypeError:
        raise TypeError(
            f"ug.from_native at {user_source()}: a {backend.name} tensor of dtype "
            f"{framework_dtype} is not supported; unigraph's dtypes are "
            f"{', '.join(_supported())}: cast it in {backend.name} first"
        ) from None


def _supported() -> tuple:
    from unigraph.ir import DTYPES

    return DTYPES


def _wrap(native, backend) -> Tensor:
    dtype = _dtype_name(native, backend)
    return Tensor(tuple(int(d) for d in native.shape), dtype, backend=backend, native=native)


def _current_backend():
    from unigraph.dispatch import current_backend

    return current_backend()


def from_native(obj) -> Tensor:
    """A unigraph tensor for a framework's own tensor (torch, TensorFlow, Paddle) or a NumPy
    array, on the current target's backend.

    When the tensor's framework is the current target's, the result wraps that very tensor
    (detached from the framework's autograd: gradients are unigraph's); otherwise it
    crosses over by DLPack, zero-copy on CPU. Either way it shares memory with `obj`, so a
    later in-place write to `obj` shows in the result (`ug.tensor` copies instead).

    >>> with ug.use_backend("torch"):
    ...     t = ug.from_native(torch.arange(3.0))     # the same torch storage
    >>> ug.from_native(np.ones(2, np.float32)) * 2    # on the current target
    """
    if isinstance(obj, Tensor):
        return obj
    framework = _framework_of(obj)
    if framework is None:
        raise TypeError(
            f"ug.from_native at {user_source()}: {type(obj).__module__}."
            f"{type(obj).__name__} is not a NumPy array nor a torch, TensorFlow or Paddle "
            "tensor; use ug.tensor(data) for Python numbers and lists"
        )
    backend = _current_backend()
    native = _PLAIN[framework](obj)
    if framework != _natives_of(backend):
        backend.load()
        native = _importer(backend)(_dlpack_source(native, framework))
    return _wrap(native, backend)


def _natives_of(backend) -> str:
    """The framework whose tensors are `backend`'s natives."""
    return backend.native_framework or backend.framework


def _importer(backend):
    """The DLPack importer into `backend`'s natives, or an error naming the fix."""
    importer = _FROM_DLPACK.get(_natives_of(backend))
    if importer is None:
        raise TypeError(
            f"ug.from_native / ug.from_dlpack at {user_source()}: backend {backend.name!r} "
            f"keeps {_natives_of(backend)!r} tensors, which unigraph cannot import by DLPack "
            "(numpy, torch, tensorflow and paddle it can); copy the values in with "
            "ug.tensor(np.asarray(t))")
    return importer


def _dlpack_source(native, framework: str):
    """An object that exports DLPack for `native` (TF tensors give a capsule)."""
    if framework == "tensorflow":
        tf = sys.modules["tensorflow"]
        return _Capsule(tf.experimental.dlpack.to_dlpack(native))
    if framework == "numpy" and not native.flags.writeable:
        return native.copy()  # DLPack exporters refuse read-only arrays
    return native


class _Capsule:
    """A DLPack capsule dressed as a producer, for importers that want `__dlpack__`."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, **kwargs):
        return self._capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU: TF's CPU build


def from_dlpack(obj) -> Tensor:
    """A unigraph tensor on the current target's backend from any DLPack producer (an object
    with `__dlpack__`, e.g. a NumPy array, a torch, TF, Paddle, JAX or CuPy tensor, or a
    unigraph Tensor), sharing its memory where the framework allows.

    >>> t = ug.from_dlpack(torch.arange(3))
    """
    if isinstance(obj, Tensor):
        obj = _Capsule(obj.__dlpack__())
    elif not hasattr(obj, "__dlpack__"):
        raise TypeError(
            f"ug.from_dlpack at {user_source()}: {type(obj).__name__} does not implement "
            "__dlpack__; for a NumPy array, list or number use ug.tensor(data)"
        )
    backend = _current_backend()
    backend.load()
    return _wrap(_importer(backend)(obj), backend)


def native(tensor: Tensor):
    """The framework's own tensor behind an eager `tensor` (see `Tensor.native`)."""
    if tensor.is_symbolic:
        raise TracingError(
            f"`.native()` on a symbolic tensor at {user_source()}: inside a static "
            "@ug.function the tensor is a node of the graph being built, not a framework "
            "tensor; return it from the function and call `.native()` on the result, or "
            "run the function on an eager target"
        )
    backend = tensor._backend
    if backend is None:
        backend = _current_backend()
    out = tensor.native_for(backend)
    if isinstance(out, np.ndarray):
        out = out.view()
        out.flags.writeable = False  # the NumPy engine's arrays are never written in place
    return out


def to_dlpack(tensor: Tensor, **kwargs):
    """The DLPack capsule of `tensor`'s native (see `Tensor.__dlpack__`)."""
    value = native(tensor)
    if tensor._backend is not None and tensor._backend.framework == "tensorflow":
        return sys.modules["tensorflow"].experimental.dlpack.to_dlpack(value)
    try:
        return value.__dlpack__(**kwargs)
    except BufferError:
        # A read-only NumPy array to a consumer that speaks DLPack < 1.0, which cannot
        # mark memory read-only: it gets a copy rather than a way to write our array.
        return np.array(value).__dlpack__(**kwargs)


def dlpack_device(tensor: Tensor) -> tuple:
    """`(device type, device id)` of `tensor`'s native, as DLPack names them."""
    value = native(tensor)
    if hasattr(value, "__dlpack_device__"):
        kind, index = value.__dlpack_device__()
        return (int(kind), int(index or 0))  # paddle says (kDLCPU, None) for the CPU
    return (1, 0)  # kDLCPU
