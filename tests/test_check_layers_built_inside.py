"""`ug.check` of a function that builds its layer inside (a BatchNorm2D made on each call).
In float32 every target is checked; in float16 the checker casts the parameters it found
and traces again, which builds new ones it never cast: a raw KeyError before, now a
ValueError naming the cause and the fix. And no autograph warning about the checker's own
gradient function (a traced `ug.grad` converts the user's function, not unigraph's)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import unigraph as ug

X = np.random.default_rng(0).random((2, 4, 3, 3)).astype(np.float32)


def batch_norm_built_inside(x):
    layer = ug.nn.BatchNorm2D(x.shape[1])
    return layer(x)


def test_float32_checks_every_target():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = ug.check(batch_norm_built_inside, X)
    # (the checker's own gradient function is not autograph's to convert: no warning)
    assert not [w for w in caught if "could not convert" in str(w.message)]
    assert report.ok, report
    assert len(report.targets) == 10 and not report.skipped, report


def test_float16_names_the_layers_built_inside():
    with pytest.raises(ValueError, match=r"builds 4 parameter\(s\) each time it runs .* "
                       r"build the layers outside the function"):
        ug.check(batch_norm_built_inside, X, dtype="float16")
