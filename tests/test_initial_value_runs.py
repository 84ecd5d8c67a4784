"""Layers built one after another skip their initial values' words together (issue 19,
build100): the generator's state is read once for the lot and the generator moves past them
when it is next handed out (`ug.random.skip`). Every number stays the one drawn at once:
each layer's weights, the draws after the layers (dropout masks, `ug.random`), a buffered
32-bit half-word, and the draws of a generator (or its bit generator) that the user holds
across the building, which moves with every layer as before. Expected values are drawn by
hand with NumPy's generator."""

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target


def _xavier(rng, fan_in, fan_out, shape):
    bound = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-bound, bound, shape).astype(np.float32)


def _layers():
    return [ug.nn.Linear(5, 4, act="relu"), ug.nn.Linear(4, 3),
            ug.nn.Linear(3, 2, weight_init=ug.init.uniform(-0.5, 0.5)), ug.nn.Linear(2, 6)]


def _hand_drawn(rng):
    """The weights of `_layers()`, drawn at once from `rng`."""
    return [_xavier(rng, 5, 4, (5, 4)), _xavier(rng, 4, 3, (4, 3)),
            rng.uniform(-0.5, 0.5, (3, 2)).astype(np.float32), _xavier(rng, 2, 6, (2, 6))]


def _check(layers, weights):
    for layer, want in reversed(list(zip(layers, weights))):  # read out of order
        assert layer.weight.numpy().tobytes() == want.tobytes()


@pytest.mark.parametrize("target", TARGETS)
def test_layers_built_in_a_row_and_the_draws_after_them(target):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        ug.manual_seed(4)
        half = ug.random.generator().random(dtype=np.float32)  # a half-word stays buffered
        layers = _layers()
        after = ug.random.uniform((3,)).numpy()  # (drawn on the target: moves past them)
        more = _layers()
        last = ug.random.generator().random(dtype=np.float32)
    rng = np.random.default_rng(4)
    assert rng.random(dtype=np.float32) == half
    weights = _hand_drawn(rng)
    assert after.tobytes() == rng.random(3).astype(np.float32).tobytes()
    more_weights = _hand_drawn(rng)
    assert rng.random(dtype=np.float32) == last  # the buffered half-word survived the skips
    _check(more, more_weights)
    _check(layers, weights)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("held", ["generator", "bit generator"])
def test_a_generator_held_across_the_building_moves_with_each_layer(target, held):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        ug.manual_seed(5)
        rng = ug.random.generator()
        bits = rng.bit_generator if held == "bit generator" else None
        if bits is not None:
            del rng
        first = _layers()
        drawn = (np.random.Generator(bits) if bits is not None else rng).random(2)
        second = _layers()
        after = ug.random.uniform((2,), dtype="float64").numpy()
    want = np.random.default_rng(5)
    first_weights = _hand_drawn(want)
    assert drawn.tobytes() == want.random(2).tobytes()  # past the first layers' words
    second_weights = _hand_drawn(want)
    assert after.tobytes() == want.random(2).tobytes()
    _check(first, first_weights)
    _check(second, second_weights)
