"""Seeding is refused inside a @ug.function body on every target, whichever call path ran
the body: an eager body is found by its frame (tracing.eager_body_codes), not by a
ContextVar set around each call, so each path that runs a body must be one of those frames.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

SEEDED = r"ug\.random\.seeded at .*test_eager_body_marker\.py:\d+"


def _on(target: str):
    t = Target.parse(target)
    return ug.use_backend(t.backend, t.mode)


def _seed_and_draw(x):
    with ug.random.seeded(1):  # (a helper's frame: the body is further up the stack)
        return x * ug.random.uniform((2,))


@pytest.mark.parametrize("target", TARGETS)
def test_seeding_is_refused_on_every_call_path(target):
    @ug.function
    def f(x, scale=1.0):
        return _seed_and_draw(x) * scale

    ones = np.ones(2, np.float32)
    with _on(target):
        x = ug.tensor(ones)
        # tensors (three times: the first converts the function, the third is the repeated
        # call's shortcut, which runs the body in `__call__`'s own frame), an array, and a
        # keyword argument (the general path)
        for args, kwargs in [((x,), {}), ((x,), {}), ((x,), {}), ((ones,), {}),
                             ((x,), {"scale": 2.0})]:
            with pytest.raises(ug.TracingError, match=SEEDED):
                f(*args, **kwargs)
        # once the calls are over, seeding is allowed again
        with ug.random.seeded(1):
            drawn = ug.random.uniform((2,)).numpy()
    with _on(target), ug.random.seeded(1):
        again = ug.random.uniform((2,)).numpy()
    np.testing.assert_array_equal(drawn, again)

