"""The shortcuts of building, loading and first-running a model (bench `build100`) keep what
the general code did, on all 9 targets: one walk of the modules for `load_state_dict`,
`named_parameters` and `named_buffers` (in `named_modules` order, a shared parameter once,
containers and a class with its own traversal included); Linear and Sequential registering
their parameters and layers directly (a subclass's own `__setattr__` still sees each one);
numpy:static's first run of ops of one, two and three operands, freeing dead values."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug


class Block(ug.nn.Module):
    """A list attribute of layers, a shared weight and a buffer."""

    def __init__(self):
        super().__init__()
        self.layers = [ug.nn.Linear(4, 4, act="relu"), ug.nn.Linear(4, 4)]
        self.layers[1].weight = self.layers[0].weight
        self.register_buffer("offset", np.zeros(4, np.float32))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x + self.offset


class Reversed(ug.nn.Module):
    """A module listing its children in its own order (its own `named_modules`)."""

    def __init__(self):
        super().__init__()
        self.a = ug.nn.Linear(4, 4)
        self.b = ug.nn.Linear(4, 4, act="tanh")

    def named_modules(self, prefix: str = ""):
        yield prefix, self
        for name in ("b", "a"):
            child = getattr(self, name)
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def forward(self, x):
        return self.b(self.a(x))


class Net(ug.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.turned = Reversed()
        self.head = ug.nn.Sequential(ug.nn.Linear(4, 3), ug.nn.ReLU())
        self.scale = ug.Parameter(np.ones(3, np.float32))

    def forward(self, x):
        return self.head(self.turned(self.block(x))) * self.scale


def _generic(model, table: str) -> list:
    """The walk as `Module` wrote it before: `named_modules`, then each module's own."""
    seen, found = set(), []
    for prefix, module in model.named_modules():
        own = module._own_parameters() if table == "_parameters" else \
            getattr(module, table).items()
        for name, param in own:
            if id(param) not in seen:
                seen.add(id(param))
                found.append(((f"{prefix}.{name}" if prefix else name), param))
    return found


def _state(model) -> dict:
    rng = np.random.default_rng(11)
    return {name: rng.standard_normal(value.shape).astype(np.float32)
            for name, value in model.state_dict().items()}


def _forward64(state, x):
    def linear(h, prefix, act=None):
        h = h @ state[f"{prefix}.weight"].astype(np.float64) + state[f"{prefix}.bias"]
        return act(h) if act else h

    h = linear(x.astype(np.float64), "block.layers.0", lambda v: np.maximum(v, 0))
    h = h @ state["block.layers.0.weight"].astype(np.float64) + state["block.layers.1.bias"]
    h = h + state["block.offset"]
    h = linear(linear(h, "turned.a"), "turned.b", np.tanh)
    return np.maximum(linear(h, "head.0"), 0) * state["scale"]


def test_one_walk_lists_what_the_generic_walk_lists():
    model = Net()
    expected = _generic(model, "_parameters")
    assert [name for name, _ in expected] == [
        "scale", "block.layers.0.weight", "block.layers.0.bias", "block.layers.1.bias",
        "turned.b.weight", "turned.b.bias", "turned.a.weight", "turned.a.bias",
        "head.0.weight", "head.0.bias"]
    for got, want in ((model.named_parameters(), expected),
                      (model.named_buffers(), _generic(model, "_buffers"))):
        assert [(name, id(p)) for name, p in got] == [(name, id(p)) for name, p in want]
    assert [name for name, _ in model.named_buffers()] == ["block.offset"]
    assert model.parameters() == [p for _, p in expected]
    assert list(model.state_dict()) == [*(name for name, _ in expected), "block.offset"]


@pytest.mark.parametrize("target", TARGETS)
def test_a_loaded_model_of_containers_shared_weights_and_own_walks_runs(target):
    model = Net()
    state = _state(model)
    model.load_state_dict(state)
    x = np.random.default_rng(12).standard_normal((5, 4)).astype(np.float32)
    want = _forward64(state, x)
    np.testing.assert_allclose(run_on(target, model, x), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run_on(target, ug.function(model), x), want, rtol=1e-5,
                               atol=1e-6)
    loaded = model.state_dict()
    assert all(np.array_equal(loaded[name], array) for name, array in state.items())


@pytest.mark.parametrize("target", TARGETS)
def test_load_state_dict_still_refuses_and_loads_nothing(target):
    model = Net()
    state = _state(model)
    before = model.state_dict()
    missing = dict(state)
    del missing["turned.a.bias"]
    with pytest.raises(KeyError, match=r"load_state_dict into Net: missing keys: "
                                       r"turned\.a\.bias$|'load_state_dict into Net: "
                                       r"missing keys: turned\.a\.bias'"):
        model.load_state_dict(missing)
    with pytest.raises(KeyError, match=r"missing keys: turned\.a\.bias; unexpected keys: "
                                       r"extra"):
        model.load_state_dict({**missing, "extra": np.zeros(1)})
    wrong = {**state, "head.0.weight": np.zeros((3, 4), np.float32)}
    with pytest.raises(ValueError, match=r"load_state_dict into Net: 'head\.0\.weight' has "
                                         r"shape \[3, 4\] in the state dict but \[4, 3\] in "
                                         r"the model"):
        model.load_state_dict(wrong)
    after = model.state_dict()
    assert all(np.array_equal(after[name], array) for name, array in before.items())
    model.load_state_dict(missing, strict=False)  # the rest loads, the bias is kept
    assert np.array_equal(model.turned.a.bias.numpy(), before["turned.a.bias"])
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(run_on(target, model, x),
                               _forward64({**state, "turned.a.bias": before["turned.a.bias"]},
                                          x), rtol=1e-5, atol=1e-6)


