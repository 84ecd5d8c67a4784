"""`ug.range`: the builtin `range`, or, with a tensor bound, a range that converted `for`
loops run as a tensor loop (see `runtime.for_stmt`)."""

from __future__ import annotations

import builtins

import numpy as np

from unigraph.autograph.weak import WeakTensor
from unigraph.dispatch import current_backend
from unigraph.dtypes import is_int
from unigraph.errors import TracingError
from unigraph.tensor import Tensor
from unigraph.tracing import user_source

_SCALARS = (bool, int, float)


def is_symbolic(x) -> bool:
    return isinstance(x, Tensor) and x.is_symbolic


class TensorRange:
    """`ug.range` with a tensor bound. A converted `for` runs it as one `while_loop` when a
    bound is symbolic, else as a Python loop; either way the index is a weak int tensor
    (`weak.WeakTensor`) of the bounds' dtype: `x * i` keeps `x`'s dtype, as with an int."""

    def __init__(self, start, stop, step):
        if isinstance(step, _SCALARS) and step == 0:
            raise ValueError("ug.range() arg 3 must not be zero")
        self.start, self.stop, self.step = start, stop, step
        dtypes = [x.dtype for x in (start, stop, step) if isinstance(x, Tensor)]
        if any(not is_int(dtype) for dtype in dtypes):
            raise TypeError(f"ug.range() needs integer bounds, got {', '.join(dtypes)}")
        self.dtype = np.result_type(*dtypes).name
        self.is_symbolic = any(is_symbolic(x) for x in (start, stop, step))

    def __iter__(self):
        if self.is_symbolic:
            raise TracingError(
                f"`for ... in ug.range(n)` with a traced tensor bound at {user_source()} runs "
                "as a while_loop only inside a converted function: keep autograph on "
                "(@ug.function, not @ug.function(autograph=False)), or use ug.while_loop"
            )
        bounds = [int(x) for x in (self.start, self.stop, self.step)]
        backend = current_backend()
        for index in builtins.range(*bounds):
            # The backend's tensor is made on first use: an index only compared or used
            # in a Python expression costs no conversion.
            yield WeakTensor((), self.dtype, backend=backend, array=np.asarray(index, self.dtype))



def range_call(callee, *args):
    """`range(...)` in a `for` statement: the builtin range becomes `ug.range` (so a tensor
    bound makes a graph loop); any other callee named `range` is just called."""
    return range(*args) if callee is builtins.range else callee(*args)


def range(*args):  # noqa: A001 (the point: `ug.range` mirrors `range`)
    """`range(...)` that a tensor bound turns into a tensor loop.

    With Python ints it is the builtin `range`: loops run in Python (unrolled when traced)
    and the index is a Python int. With a tensor bound, `for i in ug.range(n)` in a
    `@ug.function` is one `while_loop` on static targets and a Python loop on eager ones,
    and in every mode `i` is a weakly typed int tensor: operators promote it like a Python
    int (`x * i` keeps a float32 `x` float32), `ug.*` functions see an int tensor of the
    bound's dtype.

    >>> @ug.function
    ... def total(n):
    ...     s = 0
    ...     for i in ug.range(n):
    ...         s = s + i
    ...     return s
    """
    if not any(isinstance(x, Tensor) for x in args):
        return builtins.range(*args)
    if not 1 <= len(args) <= 3:
        raise TypeError(f"ug.range expected 1 to 3 arguments, got {len(args)}")
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    return TensorRange(start, stop, step)
