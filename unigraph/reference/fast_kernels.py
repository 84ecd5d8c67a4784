"""Faster NumPy kernels for the hot ops of the NumPy engine (numpy:eager and numpy:static).

An op record's `reference` is the definition of the op and stays as it is (the float64
checker runs it); a kernel here computes the same numbers with less work per call, and
`tests/test_fast_kernels.py` checks each against its reference on the record's samples:

- elementwise binary ops whose reference is a NumPy ufunc applied to two inputs of one
  dtype, then cast to that dtype (or bool): the ufunc alone already gives that dtype, so
  the kernel skips the wrapper and the cast (a scalar op in a loop body costs ~1 us less);
  most of them are also a Python operator (`OPERATORS`; a kernel's `.operator`), which the
  generated static plans write instead of a call (see `codegen`);
- conv2d without groups: im2col (a strided window view copied once into a [C*KH*KW, OH*OW]
  matrix per sample) and one matmul per sample written straight into a contiguous NCHW
  result, instead of a tensordot whose [N, OH, OW, O] result is then transposed. BLAS sums
  in another order than the reference's tensordot: equal within float rounding.

`kernel(name, record)` is the engine's entry: the kernel when `record` is the registered
record of op `name` (a deliberately wrong op table in a test keeps its own references),
else None.

>>> kernel("add", OPS["add"])(np.array(1.0), np.array(2.0))
array(3.)
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from unigraph.ops import OPS

__all__ = ["KERNELS", "OPERATORS", "conv2d", "kernel"]


def _ufunc_kernel(ufunc, operator=None):
    asarray = np.asarray

    def run(x, y):
        # An array, as from the reference (NumPy gives 0-d inputs a scalar result).
        return asarray(ufunc(x, y))

    run.__name__ = ufunc.__name__
    run.operator = operator  # the Python operator that calls `ufunc` on NumPy operands
    return run


def conv2d(x, w, bias=None, *, stride, padding, dilation, groups):
    """conv2d (NCHW input, [O, C, KH, KW] weight) by im2col and matmul; grouped convolutions
    go to the reference."""
    if groups != 1:
        return OPS["conv2d"].reference(x, w, bias, stride=stride, padding=padding,
                                       dilation=dilation, groups=groups)
    n, c, _, _ = x.shape
    o, _, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    if ph or pw:
        x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    spans = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)
    windows = sliding_window_view(x, spans, axis=(2, 3))[:, :, ::sh, ::sw, ::dh, ::dw]
    oh, ow = windows.shape[2:4]
    # [N, C, KH, KW, OH, OW] copied once: per sample, a [C*KH*KW, OH*OW] column matrix.
    columns = np.ascontiguousarray(windows.transpose(0, 1, 4, 5, 2, 3))
    columns = columns.reshape(n, c * kh * kw, oh * ow)
    out = np.matmul(w.reshape(o, c * kh * kw), columns)  # [N, O, OH*OW], contiguous
    if bias is not None:
        out += bias[:, None]
    return out.reshape(n, o, oh, ow).astype(x.dtype, copy=False)


_UFUNCS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "maximum": np.maximum, "minimum": np.minimum,
    "equal": np.equal, "not_equal": np.not_equal, "less": np.less,
    "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or,
}
# `x + y` on ndarrays or NumPy scalars is `np.add(x, y)`; on 0-d operands it is NumPy's
# scalar math, ~10x cheaper than a ufunc call: generated plans (`codegen`) write these.
# `&`, `|` are logical_and/or for the bool operands those records take.
OPERATORS = {
    "add": "+", "sub": "-", "mul": "*", "div": "/",
    "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">=",
    "equal": "==", "not_equal": "!=", "logical_and": "&", "logical_or": "|",
}
KERNELS = {name: _ufunc_kernel(ufunc, OPERATORS.get(name)) for name, ufunc in _UFUNCS.items()}
KERNELS["conv2d"] = conv2d


def kernel(name: str, record):
    """The fast kernel of op `name`, or None (no kernel, or `record` is not the registered
    record of `name`)."""
    fast = KERNELS.get(name)
    if fast is None or OPS.get(name) is not record:
        return None
    return fast
