"""`Tensor` and `Parameter`.

A Tensor is either *eager* (it holds a backend and that backend's native tensor, or a NumPy
array fetched from a static run, converted on first use) or *symbolic* (it holds an IR
`Value` of the graph being traced). Shape and dtype are known either way without touching
the framework.

The memory contract, the same on every backend: `ug.tensor(array)` copies (a later write
to the caller's array never changes the tensor), and `.numpy()` returns a read-only view
(a write to it raises instead of reaching the tensor; `np.array(t)` or `.numpy().copy()`
gives a writable copy).

NumPy operands on either side of an operator give a unigraph tensor: `np_w * t` and
`t * np_w` are the same `ug.mul` (Tensor implements `__array_ufunc__`, so NumPy hands the
operators over instead of computing them itself).
"""

from __future__ import annotations

import sys
import types

import numpy as np

from unigraph.dtypes import DEFAULT_FLOAT, DEFAULT_INT, as_dtype, result_dtype
from unigraph.errors import ShapeError, TracingError
from unigraph.ir import DTYPES
from unigraph.tracing import user_code, user_source


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
        """The number of dims (the rank)."""
        return len(self.shape)

    @property
    def size(self):
        """The number of elements (NumPy's `.size`), or None while a dim is unknown.

        >>> ug.zeros((2, 3)).size
        6
        """
        return None if None in self.shape else int(np.prod(self.shape, dtype=np.int64))

    def tolist(self):
        """The value as (nested) Python lists of numbers (eager tensors only).

        >>> ug.tensor([[1, 2]]).tolist()
        [[1, 2]]
        """
        return self._host().tolist()

    def numpy(self) -> np.ndarray:
        """The value as a read-only NumPy array (eager tensors only); `.numpy().copy()` for
        one you can write to.

        >>> ug.tensor([1.0, 2.0]).numpy()
        array([1., 2.], dtype=float32)
        """
        view = self._host().view()
        view.flags.writeable = False  # a write must never reach the tensor (on any backend)
        return view

    def _host(self) -> np.ndarray:
        """The value as a NumPy array that unigraph itself only reads (may share memory
        with the native tensor, so it is never handed to the user)."""
        if self._value is not None:
            raise TracingError(
                f"`.numpy()` on a symbolic tensor at {user_source()}: inside a static "
                "@ug.function values exist only when the compiled graph runs; return the "
                "tensor from the function and call `.numpy()` on the result"
            )
        if self._array is None:
            self._array = np.asarray(self._backend.to_numpy(self._native))
        return self._array

    def native_for(self, backend):
        """This tensor's value as `backend`'s native tensor (converted if need be)."""
        if self._backend is backend:
            if self._native is None:
                self._native = backend.to_native(self._array)
            return self._native
        return backend.to_native(self._host())

    def native(self):
        """The framework's own tensor behind this eager tensor (a torch/TF/Paddle tensor, or
        a read-only NumPy array on numpy targets), sharing its memory; an error inside a
        static trace. `ug.from_native` goes the other way.

        >>> with ug.use_backend("torch"):
        ...     ug.tensor([1.0, 2.0]).native()
        tensor([1., 2.])
        """
        return _interop().native(self)

    def __dlpack__(self, **kwargs):
        """DLPack export of the native tensor: `torch.from_dlpack(t)`, `np.from_dlpack(t)`."""
        return _interop().to_dlpack(self, **kwargs)

    def __dlpack_device__(self):
        return _interop().dlpack_device(self)

    def item(self):
        """The value of a one-element tensor as a Python number.

        >>> ug.tensor([2.5]).item()
        2.5
        """
        # The shape first: a vector is refused the same way in eager and static mode.
        if None not in self.shape and int(np.prod(self.shape)) != 1:
            raise ValueError(
                f"`.item()` at {user_source()} on a tensor of shape {list(self.shape)}: only "
                "a one-element tensor is one number; reduce it first (ug.sum, ug.mean, "
                "t[0]) or take all values with `.numpy()`"
            )
        return self._host().item()

    def __array__(self, dtype=None, copy=None):
        array = self.numpy()
        if dtype is not None and np.dtype(dtype) != array.dtype:
            return array.astype(dtype)
        return array.copy() if copy else array

    # NumPy hands every ufunc with a Tensor operand to this method, so `np_w * t`,
    # `np_b + t`, `np_a @ t` and `np_a < t` are unigraph ops (differentiable, traceable)
    # instead of NumPy computing on the tensor's value behind the graph's back.
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        op = _UFUNC_OPS.get(ufunc.__name__) if method == "__call__" and not kwargs else None
        if op is None:
            call = f"np.{ufunc.__name__}" + (f".{method}" if method != "__call__" else "")
            extra = f" with {', '.join(kwargs)}=" if kwargs else ""
            raise TypeError(
                f"{call}(){extra} on a unigraph Tensor at {user_source()}: NumPy would "
                "compute outside unigraph (no gradient, no static graph); use the ug "
                "function (ug.exp, ug.sum, ...) or convert explicitly with `.numpy()`"
            )
        return getattr(_api, op)(*inputs)

    def __bool__(self):
        native = self._native
        # The common case first: an eager one-element bool tensor (an eager tensor has no IR
        # value), read as `_truth` reads it, with `_truth_in_c`'s cache inline: an eager
        # cond/while predicate asks every step.
        if native is not None and self.dtype == "bool" and self.shape in _ONE_ELEMENT:
            in_c = _TRUTH_IN_C.get(type(native))
            if in_c:
                return native.__bool__()
            if in_c is False:  # (None: a native type not seen yet, `_truth` finds out)
                truth = self._backend.truth
                if truth is not None and self._array is None:
                    return truth(native)
                return bool(self._host().reshape(()))
        return self._truth()

    def _truth(self) -> bool:
        """`bool(self)` in full: the errors for a traced or a many-element tensor, the
        backend's cheaper read (`Backend.truth`), or a NumPy copy."""
        if self._value is not None:
            raise TracingError(_traced_truth_message())
        if self.shape not in _ONE_ELEMENT:
            raise ValueError(
                f"the truth value of a tensor of shape {list(self.shape)} is ambiguous; "
                "reduce it first (ug.sum, ug.max) or compare elementwise"
            )
        native = self._native
        if native is not None and self.dtype == "bool":
            if _truth_in_c(type(native)):
                return native.__bool__()  # no copy to NumPy: ~0.2 us where that costs ~1 us
            truth = self._backend.truth  # the backend's cheaper read (Paddle: ~0.5 of ~2 us)
            if truth is not None and self._array is None:  # (no copy made yet to read)
                return truth(native)
        return bool(self._host().reshape(()))

    def __int__(self):
        return int(self._scalar("int"))

    def __float__(self):
        return float(self._scalar("float"))

    def _scalar(self, call: str):
        if None not in self.shape and int(np.prod(self.shape)) != 1:
            raise TypeError(
                f"`{call}()` at {user_source()} on a tensor of shape {list(self.shape)}: only "
                "a one-element tensor converts to a Python number; reduce it first "
                "(ug.sum, ug.mean, t[0])"
            )
        return self._host().reshape(())

    def __index__(self):
        return int(self)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __setitem__(self, index, value):
        # (`y[i] += v` ends here too: Python reads y[i], adds, then assigns.)
        raise TypeError(f"a unigraph tensor cannot be written in place: `tensor[...] = value` at "
                        f"{user_source()}; write `y = y.at[index].set(value)` (or "
                        "`.at[index].add(value)` for `+=`), which returns the updated copy")

    def __iter__(self):
        if not self.shape:
            raise TypeError("cannot iterate over a tensor of shape []")
        if self.shape[0] is None:
            # A `for` over the rows unrolls while tracing: it needs their number.
            raise ShapeError(
                f"`for` over the rows of a tensor at {user_source()} whose first dim is left "
                f"open by input_spec (shape {list(self.shape)}): the loop is unrolled while "
                "tracing, so the number of rows must be known; give that dim a size in "
                "input_spec (eager targets know it and run the loop)"
            )
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self):
        if self._value is not None:
            return (f"Tensor(symbolic %{self._value.id}, shape={list(self.shape)}, "
                    f"dtype={self.dtype}, mode=static (tracing))")
        where = self._backend.name if self._backend is not None else "numpy"
        values = np.array2string(self._host(), separator=", ", threshold=100, prefix="Tensor(")
        return f"Tensor({values}, dtype={self.dtype}, backend={where}, mode={self._mode(where)})"

    @staticmethod
    def _mode(backend: str) -> str:
        """The mode of the current target when it is on this tensor's backend: a value is
        made by that target (eager ops, or a compiled function's run); else eager."""
        from unigraph.config import current_target

        target = current_target()
        return target.mode if target.backend == backend else "eager"

    __hash__ = object.__hash__

    # -- operators -----------------------------------------------------------------------
    # The forward operators (`x + y`, `x < y`, `-x`, `x[i]`, ...) are the op functions
    # themselves, set on this class at the end of unigraph/api/__init__.py: a method calling
    # `_api.add` would be one more Python call in every eager op (issue 19 item 3). The
    # reflected ones (`1 + x`) swap their operands here.
    def __radd__(self, other):
        return _api.add(other, self)

    def __rsub__(self, other):
        return _api.sub(other, self)

    def __rmul__(self, other):
        return _api.mul(other, self)

    def __rtruediv__(self, other):
        return _api.div(other, self)

    def __rpow__(self, other):
        return _api.pow(other, self)

    def __rmatmul__(self, other):
        return _api.matmul(other, self)

    @property
    def T(self):
        return _api.transpose(self)

    def reshape(self, *shape):
        return _api.reshape(self, shape[0] if len(shape) == 1 else shape)

    def astype(self, dtype):
        return _api.cast(self, dtype)

    def __mod__(self, other):
        return _api.mod(self, other)

    def __rmod__(self, other):
        return _api.mod(other, self)

    def __floordiv__(self, other):
        return _api.floor_divide(self, other)

    def __rfloordiv__(self, other):
        return _api.floor_divide(other, self)

    @property
    def at(self):
        """Functional updates: `x.at[index].set(v)` and `x.at[index].add(v)` return a new
        tensor (x is unchanged), differentiable in x and v. See `ug.index_update`.

        >>> ug.zeros(3).at[1].set(5.0)
        [0.0, 5.0, 0.0]
        """
        return _At(self)

    # Methods: the ug function of the same name applied to this tensor.
    def sum(self, axis=None, keepdims=False):
        return _api.sum(self, axis, keepdims)

    def mean(self, axis=None, keepdims=False):
        return _api.mean(self, axis, keepdims)

    def max(self, axis=None, keepdims=False):
        return _api.max(self, axis, keepdims)

    def min(self, axis=None, keepdims=False):
        return _api.min(self, axis, keepdims)

    def prod(self, axis=None, keepdims=False):
        return _api.prod(self, axis, keepdims)

    def var(self, axis=None, keepdims=False, ddof=0):
        return _api.var(self, axis, keepdims, ddof)

    def std(self, axis=None, keepdims=False, ddof=0):
        return _api.std(self, axis, keepdims, ddof)

    def argmax(self, axis=-1, keepdims=False):
        return _api.argmax(self, axis, keepdims)

    def argmin(self, axis=-1, keepdims=False):
        return _api.argmin(self, axis, keepdims)

    def topk(self, k, axis=-1, largest=True, sorted=True):
        """`ug.topk(self, k, axis, largest, sorted)`: (values, indices)."""
        return _api.topk(self, k, axis, largest, sorted)

    def flatten(self, start_axis=0, end_axis=-1):
        return _api.flatten(self, start_axis, end_axis)

    def squeeze(self, axis=None):
        return _api.squeeze(self, axis)

    def expand_dims(self, axis):
        return _api.expand_dims(self, axis)

    unsqueeze = expand_dims

    def clip(self, min=None, max=None):
        return _api.clip(self, min, max)

    def abs(self):
        return _api.abs(self)

    def exp(self):
        return _api.exp(self)

    def log(self):
        return _api.log(self)

    def sqrt(self):
        return _api.sqrt(self)

    def transpose(self, *perm):
        return _api.transpose(self, perm[0] if len(perm) == 1 else (perm or None))

    def cumsum(self, axis=None):
        return _api.cumsum(self, axis)

    def detach(self):
        """This tensor's value with no gradient flowing back through it: `ug.stop_gradient`."""
        return _api.stop_gradient(self)


