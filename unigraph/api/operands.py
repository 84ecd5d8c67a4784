"""Operands of the public op functions: promotion to one dtype (NumPy rules, Python
numbers weak), Python numbers as cached scalars, axes checked and normalised, and each
wrapper's docstring taken from its op record.
"""

from __future__ import annotations

import builtins
import numbers
import sys

import numpy as np

from unigraph.dispatch import apply, check_int_range, current_backend, scalar_on
from unigraph.dtypes import as_dtype, is_float, result_dtype
from unigraph.errors import ShapeError
from unigraph.ir import DTYPES
from unigraph.ops import OPS
from unigraph.tensor import Parameter, Tensor
from unigraph.tracing import _builder, user_source

_SCALARS = (bool, int, float)
_TENSORS = (Tensor, Parameter)


def _as_operand(x):
    if isinstance(x, (Tensor, *_SCALARS)):
        return x
    if isinstance(x, np.ndarray | np.generic):
        as_dtype(x.dtype)
        return np.asarray(x)
    if isinstance(x, list | tuple):
        from unigraph.tensor import tensor

        return tensor(x)
    raise TypeError(
        f"{_short(x)} (a {type(x).__name__}) at {user_source()} is not a tensor, array or "
        "number: unigraph ops take ug tensors, NumPy arrays, Python numbers and (nested) "
        "lists of them"
    )


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def promote_for(op: str, *xs, policy: str | None = None) -> list:
    """`xs` as the operands of `op`, promoted as its record says (`OpDef.promote`: "same",
    "float" or "none"; `policy` overrides it where a record does not say yet)."""
    policy = policy or OPS[op].promote
    if policy == "none":
        return [_tensor_or_array(x) for x in xs]
    return _promote(*xs, to_float=policy == "float")


def ready_dtypes(op: str, policy: str | None = None) -> frozenset:
    """The dtypes in which tensors that all have that one dtype are already `op`'s
    operands (`promote_for` returns them unchanged, and a Python number next to one
    follows NumPy's weak-scalar rule): the wrappers' fast path. Empty for "none" (whose
    numbers get their own default dtypes).

    >>> "int64" in ready_dtypes("add"), "int64" in ready_dtypes("sigmoid", "float")
    (True, False)
    """
    policy = policy or OPS[op].promote
    if policy == "none":
        return frozenset()
    return frozenset(d for d in DTYPES if policy != "float" or is_float(d))


def _promote(*xs, to_float=False):
    """Bring operands to one dtype (NumPy rules, Python scalars weak); optionally to float."""
    first = xs[0]
    if type(first) in _TENSORS and all(type(x) in _TENSORS and x.dtype == first.dtype
                                       for x in xs) and (not to_float or is_float(first.dtype)):
        return list(xs)  # the common case, kept cheap for eager mode
    if len(xs) == 2:
        # tensor <op> Python number (`x + 1`, `lr * g`): the tensor's dtype usually wins.
        a, b = xs
        tensor_first = type(a) in _TENSORS and type(b) in _SCALARS
        if tensor_first or (type(b) in _TENSORS and type(a) in _SCALARS):
            t, number = (a, b) if tensor_first else (b, a)
            dtype = result_dtype([t.dtype], [number])
            if dtype == t.dtype and (not to_float or is_float(dtype)):
                scalar = _scalar(number, dtype)
                return [t, scalar] if tensor_first else [scalar, t]
    xs = [_as_operand(x) for x in xs]
    strong, weak, weak_dtypes = [], [], []
    for x in xs:
        if isinstance(x, _SCALARS):
            weak.append(x)
        elif _is_weak_tensor(x):
            weak_dtypes.append(x.dtype)
        else:
            strong.append(x.dtype if isinstance(x, Tensor) else x.dtype.name)
    if strong:
        # A WeakTensor (autograph's loop counters) promotes like a Python number of its kind.
        weak = [_PYTHON_KIND[x[0]] for x in weak_dtypes] + weak
    else:
        strong = weak_dtypes
    dtype = result_dtype(strong, weak)
    if to_float and not is_float(dtype):
        dtype = "float64"
    return [_to_dtype(x, dtype) for x in xs]


# The Python number each kind of dtype stands for, keyed by the name's first letter.
_PYTHON_KIND = {"b": True, "i": 1, "f": 1.0}


def _is_weak_tensor(x) -> bool:
    """A `unigraph.autograph.weak.WeakTensor` (only reached off the fast path; the module is
    loaded whenever one exists, so a never-used autograph costs no import)."""
    if type(x) in _TENSORS or not isinstance(x, Tensor):
        return False
    weak = sys.modules.get("unigraph.autograph.weak")
    return weak is not None and isinstance(x, weak.WeakTensor)


def _to_dtype(x, dtype):
    if isinstance(x, Tensor):
        return x if x.dtype == dtype else apply("cast", [x], {"dtype": dtype})
    if isinstance(x, _SCALARS):
        return _scalar(x, dtype)
    return np.asarray(x, dtype=dtype)


