"""Initial weights drawn on first read (`ug.init.parameter`, issue 19 item 7).

A layer takes its stretch of the generator's stream when it is built but draws only when its
value is first read, so: read weights are the seeded draws, bit for bit, on every target; a
loaded layer never draws; every later draw is the same whether earlier layers were loaded,
read or never touched. Expected values are drawn by hand with NumPy's generator.
"""

import copy
import pickle

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.init import InitialValue


def _xavier(rng, fan_in, fan_out, shape):
    bound = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-bound, bound, shape).astype(np.float32)


def _forward64(x, layers):
    """float64 relu(x @ w + b) ... (no relu after the last layer)."""
    h = x.astype(np.float64)
    for i, (w, b) in enumerate(layers):
        h = h @ w.astype(np.float64) + b.astype(np.float64)
        if i < len(layers) - 1:
            h = np.maximum(h, 0.0)
    return h


def _run(target, model, x):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        return np.asarray(ug.function(model)(ug.tensor(x)).numpy())


def _x():
    return np.random.default_rng(11).standard_normal((3, 5)).astype(np.float32)


@pytest.mark.parametrize("target", TARGETS)
def test_read_initial_weights_are_the_seeded_draws(target):
    ug.manual_seed(3)
    model = ug.nn.Sequential(ug.nn.Linear(5, 4, act="relu"), ug.nn.Linear(4, 2))
    rng = np.random.default_rng(3)
    w0, w1 = _xavier(rng, 5, 4, (5, 4)), _xavier(rng, 4, 2, (4, 2))
    x = _x()
    out = _run(target, model, x)
    expected = _forward64(x, [(w0, np.zeros(4)), (w1, np.zeros(2))])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    # read back after the run on the target: the very bits of the hand draws
    assert model[0].weight.numpy().tobytes() == w0.tobytes()
    assert model[1].weight.numpy().tobytes() == w1.tobytes()
    assert not model[1].bias.numpy().any()


@pytest.mark.parametrize("target", TARGETS)
def test_a_loaded_layer_never_draws(target, monkeypatch):
    drawn = []
    original = InitialValue.get_param

    def counting(self, key):
        drawn.append(self.shape)
        return original(self, key)

    monkeypatch.setattr(InitialValue, "get_param", counting)
    model = ug.nn.Sequential(ug.nn.Linear(5, 4, act="relu"), ug.nn.Linear(4, 2))
    rng = np.random.default_rng(5)
    state = {"0.weight": rng.standard_normal((5, 4)).astype(np.float32),
             "0.bias": rng.standard_normal(4).astype(np.float32),
             "1.weight": rng.standard_normal((4, 2)).astype(np.float32),
             "1.bias": rng.standard_normal(2).astype(np.float32)}
    model.load_state_dict(state)
    x = _x()
    out = _run(target, model, x)
    expected = _forward64(x, [(state["0.weight"], state["0.bias"]),
                              (state["1.weight"], state["1.bias"])])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    assert drawn == []
    # and an unloaded layer does draw, once, when read
    ug.nn.Linear(3, 2).weight.numpy()
    assert drawn == [(3, 2)]


@pytest.mark.parametrize("target", TARGETS)
def test_later_draws_do_not_depend_on_earlier_layers(target):
    """Layer b (built after a) and a uniform draw made after both are the same numbers
    whether a was loaded, read, or left alone: a takes its stretch of the stream when built."""
    rng = np.random.default_rng(9)
    _xavier(rng, 6, 5, (6, 5))
    wb = _xavier(rng, 5, 4, (5, 4))
    after = rng.random((2, 3)).astype(np.float32)
    x = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    expected = _forward64(x, [(wb, np.zeros(4))])
    for what in ("loaded", "read", "untouched"):
        ug.manual_seed(9)
        a = ug.nn.Linear(6, 5)
        if what == "loaded":
            a.load_state_dict({"weight": np.ones((6, 5), np.float32),
                               "bias": np.ones(5, np.float32)})
        elif what == "read":
            a.weight.numpy()
        b = ug.nn.Linear(5, 4)
        assert ug.random.uniform((2, 3)).numpy().tobytes() == after.tobytes(), what
        np.testing.assert_allclose(_run(target, b, x), expected, rtol=1e-5, atol=1e-6,
                                   err_msg=what)


