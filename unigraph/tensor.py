"""`Tensor` and `Parameter`.

A Tensor is either *eager* (it holds a backend and that backend's native tensor, or a NumPy
array fetched from a static run, converted on first use) or *symbolic* (it holds an IR
`Value` of the graph being traced). Shape and dtype are known either way without touching
the framework.
"""

from __future__ import annotations

import numpy as np

from unigraph.errors import TracingError
from unigraph.ir import check_dtype
from unigraph.tracing import user_source


class Tensor:
    __slots__ = ("_backend", "_native", "_array", "_value", "_builder", "shape", "dtype")

    def __init__(self, shape, dtype, backend=None, native=None, array=None, value=None,
                 builder=None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self._backend = backend
        self._native = native
        self._array = array
        self._value = value
        self._builder = builder

    # -- data ---------------------------------------------------------------------------
    @property
    def is_symbolic(self) -> bool:
        return self._value is not None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numpy(self) -> np.ndarray:
        """The value as a NumPy array (eager tensors only)."""
        if self._value is not None:
            raise TracingError(
                f"`.numpy()` on a symbolic tensor at {user_source()}: inside a static "
                "@ug.function values exist only when the compiled graph runs; return the "
                "tensor from the function and call `.numpy()` on the result"
            )
        if self._array is None:
            self._array = self._backend.to_numpy(self._native)
        return self._array

    def native_for(self, backend):
        """This tensor's value as `backend`'s native tensor (converted if need be)."""
        if self._backend is backend:
            if self._native is None:
                self._native = backend.to_native(self._array)
            return self._native
        return backend.to_native(self.numpy())

    def item(self):
        return self.numpy().item()

    def __array__(self, dtype=None, copy=None):
        array = self.numpy()
        return array.astype(dtype) if dtype is not None else array

    def __bool__(self):
        if self._value is not None:
            raise TracingError(
                f"`if`/`while`/`bool()` on a traced tensor at {user_source()}: in a static "
                "graph its value is not known while tracing; use `ug.cond(pred, true_fn, "
                "false_fn)` or `ug.while_loop(cond_fn, body_fn, loop_vars)` instead"
            )
        if self.shape not in ((), (1,)):
            raise ValueError(
                f"the truth value of a tensor of shape {list(self.shape)} is ambiguous; "
                "reduce it first (ug.sum, ug.max) or compare elementwise"
            )
        return bool(self.numpy().reshape(()))

    def __int__(self):
        return int(self.numpy().reshape(()))

    def __float__(self):
        return float(self.numpy().reshape(()))

    def __index__(self):
        return int(self)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if not self.shape or self.shape[0] is None:
            raise TypeError(f"cannot iterate over a tensor of shape {list(self.shape)}")
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self):
        if self._value is not None:
            return (f"Tensor(symbolic %{self._value.id}, shape={list(self.shape)}, "
                    f"dtype={self.dtype})")
        where = self._backend.name if self._backend is not None else "numpy"
        return f"Tensor({self.numpy()!r}, backend={where})"

    __hash__ = object.__hash__

    # -- operators (defined in unigraph.api, bound below) --------------------------------
    def __add__(self, other):
        return _api.add(self, other)

    def __radd__(self, other):
        return _api.add(other, self)

    def __sub__(self, other):
        return _api.sub(self, other)

    def __rsub__(self, other):
        return _api.sub(other, self)

    def __mul__(self, other):
        return _api.mul(self, other)

    def __rmul__(self, other):
        return _api.mul(other, self)

    def __truediv__(self, other):
        return _api.div(self, other)

    def __rtruediv__(self, other):
        return _api.div(other, self)

    def __pow__(self, other):
        return _api.pow(self, other)

    def __rpow__(self, other):
        return _api.pow(other, self)

    def __matmul__(self, other):
        return _api.matmul(self, other)

    def __rmatmul__(self, other):
        return _api.matmul(other, self)

    def __neg__(self):
        return _api.neg(self)

    def __abs__(self):
        return _api.abs(self)

    def __lt__(self, other):
        return _api.less(self, other)

    def __le__(self, other):
        return _api.less_equal(self, other)

    def __gt__(self, other):
        return _api.greater(self, other)

    def __ge__(self, other):
        return _api.greater_equal(self, other)

    def __eq__(self, other):
        return _api.equal(self, other)

    def __ne__(self, other):
        return _api.not_equal(self, other)

    def __and__(self, other):
        return _api.logical_and(self, other)

    def __or__(self, other):
        return _api.logical_or(self, other)

    def __invert__(self):
        return _api.logical_not(self)

    def __getitem__(self, index):
        return _api.getitem(self, index)

    @property
    def T(self):
        return _api.transpose(self)

    def reshape(self, *shape):
        return _api.reshape(self, shape[0] if len(shape) == 1 else shape)

    def astype(self, dtype):
        return _api.cast(self, dtype)

    def sum(self, axis=None, keepdims=False):
        return _api.sum(self, axis, keepdims)

    def mean(self, axis=None, keepdims=False):
        return _api.mean(self, axis, keepdims)


