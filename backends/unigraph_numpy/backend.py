"""The NumPy backend: `numpy:eager` and `numpy:static`, a thin adapter over the reference
engine in the core (`unigraph.reference`): its natives are NumPy arrays, its ops the op
records' references, its gradients their VJP rules.

Memory: `to_native` copies the caller's array in and `to_numpy` hands out a read-only view,
so no write on either side reaches the other. The engine writes an array in place only in
`sub_`, `add_`, `mul_`, `div_`, `sqrt_`, the eager optimizers' updates of a parameter, a
state slot or a temporary of theirs that nothing else holds.
"""

from __future__ import annotations

import operator

import numpy as np

from unigraph import reference
from unigraph.backend import Backend
from unigraph.errors import BackendError
from unigraph.ops import OPS
from unigraph.reference.eager import COMPOSITES, _tape
from unigraph.reference.fast_kernels import _UFUNCS, KERNELS

ALIGNED_FROM = 4096  # bytes: from here `to_native` aligns its copy (`reference.aligned_copy`)

asarray = np.asarray


def _array_out() -> bool:
    """Whether ufuncs take `out=...` (NumPy >= 2.3): a 0-d result then stays an array,
    without the NumPy scalar `asarray` would convert back (~0.3 of a scalar op's ~1 us)."""
    try:
        return type(np.add(np.zeros(()), np.zeros(()), out=...)) is np.ndarray
    except TypeError:
        return False


_ARRAY_OUT = _array_out()
# The ufunc behind each elementwise fast kernel (`fast_kernels._UFUNCS`'s, by its kernel).
_KERNEL_UFUNCS = {KERNELS[name]: ufunc for name, ufunc in _UFUNCS.items()}


# The comparisons and bool logic an eager op on two 0-d operands of one dtype computes by
# the Python operator on their NumPy scalars (`fast_kernels.OPERATORS`' operator, as
# numpy:static's generated code writes it): NumPy's scalar math gives the ufunc's answer and
# sets no floating-point flag (NaN compares without a warning either way), ~0.3k
# instructions where the ufunc call on 0-d arrays is ~3k; the result is made a 0-d array
# again (a NumPy target's tensors are arrays). Arithmetic keeps the ufunc: on scalars NumPy
# warns on integer overflow where arrays wrap silently, and a float's warning says
# "overflow encountered in scalar add" where the array's says "... in add".
_SCALAR_COMPARISONS = {
    "less": operator.lt, "less_equal": operator.le, "greater": operator.gt,
    "greater_equal": operator.ge, "equal": operator.eq, "not_equal": operator.ne,
}
_SCALAR_BOOL_LOGIC = {"logical_and": operator.and_, "logical_or": operator.or_}
_BOOL = np.dtype(bool)


def _scalar_operator(op: str, inputs):
    """The Python operator `op` on two 0-d `inputs` (tensors or arrays, as `dispatch` plans
    them) of one dtype is the same as its ufunc (`_SCALAR_COMPARISONS`, `_SCALAR_BOOL_LOGIC`
    on bools), or None."""
    if inputs is None or len(inputs) != 2:
        return None
    x, y = inputs
    if tuple(x.shape) != () or tuple(y.shape) != ():
        return None
    dtype = np.dtype(x.dtype)
    if dtype != np.dtype(y.dtype):
        return None
    if dtype == _BOOL and op in _SCALAR_BOOL_LOGIC:
        return _SCALAR_BOOL_LOGIC[op]
    return _SCALAR_COMPARISONS.get(op)


def _writable(x, y) -> bool:
    """Whether `op(x, y)` may be written into `x`: an array that owns its writeable memory
    (a NumPy view holds its base, so nothing views it), outside a gradient tape (the tape
    holds the values it recorded), `y` an array of its dtype and of its shape or 0-d (so
    the result has x's shape and dtype); `y is None` for a unary op."""
    return (type(x) is np.ndarray and x.base is None and x.flags.writeable
            and (y is None or (type(y) is np.ndarray and y.dtype == x.dtype
                               and (y.shape == x.shape or y.shape == ())))
            and _tape.get() is None)  # (`in_tape()`, inline: every optimizer write asks)