def test_conv_weights_and_every_initializer_keep_the_stream():
    """Conv layers defer too; normal initializers draw at once (their draw takes a varying
    part of the stream); the values and the stream are those of drawing in build order."""
    ug.manual_seed(4)
    conv = ug.nn.Conv2D(2, 3, 3)
    normal = ug.nn.Linear(4, 3, weight_init=ug.init.xavier_normal())
    conv1d = ug.nn.Conv1D(2, 2, 3, weight_init=ug.init.kaiming_uniform())
    uniform = ug.nn.Linear(3, 2, weight_init=ug.init.uniform(-0.5, 0.5),
                           bias_init=ug.init.constant(0.25))
    rng = np.random.default_rng(4)
    w_conv = _xavier(rng, 18, 27, (3, 2, 3, 3))
    w_normal = rng.normal(0.0, np.sqrt(2.0 / 7), (4, 3)).astype(np.float32)
    bound = np.sqrt(3.0) * np.sqrt(2.0) / np.sqrt(6)
    w_conv1d = rng.uniform(-bound, bound, (2, 2, 3)).astype(np.float32)
    w_uniform = rng.uniform(-0.5, 0.5, (3, 2)).astype(np.float32)
    assert ug.random.uniform((4,)).numpy().tobytes() == rng.random(4).astype(
        np.float32).tobytes()
    for got, want in [(uniform.weight, w_uniform), (conv1d.weight, w_conv1d),
                      (normal.weight, w_normal), (conv.weight, w_conv)]:  # read out of order
        assert got.numpy().tobytes() == want.tobytes()
    assert (uniform.bias.numpy() == np.float32(0.25)).all()


def test_a_buffered_half_word_survives_the_skip():
    """A 32-bit draw leaves half a 64-bit word buffered in PCG64: skipping a layer's words
    keeps it, as drawing them would."""
    ug.manual_seed(2)
    first = ug.random.generator().random(dtype=np.float32)
    layer = ug.nn.Linear(3, 3)
    second = ug.random.generator().random(dtype=np.float32)
    rng = np.random.default_rng(2)
    assert rng.random(dtype=np.float32) == first
    w = _xavier(rng, 3, 3, (3, 3))
    assert rng.random(dtype=np.float32) == second
    assert layer.weight.numpy().tobytes() == w.tobytes()


def test_copies_and_state_dicts_of_an_unread_layer():
    ug.manual_seed(6)
    layer = ug.nn.Linear(4, 3)
    twin = copy.deepcopy(layer)
    pickled = pickle.loads(pickle.dumps(layer.weight))  # e.g. sent to a checker's worker
    rng = np.random.default_rng(6)
    w = _xavier(rng, 4, 3, (4, 3))
    assert twin.weight.numpy().tobytes() == w.tobytes()
    assert pickled.numpy().tobytes() == w.tobytes()
    assert layer.state_dict()["weight"].tobytes() == w.tobytes()
    assert layer.copy("float64").weight.numpy().tobytes() == w.astype(np.float64).tobytes()


@pytest.mark.parametrize("target", TARGETS)
def test_an_initializer_changed_after_a_layer_is_built_does_not_change_its_draw(target):
    """One initializer object builds two layers, its bounds changed in between: each layer's
    weights are the draw its bounds gave when it was built (read after both are built), as
    when the draw is made at once."""
    ug.manual_seed(5)
    init = ug.init.uniform(-1.0, 1.0)
    first = ug.nn.Linear(5, 4, act="relu", weight_init=init)
    init.low, init.high = -0.01, 0.01
    second = ug.nn.Linear(4, 2, weight_init=init)
    rng = np.random.default_rng(5)
    w0 = rng.uniform(-1.0, 1.0, (5, 4)).astype(np.float32)
    w1 = rng.uniform(-0.01, 0.01, (4, 2)).astype(np.float32)
    x = _x()
    out = _run(target, ug.nn.Sequential(first, second), x)
    np.testing.assert_allclose(out, _forward64(x, [(w0, np.zeros(4)), (w1, np.zeros(2))]),
                               rtol=1e-5, atol=1e-6)
    assert first.weight.numpy().tobytes() == w0.tobytes()
    assert second.weight.numpy().tobytes() == w1.tobytes()
