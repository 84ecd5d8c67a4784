"""Issue 19 item 2: `ug.nn.Linear`'s weight carries the storage hint `order="F"`, and torch
keeps it column-major (as torch's own Linear keeps `weight.t()`), so torch's mm backward
computes the weight gradient as `(g.T @ x).T`, the kernel of idiomatic torch code.

On all 9 targets: Linear training (SGD, Momentum, Adam), a checkpoint saved and reloaded
mid-training, a `state_dict` round trip, a weight shared by two layers and `ug.assign` into
the weight give the numbers of a float64 NumPy reference derived by hand, and the user sees
ordinary [in, out] values. On torch: the stored tensor is column-major after loading, after
an (in-place) update and after an assign, eager and static."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

TORCH_TARGETS = [t for t in TARGETS if t.startswith("torch:")]
OPTIMIZERS = {
    "sgd": lambda params: ug.optim.SGD(params, lr=0.1),
    "momentum": lambda params: ug.optim.Momentum(params, lr=0.1, momentum=0.9),
    "adam": lambda params: ug.optim.Adam(params, lr=0.01),
}
# float32 against float64 over a few steps of a 4-wide net: a few ulps per op.
RTOL, ATOL = 2e-5, 2e-6


class Net(ug.nn.Module):
    """tanh(tanh(x @ W1 + b1) @ W1 + b2) @ W3 + b3: fc2 shares fc1's weight."""

    def __init__(self):
        super().__init__()
        self.fc1 = ug.nn.Linear(4, 4)
        self.fc2 = ug.nn.Linear(4, 4)
        self.fc2.weight = self.fc1.weight
        self.out = ug.nn.Linear(4, 3)

    def forward(self, x):
        return self.out(ug.tanh(self.fc2(ug.tanh(self.fc1(x)))))


def _data():
    rng = np.random.default_rng(19)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    target = rng.standard_normal((6, 3)).astype(np.float32)
    return x, target


def _start() -> dict:
    """The net's initial weights, from unigraph's seeded initializers (same on every target)."""
    ug.manual_seed(0)
    return {name: np.array(value, np.float64) for name, value in Net().state_dict().items()}


def _reference_forward(w: dict, x) -> np.ndarray:
    x = x.astype(np.float64)
    h1 = np.tanh(x @ w["fc1.weight"] + w["fc1.bias"])
    return np.tanh(h1 @ w["fc1.weight"] + w["fc2.bias"]) @ w["out.weight"] + w["out.bias"]


def _reference_grads(w: dict, x, target) -> dict:
    """Gradients of mean((net(x) - target)^2), derived by hand, in float64."""
    x, target = x.astype(np.float64), target.astype(np.float64)
    w1, w3 = w["fc1.weight"], w["out.weight"]
    h1 = np.tanh(x @ w1 + w["fc1.bias"])
    h2 = np.tanh(h1 @ w1 + w["fc2.bias"])
    y = h2 @ w3 + w["out.bias"]
    dy = 2.0 * (y - target) / y.size
    dz2 = (dy @ w3.T) * (1.0 - h2 ** 2)
    dz1 = (dz2 @ w1.T) * (1.0 - h1 ** 2)
    return {"fc1.weight": x.T @ dz1 + h1.T @ dz2, "fc1.bias": dz1.sum(0),
            "fc2.bias": dz2.sum(0), "out.weight": h2.T @ dy, "out.bias": dy.sum(0)}


def _reference_training(kind: str, steps: int) -> dict:
    """The weights after `steps` updates, by the formulas of ug.optim's docstrings."""
    x, target = _data()
    w = _start()
    slots = {name: [np.zeros_like(value), np.zeros_like(value)] for name, value in w.items()}
    for t in range(1, steps + 1):
        grads = _reference_grads(w, x, target)
        for name, g in grads.items():
            m, v = slots[name]
            if kind == "sgd":
                w[name] = w[name] - 0.1 * g
            elif kind == "momentum":
                m[...] = 0.9 * m + g
                w[name] = w[name] - 0.1 * m
            else:
                m[...] = 0.9 * m + 0.1 * g
                v[...] = 0.999 * v + 0.001 * g * g
                m_hat, v_hat = m / (1 - 0.9 ** t), v / (1 - 0.999 ** t)
                w[name] = w[name] - 0.01 * m_hat / (np.sqrt(v_hat) + 1e-8)
    return w