_new = object.__new__


def eager_tensor(shape: tuple, dtype: str, backend, native, array=None) -> Tensor:
    """`Tensor(shape, dtype, backend, native, array)` for a `shape` that is already a tuple:
    the slots set directly, without `__init__`'s call and copy (~40 ns of every eager op).
    A static run's NumPy output is the `array` (native None: converted on first use).

    >>> eager_tensor((), "float32", backend, native).shape
    ()
    >>> eager_tensor((2,), "float32", backend, None, np.zeros(2, np.float32)).numpy()
    array([0., 0.], dtype=float32)
    """
    t = _new(Tensor)
    t.shape = shape
    t.dtype = dtype
    t._backend = backend
    t._native = native
    t._array = array
    t._value = t._builder = None
    return t


def eager_tensor_lines(name: str, shape: str, dtype: str, backend: str, out: str) -> list:
    """Source lines, for generated code (a @ug.function's prebuilt caller), that make local
    `name` the Tensor of a static run's output `out` (names of locals or globals; globals
    `new` = object.__new__, `Tensor`, `ndarray` = np.ndarray): `eager_tensor`'s stores
    without its call (~1 k instructions of a 13 k scalar call), an `ndarray` output as the
    `array`, anything else as the native. Kept here, next to `eager_tensor`, with the slots.

    >>> eager_tensor_lines("t0", "S0", "D0", "backend", "o0")[0]
    '    t0 = new(Tensor)'
    """
    return [f"    {name} = new(Tensor)",
            f"    {name}.shape = {shape}",
            f"    {name}.dtype = {dtype}",
            f"    {name}._backend = {backend}",
            f"    if type({out}) is ndarray:",
            f"        {name}._native = None",
            f"        {name}._array = {out}",
            "    else:",
            f"        {name}._native = {out}",
            f"        {name}._array = None",
            f"    {name}._value = {name}._builder = None"]