def _scalar(value, dtype):
    """A Python number as an operand of `dtype`: a constant when tracing, else an eager
    tensor on the current backend from its cache (`dispatch.scalar_on`)."""
    if _builder.get() is not None:
        check_int_range(value, dtype)
        return np.asarray(value, dtype=dtype)  # becomes a constant node
    return scalar_on(current_backend(), value, dtype)


_KEEPS_DTYPE = {  # (tensor dtype, Python number type) pairs where the tensor's dtype wins
    *((d, int) for d in DTYPES if d != "bool"), *((d, float) for d in DTYPES if is_float(d))}
# The same pairs as two sets of dtypes, one per number type: the wrappers' test builds no
# (dtype, type) key (`x + 1` in an eager loop asks every step).
_KEEPS_INT = frozenset(d for d, kind in _KEEPS_DTYPE if kind is int)
_KEEPS_FLOAT = frozenset(d for d, kind in _KEEPS_DTYPE if kind is float)


def weak_scalar(t, number):
    """`number` (a Python int or float) as the operand next to tensor `t` when NumPy's weak
    scalar rule keeps `t`'s dtype (`x + 2`, `0.5 * x` on a float x), else None: the
    wrappers' fast path, the same result as `_promote`.

    >>> weak_scalar(ug.tensor([1.0]), 2).dtype, weak_scalar(ug.tensor([1]), 0.5)
    ('float32', None)
    """
    dtype = t.dtype
    if (dtype, type(number)) not in _KEEPS_DTYPE:
        return None
    return _scalar(number, dtype)


def _axis(axis, ndim: int, op: str) -> int:
    if not -ndim <= axis < builtins.max(ndim, 1):
        raise ShapeError(f"{op}: axis {axis} at {user_source()} is out of range for a tensor "
                         f"of rank {ndim}")
    return axis % ndim if ndim else 0


def _axes(axis, ndim: int, op: str):
    """`axis` (None, an int or a tuple) as sorted non-negative axes, refused as NumPy's
    AxisError refuses it: out of range, named twice, or any axis of a 0-d x (the callers
    that take NumPy's int 0 or -1 on a 0-d x handle it first, see `zero_d_axis`)."""
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    if not ndim and axes:
        raise ShapeError(f"{op}: axis {axis!r} at {user_source()} is out of range for a 0-d "
                         "tensor, which has no axes; pass axis=None")
    found = tuple(sorted(_axis(a, ndim, op) for a in axes))
    if len(set(found)) < len(found):
        raise ShapeError(f"{op}: axis {axis!r} at {user_source()} names an axis twice; name "
                         "each once")
    return found


def zero_d_axis(axis, ndim: int) -> bool:
    """Whether `axis` is the int 0 or -1 on a 0-d x, which NumPy's reductions, `squeeze`
    and `cumsum` take as the whole x (its one element)."""
    return ndim == 0 and isinstance(axis, int | np.integer) and axis in (0, -1)


def _tensor_or_array(x):
    x = _as_operand(x)
    if isinstance(x, _SCALARS):
        from unigraph.tensor import tensor

        return tensor(x)
    return x


def unchanged(x):
    """What a no-op (`axis=()`, a squeeze of nothing, a reshape to the same shape) returns:
    x itself, no node, so no backend ever sees the degenerate form; a NumPy array becomes
    a tensor (a `constant` when tracing), as the op would have made it."""
    if isinstance(x, Tensor):
        return x
    from unigraph.tensor import tensor

    return tensor(x)


def _record_doc(op: str, note: str = "") -> str:
    """A public function's docstring from its op record: the record's text and example."""
    record = OPS[op]
    call, _, result = record.example.partition("  # ")
    parts = [record.doc, note, f"Example::\n\n    >>> {call}\n    {result}"]
    return "\n\n".join(part for part in parts if part)


def _known_shape(x, what: str) -> tuple:
    if None in x.shape:
        raise ShapeError(f"{what}: the shape {list(x.shape)} of the tensor at {user_source()} "
                         "has a dim known only at run time; this function needs every dim: "
                         "give that dim a size in input_spec, or state the sizes first with "
                         "ug.ensure_shape(x, shape)")
    return tuple(x.shape)


def _pair(value, name: str) -> tuple:
    """An int or a pair of ints -> (int, int). Integral floats pass (2.0 is 2); a fractional
    one (padding=1.5) is refused rather than silently truncated."""
    pair = (value, value) if np.ndim(value) == 0 else tuple(value)
    if len(pair) != 2 or not all(isinstance(v, numbers.Real) and int(v) == v for v in pair):
        raise ValueError(f"{name} must be an int or a pair of ints, got {value!r}; "
                         f"e.g. {name}=1 or {name}=(1, 2)")
    return tuple(int(v) for v in pair)


def _exact_int(value, name: str) -> int:
    """An integral number -> int; 1.5 is refused rather than silently truncated to 1."""
    if int(value) != value:
        raise ValueError(f"{name} must be an int, got {value!r}; e.g. {name}=1")
    return int(value)


def _docs_from_records(*functions) -> None:
    """Each simple wrapper's doc: its op record's text and example, then its own note."""
    for function in functions:
        function.__doc__ = _record_doc(function.__name__, (function.__doc__ or "").strip())
