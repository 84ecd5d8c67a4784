"""build100's shortcuts (issue 19 item 7: building, loading and first-running a model) keep
every result and message, on all 9 targets: the initial weights of a seed (pinned: the
digests of 3c34b75's draws), a model's outputs before and after `load_state_dict`, the
load's conversions and its errors, and traced ops' shapes and values."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.config import Target


def _digest(array) -> str:
    return hashlib.sha256(np.ascontiguousarray(np.asarray(array)).tobytes()).hexdigest()[:16]


def _layers() -> list:
    return [ug.nn.Linear(5, 3),
            ug.nn.Linear(4, 6, act="relu", weight_init=ug.init.kaiming_uniform()),
            ug.nn.Linear(3, 2, weight_init=ug.init.uniform(-0.5, 0.5),
                         bias_init=ug.init.constant(0.1)),
            ug.nn.Linear(3, 2, weight_init=ug.init.xavier_normal()),
            ug.nn.Conv2D(3, 2, 3), ug.nn.Embedding(7, 3), ug.nn.Linear(3, 3, dtype="float64")]


# seed -> (digests of every parameter of _layers() in order, digest of the next 2 draws),
# as 3c34b75 drew them
PINNED = {
    0: (["38cec7602b224f81", "15ec7bf0b50732b4", "6011ecbf9e9d8eea", "9d908ecfb6b256de",
         "6bcdc8cc98bb329b", "e2f8e482c9156e75", "7b59495911a8143b", "af5570f5a1810b7a",
         "bb593776277aca77", "af5570f5a1810b7a", "ea72af845d00f17c", "726fde0bc5d864c0",
         "9d908ecfb6b256de"], "f5b0f61bb47788f9"),
    1: (["611181733d68514b", "15ec7bf0b50732b4", "02a77254d07d7d8f", "9d908ecfb6b256de",
         "0e241f595ec00633", "e2f8e482c9156e75", "9b5e39cff9ec4b03", "af5570f5a1810b7a",
         "a108dba18f16a4a4", "af5570f5a1810b7a", "29584737a3095dd3", "0491ccb5644b34c4",
         "9d908ecfb6b256de"], "d7f6ba2ac324290e"),
    7: (["9c9456ce8c442cc6", "15ec7bf0b50732b4", "e9bc669584c625eb", "9d908ecfb6b256de",
         "cfa88eb7fe5ed122", "e2f8e482c9156e75", "7ad88facd8db2d94", "af5570f5a1810b7a",
         "3a1e53698c0fc9e7", "af5570f5a1810b7a", "4ce23aebbb8dd84e", "15cf782b9c7f1ea7",
         "9d908ecfb6b256de"], "5e928516dd1d6611"),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("seed", sorted(PINNED))
def test_initial_parameters_are_the_pinned_draws(target, seed):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        ug.manual_seed(seed)
        layers = _layers()
        after = ug.random.generator().random(2)  # the stream past the layers' draws
        digests = [_digest(p.numpy()) for layer in layers for p in layer.parameters()]
    assert (digests, _digest(after)) == PINNED[seed]


def _model(depth=4, width=8):
    return ug.nn.Sequential(*[ug.nn.Linear(width, width, act="relu") for _ in range(depth)])


def _state(depth=4, width=8, seed=3) -> dict:
    rng = np.random.default_rng(seed)
    state = {}
    for i in range(depth):
        state[f"{i}.weight"] = rng.standard_normal((width, width)).astype(np.float32)
        state[f"{i}.bias"] = rng.standard_normal(width).astype(np.float32)
    return state


def _reference(state: dict, x: np.ndarray, depth=4) -> np.ndarray:
    for i in range(depth):
        x = np.maximum(x @ state[f"{i}.weight"] + state[f"{i}.bias"], np.float32(0))
    return x


def _close(target: str, got, expected) -> None:
    if target.startswith("numpy"):  # the reference engine itself: the same bits
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_built_loaded_and_run_gives_the_same_numbers(target):
    x = np.random.default_rng(4).standard_normal((5, 8)).astype(np.float32)
    state = _state()
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        model = _model()
        initial = {name: np.array(p.numpy()) for name, p in model.named_parameters()}
        fn = ug.function(model)
        before = fn(ug.tensor(x)).numpy()
        model.load_state_dict(state)
        after = fn(ug.tensor(x)).numpy()
        again = ug.function(model)(ug.tensor(x)).numpy()
        for name, param in model.named_parameters():
            assert param.numpy().dtype == np.float32
            np.testing.assert_array_equal(param.numpy(), state[name])
    _close(target, before, _reference(initial, x))
    _close(target, after, _reference(state, x))
    np.testing.assert_array_equal(after, again)


@pytest.mark.parametrize("target", TARGETS)
def test_load_state_dict_errors_and_nothing_loaded(target):
    state = _state()
    cases = [
        ({**state, "1.weight": state["1.weight"][:3]}, ValueError,
         "load_state_dict into Sequential: '1.weight' has shape [3, 8] in the state dict "
         "but [8, 8] in the model"),
        ({k: v for k, v in state.items() if k != "2.bias"}, KeyError,
         "'load_state_dict into Sequential: missing keys: 2.bias'"),
        ({**state, "extra": state["0.bias"]}, KeyError,
         "'load_state_dict into Sequential: unexpected keys: extra'"),
    ]
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        model = _model()
        kept = {name: np.array(p.numpy()) for name, p in model.named_parameters()}
        for bad, kind, message in cases:
            with pytest.raises(kind) as info:
                model.load_state_dict(bad)
            assert str(info.value) == message
            for name, param in model.named_parameters():  # all or nothing
                np.testing.assert_array_equal(param.numpy(), kept[name])
        with pytest.raises(ValueError) as info:
            model.parameters()[0].set_value(np.zeros((2, 2), np.float32))
        assert str(info.value) == ("parameter '0.weight' has shape [8, 8]; cannot set a "
                                   "value of shape [2, 2]")


@pytest.mark.parametrize("target", TARGETS)
def test_loaded_values_are_converted_copies(target):
    state = _state()
    bias = state["1.bias"]
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        x = np.ones((2, 8), np.float32)
        for value, expected in [
            (bias.astype(np.float64) / 3, (bias.astype(np.float64) / 3).astype(np.float32)),
            (bias.astype(">f4"), bias),  # not in the native byte order
            (np.arange(8, dtype=np.int32), np.arange(8, dtype=np.float32)),
            (bias.tolist(), bias),
            (np.asfortranarray(state["1.weight"]), state["1.weight"]),
        ]:
            model = _model()
            name = "1.weight" if np.ndim(value) == 2 else "1.bias"
            source = np.array(value) if isinstance(value, np.ndarray) else value
            model.load_state_dict({**state, name: source})
            if isinstance(source, np.ndarray):
                source[...] = 0  # the parameter holds its own copy
            got = dict(model.named_parameters())[name].numpy()
            assert got.dtype == np.float32 and got.dtype.isnative
            np.testing.assert_array_equal(got, expected)
            loaded = {**state, name: np.asarray(expected)}
            _close(target, ug.function(model)(ug.tensor(x)).numpy(), _reference(loaded, x))


@pytest.mark.parametrize("target", TARGETS)
def test_traced_ops_of_each_arity_and_attrs(target):
    """The shape inference's cache keys of ops with 1, 2 and 3 inputs, with and without
    attrs, for two input shapes in turn (each signature its own answer)."""

    def f(x, y):
        a = ug.relu(x)                      # one input
        b = a * y                           # two
        c = ug.where(a > 0.5, b, y)         # three
        return ug.sum(c, axis=0), ug.sum(c), ug.transpose(c)  # attrs

    t = Target.parse(target)
    rng = np.random.default_rng(6)
    for shape in [(3, 4), (2, 5)]:
        x, y = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
        with ug.use_backend(t.backend, t.mode):
            got = [o.numpy() for o in ug.function(f)(ug.tensor(x), ug.tensor(y))]
        a = np.maximum(x, 0)
        c = np.where(a > 0.5, a * y, y)
        for out, expected in zip(got, [c.sum(axis=0), c.sum(), c.T], strict=True):
            assert out.shape == expected.shape and out.dtype == np.float32
            np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_outer_values_inside_a_branch_are_captured(target):
    """A tensor of the graph being traced is that graph's value as it is; one of an
    enclosing graph, used inside a cond branch, is captured there (not taken as the
    branch's own value), and a Parameter read there too."""
    w = ug.Parameter(np.array([2.0, -1.0, 0.5], np.float32))

    def f(x, y):
        s = x * y  # this graph's value
        return ug.cond(ug.sum(s) > 0, lambda: s * w + x, lambda: s - w)

    t = Target.parse(target)
    x = np.array([1.0, 2.0, -0.5], np.float32)
    for y in (np.ones(3, np.float32), -np.ones(3, np.float32)):  # each branch taken once
        with ug.use_backend(t.backend, t.mode):
            got = ug.function(f)(ug.tensor(x), ug.tensor(y)).numpy()
        s = x * y
        expected = s * w.numpy() + x if s.sum() > 0 else s - w.numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


def _marked_line(marker: str) -> int:
    with open(__file__) as source:
        return next(i for i, line in enumerate(source, 1) if marker in line)


def _ops_called_three_ways(x):
    from unigraph.dispatch import apply

    a = ug.relu(x)  # API LINE
    b = a * 2.0  # OPERATOR LINE
    return apply("neg", [b], {})  # APPLY LINE


@pytest.mark.parametrize("target", TARGETS)
def test_traced_nodes_name_the_users_line(target):
    """Each node's user line is the line calling the op, whether through an op function, an
    operator or `dispatch.apply` itself (the walk skips only unigraph's own frames)."""
    t = Target.parse(target)
    here = __file__.rsplit("/", 1)[-1]
    with ug.use_backend(t.backend, t.mode):
        graph = ug.function(_ops_called_three_ways).trace(np.ones((2, 3), np.float32))
    lines = {node.op: node.source for node in graph.nodes}
    assert [node.op for node in graph.nodes] == ["relu", "constant", "mul", "neg"]
    for op, marker in [("relu", "API"), ("mul", "OPERATOR"), ("neg", "APPLY")]:
        line = _marked_line("# " + marker + " LINE")
        assert lines[op].rsplit("/", 1)[-1] == f"{here}:{line}"


def _ops_of_two_tensors_and_a_layer(x, w, layer):
    a = ug.matmul(x, w)  # MATMUL LINE
    b = a + x  # TENSORS LINE
    return layer(b)  # LAYER LINE


@pytest.mark.parametrize("target", TARGETS)
def test_traced_nodes_of_op_wrappers_and_layers_name_the_users_line(target):
    """The op wrappers' traced path starts the walk for the user line beyond the wrapper:
    `ug.matmul`, an operator on two tensors and the three ops of a Linear layer's forward
    (matmul, add, relu: unigraph's own code) each name the user's line that called them."""
    t = Target.parse(target)
    here = __file__.rsplit("/", 1)[-1]
    with ug.use_backend(t.backend, t.mode):
        layer = ug.nn.Linear(3, 3, act="relu")
        w = ug.tensor(np.eye(3, dtype=np.float32))
        graph = ug.function(_ops_of_two_tensors_and_a_layer).trace(
            np.ones((2, 3), np.float32), w, layer)
    assert [node.op for node in graph.nodes] == ["matmul", "add", "matmul", "add", "relu"]
    lines = [node.source.rsplit("/", 1)[-1] for node in graph.nodes]
    expected = [_marked_line("# " + marker + " LINE")
                for marker in ("MATMUL", "TENSORS", "LAYER", "LAYER", "LAYER")]
    assert lines == [f"{here}:{line}" for line in expected]


@pytest.mark.parametrize("target", TARGETS)
def test_constructors_register_as_attribute_assignment_does(target):
    """Linear's weight and bias and Sequential's children are registered without
    `Module.__setattr__`'s tests (`Module._register_new`): the same names, tables and
    attributes, inside a parent that has a path; a class that overrides `__setattr__` still
    sees each assignment; the model runs with those parameters."""
    seen = []

    class Watched(ug.nn.Linear):
        def __setattr__(self, name, value):
            seen.append(name)
            super().__setattr__(name, value)

    class Outer(ug.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = ug.nn.Sequential(ug.nn.Linear(3, 2, act="relu"),
                                         ug.nn.Linear(2, 2, bias=False), Watched(2, 1))

        def forward(self, x):
            return self.body(x)

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        model = Outer()
        names = [name for name, _ in model.named_parameters()]
        assert names == ["body.0.weight", "body.0.bias", "body.1.weight", "body.2.weight",
                         "body.2.bias"]
        assert [p.name for p in model.parameters()] == names
        assert {"weight", "bias"} <= set(seen)
        first = model.body[0]
        assert first.weight is first._parameters["weight"] and first.bias is \
            first._parameters["bias"]
        assert model.body[1].bias is None and "bias" not in model.body[1]._parameters
        assert list(model.body._modules) == ["0", "1", "2"] and model.body[2].path == "body.2"
        x = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
        out = ug.function(model)(ug.tensor(x)).numpy()
        state = model.state_dict()
    h = np.maximum(x @ state["body.0.weight"] + state["body.0.bias"], 0) @ state["body.1.weight"]
    np.testing.assert_allclose(out, h @ state["body.2.weight"] + state["body.2.bias"],
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_traced_calls_run_the_forward_of_the_class_now_or_of_the_instance(target):
    """A traced module call runs its class's forward found by the class
    (`module._CLASS_FORWARDS`): a forward replaced on the class afterwards, one set on an
    instance, and a subclass's inherited one are each the one that runs."""

    class Scale(ug.nn.Module):
        def forward(self, x):
            return x * 2.0

    class Child(Scale):
        pass

    def traced(model, x):
        return run_on(target, ug.function(model), x)

    x = np.array([1.0, -2.0], np.float32)
    np.testing.assert_array_equal(traced(ug.nn.Sequential(Scale(), Child()), x), x * 4)
    original = Scale.forward
    Scale.forward = lambda self, x: x * 3.0
    try:
        np.testing.assert_array_equal(traced(ug.nn.Sequential(Scale(), Child()), x), x * 9)
    finally:
        Scale.forward = original
    own = Scale()
    own.forward = lambda x: x + 1.0
    np.testing.assert_array_equal(traced(ug.nn.Sequential(own, Scale()), x), (x + 1) * 2)
    np.testing.assert_array_equal(traced(ug.nn.Sequential(Child(), Scale()), x), x * 4)