def symbolic_tensor(builder, value) -> Tensor:
    """`Tensor(value.shape, value.dtype, value=value, builder=builder)`, the Tensor of IR
    `value` in `builder`'s graph, with its slots set directly as in `eager_tensor` (every
    traced op makes one: ~0.5 us); a Value's shape is already a tuple.

    >>> symbolic_tensor(builder, builder.add_input((2,), "float32")).is_symbolic
    True
    """
    t = _new(Tensor)
    t.shape = value.shape
    t.dtype = value.dtype
    t._value = value
    t._builder = builder
    t._backend = t._native = t._array = None
    return t


class _At:
    """`x.at`: indexing it gives the functional-update object for that index."""

    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor

    def __getitem__(self, index):
        return _AtIndex(self.tensor, index)


class _AtIndex:
    __slots__ = ("tensor", "index")

    def __init__(self, tensor, index):
        self.tensor = tensor
        self.index = index

    def set(self, value):
        """A copy of the tensor with `value` written at the index (broadcast)."""
        return _api.index_update(self.tensor, self.index, value)

    def add(self, value):
        """A copy of the tensor with `value` added at the index (repeats accumulate)."""
        return _api.index_update(self.tensor, self.index, value, accumulate=True)


class Parameter(Tensor):
    """A trainable (or frozen) weight, initialised once from NumPy and loaded into every
    backend from that value.

    `trainable=False` excludes it from optimizers; `lr_scale` multiplies the learning rate
    for this parameter only (Paddle's `ParamAttr(learning_rate=...)`). `order` is a hint for
    how a backend stores a 2-D value: "C" (row-major, the default) or "F" (column-major,
    what torch's Linear keeps: its [out, in] weight, used as `weight.t()`). Values and shape
    never change; a backend that honours the hint (torch) then runs the kernels of the
    framework's own layers, the others ignore it. `ug.nn.Linear` sets "F" on its weight.

    >>> w = ug.Parameter(np.zeros((784, 10), np.float32), lr_scale=0.1, order="F")

    Where the newest value lives: a parameter written by a training step on some backend
    keeps its value there (`_home`) until someone reads it; `version` counts writes so that
    every other store knows when to reload.
    """

    __slots__ = ("name", "trainable", "lr_scale", "order", "version", "_home", "_natives")

    def __init__(self, data, name="", trainable=True, lr_scale=1.0, dtype=None, order="C"):
        # NumPy's default dtypes (float64 for Python floats), always a private copy.
        array = as_array(data, dtype, what="ug.Parameter", python_defaults=False)
        super().__init__(array.shape, dtype_name(array.dtype), array=array)
        self.name = name
        self.trainable = trainable
        self.lr_scale = float(lr_scale)
        if order not in ("C", "F"):
            raise ValueError(f"ug.Parameter: order must be 'C' (row-major) or 'F' "
                             f"(column-major), got {order!r}")
        self.order = order
        self.version = 0
        self._home = None  # (store, key) holding a newer value than _array, or None
        self._natives: dict = {}  # backend name -> (version, native) for eager use

    @classmethod
    def _deferred(cls, store, shape: tuple, dtype: str, name="", trainable=True, lr_scale=1.0,
                 order="C") -> Parameter:
        """A parameter of `shape` (a tuple of ints) and `dtype` (a unigraph dtype name) whose
        value `store.get_param(None)` gives when first read (`ug.init.parameter`'s
        `InitialValue`, drawn then); the options are the constructor's. Nothing is
        allocated or copied for a value that is never read (a loaded model's weights), and
        the constructor's conversion of `data` is skipped (build100's build phase: ~4 of ~19
        us a Linear).

        >>> w = Parameter._deferred(value, (784, 10), "float32", order="F")
        """
        if order not in ("C", "F"):
            raise ValueError(f"ug.Parameter: order must be 'C' (row-major) or 'F' "
                             f"(column-major), got {order!r}")
        param = _new(cls)
        param.shape = shape
        param.dtype = dtype
        param._backend = param._native = param._array = param._value = param._builder = None
        param.name = name
        param.trainable = trainable
        param.lr_scale = float(lr_scale)
        param.order = order
        param.version = 0
        param._home = (store, None)  # the newest value lives there until read
        param._natives = {}
        return param

    def _host(self) -> np.ndarray:
        if self._home is not None:
            store, key = self._home
            self._array = np.asarray(store.get_param(key))  # (a backend may give a scalar)
            self._home = None
        return self._array

    def native_for(self, backend):
        entry = self._natives.get(backend.name)
        if entry is not None and entry[0] == self.version:
            return entry[1]
        array = self._host()
        # 3: the parameter's own reference, `array` and getrefcount's argument (a view of
        # it, a backend's native sharing it or a static plan holding it count too)
        if array.base is None and array.flags.writeable and sys.getrefcount(array) == 3:
            native = backend.adopt_native(array)
        else:
            native = backend.to_native(array)
        if self.order != "C":
            native = backend.param_layout(native, self.order)
        self._natives[backend.name] = (self.version, native)
        if native is array:  # the backend took the private array: the value lives there now
            self._array = None
            self._home = (_AdoptedStore(backend, native), None)
        return native

    def set_value(self, value) -> None:
        """Replace the value (NumPy array, or a Tensor of the same shape and dtype).

        >>> w.set_value(np.zeros((784, 10), np.float32))
        """
        dtype = self.dtype
        if isinstance(value, Tensor):
            array = value._host()
        elif (type(value) is np.ndarray and value.dtype.isnative
              and dtype_name(value.dtype) == dtype):
            array = value  # already of a supported dtype: copied once, below (load_state_dict)
            dtype = value.dtype  # (the object: astype then parses no name, ~0.3 us a load)
        else:
            array = as_array(value, what=f"{self.name or 'Parameter'}.set_value",
                             python_defaults=False)
        if array.shape != self.shape:
            raise ValueError(
                f"parameter {self.name!r} has shape {list(self.shape)}; "
                f"cannot set a value of shape {list(array.shape)}"
            )
        self._array = array.astype(dtype, copy=True)
        self._home = None
        self.version += 1

    def _written_by(self, store, key) -> None:
        """A static store (compiled executable) has just written a new value."""
        self.version += 1
        self._home = (store, key)

    def _written_eager(self, backend, native) -> None:
        if self.order != "C":  # an assigned value keeps the storage order (no copy if it has)
            own = self._natives.get(backend.name)  # (the native held, written in place: has)
            if own is None or own[1] is not native:
                native = backend.param_layout(native, self.order)
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


