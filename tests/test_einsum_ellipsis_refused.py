"""`ug.einsum` with '...' is refused on all 9 targets with a message saying what is
supported and how to write the program: a letter for each dim '...' stands for. The
message said the equation must be "without '...' (the frontend normally makes it
explicit)", which read as if the frontend would handle '...'."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ShapeError

A = np.ones((2, 3, 4), np.float32)
B = np.ones((2, 4, 5), np.float32)


def _line(marker: str) -> int:
    with open(__file__) as source:
        return next(i for i, text in enumerate(source, 1) if text.rstrip().endswith(marker))


def batched(a, b):
    return ug.einsum("...ij,...jk->...ik", a, b)  # ellipsis


def spelled_out(a, b):
    return ug.einsum("bij,bjk->bik", a, b)


@pytest.mark.parametrize("target", TARGETS)
def test_an_ellipsis_is_refused_naming_the_fix(target):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        with pytest.raises(ShapeError) as caught:
            ug.function(batched)(A, B)
        message = str(caught.value)
        assert message.startswith("einsum: '...' in '...ij,...jk->...ik' is not supported")
        assert "'bij,bjk->bik'" in message
        assert f"test_einsum_ellipsis_refused.py:{_line('# ellipsis')}" in message
        np.testing.assert_array_equal(ug.function(spelled_out)(A, B).numpy(), np.full(
            (2, 3, 5), 4.0, np.float32))
