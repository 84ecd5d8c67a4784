"""x.at[i].set(v) / .add(v) with a traced int scalar i outside [-n, n), on all 9 targets and
onnxruntime:static: an `IndexError` naming the line, as eager (NumPy's) and as `x.at[[i]]`,
`ug.take` and `ug.scatter` on every static target (README "Out-of-range indices"); never a
copy of x with nothing written.

Found probing the random tester's `x.at[...]` draw: every static target returned x
unchanged (a one_hot row mask of an index out of range is all False), where eager raised.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, INFERENCE_TARGETS

import unigraph as ug
from unigraph.config import Target

X = np.array([[0.3, -1.2, 0.7], [1.1, 0.4, -0.6]], dtype=np.float32)


def write_row(x, k):
    return x.at[k].set(ug.tanh(x[0]) * 2.0)


def add_row(x, k):
    return x.at[k].add(x[1] * 3.0)


def fill_rows(x, k):
    """A loop counter writing rows k, k + 1, ... (one past the end when k is 1)."""
    def body(i, b):
        return i + 1, b.at[i].set(ug.sin(x[0]))
    return ug.while_loop(lambda i, b: i < k + 2, body, (k, ug.zeros_like(x)))[1]


def _want(fn, k):
    want = X.copy()
    if fn is write_row:
        want[k] = np.tanh(X[0]) * 2.0
    else:
        want[k] += X[1] * 3.0
    return want


def _run(fn, target, k):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        return ug.function(fn)(X, np.int32(k)).numpy()


@pytest.mark.parametrize("fn,k", [(write_row, 2), (write_row, -3), (write_row, 7),
                                  (add_row, 2), (add_row, -3),
                                  (fill_rows, 1)])  # the loop writes rows 1 and 2 of 2
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_traced_row_out_of_range_is_an_index_error(target, fn, k):
    with pytest.raises(IndexError, match=r"test_at_traced_row_out_of_range.py:\d+"):
        _run(fn, target, k)


@pytest.mark.parametrize("k", [1, -2, 0, -1])
@pytest.mark.parametrize("fn", [write_row, add_row])
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_traced_row_in_range_is_written(target, fn, k):
    np.testing.assert_allclose(_run(fn, target, k), _want(fn, k), rtol=1e-6)
    if target in INFERENCE_TARGETS:
        return
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        g = ug.function(ug.grad(lambda x, k: ug.sum(fn(x, k) * X)))(X, np.int32(k)).numpy()
    want = X.copy()
    if fn is write_row:
        want[k % 2] = 0.0
        want[0] += X[k] * 2.0 * (1.0 - np.tanh(X[0]) ** 2)
    else:
        want[1] += X[k] * 3.0
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