def sub_(param, delta):
    """`param - delta`, written into `param`: the eager optimizers' update, as hand-written
    NumPy does it (`w -= lr * g`, no new parameter array per step). Not an op record:
    `unigraph.optim` looks it up by name, and calls it only on a parameter's array that no
    other Python object holds. Here: only where `_writable` allows; otherwise a new array,
    as the `sub` op. The same ufunc, so the same rounding either way.

    >>> w = np.ones(3, np.float32)
    >>> sub_(w, np.full(3, 0.5, np.float32)) is w
    True
    """
    if _writable(param, delta):
        return np.subtract(param, delta, out=param)
    return OPS["sub"].reference(param, delta)


def add_(x, y):
    """`x + y`, written into `x` where `_writable` allows (an optimizer slot, Adam's
    temporaries: `Optimizer.write`, `in_place.scratch`), else a new array as the `add` op.

    >>> v = np.ones(2, np.float32)
    >>> add_(v, np.float32(0.5) * np.ones(2, np.float32)) is v
    True
    """
    if _writable(x, y):
        return np.add(x, y, out=x)
    return OPS["add"].reference(x, y)


def mul_(x, y):
    """`x * y`, written into `x` where `_writable` allows (see `add_`).

    >>> v = np.ones(2, np.float32)
    >>> mul_(v, np.array(0.9, np.float32)) is v
    True
    """
    if _writable(x, y):
        return np.multiply(x, y, out=x)
    return OPS["mul"].reference(x, y)


def div_(x, y):
    """`x / y`, written into a float `x` where `_writable` allows (see `add_`); an integer
    `x` takes the `div` op (true division makes floats).

    >>> v = np.ones(2, np.float32)
    >>> div_(v, np.full(2, 4.0, np.float32)) is v
    True
    """
    if _writable(x, y) and x.dtype.kind == "f":
        return np.divide(x, y, out=x)
    return OPS["div"].reference(x, y)


def sqrt_(x):
    """`sqrt(x)`, written into a float `x` where `_writable` allows (see `add_`).

    >>> v = np.full(2, 4.0, np.float32)
    >>> sqrt_(v) is v
    True
    """
    if _writable(x, None) and x.dtype.kind == "f":
        return np.sqrt(x, out=x)
    return OPS["sqrt"].reference(x)


# The optimizers' in-place updates (`Optimizer.write`, `in_place.scratch` look them up by
# name): not op records, entries of the lowering table only.
IN_PLACE = {"sub_": sub_, "add_": add_, "mul_": mul_, "div_": div_, "sqrt_": sqrt_}


