"""Training that stops on one target and resumes on another: `model.save` + `opt.save` after
K steps on target a, a fresh model and optimizers `load` them on target b, K more steps there
= 2K steps of the float64 NumPy reference (weights and every piece of optimizer state), for
every pair of the 9 targets, with Adam and Momentum so that the state matters. Also
`opt.step`, `trainer.fit((x, y))` / `trainer.fit(x, y)`, and the optimizer file's checks."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.checking import compare as cmp
from unigraph.nn import functional as F
from unigraph.weights import WeightFileError

STEPS = 3  # per leg of the all-pairs resume


class Tiny(ug.nn.Module):
    """Adam trains fc1, Momentum trains fc2 and the root-level `scale`."""

    def __init__(self):
        super().__init__()
        self.fc1 = ug.nn.Linear(3, 4)
        self.fc2 = ug.nn.Linear(4, 2)
        self.scale = ug.Parameter(np.full((2,), 1.5, np.float32))

    def forward(self, x):
        return self.fc2(ug.tanh(self.fc1(x))) * self.scale


def _data(dtype="float32"):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 3)).astype(dtype)
    y = rng.standard_normal((8, 2)).astype(dtype)
    return x, y


def _optimizers(model):
    adam = ug.optim.Adam(model.fc1, lr=0.05, betas=(0.8, 0.9))
    momentum = ug.optim.Momentum([*model.fc2.parameters(), model.scale], lr=0.1,
                                 momentum=0.9)
    return adam, momentum


def _step_function(model, adam, momentum):
    params = adam.params + momentum.params
    first = len(adam.params)

    @ug.function
    def step(x, y):
        loss, grads = ug.value_and_grad(lambda: F.mse_loss(model(x), y), wrt=params)()
        adam.step(grads[:first])
        momentum.step(grads[first:])
        return loss

    return step


def _steps(step, x, y):
    """STEPS training steps; the last loss."""
    return [step(x, y) for _ in range(STEPS)][-1]


def _state(model, adam, momentum) -> dict:
    """Weights and optimizer state, by name."""
    state = {f"model/{k}": v for k, v in model.state_dict().items()}
    state.update({f"adam/{k}": v for k, v in adam.state_dict().items()})
    state.update({f"momentum/{k}": v for k, v in momentum.state_dict().items()})
    return state


def _assert_close(got: dict, expected: dict, budget, where):
    assert sorted(got) == sorted(expected), where
    rtol, atol = budget
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=rtol, atol=atol,
                                   err_msg=f"{where}: {name}")


@pytest.fixture(scope="module")
def resume_setup(tmp_path_factory):
    """The initial weights, the float64 reference after STEPS and 2 * STEPS steps, the
    budget, and for every target a the files saved after STEPS steps there."""
    ug.manual_seed(0)
    model = Tiny()
    initial = model.state_dict()
    x, y = _data()
    reference = model.copy("float64")
    ref_adam, ref_momentum = _optimizers(reference)
    ref_step = _step_function(reference, ref_adam, ref_momentum)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    expected = []
    with ug.use_backend("numpy", "static"):
        for _ in range(2):
            for _ in range(STEPS):
                ref_step(x64, y64)
            expected.append(_state(reference, ref_adam, ref_momentum))
    # check_training's float32 budget: the widest op budget of the step, times the steps.
    ops = cmp.ops_of(_step_function(model, *_optimizers(model)).trace(x, y))
    rtol, atol = cmp.budget_for(ops, "float32")
    budget = (rtol * 2 * STEPS, atol * 2 * STEPS)

    folder = tmp_path_factory.mktemp("resume")
    saved = {}
    for target in TARGETS:
        model.load_state_dict(initial)
        adam, momentum = _optimizers(model)
        step = _step_function(model, adam, momentum)
        run_on(target, _steps, step, x, y)
        stem = folder / target.replace(":", "-")
        paths = [f"{stem}-model.safetensors", f"{stem}-adam.safetensors",
                 f"{stem}-momentum.safetensors"]
        model.save(paths[0])
        adam.save(paths[1])
        momentum.save(paths[2])
        saved[target] = (paths, _state(model, adam, momentum))
    return initial, expected, budget, saved


@pytest.mark.parametrize("target_b", TARGETS)
@pytest.mark.parametrize("target_a", TARGETS)
def test_training_resumes_on_another_target(resume_setup, target_a, target_b):
    _, expected, budget, saved = resume_setup
    paths, state_a = saved[target_a]
    _assert_close(state_a, expected[0], budget, f"after {STEPS} steps on {target_a}")
    model = Tiny()  # fresh: other initial weights, no optimizer state yet
    adam, momentum = _optimizers(model)
    model.load(paths[0])
    adam.load(paths[1])
    momentum.load(paths[2])
    _assert_close(_state(model, adam, momentum), state_a, (0, 0), "loaded")  # bit for bit
    step = _step_function(model, adam, momentum)
    x, y = _data()
    run_on(target_b, _steps, step, x, y)
    _assert_close(_state(model, adam, momentum), expected[1], budget,
                  f"{STEPS} steps on {target_a}, then {STEPS} on {target_b}")


def test_the_state_matters(resume_setup):
    """Resuming with the weights alone (fresh optimizer state) misses the reference by far
    more than the budget, so the test above would catch state that did not travel."""
    _, expected, budget, saved = resume_setup
    paths, _ = saved["numpy:static"]
    model = Tiny()
    adam, momentum = _optimizers(model)
    model.load(paths[0])
    run_on("numpy:static", _steps, _step_function(model, adam, momentum), *_data())
    got = _state(model, adam, momentum)
    for name in ("model/fc1.weight", "model/fc2.weight", "model/scale"):
        error = np.max(np.abs(got[name] - expected[1][name]) / (np.abs(expected[1][name])
                                                                + budget[1] / budget[0]))
        assert error > 100 * budget[0], name


@pytest.mark.parametrize("make", ["adam", "momentum"])
def test_ten_steps_on_torch_static_then_ten_on_paddle_static(tmp_path, make):
    """The issue's case, through ug.Trainer: fit((x, y)) on torch:static, fit(x, y) on
    paddle:static after loading into a fresh model and optimizer = 20 steps of the float64
    reference on numpy:static."""
    optimizer = {"adam": lambda m: ug.optim.Adam(m, lr=0.05, betas=(0.8, 0.9)),
                 "momentum": lambda m: ug.optim.Momentum(m, lr=0.1, momentum=0.9)}[make]
    x, y = _data()
    model = Tiny()
    reference = model.copy("float64")
    trainer = ug.Trainer(model, F.mse_loss, optimizer(model))
    with ug.use_backend("torch", "static"):
        trainer.fit((x, y), epochs=10, progress=False)
    model.save(tmp_path / "model.safetensors")
    trainer.optimizer.save(tmp_path / "opt.safetensors")

    fresh = Tiny()
    resumed = ug.Trainer(fresh, F.mse_loss, optimizer(fresh))
    fresh.load(tmp_path / "model.safetensors")
    resumed.optimizer.load(tmp_path / "opt.safetensors")
    with ug.use_backend("paddle", "static"):
        resumed.fit(x, y, epochs=10, progress=False)

    ref_trainer = ug.Trainer(reference, F.mse_loss, optimizer(reference))
    with ug.use_backend("numpy", "static"):
        ref_trainer.fit(x.astype(np.float64), y.astype(np.float64), epochs=20, progress=False)
    ops = cmp.ops_of(resumed.train_step_function.trace(x, y))
    rtol, atol = cmp.budget_for(ops, "float32")
    budget = (rtol * 20, atol * 20)
    got = {**fresh.state_dict(), **resumed.optimizer.state_dict()}
    want = {**reference.state_dict(), **ref_trainer.optimizer.state_dict()}
    _assert_close(got, want, budget, "10 steps on torch:static + 10 on paddle:static")
    if make == "adam":
        assert float(got["fc1.weight.step"]) == 20  # the step count travelled
    np.testing.assert_allclose(resumed.history["loss"], ref_trainer.history["loss"][10:],
                               rtol=budget[0], atol=budget[1])


# -- optimizer state: keys, and files that are checked before anything is loaded ----------
def test_state_dict_is_keyed_by_parameter_name():
    model = Tiny()
    adam, momentum = _optimizers(model)
    assert sorted(adam.state_dict()) == ["fc1.bias.m", "fc1.bias.step", "fc1.bias.v",
                                         "fc1.weight.m", "fc1.weight.step", "fc1.weight.v",
                                         "lr"]
    assert sorted(momentum.state_dict()) == ["fc2.bias.velocity", "fc2.weight.velocity",
                                             "lr", "scale.velocity"]
    state = adam.state_dict()
    assert state["lr"] == 0.05 and state["lr"].dtype == np.float64
    np.testing.assert_array_equal(state["fc1.weight.m"], np.zeros((3, 4), np.float32))
    assert state["fc1.weight.step"].dtype == np.float64
    # Unnamed parameters (or two with one name) are keyed by position.
    loose = ug.optim.Momentum([ug.Parameter(np.ones(2)), ug.Parameter(np.ones(3))])
    assert sorted(loose.state_dict()) == ["0.velocity", "1.velocity", "lr"]


@pytest.mark.parametrize("target", TARGETS)
def test_a_damaged_or_mismatched_file_loads_nothing(tmp_path, target):
    x, y = _data()
    model = Tiny()
    adam, momentum = _optimizers(model)
    step = _step_function(model, adam, momentum)
    run_on(target, step, x, y)
    path = tmp_path / "adam.safetensors"
    adam.save(path)
    run_on(target, step, x, y)  # the state moves on: a failed load must not bring it back
    before = _state(model, adam, momentum)

    data = path.read_bytes()
    damaged = tmp_path / "damaged.safetensors"
    damaged.write_bytes(data[:-5])
    with pytest.raises(WeightFileError, match="not a readable safetensors.*truncated"):
        adam.load(damaged)
    with pytest.raises(WeightFileError, match="holds Adam state; this optimizer is Momentum"):
        momentum.load(path)
    model.save(tmp_path / "model.safetensors")
    with pytest.raises(WeightFileError, match="a Tiny module's weights: load it with model"):
        adam.load(tmp_path / "model.safetensors")
    other = ug.nn.Linear(3, 5)
    other.weight.name, other.bias.name = "fc1.weight", "fc1.bias"
    wrong_shapes = ug.optim.Adam(other, lr=0.05)
    wrong_shapes.save(tmp_path / "other.safetensors")
    with pytest.raises(WeightFileError) as error:
        adam.load(tmp_path / "other.safetensors")
    text = str(error.value)
    for part in ("fc1.weight.m: shape [3, 5] in the file, [3, 4]", "fc1.bias.v: shape [5]",
                 "nothing was loaded"):
        assert part in text
    _assert_close(_state(model, adam, momentum), before, (0, 0), "after the failed loads")

    # The state dict path is all-or-nothing too: a bad shape after good keys sets nothing.
    bad = dict(adam.state_dict(), **{"lr": np.float64(0.5),
                                     "fc1.bias.m": np.zeros(7, np.float32)})
    with pytest.raises(ValueError, match=r"'fc1.bias.m' has shape \[7\], expected \[4\]"):
        adam.load_state_dict(bad)
    assert adam.lr == 0.05
    with pytest.raises(KeyError, match="unexpected keys fc9.weight.m"):
        adam.load_state_dict({"fc9.weight.m": np.zeros(1)})

    adam.load(path)  # the good file still loads, and training goes on from it
    np.testing.assert_array_equal(adam.state_dict()["fc1.weight.step"], 1.0)
    run_on(target, step, x, y)
    assert float(adam.state_dict()["fc1.weight.step"]) == 2


# -- opt.step and trainer.fit with arrays, against SGD on a linear model by hand ----------
def _sgd_by_hand(w, b, batches, lr, epochs):
    """Linear + mean squared error + SGD in float64; returns (w, b, per-epoch mean loss)."""
    losses = []
    for _ in range(epochs):
        total, rows = 0.0, 0
        for x, y in batches:
            x, y = x.astype(np.float64), y.astype(np.float64)
            difference = x @ w + b - y
            total += float(np.mean(difference ** 2)) * len(x)
            rows += len(x)
            upstream = 2 * difference / difference.size
            w, b = w - lr * (x.T @ upstream), b - lr * upstream.sum(axis=0)
        losses.append(total / rows)
    return w, b, losses


@pytest.mark.parametrize("target", TARGETS)
def test_fit_takes_arrays_as_a_pair_or_two_arguments(target):
    x, y = _data()
    model = ug.nn.Linear(3, 2)
    w0, b0 = (p.numpy().astype(np.float64) for p in model.parameters())
    trainer = ug.Trainer(model, F.mse_loss, ug.optim.SGD(model, lr=0.1))
    with ug.use_backend(*target.split(":")):
        first = trainer.fit((x, y), epochs=2, progress=False)["loss"][:]
        second = trainer.fit(x, y, epochs=2, progress=False)["loss"][2:]
        third = trainer.fit(x, y, epochs=1, batch_size=3, progress=False)["loss"][4:]
        evaluated = trainer.evaluate(x, y)
    w, b, by_hand = _sgd_by_hand(w0, b0, [(x, y)], 0.1, 4)
    np.testing.assert_allclose(first + second, by_hand, rtol=1e-5, atol=1e-6)
    w, b, by_hand = _sgd_by_hand(w, b, [(x[:3], y[:3]), (x[3:6], y[3:6]), (x[6:], y[6:])],
                                 0.1, 1)
    np.testing.assert_allclose(third, by_hand, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.weight.numpy(), w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.bias.numpy(), b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(evaluated["loss"], np.mean((x @ w + b - y) ** 2), rtol=1e-5)


def test_fit_explains_a_misplaced_epochs_and_ragged_arrays():
    model = ug.nn.Linear(3, 2)
    trainer = ug.Trainer(model, F.mse_loss, ug.optim.SGD(model, lr=0.1))
    x, y = _data()
    with pytest.raises(TypeError, match=r"second argument is y .*fit\(data, epochs=3\)"):
        trainer.fit([(x, y)], 3)
    with pytest.raises(ValueError, match="x has 8 rows but y has 7"):
        trainer.fit(x, y[:7])
    with pytest.raises(TypeError, match="batch_size and shuffle apply to arrays"):
        trainer.fit([(x, y)], batch_size=4)


@pytest.mark.parametrize("target", TARGETS)
def test_opt_step_is_apply(target):
    """opt.step(grads) in a manual loop: SGD by hand, eager and compiled."""
    x, y = _data()
    model = ug.nn.Linear(3, 2)
    w0, b0 = (p.numpy().astype(np.float64) for p in model.parameters())
    opt = ug.optim.SGD(model, lr=0.1)

    @ug.function
    def train_step(x, y):
        loss, grads = ug.value_and_grad(lambda: F.mse_loss(model(x), y), wrt=opt.params)()
        opt.step(grads)
        return loss

    losses = [float(run_on(target, train_step, x, y)) for _ in range(3)]
    w, b, by_hand = _sgd_by_hand(w0, b0, [(x, y)], 0.1, 3)
    np.testing.assert_allclose(losses, by_hand, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.weight.numpy(), w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.bias.numpy(), b, rtol=1e-5, atol=1e-6)
