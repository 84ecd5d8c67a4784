"""Helpers shared by the op families: type checks, broadcasting, gradient plumbing.

Every check raises `ShapeError` with the op's name first, the offending types written as
`float32[2, ?]`, and what to do about it.
"""

from __future__ import annotations

import numpy as np

from unigraph.errors import ShapeError
from unigraph.ir import DTYPES, FLOAT_DTYPES
from unigraph.ops.base import TensorSpec

INT_DTYPES = ("int8", "uint8", "int16", "int32", "int64")
NUMERIC_DTYPES = FLOAT_DTYPES + INT_DTYPES

# Ops that sum many terms (matmul, conv, long reductions, softmax's normaliser) round more,
# and backends order those sums differently (pairwise, blocked BLAS, GPU trees): float32
# gets a wider budget than an elementwise op. float16 keeps the default, already loose.
ACCUMULATING_TOLERANCE = {"float32": (1e-4, 1e-5)}


def accumulator(dtype):
    """The dtype a sum, product or contraction of `dtype` runs in: float32 for float16 (torch's
    sum, Paddle and onnxruntime do so; NumPy's own float16 sum rounds to float16 at every step
    along any axis but the last, 516 ulps off over 4,096 terms), else `dtype` itself."""
    return np.float32 if np.dtype(dtype) == np.float16 else dtype


def fmt(spec: TensorSpec) -> str:
    """`float32[2, ?]`: the way every error message writes a tensor type."""
    dims = ", ".join("?" if d is None else str(d) for d in spec.shape)
    return f"{spec.dtype}[{dims}]"


def is_float(dtype) -> bool:
    return np.dtype(dtype).name in FLOAT_DTYPES


def require_dtype(op: str, what: str, spec: TensorSpec, allowed: tuple, fix: str) -> None:
    """Raise unless `spec.dtype` is one of `allowed`; `what` names the input ("x")."""
    if spec.dtype not in allowed:
        wanted = " or ".join(allowed) if len(allowed) < 3 else (
            ", ".join(allowed[:-1]) + " or " + allowed[-1]
        )
        raise ShapeError(f"{op}: {what} is {fmt(spec)}, but {op} needs {wanted} ({fix})")


def require_float(op: str, what: str, spec: TensorSpec) -> None:
    require_dtype(op, what, spec, FLOAT_DTYPES, f"use cast({what}, 'float32') first")


def require_numeric(op: str, what: str, spec: TensorSpec) -> None:
    require_dtype(op, what, spec, NUMERIC_DTYPES, f"use cast({what}, 'int32') first")


def require_bool(op: str, what: str, spec: TensorSpec) -> None:
    require_dtype(op, what, spec, ("bool",), f"compare first, e.g. {what} != 0")


def require_int(op: str, what: str, spec: TensorSpec) -> None:
    require_dtype(op, what, spec, INT_DTYPES, f"use cast({what}, 'int64') first")


def require_same_dtype(op: str, named_specs: dict) -> str:
    """Every spec in {name: spec} has one dtype; return it."""
    dtypes = {spec.dtype for spec in named_specs.values()}
    if len(dtypes) > 1:
        listed = ", ".join(f"{name} is {fmt(spec)}" for name, spec in named_specs.items())
        raise ShapeError(f"{op}: inputs have different dtypes: {listed} (cast them to one dtype)")
    return dtypes.pop()


def require_rank(op: str, what: str, spec: TensorSpec, rank: int, layout: str = "") -> None:
    if len(spec.shape) != rank:
        hint = f" laid out as {layout}" if layout else ""
        raise ShapeError(f"{op}: {what} is {fmt(spec)}, but {op} needs a rank-{rank} {what}{hint}")


def require_dtype_name(op: str, dtype) -> str:
    """Return `dtype` as a supported dtype name, or raise naming the supported ones."""
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = str(dtype)
    if name not in DTYPES:
        raise ShapeError(f"{op}: dtype {dtype!r} is not supported; use one of {', '.join(DTYPES)}")
    return name


