"""`ug.Spec`: the type of a function argument with dims that may vary (`None`).

`@ug.function(input_spec=[ug.Spec((None, 784), "float32"), ...])` traces ONE graph whose
inputs have unknown dims where the spec says `None`: it serves every batch size without
tracing again, on every static target (TF placeholders and `input_signature` with `None`,
Paddle `static.data` with -1, torch and NumPy generic). Eager targets check each call
against the spec the same way, so a program that an eager target accepts runs on every
static one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from unigraph.errors import ShapeError
from unigraph.ir import check_dtype


@dataclass(frozen=True, init=False)
class Spec:
    """The type of one tensor argument: `shape` (ints, `None` where any size is taken) and
    `dtype` (a dtype name or constant); `name` names the input in exported artifacts.

    >>> spec = ug.Spec((None, 784), "float32")
    >>> @ug.function(input_spec=[spec, ug.Spec((None,), "int64")])
    ... def loss(x, labels): ...
    >>> spec.fits((32, 784), "float32")
    True
    """

    shape: tuple
    dtype: str
    name: str | None

    def __init__(self, shape, dtype="float32", name=None):
        if shape is None or isinstance(shape, str):
            raise ShapeError(f"ug.Spec: shape {shape!r} is not a shape: give the dims, e.g. "
                             "(None, 784), with None where the size varies")
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        for dim in shape:
            if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int | np.integer)
                                    or dim < 0):
                raise ShapeError(f"ug.Spec: dim {dim!r} of shape {list(shape)} is not a size: "
                                 "use an int >= 0, or None for a dim that varies")
        object.__setattr__(self, "shape", tuple(None if d is None else int(d) for d in shape))
        object.__setattr__(self, "dtype", check_dtype(np.dtype(dtype).name))
        object.__setattr__(self, "name", name)

    def fits(self, shape, dtype) -> bool:
        """Whether a tensor of `shape` and `dtype` is of this type."""
        return str(dtype) == self.dtype and self.mismatched_dim(shape) is None

    def mismatched_dim(self, shape):
        """The first axis where `shape` differs from the spec, "rank" if the ranks differ,
        None if it fits."""
        if len(shape) != len(self.shape):
            return "rank"
        for axis, (got, want) in enumerate(zip(shape, self.shape)):
            if want is not None and got != want:
                return axis
        return None

    def __str__(self):
        dims = ", ".join("None" if d is None else str(d) for d in self.shape)
        return f"ug.Spec(({dims}{',' if len(self.shape) == 1 else ''}), {self.dtype!r})"


def as_spec(value) -> Spec:
    """A Spec from a Spec, or from anything with `shape` and `dtype` (a `tf.TensorSpec`,
    an array used as an example)."""
    if isinstance(value, Spec):
        return value
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        shape = [None if d is None or d == -1 else int(d) for d in value.shape]
        return Spec(shape, np.dtype(getattr(value.dtype, "as_numpy_dtype", value.dtype)).name,
                    getattr(value, "name", None))
    raise TypeError(f"input_spec entries must be ug.Spec (or None for an argument without "
                    f"one), got {type(value).__name__} {value!r}")


def mismatch_text(function: str, argument: str, spec: Spec, shape, dtype, where: str) -> str:
    """The one message for an argument that does not match its spec."""
    got = f"{dtype}{[int(d) for d in shape]}"
    if str(dtype) != spec.dtype:
        what, fix = "dtype", f"cast it: ug.cast({argument}, {spec.dtype!r})"
    else:
        axis = spec.mismatched_dim(shape)
        if axis == "rank":
            what = f"rank ({len(shape)} dims, the spec has {len(spec.shape)})"
        else:
            what = f"dim {axis} ({shape[axis]}, the spec says {spec.shape[axis]})"
        fix = ("pass a tensor of the spec's shape, or write None in the spec where the size "
               "varies")
    at = f" at {where}" if where else ""
    return (f"@ug.function {function}: argument {argument!r}{at} is {got}, which does not "
            f"match its input_spec {spec}: the {what} differs; {fix}")