class NumpyBackend(Backend):
    name = "numpy"
    modes = ("eager", "static")
    framework = "numpy"
    distribution = "numpy"
    extra = ""
    # The op table the engine runs: a subclass may swap a record (the checker's tests build
    # deliberately wrong backends this way).
    ops: dict = OPS

    @property
    def lowerings(self) -> dict:
        """The flat lowering table: each op's NumPy reference is its own lowering, and the
        optimizers' in-place updates (`IN_PLACE`). Built once per op table (the optimizers
        ask for them every step); eager ops run the records themselves."""
        cached = self.__dict__.get("_lowerings")
        if cached is None or cached[0] is not self.ops:
            table = {name: record.reference for name, record in self.ops.items()}
            table.update(IN_PLACE)
            cached = self.__dict__["_lowerings"] = (self.ops, table)
        return cached[1]

    @property
    def composites(self) -> dict | None:
        """`ug.nn.functional`'s eager linear and mean cross-entropy as one engine call and
        one tape record each (`reference.eager.COMPOSITES`: the records' kernels, the same
        numbers), with the registered op table and no `eager_op` set on this object (the
        random-program tester's watch sees every op); else None: the records, op by op."""
        if self.ops is OPS and "eager_op" not in self.__dict__:
            return COMPOSITES
        return None

    def to_native(self, array):
        # A C-contiguous array of 4 KiB or more starts on a 64-byte boundary (what BLAS
        # reads fastest; hand-written NumPy's own arrays may or may not); smaller ones and
        # other layouts are copied as they are
        if array.nbytes >= ALIGNED_FROM and array.flags.c_contiguous:
            return reference.aligned_copy(array)
        return np.array(array, copy=True)

    def adopt_native(self, array):
        return array  # (a writable array that nothing else holds: Parameter.native_for)

    def to_numpy(self, native):
        return reference.read_only(native)

    def is_native(self, obj):
        return isinstance(obj, np.ndarray)

    def eager_op(self, op, inputs, attrs):
        # With no gradient tape recording and the registered op table, an op with a fast
        # kernel is that kernel (what `reference.eager_op` runs then), without its lookups:
        # ~0.3 us of a scalar op's ~1.5. KERNELS is read at each call (a test may patch it).
        if op in IN_PLACE:  # not op records: the table's entries (a test may replace them)
            return self.lowerings[op](*inputs)
        if _tape.get() is None and self.ops is OPS:
            fast = KERNELS.get(op)
            if fast is not None:
                return asarray(fast(*inputs, **attrs))  # (np.matmul of vectors: a scalar)
        return reference.eager_op(op, inputs, attrs, self.ops)

    def eager_kernel(self, op, arity, inputs=None):
        """`eager_op(op, inputs, {})` as a callable of the `arity` inputs, for `dispatch`'s
        plan of an attr-less op with a fast kernel and the plan's `inputs` (tensors or
        arrays: their shapes and dtypes are the plan's): that kernel while no gradient tape
        records (a binary ufunc's called with `out=...`: an array for 0-d operands too; a
        comparison of two 0-d operands of one dtype, the Python operator on their NumPy
        scalars, see `_SCALAR_COMPARISONS`), else `eager_op` (which records). KERNELS, the
        op table and an `eager_op` set on this object (the random-program tester's watch)
        are looked at each call (a test may patch them); None for the other ops.

        >>> backend.eager_kernel("add", 2)(np.ones(2), np.ones(2))
        array([2., 2.])
        >>> backend.eager_kernel("less", 2, [np.ones(()), np.ones(())])(
        ...     np.zeros(()), np.ones(()))
        array(True)
        """
        fast = KERNELS.get(op)
        if fast is None or op in IN_PLACE:
            return None
        ufunc = fast if isinstance(fast, np.ufunc) else _KERNEL_UFUNCS.get(fast)
        if not _ARRAY_OUT or arity != 2 or (ufunc is not None and ufunc.nin != 2):
            ufunc = None
        scalar_operator = _scalar_operator(op, inputs) if ufunc is not None else None
        if scalar_operator is not None:
            def run(x, y):
                if _tape.get() is None and self.ops is OPS and KERNELS.get(op) is fast and \
                        "eager_op" not in self.__dict__:
                    return asarray(scalar_operator(x[()], y[()]))
                return self.eager_op(op, [x, y], {})
        elif ufunc is not None:
            def run(x, y):
                if _tape.get() is None and self.ops is OPS and KERNELS.get(op) is fast and \
                        "eager_op" not in self.__dict__:
                    return ufunc(x, y, out=...)
                return self.eager_op(op, [x, y], {})
        else:
            def run(*inputs):
                if _tape.get() is None and self.ops is OPS and KERNELS.get(op) is fast and \
                        "eager_op" not in self.__dict__:
                    return asarray(fast(*inputs))
                return self.eager_op(op, list(inputs), {})
        run.__name__ = run.__qualname__ = op
        return run

    def eager_grad(self, fn, watched):
        return reference.eager_grad(fn, watched)

    def compile(self, graph, mode):
        if mode != "static":
            raise BackendError(f"numpy: no compiled mode {mode!r}; compile for 'static' (eager "
                               "mode runs op by op through eager_op)")
        return reference.ReferenceExecutable(graph, self.ops)
