"""Shared test setup: the list of targets every parametrized suite runs over."""

import numpy as np
import pytest

from unigraph.plugins import all_targets

TARGETS = [str(t) for t in all_targets()]


@pytest.fixture(autouse=True)
def _seed():
    import unigraph as ug

    ug.manual_seed(0)
    yield


def run_on(target: str, fn, *args):
    """Call `fn(*args)` with `target` current; return the outputs as NumPy arrays."""
    import unigraph as ug
    from unigraph.config import Target

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        out = fn(*args)
    if isinstance(out, tuple | list):
        return [np.asarray(o.numpy()) for o in out]
    return np.asarray(out.numpy())