class _AdoptedStore(_EagerStore):
    """The store of a parameter's private array that its backend took as the native
    (`Parameter.native_for`, `Backend.adopt_native`): read as any eager store, but not taken
    by `in_place.sole_native` (it asks for an `_EagerStore` itself), so an optimizer's first
    step still makes a new tensor and writes in place from the second on, as before."""

    __slots__ = ()


_ONE_ELEMENT = ((), (1,))  # the shapes that `bool()` reads
_TRUTH_IN_C: dict = {}  # native tensor type -> whether its __bool__ is compiled code


def _traced_truth_message() -> str:
    """The error of `bool()` on a traced tensor, at the user's line; in a function that
    autograph could not convert, naming it and why (a function with no source: exec'd, or
    typed at the prompt)."""
    from unigraph.autograph import calls

    message = (f"`if`/`while`/`bool()` on a traced tensor at {user_source()}: in a static "
               "graph its value is not known while tracing; use `ug.cond(pred, true_fn, "
               "false_fn)` or `ug.while_loop(cond_fn, body_fn, loop_vars)` instead")
    code = user_code()
    reason = calls.unconvertible_reason(code) if code is not None else None
    if reason is not None:
        message += (f". `{code.co_qualname}` runs as written: autograph could not convert "
                    f"it: {reason}")
    return message


