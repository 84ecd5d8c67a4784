"""ug.squeeze(x, axis=k) of a dim that `input_spec` leaves open, on all 9 targets.

Where the dim is 1 when the program runs, every target gives eager's result, forward and
gradient. Where it is not, eager raises ShapeError; torch:static and paddle:static returned
x with the dim kept (torch's and Paddle's squeeze keep a dim that is not 1), so the result
held [3, 2] where its shape said [2]; the other static targets raised their framework's
own error. Now every static target refuses it when the program runs with the ShapeError
eager raises, naming the target and the line (`unigraph.squeeze_checks`).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ShapeError

SPECS = {  # the spec, the axis squeezed, an input where it is 1, one where it is 3
    "batch": ((None, 2), 0, (1, 2), (3, 2)),
    "two open dims": ((None, None), 0, (1, 4), (3, 4)),
    "middle of three": ((2, None, 3), 1, (2, 1, 3), (2, 3, 3)),
}


@pytest.mark.parametrize("case", list(SPECS))
@pytest.mark.parametrize("target", TARGETS)
def test_squeeze_of_an_open_dim(target, case):
    spec, axis, fits, misfits = SPECS[case]
    t = Target.parse(target)
    x = np.arange(np.prod(fits), dtype=np.float32).reshape(fits) - 1.5
    bad = np.ones(misfits, np.float32)
    specs = [ug.Spec(spec, "float32")]
    with ug.use_backend(t.backend, t.mode):
        forward = ug.function(lambda x: ug.squeeze(x, axis=axis) * 2.0, input_spec=specs)
        grad = ug.function(lambda x: ug.grad(
            lambda x: ug.sum(ug.squeeze(x, axis=axis) * ug.squeeze(x, axis=axis)))(x),
            input_spec=specs)
        got = forward(x)
        assert got.shape == np.squeeze(x, axis).shape
        np.testing.assert_array_equal(got.numpy(), np.squeeze(x, axis) * 2.0)
        np.testing.assert_array_equal(grad(x).numpy(), 2.0 * x)
        # eagerly the op's check; a static run's framework error, translated
        # (unigraph.squeeze_checks), names the target and this line
        where = "" if t.mode == "eager" else \
            rf" on {target} at .*test_open_dim_squeeze_checked\.py:\d+"
        with pytest.raises(ShapeError, match=rf"squeeze{where}: axis {axis} .*not 1"):
            forward(bad)