class Parameter(Tensor):
    """A trainable (or frozen) weight, initialised once from NumPy and loaded into every
    backend from that value.

    `trainable=False` excludes it from optimizers; `lr_scale` multiplies the learning rate
    for this parameter only (Paddle's `ParamAttr(learning_rate=...)`).

    Where the newest value lives: a parameter written by a training step on some backend
    keeps its value there (`_home`) until someone reads it; `version` counts writes so that
    every other store knows when to reload.
    """

    __slots__ = ("name", "trainable", "lr_scale", "version", "_home", "_natives")

    def __init__(self, data, name="", trainable=True, lr_scale=1.0, dtype=None):
        array = np.array(data, dtype=dtype)
        check_dtype(array.dtype)
        super().__init__(array.shape, array.dtype.name, array=array)
        self.name = name
        self.trainable = trainable
        self.lr_scale = float(lr_scale)
        self.version = 0
        self._home = None  # (store, key) holding a newer value than _array, or None
        self._natives: dict = {}  # backend name -> (version, native) for eager use

    def numpy(self) -> np.ndarray:
        if self._home is not None:
            store, key = self._home
            self._array = store.get_param(key)
            self._home = None
        return self._array

    def native_for(self, backend):
        entry = self._natives.get(backend.name)
        if entry is not None and entry[0] == self.version:
            return entry[1]
        native = backend.to_native(self.numpy())
        self._natives[backend.name] = (self.version, native)
        return native

    def set_value(self, value) -> None:
        """Replace the value (NumPy array, or a Tensor of the same shape and dtype)."""
        array = np.asarray(value.numpy() if isinstance(value, Tensor) else value)
        if array.shape != self.shape:
            raise ValueError(
                f"parameter {self.name!r} has shape {list(self.shape)}; "
                f"cannot set a value of shape {list(array.shape)}"
            )
        self._array = array.astype(self.dtype, copy=True)
        self._home = None
        self.version += 1

    def _written_by(self, store, key) -> None:
        """A static store (compiled executable) has just written a new value."""
        self.version += 1
        self._home = (store, key)

    def _written_eager(self, backend, native) -> None:
        self.version += 1
        self._natives = {backend.name: (self.version, native)}
        self._home = (_EagerStore(backend, native), None)

    def __repr__(self):
        return f"Parameter({self.name!r}, shape={list(self.shape)}, dtype={self.dtype})"


class _EagerStore:
    __slots__ = ("backend", "native")

    def __init__(self, backend, native):
        self.backend = backend
        self.native = native

    def get_param(self, key):
        return self.backend.to_numpy(self.native)


def tensor(data, dtype=None) -> Tensor:
    """Make an eager tensor on the current target's backend.

    >>> ug.tensor([1.0, 2.0])          # float32, like every framework (NumPy: float64)
    >>> ug.tensor(np.arange(3))        # keeps the array's dtype
    """
    from unigraph.dispatch import current_backend
    from unigraph.dtypes import python_scalar_dtype

    if isinstance(data, Tensor) and dtype is None:
        return data
    if dtype is None and not isinstance(data, np.ndarray | np.generic):
        flat = np.asarray(data)
        if flat.dtype.kind == "f":
            dtype = "float32"
        elif flat.dtype.kind in "iu":
            dtype = "int64"
        elif flat.dtype.kind == "b":
            dtype = "bool"
        elif flat.size == 0:
            dtype = "float32"
        else:
            python_scalar_dtype(data)  # raises naming the type
    array = np.asarray(data.numpy() if isinstance(data, Tensor) else data, dtype=dtype)
    check_dtype(array.dtype)
    return Tensor(array.shape, array.dtype.name, backend=current_backend(), array=array)


from unigraph import api as _api  # noqa: E402  (operators need the op functions)