def _truth_in_c(native_type) -> bool:
    """Whether `bool(x)` of a one-element tensor of `native_type` is the framework's own
    compiled truth test (torch's, NumPy's): then an eager predicate is read without a copy
    to NumPy. A `__bool__` written in Python (TF's, Paddle's) may do more work than that
    copy (Paddle's costs ~10 us), so those tensors take the copy."""
    known = _TRUTH_IN_C.get(native_type)
    if known is None:
        method = getattr(native_type, "__bool__", None)
        known = _TRUTH_IN_C[native_type] = isinstance(
            method, types.MethodDescriptorType | types.WrapperDescriptorType)
    return known


_DTYPE_NAMES: dict = {}  # np.dtype -> name: `np.dtype.name` runs Python code on each access


def dtype_name(dtype: np.dtype) -> str:
    """`dtype.name`, cached (eager ops ask it for every NumPy input).

    >>> dtype_name(np.dtype("float32"))
    'float32'
    """
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = dtype.name
    return name


def tensor(data, dtype=None) -> Tensor:
    """Make an eager tensor on the current target's backend. NumPy arrays are copied: a
    later write to `data` never changes the tensor.

    >>> ug.tensor([1.0, 2.0])          # float32, like every framework (NumPy: float64)
    >>> ug.tensor(np.arange(3))        # keeps the array's dtype (int64), copies it
    >>> ug.tensor([1, 2], dtype="float64")
    """
    from unigraph.dispatch import current_backend

    if isinstance(data, Tensor):
        if dtype is None or as_dtype(dtype) == data.dtype:
            return data
        return _api.cast(data, dtype)
    if isinstance(data, list | tuple) and _holds_tensor(data):
        return _stacked(data, dtype)
    array = as_array(data, dtype)
    return Tensor(array.shape, dtype_name(array.dtype), backend=current_backend(), array=array)


