"""Dtype rules. NumPy's promotion is the reference (`np.result_type`), with Python scalars
"weak" as in NumPy 2 (NEP 50): `float32 tensor + 2.0` stays float32.

Where we differ from NumPy, on purpose, so that every framework can follow:
* `ug.tensor(1.5)` and a Python float passed to a `@ug.function` become float32 (NumPy:
  float64), like PyTorch, TensorFlow and Paddle. Python ints become int64, bools bool.
* `sum` keeps the input dtype (NumPy widens int32 to int64).
* `div` of integers returns float64 as NumPy does; `mean` of integers is float64 too.

Small integers (int8, uint8, int16) follow NumPy too: `int8 + uint8 -> int16`,
`uint8 + int32 -> int32`, a Python int keeps the tensor's dtype (`uint8 + 1` is uint8; an
int that does not fit is an error naming both), and arithmetic wraps on overflow as NumPy's
does (`uint8 250 + 10 == 4`, `int8 127 + 1 == -128`), on every target.
"""

from __future__ import annotations

import numpy as np

from unigraph.ir import DTYPES

DEFAULT_FLOAT = "float32"
DEFAULT_INT = "int64"


class DType(str):
    """A dtype constant (`ug.float32`, ...): the dtype's name, so it is accepted wherever a
    name is (`ug.zeros(3, ug.int32)`, `x.astype(ug.float16)`), and compares equal to it.

    >>> ug.float32 == "float32", repr(ug.float32)
    (True, 'ug.float32')
    """

    __slots__ = ()

    def __repr__(self):
        return f"ug.{str.__str__(self)}"


float16 = DType("float16")
float32 = DType("float32")
float64 = DType("float64")
int8 = DType("int8")
uint8 = DType("uint8")
int16 = DType("int16")
int32 = DType("int32")
int64 = DType("int64")
bool_ = DType("bool")


def as_dtype(dtype) -> str:
    """A dtype given by name, NumPy dtype or type, as one of unigraph's dtype names; an error
    naming the closest name for a misspelling, or the nearest supported dtype.

    >>> as_dtype("float32"), as_dtype(np.int64), as_dtype(float)
    ('float32', 'int64', 'float64')
    """
    if isinstance(dtype, str) and dtype in DTYPES:
        return str.__str__(dtype)  # a plain str, also for a DType constant
    try:
        name = np.dtype(dtype).name
    except TypeError:
        import difflib

        close = difflib.get_close_matches(str(dtype), DTYPES, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise TypeError(f"dtype {dtype!r} does not exist; {hint}unigraph's dtypes are "
                        f"{', '.join(DTYPES)}") from None
    if name not in DTYPES:
        raise TypeError(f"dtype {dtype!r} ({name}) is not supported; unigraph's dtypes are "
                        f"{', '.join(DTYPES)}")
    return name


def is_float(dtype: str) -> bool:
    return dtype.startswith("float")


def is_int(dtype: str) -> bool:
    """Signed or unsigned integer (uint8 included)."""
    return dtype.startswith(("int", "uint"))


def python_scalar_dtype(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return DEFAULT_INT
    if isinstance(value, float):
        return DEFAULT_FLOAT
    raise TypeError(f"expected a tensor or a Python number, got {type(value).__name__}")


def result_dtype(strong: list, weak: list) -> str:
    """Promote the dtypes of tensors (`strong`) with Python scalars (`weak`, the values)."""
    if not strong:
        return np.result_type(*[python_scalar_dtype(w) for w in weak]).name
    first = strong[0]
    same = all(d == first for d in strong)
    dtype = first if same else np.result_type(*strong).name
    for value in weak:
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and dtype == "bool":
            dtype = DEFAULT_INT
        elif isinstance(value, float) and not is_float(dtype):
            dtype = "float64"
    if dtype not in DTYPES:
        raise TypeError(f"dtype {dtype} is not supported")
    return dtype
