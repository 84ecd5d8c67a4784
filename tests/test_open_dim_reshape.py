"""ug.reshape with a size read from an open dim (`x.shape[0]`, None while tracing with
`input_spec`), on all 9 targets: eagerly the size is known and it runs; a trace refuses it
with a ShapeError naming the line and the fix (-1), where every static target raised a raw
TypeError (int(None)). Written with -1, it runs everywhere."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ShapeError

SPEC = [ug.Spec((None, 6), "float32")]
X = np.arange(12, dtype=np.float32).reshape(2, 6)


@pytest.mark.parametrize("target", TARGETS)
def test_a_reshape_to_an_open_size_names_the_fix(target):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        by_size = ug.function(lambda x: ug.reshape(x, (x.shape[0], 2, 3)), input_spec=SPEC)
        by_minus_one = ug.function(lambda x: ug.reshape(x, (-1, 2, 3)), input_spec=SPEC)
        np.testing.assert_array_equal(by_minus_one(X).numpy(), X.reshape(2, 2, 3))
        if t.mode == "eager":  # x.shape[0] is 2 here
            np.testing.assert_array_equal(by_size(X).numpy(), X.reshape(2, 2, 3))
            return
        with pytest.raises(ShapeError, match=r"ug\.reshape at .*test_open_dim_reshape\.py:\d+"
                                             r": .*None.*write -1"):
            by_size(X)