def _holds_tensor(data) -> bool:
    return any(isinstance(item, Tensor) or (isinstance(item, list | tuple) and _holds_tensor(item))
               for item in data)


def _stacked(data, dtype) -> Tensor:
    """`ug.tensor([x, y * 2, 1.0])` with tensors among the items: `ug.stack` of them (a
    nested list level by level), so a gradient flows through the tensors and a static
    target traces it, as eager code reads it. Python numbers among them are weak, as in
    `x + 1.0`: the result has the tensors' (and arrays') promoted dtype, unless `dtype`."""
    if dtype is None:
        strong, weak = [], []
        _leaf_kinds(data, strong, weak)
        dtype = result_dtype(strong, weak)
    return _stack_levels(data, dtype)


def _leaf_kinds(data, strong: list, weak: list) -> None:
    for item in data:
        if isinstance(item, Tensor):
            strong.append(item.dtype)
        elif isinstance(item, list | tuple):
            _leaf_kinds(item, strong, weak)
        elif isinstance(item, np.ndarray | np.generic):
            strong.append(dtype_name(item.dtype))
        else:
            weak.append(item)


def _stack_levels(data, dtype) -> Tensor:
    items = [_stack_levels(item, dtype)
             if isinstance(item, list | tuple) and _holds_tensor(item) else tensor(item, dtype)
             for item in data]
    return _api.stack(items, axis=0)


