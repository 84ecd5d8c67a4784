"""`ug.init.parameter` checks a default initializer's spec (shape, dtype, fans, the words its
draw takes) once per spec, not once per layer: the same numbers as a draw made at once, on
the generator current at each call (a deferred draw under PCG64, at once under another bit
generator, even for a spec seen before), the same errors, and the layers run on all 9
targets."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph import init
from unigraph.random import drawing_from


def _at_once(rng_seed, bits):
    """Linear(4, 3)'s weight and bias as drawn at once from a generator of `bits`."""
    with drawing_from(np.random.Generator(bits(rng_seed))):
        return init.xavier_uniform()((4, 3), "float32", 4, 3), np.zeros(3, np.float32)


@pytest.mark.parametrize("target", TARGETS)
def test_a_spec_seen_before_draws_what_a_draw_at_once_draws(target):
    layers = []
    for bits in (np.random.PCG64, np.random.MT19937, np.random.PCG64, np.random.MT19937):
        with drawing_from(np.random.Generator(bits(7))):
            layer = ug.nn.Linear(4, 3, act="relu")
        deferred = layer.weight._home is not None  # (the value not drawn yet)
        assert deferred == (bits is np.random.PCG64)
        weight, bias = _at_once(7, bits)
        np.testing.assert_array_equal(layer.weight.numpy(), weight)
        np.testing.assert_array_equal(layer.bias.numpy(), bias)
        layers.append(layer)
    x = np.random.default_rng(8).standard_normal((2, 4)).astype(np.float32)
    for layer in layers:
        w = layer.weight.numpy().astype(np.float64)
        want = np.maximum(x.astype(np.float64) @ w, 0)
        np.testing.assert_allclose(run_on(target, ug.function(layer), x), want, rtol=1e-5,
                                   atol=1e-6)


def test_shapes_given_otherwise_and_bad_specs_as_before():
    param = init.parameter(init.DEFAULT_WEIGHT, [np.int64(4), 3.0], "float32")
    assert param.shape == (4, 3) and param.dtype == "float32"
    for _ in range(2):  # a bad spec is refused each time, never kept
        with pytest.raises(ValueError, match="invalid literal for int"):
            init.parameter(init.DEFAULT_WEIGHT, (4, "three"))
        with pytest.raises(TypeError, match="dtype 'float33' does not exist"):
            init.parameter(init.DEFAULT_BIAS, (3,), "float33")
    with pytest.raises(TypeError):
        init.parameter(init.DEFAULT_WEIGHT, (4, [3]))
