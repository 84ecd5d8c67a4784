"""A strided slice of a tensor of rank 7 or 8 with a dim left open by `input_spec`, on all
9 targets, forward and gradient, against numpy:eager in float64.

Paddle's StridedSlice takes at most 6 dims; its lowering slices one axis at a time on 3-D
views above that (ranks.strided_slice), which needed every size known.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS
from test_open_dim_images import _run

SHAPES = {"rank 7": (4, 5, 2, 3, 2, 3, 2), "rank 8": (4, 5, 2, 1, 3, 2, 3, 2)}
OPEN = {"the first dim": (0,), "a middle dim": (3,), "every dim": tuple(range(8))}
INDICES = {
    "[::2, 1::3, ...]": np.s_[::2, 1::3, ...],
    "[1:, :, ::2, ..., -1:]": np.s_[1:, :, ::2, ..., -1:],
    "[-3::2, 1, ..., 1::2]": np.s_[-3::2, 1, ..., 1::2],
}


@pytest.mark.parametrize("index", list(INDICES))
@pytest.mark.parametrize("opened", list(OPEN))
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("target", TARGETS)
def test_a_strided_slice_of_rank_7_or_8_with_an_open_dim(target, shape, opened, index):
    dims = SHAPES[shape]
    x = np.random.default_rng(5).normal(size=dims).astype(np.float32)
    axes = tuple(axis for axis in OPEN[opened] if axis < len(dims))
    item = INDICES[index]
    _run(lambda x: x[item], [x], [axes], target)