def as_array(data, dtype=None, what="ug.tensor", python_defaults=True) -> np.ndarray:
    """`data` (numbers, bools, nested lists of them, NumPy arrays) as a NumPy array that
    nobody else holds, or an error naming the offending value and the fix.

    python_defaults: Python floats become float32 and ints int64 (every framework's
    defaults); otherwise NumPy's (float64). NumPy arrays keep their dtype either way.
    """
    if dtype is not None:
        dtype = as_dtype(dtype)
    if isinstance(data, Tensor):
        data = data._host()
    if isinstance(data, np.ndarray | np.generic):
        if data.dtype.kind not in "biuf":
            raise _conversion_error(data, what)
        if dtype is None and not data.dtype.isnative:  # byte-swapped: the kernels take native
            dtype = data.dtype.newbyteorder("=")
        array = np.array(data, dtype=dtype, copy=True)  # copy in: the caller keeps its array
    else:
        try:
            array = np.asarray(data, dtype=dtype)
        except (ValueError, TypeError, OverflowError):
            raise _conversion_error(data, what) from None
        if array.dtype.kind not in "biuf" or (dtype is None and array.dtype.kind == "u"):
            raise _conversion_error(data, what)
        if (dtype is None and array.dtype.kind == "f" and array.size
                and np.abs(array).max() >= 2.0**63 and _bad_leaf(data, ()) is not None):
            raise _conversion_error(data, what)  # [1, 2**63]: NumPy made the ints floats
        if dtype is None and python_defaults:
            if array.dtype.kind == "f" or array.size == 0:
                array = array.astype(DEFAULT_FLOAT)
            elif array.dtype.kind == "i":
                array = array.astype(DEFAULT_INT, copy=False)
    if dtype_name(array.dtype) not in DTYPES:
        raise TypeError(
            f"{what} at {user_source()}: NumPy {array.dtype.name} data is not supported; "
            f"unigraph's dtypes are {', '.join(DTYPES)}: convert first, e.g. "
            f"`.astype({_nearest_supported(array.dtype)!r})`"
        )
    return array


def _nearest_supported(dtype: np.dtype) -> str:
    if dtype.kind == "f":
        return "float32" if dtype.itemsize <= 4 else "float64"
    if dtype.kind in "iu":
        return "int32" if dtype.itemsize < 4 else "int64"
    return "float32"


_INT64 = (-2**63, 2**63 - 1)