def check_axis(op: str, spec: TensorSpec, axis: int, rank: int | None = None) -> None:
    """`axis` must be a valid non-negative axis of a rank-`rank` result (default: spec's rank)."""
    rank = len(spec.shape) if rank is None else rank
    if not isinstance(axis, (int, np.integer)) or not 0 <= axis < rank:
        raise ShapeError(
            f"{op}: axis {axis!r} is out of range for {fmt(spec)} "
            f"(use a non-negative int below {rank})"
        )


def merge_dim(a, b):
    """Two dims known to be equal: the one that is known, or None."""
    return a if a is not None else b


def dims_conflict(a, b) -> bool:
    """True when two dims are both known and differ (None is compatible with anything)."""
    return a is not None and b is not None and a != b


def broadcast_shapes(op: str, named_specs: dict) -> tuple:
    """NumPy broadcasting of {name: spec}; a None dim is compatible with anything."""
    shapes = [spec.shape for spec in named_specs.values()]
    rank = max((len(s) for s in shapes), default=0)
    result = []
    for i in range(rank):
        dim = 1
        for shape in shapes:
            d = shape[i - rank + len(shape)] if i - rank + len(shape) >= 0 else 1
            if d == 1:
                continue
            if dim == 1 or (dim is None and d is not None):
                dim = d
            elif d is not None and d != dim:
                listed = ", ".join(f"{name} is {fmt(spec)}" for name, spec in named_specs.items())
                raise ShapeError(
                    f"{op}: shapes do not broadcast: {listed} (each dim, aligned from the right, "
                    "must be equal or 1; reshape or broadcast_to first)"
                )
        result.append(dim)
    return tuple(result)


def unbroadcast(grad: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum `grad` over the dims that broadcasting added to or stretched in `shape`; float16
    in float32, rounded once, as `sum` (a bias's float16 gradient summed in float16 over
    4,096 rows was 515 ulps off)."""
    extra = grad.ndim - len(shape)
    stretched = tuple(i for i, d in enumerate(shape) if d == 1 and grad.shape[extra + i] != 1)
    if not extra and not stretched:
        return grad
    dtype = grad.dtype
    wide = np.float32 if dtype == np.float16 else None  # (None: the dtype's own sum)
    total = grad.sum(axis=tuple(range(extra)), dtype=wide) if extra else grad
    if stretched:
        total = total.sum(axis=stretched, keepdims=True, dtype=wide)
    return total if wide is None else total.astype(dtype)


def grad_for(grad: np.ndarray, like: np.ndarray):
    """The gradient of input `like`: unbroadcast to its shape and cast to its dtype, or None
    when `like` is not floating (ints and bools have no gradient)."""
    if not is_float(like.dtype):
        return None
    return np.asarray(unbroadcast(np.asarray(grad), like.shape)).astype(like.dtype, copy=False)


def reduced_axes(axis, rank: int) -> tuple:
    """The axes a reduction runs over: all of them when `axis` is None."""
    return tuple(range(rank)) if axis is None else tuple(axis)


def expand_reduced(g: np.ndarray, axis, rank: int, keepdims: bool) -> np.ndarray:
    """Put the reduced axes back (as size 1) into a reduction's output cotangent."""
    if keepdims:
        return g
    return np.expand_dims(g, reduced_axes(axis, rank))


# Sample values. Finite differences in float64 need values away from kinks and ties: these
# keep every value (or every gap between values) at least about 0.1 from trouble.


def normal(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.standard_normal(shape)


def positive(rng: np.random.Generator, shape, low: float = 0.5, high: float = 2.0) -> np.ndarray:
    return rng.uniform(low, high, shape)


def nonzero(rng: np.random.Generator, shape) -> np.ndarray:
    """Values with |v| in [0.1, 2]: clear of the kink of relu and abs at zero."""
    return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.1, 2.0, shape)


def distinct(rng: np.random.Generator, shape) -> np.ndarray:
    """All values differ by at least 0.1: no ties for max, min or max_pool."""
    size = int(np.prod(shape, dtype=np.int64))
    return (rng.permutation(size) - size / 2).reshape(shape) * 0.1
