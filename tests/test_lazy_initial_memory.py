"""A layer whose initial weights wait for their first read (`ug.init.parameter`) allocates
nothing of their size when it is built: its Parameter is made from a 0-d placeholder (a
loaded model never holds, nor copies, an array it will not read; before, a Linear(4096,
4096) allocated and copied 64 MB of placeholder, ~12 ms). Its shape and dtype are the
value's, and the first read draws the seeded numbers, on every target."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target


def _built_with_peak(make):
    tracemalloc.start()
    try:
        made = make()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return made, peak


@pytest.mark.parametrize("target", TARGETS)
def test_a_lazy_layer_allocates_nothing_of_its_size_and_reads_the_seeded_draws(target):
    t = Target.parse(target)
    x = np.random.default_rng(2).standard_normal((2, 512)).astype(np.float32)
    with ug.use_backend(t.backend, t.mode):
        ug.nn.Linear(2, 2)  # first-use set-up (imports, the generator) outside the count
        ug.manual_seed(8)
        layer, peak = _built_with_peak(lambda: ug.nn.Linear(512, 256))
        assert peak < 64 * 1024  # the weight alone is 512 KB
        assert layer.weight.shape == (512, 256) and layer.weight.dtype == "float32"
        assert layer.bias.shape == (256,)
        out = np.asarray(ug.function(layer)(x).numpy())
    bound = np.sqrt(6.0 / (512 + 256))
    w = np.random.default_rng(8).uniform(-bound, bound, (512, 256)).astype(np.float32)
    np.testing.assert_allclose(out, x.astype(np.float64) @ w.astype(np.float64), rtol=1e-4,
                               atol=1e-5)
    assert layer.weight.numpy().tobytes() == w.tobytes()
    assert not layer.bias.numpy().any()