def _conversion_error(data, what: str) -> Exception:
    """The error for data NumPy could not turn into a supported array: find the offending
    element (or the ragged nesting) and say what to do about it."""
    where = f"{what} at {user_source()}"
    ragged = _ragged(data)
    if ragged:
        return ValueError(
            f"{where}: the nested lists are ragged ({ragged}); a tensor is rectangular: pad "
            "the rows to one length, or make one tensor per row"
        )
    found = _bad_leaf(data, ())
    if found is None:
        return TypeError(f"{where}: cannot make a tensor of {_short_repr(data)}")
    path, leaf = found
    at = f" at index {''.join(f'[{i}]' for i in path)}" if path else ""
    if isinstance(leaf, int | np.integer):
        return OverflowError(
            f"{where}: the integer {leaf}{at} does not fit in int64 ({_INT64[0]} .. "
            f"{_INT64[1]}), the widest integer every framework has; pass it as a float "
            "(float(n), or dtype='float64') if an approximation is fine"
        )
    if isinstance(leaf, str | bytes | np.str_):
        return TypeError(
            f"{where}: {leaf!r}{at} is text, not a number; convert it first "
            "(float(s) or int(s))"
        )
    if leaf is None:
        return TypeError(
            f"{where}: None{at} is not a number; use float('nan') for a missing value"
        )
    if isinstance(leaf, np.ndarray | np.generic) and leaf.dtype.kind != "c":
        return TypeError(
            f"{where}: a NumPy array of {leaf.dtype}{at} does not hold numbers; convert it "
            "first (e.g. `.astype('float32')`)"
        )
    if isinstance(leaf, complex | np.complexfloating) or (
            isinstance(leaf, np.ndarray) and leaf.dtype.kind == "c"):
        return TypeError(
            f"{where}: complex values{at} are not supported; pass the real and imaginary "
            "parts as two tensors"
        )
    return TypeError(
        f"{where}: {_short_repr(leaf)}{at} (a {type(leaf).__name__}) is not a number, a bool, "
        "a NumPy array or a (nested) list of them"
    )


def _bad_leaf(data, path: tuple):
    """(index path, value) of the first element that is not a storable number, or None."""
    if isinstance(data, list | tuple):
        for index, item in enumerate(data):
            found = _bad_leaf(item, (*path, index))
            if found is not None:
                return found
        return None
    if isinstance(data, bool | np.bool_ | float | np.floating | Tensor):
        return None
    if isinstance(data, int | np.integer):
        return None if _INT64[0] <= int(data) <= _INT64[1] else (path, data)
    if isinstance(data, np.ndarray) and data.dtype.kind in "biuf":
        return None
    return path, data


def _ragged(data) -> str:
    """'row [1] has 1 item, row [0] has 2' when nested lists differ in length, else ''."""
    level = [((), data)]
    while level:
        lists = [(path, item) for path, item in level if isinstance(item, list | tuple)]
        if not lists:
            return ""
        if len(lists) != len(level):
            path, _ = next((p, i) for p, i in level if not isinstance(i, list | tuple))
            return f"item {_path(path)} is a number where its siblings are lists"
        first_path, first = lists[0]
        for path, item in lists[1:]:
            if len(item) != len(first):
                return (f"row {_path(path)} has {_items(len(item))}, row "
                        f"{_path(first_path)} has {_items(len(first))}")
        level = [((*path, i), x) for path, item in lists for i, x in enumerate(item)]
    return ""


def _items(count: int) -> str:
    return f"{count} item" if count == 1 else f"{count} items"


def _path(path: tuple) -> str:
    return "".join(f"[{i}]" for i in path) or "(the top level)"


def _short_repr(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_UFUNC_OPS = {  # NumPy ufunc name -> unigraph op function (api), for __array_ufunc__
    "add": "add", "subtract": "sub", "multiply": "mul", "true_divide": "div",
    "divide": "div", "power": "pow", "matmul": "matmul", "negative": "neg",
    "absolute": "abs", "maximum": "maximum", "minimum": "minimum", "equal": "equal",
    "not_equal": "not_equal", "less": "less", "less_equal": "less_equal",
    "greater": "greater", "greater_equal": "greater_equal", "logical_and": "logical_and",
    "logical_or": "logical_or", "logical_not": "logical_not", "bitwise_and": "logical_and",
    "bitwise_or": "logical_or", "invert": "logical_not", "exp": "exp", "log": "log",
    "sqrt": "sqrt", "tanh": "tanh", "remainder": "mod", "floor_divide": "floor_divide",
}


from unigraph import api as _api  # noqa: E402  (operators need the op functions)


def _interop():
    """unigraph.interop, imported on first use (it imports this module)."""
    from unigraph import interop

    return interop
