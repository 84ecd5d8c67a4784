"""The random-program tester's hazard watch reads what an op read, also where the op writes
its result into its first input (numpy:eager's in-place `sqrt_`, `add_`, ... in Adam's
update). Before, the watch saw the input after the write: Adam's sqrt(v_hat) of 1.3e-13 (a
gradient of 3.6e-7, where weight decay cancelled it) was checked as its own root, 3.6e-7,
past the `sqrt` hazard's 1e-10, and the program was judged, not rejected: every float32
target then disagreed with the float64 reference (and with each other) by up to 2.4e-4 in
a weight, past the budget (random-program seed 15001, an Adam program with weight_decay).
"""

from __future__ import annotations

import numpy as np
import pytest

import unigraph as ug
from unigraph.testing.random_programs.runner import (
    TRAINING_HAZARDS,
    IllConditioned,
    Watch,
    watching,
)


def _adam_step(cancelled_gradient: float):
    """One Adam step (weight_decay 0.01) on p = 0.2 whose gradient, weight decay added,
    is `cancelled_gradient`."""
    p = ug.nn.Parameter(np.full((2,), 0.2))
    opt = ug.optim.Adam([p], lr=0.05, weight_decay=0.01)
    slope = ug.tensor(np.full((2,), cancelled_gradient - 0.01 * 0.2))
    _, grads = ug.value_and_grad(lambda: ug.sum(p * slope), wrt=[p])()
    opt.step(grads)


def test_an_in_place_op_is_watched_on_the_value_it_read():
    seen = []

    class Recording(Watch):
        def __call__(self, op, inputs, attrs, out):
            if op.startswith("sqrt"):
                seen.append((np.array(inputs[0], copy=True), np.array(out, copy=True)))
            return super().__call__(op, inputs, attrs, out)

    with ug.use_backend("numpy", "eager"), watching(Recording({})):
        _adam_step(0.5)
    assert seen, "Adam's update applied no sqrt"
    for read, written in seen:
        np.testing.assert_allclose(np.sqrt(read), written, rtol=1e-15)


@pytest.mark.parametrize("gradient", [3.6e-7, -2e-6])
def test_adam_of_a_cancelled_gradient_is_ill_conditioned(gradient):
    with ug.use_backend("numpy", "eager"), watching(Watch(TRAINING_HAZARDS)):
        with pytest.raises(IllConditioned, match="sqrt"):
            _adam_step(gradient)


def test_adam_of_a_plain_gradient_is_judged():
    with ug.use_backend("numpy", "eager"), watching(Watch(TRAINING_HAZARDS)):
        _adam_step(0.5)
