"""Arrays fed to a @ug.function as they are: negatively strided and read-only arrays (which
torch.from_numpy refuses, so torch:static's feed copies them) and ordinary ones give the
same results on all 9 targets, on every call, and no later write to the caller's array
reaches a result."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target


@ug.function
def scaled_sum(x, y):
    return x * 2.0 + y, ug.sum(x)


def feeds():
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    frozen = base.copy()
    frozen.setflags(write=False)
    return {"reversed": base[::-1], "both": base[::-1, ::-1], "read_only": frozen,
            "strided": base[:, ::2], "zero_d": np.asarray(np.float32(5.0))}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind", ["reversed", "both", "read_only", "strided", "zero_d"])
def test_unusual_arrays_are_fed_as_their_values(target, kind):
    x = feeds()[kind]
    want = (np.array(x) * 2.0 + np.float32(1.0), np.array(x).sum(dtype=np.float32))
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        results = [scaled_sum(x, np.float32(1.0)) for _ in range(3)]
    if x.flags.writeable:
        x[...] = -7.0  # a later write to the caller's array reaches no result
    for doubled, total in results:
        assert doubled.shape == want[0].shape and doubled.dtype == "float32"
        np.testing.assert_array_equal(doubled.numpy(), want[0])
        np.testing.assert_allclose(total.numpy(), want[1], rtol=1e-6)