def _trainer(net, opt):
    @ug.function
    def step(x, target):
        def loss_fn():
            return ug.mean((net(x) - target) ** 2)

        loss, grads = ug.value_and_grad(loss_fn, wrt=opt.params)()
        opt.step(grads)
        return loss

    return step


def _check_weights(net, expected: dict) -> None:
    """The user-visible values: [in, out] arrays equal to the float64 reference."""
    state = net.state_dict()
    assert sorted(state) == sorted(expected)
    for name, value in expected.items():
        assert state[name].flags.c_contiguous
        np.testing.assert_allclose(state[name], value, rtol=RTOL, atol=ATOL, err_msg=name)
    shown = net.fc1.weight.numpy()
    assert shown.shape == (4, 4) and net.out.weight.numpy().shape == (4, 3)
    np.testing.assert_allclose(shown, expected["fc1.weight"], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(net.out.weight.numpy().copy(), expected["out.weight"],
                               rtol=RTOL, atol=ATOL)
    assert net.fc2.weight is net.fc1.weight


def _stored(step, param):
    """The torch tensor the current target keeps for `param`: the eager native, or the
    compiled step's stored parameter on torch:static."""
    if step is not None and step._cache:
        compiled = next(iter(step._cache.values()))
        index = next(i for i, p in enumerate(compiled.params) if p is param)
        return compiled.executable.params[index]
    return param._natives["torch"][1]


def _assert_column_major(tensor, shape) -> None:
    assert tuple(tensor.shape) == shape
    assert tensor.stride() == (1, shape[0]), tensor.stride()


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
@pytest.mark.parametrize("target", TARGETS)
def test_training_matches_float64_reference(target, kind):
    """3 steps of each optimizer, a weight shared by two Linear layers: every weight equals
    the float64 reference, and reads as [in, out]."""
    t = Target.parse(target)
    x, target_values = _data()
    with ug.use_backend(t.backend, t.mode):
        ug.manual_seed(0)
        net = Net()
        opt = OPTIMIZERS[kind](net.parameters())
        step = _trainer(net, opt)
        for _ in range(3):
            step(x, target_values)
        if t.backend == "torch":
            _assert_column_major(_stored(step, net.fc1.weight), (4, 4))
            _assert_column_major(_stored(step, net.out.weight), (4, 3))
            assert tuple(_stored(step, net.out.bias).shape) == (3,)
            # The optimizer's slots in the weight's layout: compiled steps choose it from
            # the update; eager ones follow the slot Parameter's own order hint.
            for slot_name in {"momentum": ("velocity",), "adam": ("m", "v")}.get(kind, ()):
                slot = opt.state(net.out.weight, slot_name)
                if t.mode == "static" or slot.order == "F":
                    _assert_column_major(_stored(step, slot), (4, 3))
        _check_weights(net, _reference_training(kind, 3))


@pytest.mark.parametrize("target", TARGETS)
def test_checkpoint_saved_and_reloaded_mid_training(target, tmp_path):
    """Adam, 2 steps, save model and optimizer, load them into a new net and optimizer,
    2 more steps: the weights of 4 uninterrupted float64 steps. On torch the loaded weight
    is stored column-major."""
    t = Target.parse(target)
    x, target_values = _data()
    with ug.use_backend(t.backend, t.mode):
        ug.manual_seed(0)
        net = Net()
        opt = OPTIMIZERS["adam"](net.parameters())
        step = _trainer(net, opt)
        for _ in range(2):
            step(x, target_values)
        net.save(tmp_path / "net.safetensors")
        opt.save(tmp_path / "opt.safetensors")

        ug.manual_seed(1)  # other initial weights: the checkpoint must replace them
        resumed = Net()
        resumed.load(tmp_path / "net.safetensors")
        resumed_opt = OPTIMIZERS["adam"](resumed.parameters())
        resumed_opt.load(tmp_path / "opt.safetensors")
        resumed_step = _trainer(resumed, resumed_opt)
        resumed_step(x, target_values)
        if t.backend == "torch":
            _assert_column_major(_stored(resumed_step, resumed.fc1.weight), (4, 4))
        resumed_step(x, target_values)
        _check_weights(resumed, _reference_training("adam", 4))


@pytest.mark.parametrize("target", TARGETS)
def test_state_dict_round_trip(target):
    """state_dict after training gives [in, out] C-ordered copies; loading them into a new
    net gives the same outputs as the float64 reference on those weights."""
    t = Target.parse(target)
    x, target_values = _data()
    with ug.use_backend(t.backend, t.mode):
        ug.manual_seed(0)
        net = Net()
        step = _trainer(net, OPTIMIZERS["sgd"](net.parameters()))
        for _ in range(2):
            step(x, target_values)
        state = net.state_dict()
        ug.manual_seed(1)
        twin = Net()
        twin.load_state_dict(state)
        forward = ug.function(lambda x: twin(x))
        out = forward(x).numpy()
        if t.backend == "torch":
            _assert_column_major(_stored(forward if t.mode == "static" else None,
                                         twin.fc1.weight), (4, 4))
    expected = _reference_training("sgd", 2)
    _check_weights(twin, expected)
    np.testing.assert_allclose(out, _reference_forward(expected, x), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("target", TARGETS)
def test_assign_into_weight(target):
    """`ug.assign` of a row-major value (a fed input, a new tensor) into a Linear weight:
    the value reads back as given, the next forward uses it, and torch keeps the weight
    column-major, eagerly and in a compiled step (which reads the weight, then assigns)."""
    t = Target.parse(target)
    rng = np.random.default_rng(5)
    new_weight = rng.standard_normal((4, 3)).astype(np.float32)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    with ug.use_backend(t.backend, t.mode):
        fc = ug.nn.Linear(4, 3)
        initial = fc.weight.numpy().copy()

        @ug.function
        def apply_then_set(x, value):
            out = fc(x)
            ug.assign(fc.weight, value)
            return out

        first = apply_then_set(x, new_weight).numpy()
        static_step = apply_then_set if t.mode == "static" else None
        if t.backend == "torch":
            _assert_column_major(_stored(static_step, fc.weight), (4, 3))
        np.testing.assert_array_equal(fc.weight.numpy(), new_weight)
        second = apply_then_set(x, 2 * new_weight).numpy()
        if t.backend == "torch":
            _assert_column_major(_stored(static_step, fc.weight), (4, 3))

        ug.assign(fc.weight, ug.tensor(3 * new_weight))  # outside any function: immediate
        third = fc(x).numpy()
        if t.backend == "torch" and t.mode == "eager":
            _assert_column_major(_stored(None, fc.weight), (4, 3))
    np.testing.assert_array_equal(fc.weight.numpy(), 3 * new_weight)
    x64 = x.astype(np.float64)
    for out, weight in ((first, initial), (second, new_weight), (third, 3 * new_weight)):
        np.testing.assert_allclose(out, x64 @ weight, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("target", TORCH_TARGETS)
def test_torch_eager_update_is_in_place_and_column_major(target):
    """On torch the SGD update writes the stored column-major weight in place (eager, from
    the second step) or rebinds it to a column-major result (static): either way the weight
    gradient ran through torch's Linear orientation, and no step made a row-major copy."""
    t = Target.parse(target)
    x, target_values = _data()
    with ug.use_backend(t.backend, t.mode):
        ug.manual_seed(0)
        net = Net()
        step = _trainer(net, OPTIMIZERS["sgd"](net.parameters()))
        step(x, target_values)
        before = _stored(step, net.out.weight)
        _assert_column_major(before, (4, 3))
        address = before.data_ptr()
        del before
        step(x, target_values)
        after = _stored(step, net.out.weight)
        _assert_column_major(after, (4, 3))
        if t.mode == "eager":
            assert after.data_ptr() == address  # written in place
    _check_weights(net, _reference_training("sgd", 2))


@pytest.mark.parametrize("target", TARGETS)
def test_weight_trained_on_torch_runs_on_every_target(target):
    """A weight written by torch:eager training reads back from its column-major tensor (a
    Fortran-ordered NumPy view); every target then computes with the same values."""
    x, target_values = _data()
    with ug.use_backend("torch", "eager"):
        ug.manual_seed(0)
        net = Net()
        step = _trainer(net, OPTIMIZERS["sgd"](net.parameters()))
        for _ in range(2):
            step(x, target_values)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        out = ug.function(lambda x: net(x))(x).numpy()
    expected = _reference_forward(_reference_training("sgd", 2), x)
    np.testing.assert_allclose(out, expected, rtol=RTOL, atol=ATOL)


def test_order_is_checked():
    with pytest.raises(ValueError, match="order must be 'C'"):
        ug.Parameter(np.zeros((2, 2), np.float32), order="K")
    assert ug.nn.Linear(3, 2).weight.order == "F"
    assert ug.nn.Linear(3, 2).bias.order == "C"
