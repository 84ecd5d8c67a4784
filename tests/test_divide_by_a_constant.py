"""`x / c` with c a constant (a Python number, a 0-d or an array tensor made in the
program) is correctly rounded on every target, as NumPy's divide: on tensorflow:function
Grappler's constant folding rewrote x / c to x * (1 / c), off in the last bit for 75 of these
199 float32 elements (quirk "div"); the function now captures its constants."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, run_on

import unigraph as ug

X = (np.arange(1, 200, dtype=np.float32) * np.float32(0.337)).astype(np.float32)
ELEVENS = np.full(199, 11.0, np.float32)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_divide_by_a_constant_is_correctly_rounded(target, dtype):
    x = X.astype(dtype)
    c = np.asarray(11.0, dtype)

    def fn(a):
        return (a / 11.0, a / ug.tensor(c), a / ug.tensor(ELEVENS.astype(dtype)),
                ug.mean(ug.reshape(a[:198], (18, 11)), axis=1))

    got = run_on(target, ug.function(fn), x)
    want = [x / c, x / c, x / c, x[:198].reshape(18, 11).sum(axis=1, dtype=dtype) / c]
    assert not np.array_equal(want[0], x * (np.asarray(1, dtype) / c))  # tells them apart
    for g, w in zip(got[:3], want[:3]):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    # (a mean's sum is the framework's own order; its divide by the count is exact)
    np.testing.assert_allclose(got[3], want[3], rtol=2e-7 if dtype == "float32" else 1e-15)