class SeenLinear(ug.nn.Linear):
    def __setattr__(self, name, value):
        self.__dict__.setdefault("seen", []).append(name)
        super().__setattr__(name, value)


class SeenSequential(ug.nn.Sequential):
    def __setattr__(self, name, value):
        self.__dict__.setdefault("seen", []).append(name)
        super().__setattr__(name, value)


@pytest.mark.parametrize("target", TARGETS)
def test_subclasses_with_their_own_setattr_see_every_registration(target):
    layer = SeenLinear(4, 3, act="relu")
    assert layer.seen == ["weight", "bias"]
    model = SeenSequential(layer, ug.nn.Linear(3, 3))
    assert model.seen == ["0", "1"]
    assert [name for name, _ in model.named_parameters()] == [
        "0.weight", "0.bias", "1.weight", "1.bias"]
    assert [p.name for p in model.parameters()] == ["0.weight", "0.bias", "1.weight",
                                                    "1.bias"]
    state = _state(model)
    model.load_state_dict(state)
    x = np.random.default_rng(13).standard_normal((2, 4)).astype(np.float32)
    h = np.maximum(x.astype(np.float64) @ state["0.weight"] + state["0.bias"], 0)
    np.testing.assert_allclose(run_on(target, ug.function(model), x),
                               h @ state["1.weight"] + state["1.bias"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_sequential_names_its_layers_as_setattr_did(target):
    shared = ug.nn.Linear(3, 3, bias=False)
    model = ug.nn.Sequential(ug.nn.Linear(2, 3), shared, shared)
    assert [name for name, _ in model.named_parameters()] == ["0.weight", "0.bias",
                                                              "1.weight"]
    assert shared.path == "2" and shared.weight.name == "2.weight"  # named by the last
    assert len(model) == 3 and model[2] is shared and getattr(model, "1") is shared
    outer = ug.nn.Sequential(model)
    assert [p.name for p in outer.parameters()] == ["0.0.weight", "0.0.bias", "0.2.weight"]
    assert list(outer.state_dict()) == ["0.0.weight", "0.0.bias", "0.1.weight"]
    assert shared.bias is None and "bias" not in shared._parameters
    with pytest.raises(TypeError, match="Sequential: item 1 is a int, not a ug.nn.Module"):
        ug.nn.Sequential(shared, 3)
    x = np.ones((1, 2), np.float32)
    state = outer.state_dict()
    h = x @ state["0.0.weight"] + state["0.0.bias"]
    want = h @ state["0.1.weight"] @ state["0.1.weight"]  # (listed under its first name)
    np.testing.assert_allclose(run_on(target, ug.function(outer), x), want, rtol=1e-5,
                               atol=1e-6)


def _mixed(x, y):
    a = ug.relu(x)  # one operand
    b = a * y  # two
    c = ug.where(x > 0, b, y)  # three
    return ug.tanh(c) + a, b


@pytest.mark.parametrize("target", TARGETS)
def test_a_first_run_equals_the_later_runs_for_ops_of_one_two_and_three_operands(target):
    rng = np.random.default_rng(14)
    x, y = (rng.standard_normal((3, 5)).astype(np.float32) for _ in range(2))
    function = ug.function(_mixed)
    first = run_on(target, function, x, y)
    second = run_on(target, function, x, y)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    a = np.maximum(x, 0)
    b = a * y
    np.testing.assert_allclose(first[0], np.tanh(np.where(x > 0, b, y)) + a, rtol=1e-6,
                               atol=1e-6)
    np.testing.assert_array_equal(first[1], b)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("initializer", ["zeros", "uniform", "normal"])
def test_init_parameter_takes_the_parameters_options_and_refuses_others(target, initializer):
    make = getattr(ug.init, initializer)
    param = ug.init.parameter(make(), (2, 3), "float32", name="w", trainable=False,
                              lr_scale=2, order="F")
    assert (param.name, param.trainable, param.lr_scale, param.order) == ("w", False, 2.0,
                                                                          "F")
    default = ug.init.parameter(make(), [2, 3])
    assert (default.name, default.trainable, default.lr_scale, default.order,
            default.dtype) == ("", True, 1.0, "C", "float32")
    ug.manual_seed(7)
    again = ug.init.parameter(make(), (2, 3), name="w")
    ug.manual_seed(7)
    drawn = make()((2, 3))
    np.testing.assert_array_equal(again.numpy(), drawn)
    x = np.ones((4, 2), np.float32)
    np.testing.assert_allclose(run_on(target, ug.function(lambda x: x @ again), x), x @ drawn,
                               rtol=1e-6)
    where = "_deferred" if initializer != "normal" else "__init__"
    with pytest.raises(TypeError, match=rf"^Parameter\.{where}\(\) got an unexpected keyword "
                                        r"argument 'colour'$"):
        ug.init.parameter(make(), (2,), colour="red")
    with pytest.raises(ValueError, match="order must be 'C'"):
        ug.init.parameter(make(), (2,), order="X")
