"""ug.optim: every optimizer's update against its formula computed by hand in float64, on
numpy:eager and numpy:static (where the updates are graph updates of one compiled step);
argument checks (lr, momentum, betas, eps; zero trainable parameters) on all 9 targets."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

MODES = ["eager", "static"]
STEPS = 3


def _gradients(shape, steps=STEPS, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for _ in range(steps)]


def _run_optimizer(make, mode, dtype="float64", weight_decay=0.0, lr_scale=1.0, steps=STEPS):
    """Apply `steps` given gradients to two parameters (the second frozen) on numpy:<mode>;
    return (trained values, frozen values, the optimizer)."""
    start = np.random.default_rng(1).standard_normal((2, 3))
    param = ug.Parameter(start, name="w", lr_scale=lr_scale, dtype=dtype)
    frozen = ug.Parameter(start, name="frozen", trainable=False, dtype=dtype)
    optimizer = make([param, frozen], weight_decay)
    grads = _gradients(start.shape, steps)

    @ug.function
    def step(g):
        optimizer.apply([g, g])  # the frozen parameter's gradient is ignored

    with ug.use_backend("numpy", mode):
        for g in grads:
            step(g.astype(dtype))
    if mode == "static":
        assert len(step._cache) == 1
    return param.numpy(), frozen.numpy(), optimizer, start, grads


def _sgd_by_hand(p, grads, lr, wd):
    for g in grads:
        p = p - lr * (g + wd * p)
    return p


def _momentum_by_hand(p, grads, lr, wd, mu, nesterov):
    v = np.zeros_like(p)
    for g in grads:
        g = g + wd * p
        v = mu * v + g
        p = p - lr * (g + mu * v if nesterov else v)
    return p


def _adam_by_hand(p, grads, lr, wd, b1, b2, eps):
    m, v = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        p = p - lr * m_hat / (np.sqrt(v_hat) + eps)
    return p


CASES = {
    "sgd": (lambda ps, wd: ug.optim.SGD(ps, lr=0.3, weight_decay=wd),
            lambda p, gs, lr_scale, wd: _sgd_by_hand(p, gs, 0.3 * lr_scale, wd)),
    "momentum": (lambda ps, wd: ug.optim.Momentum(ps, lr=0.2, momentum=0.8, weight_decay=wd),
                 lambda p, gs, s, wd: _momentum_by_hand(p, gs, 0.2 * s, wd, 0.8, False)),
    "nesterov": (lambda ps, wd: ug.optim.Momentum(ps, lr=0.2, momentum=0.8, nesterov=True,
                                                  weight_decay=wd),
                 lambda p, gs, s, wd: _momentum_by_hand(p, gs, 0.2 * s, wd, 0.8, True)),
    "adam": (lambda ps, wd: ug.optim.Adam(ps, lr=0.05, betas=(0.8, 0.95), eps=1e-6,
                                          weight_decay=wd),
             lambda p, gs, s, wd: _adam_by_hand(p, gs, 0.05 * s, wd, 0.8, 0.95, 1e-6)),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("weight_decay, lr_scale", [(0.0, 1.0), (0.1, 0.5)])
@pytest.mark.parametrize("name", list(CASES))
def test_update_matches_the_formula(name, weight_decay, lr_scale, mode):
    make, by_hand = CASES[name]
    got, frozen, _, start, grads = _run_optimizer(make, mode, "float64", weight_decay,
                                                  lr_scale)
    np.testing.assert_allclose(got, by_hand(start, grads, lr_scale, weight_decay),
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(frozen, start)  # trainable=False: never touched


@pytest.mark.parametrize("name", list(CASES))
def test_float32_eager_and_static_agree_with_the_formula(name):
    make, by_hand = CASES[name]
    eager, *_ = _run_optimizer(make, "eager", "float32")
    static, _, _, start, grads = _run_optimizer(make, "static", "float32")
    expected = by_hand(start, grads, 1.0, 0.0)
    assert eager.dtype == static.dtype == np.float32
    np.testing.assert_allclose(eager, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(static, eager, rtol=1e-6, atol=1e-7)


def test_adam_state_holds_moments_and_step_count():
    _, _, optimizer, start, grads = _run_optimizer(CASES["adam"][0], "static")
    state = optimizer.state_dict()
    assert sorted(state) == ["lr", "w.m", "w.step", "w.v"]  # nothing for the frozen one
    assert float(state["w.step"]) == STEPS
    m = np.zeros_like(start)
    for g in grads:
        m = 0.8 * m + 0.2 * g
    np.testing.assert_allclose(state["w.m"], m, rtol=1e-12)


def test_state_dict_round_trip_and_reset():
    make = CASES["momentum"][0]
    _, _, optimizer, start, grads = _run_optimizer(make, "eager")
    saved = optimizer.state_dict()
    velocity = optimizer.state(optimizer.params[0], "velocity")
    optimizer.reset()
    np.testing.assert_array_equal(velocity.numpy(), np.zeros_like(start))
    optimizer.load_state_dict(saved)
    np.testing.assert_array_equal(velocity.numpy(), saved["w.velocity"])
    with pytest.raises(KeyError, match="unexpected keys 7.velocity"):
        optimizer.load_state_dict({"7.velocity": np.zeros(1)})
    with pytest.raises(ValueError, match=r"'w.velocity' has shape \[3\]"):
        optimizer.load_state_dict({"w.velocity": np.zeros(3)})


def test_changing_lr_needs_no_recompilation():
    param = ug.Parameter(np.ones(3), name="w")
    optimizer = ug.optim.SGD([param], lr=0.5)

    @ug.function
    def step(g):
        optimizer.apply([g])

    with ug.use_backend("numpy", "static"):
        step(np.ones(3))
        optimizer.lr = 0.25
        step(np.ones(3))
    assert len(step._cache) == 1
    np.testing.assert_allclose(param.numpy(), 1 - 0.5 - 0.25)
    assert optimizer.lr == 0.25


def test_lr_scale_is_applied_in_the_parameter_dtype():
    param = ug.Parameter(np.zeros(2, np.float32), lr_scale=0.001)
    ug.optim.SGD([param], lr=0.5).apply([ug.tensor(np.ones(2, np.float32))])
    np.testing.assert_array_equal(param.numpy(), -np.float32(0.5 * 0.001))


def test_a_module_can_be_given_instead_of_its_parameters():
    net = ug.nn.Linear(3, 2)
    optimizer = ug.optim.Adam(net)
    assert [p.name for p in optimizer.params] == ["weight", "bias"]


def test_gradients_by_dict_and_by_trainable_order():
    a, b = ug.Parameter(np.zeros(2), name="a"), ug.Parameter(np.zeros(3), name="b")
    frozen = ug.Parameter(np.zeros(1), name="frozen", trainable=False)
    optimizer = ug.optim.SGD([a, frozen, b], lr=1.0)
    optimizer.apply({b: ug.tensor(np.ones(3))})
    np.testing.assert_array_equal(b.numpy(), -np.ones(3))
    np.testing.assert_array_equal(a.numpy(), np.zeros(2))
    optimizer.apply([ug.tensor(np.ones(2)), ug.tensor(np.ones(3))])  # trainable() order
    np.testing.assert_array_equal(a.numpy(), -np.ones(2))


def test_bad_gradients_are_explained():
    a = ug.Parameter(np.zeros(2), name="a")
    optimizer = ug.optim.SGD([a], lr=1.0)
    with pytest.raises(ValueError, match="got 2 gradients for 1 parameters"):
        optimizer.apply([ug.tensor(np.ones(2)), ug.tensor(np.ones(2))])
    with pytest.raises(ValueError, match=r"gradient of 'a' has shape \[3\]"):
        optimizer.apply([ug.tensor(np.ones(3))])


BAD_ARGUMENTS = [  # (constructor, error class, the message must name argument and value)
    (lambda ps: ug.optim.SGD(ps, lr=-1.0), ValueError, r"SGD: lr=-1 is out of range: lr must "
                                                       r"be >= 0"),
    (lambda ps: ug.optim.SGD(ps, lr=float("nan")), ValueError, r"SGD: lr=nan is not a finite"),
    (lambda ps: ug.optim.Adam(ps, lr=float("inf")), ValueError, r"Adam: lr=inf is not a finite"),
    (lambda ps: ug.optim.SGD(ps, lr="0.1"), TypeError,
     r"SGD: lr must be a number, got '0.1' \(str\); write lr=0.1"),
    (lambda ps: ug.optim.SGD(ps, lr=None), TypeError, r"lr must be a number, got None"),
    (lambda ps: ug.optim.Momentum(ps, momentum=float("nan")), ValueError,
     r"Momentum: momentum=nan is not a finite"),
    (lambda ps: ug.optim.Momentum(ps, momentum=-0.1), ValueError,
     r"momentum=-0.1 is out of range: momentum must be >= 0"),
    (lambda ps: ug.optim.Adam(ps, betas=(0.9, 1.0)), ValueError,
     r"Adam: betas\[1\]=1 is out of range: betas\[1\] must lie in \[0, 1\)"),
    (lambda ps: ug.optim.Adam(ps, betas=(-0.1, 0.9)), ValueError, r"betas\[0\]=-0.1"),
    (lambda ps: ug.optim.Adam(ps, betas=(float("nan"), 0.9)), ValueError, r"betas\[0\]=nan"),
    (lambda ps: ug.optim.Adam(ps, betas=0.9), TypeError, r"betas must be a pair"),
    (lambda ps: ug.optim.Adam(ps, eps=0.0), ValueError, r"eps=0 is out of range: eps must be > 0"),
    (lambda ps: ug.optim.SGD(ps, weight_decay=float("inf")), ValueError, r"weight_decay=inf"),
    (lambda ps: ug.optim.SGD([np.zeros(2)]), TypeError, r"expected ug.Parameter"),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", range(len(BAD_ARGUMENTS)))
def test_bad_hyperparameters_are_refused_naming_argument_and_value(target, case):
    make, error, message = BAD_ARGUMENTS[case]
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode), pytest.raises(error, match=message):
        make([ug.Parameter(np.zeros(2, np.float32))])


@pytest.mark.parametrize("target", TARGETS)
def test_lr_setter_is_checked_and_a_checked_lr_trains(target):
    param = ug.Parameter(np.ones(2, np.float32), name="w")
    optimizer = ug.optim.SGD([param], lr=np.float32(0.5))  # NumPy scalars are numbers too

    @ug.function
    def step(g):
        optimizer.apply([g])

    with pytest.raises(ValueError, match=r"SGD: lr=nan is not a finite"):
        optimizer.lr = float("nan")
    with pytest.raises(TypeError, match=r"lr must be a number, got '1e-3'.*lr=0.001"):
        optimizer.lr = "1e-3"
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        step(np.full(2, 2.0, np.float32))
    np.testing.assert_allclose(param.numpy(), [0.0, 0.0])  # 1 - 0.5 * 2; never NaN


class _PlainListNet(ug.nn.Module):
    """Layers in an attribute that registers nothing (a generator of layers)."""

    def __init__(self):
        super().__init__()
        self.layers = (layer for layer in [ug.nn.Linear(2, 2)])

    def forward(self, x):
        return x


@pytest.mark.parametrize("target", TARGETS)
def test_zero_trainable_parameters_are_refused_with_the_likely_causes(target):
    t = Target.parse(target)
    frozen = ug.nn.Linear(2, 2)
    for param in frozen.parameters():
        param.trainable = False
    with ug.use_backend(t.backend, t.mode):
        with pytest.raises(ValueError, match=r"SGD: _PlainListNet has no trainable parameters"
                                             r".*ug\.nn\.ModuleList.*trainable=False"):
            ug.optim.SGD(_PlainListNet(), lr=0.1)
        with pytest.raises(ValueError, match=r"Adam: Linear has no trainable parameters"):
            ug.optim.Adam(frozen)
        with pytest.raises(ValueError, match=r"Momentum: the parameters given has no trainable"):
            ug.optim.Momentum([])
        net = ug.nn.Linear(2, 2)
        trainer = ug.Trainer(net, ug.nn.functional.mse_loss, ug.optim.SGD(net, lr=0.1))
        for param in net.parameters():
            param.trainable = False  # frozen after the Trainer was built
        with pytest.raises(ValueError, match=r"Trainer.step: Linear has no trainable"):
            trainer.step(np.ones((1, 2), np.float32), np.ones((1, 2), np.float32))


def test_copy_for_carries_hyperparameters_and_state():
    make = CASES["adam"][0]
    _, _, optimizer, start, grads = _run_optimizer(make, "eager", "float32")
    twin_params = [ug.Parameter(p.numpy(), dtype="float64", trainable=p.trainable)
                   for p in optimizer.params]
    twin = optimizer.copy_for(twin_params)
    assert isinstance(twin, ug.optim.Adam) and twin.hyperparameters() == \
        optimizer.hyperparameters()
    assert twin.state(twin_params[0], "m").dtype == "float64"
    np.testing.assert_allclose(twin.state_dict()["0.m"], optimizer.state_dict()["w.m"],
                               rtol=1e-7)
    assert float(twin.state_dict()["0.step"]) == STEPS


def _formula(name, start, grads, restart_at):
    """Parameter values after each gradient, in float64, by each optimizer's formula; the
    parameter is set back to `start` before gradient `restart_at` (the state is kept)."""
    p = start.astype(np.float64)
    velocity = m = v = np.zeros_like(p)
    values = []
    for t, g in enumerate(grads, 1):
        g = g.astype(np.float64)
        if t == restart_at:
            p = start.astype(np.float64)
        if name == "sgd":
            update = 0.1 * g
        elif name == "momentum":
            velocity = 0.9 * velocity + g
            update = 0.1 * velocity
        else:
            m = 0.9 * m + 0.1 * g
            v = 0.999 * v + 0.001 * g * g
            update = 0.1 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
        p = p - update
        values.append(p)
    return values


@pytest.mark.parametrize("name", ["sgd", "adam"])  # momentum's last step is SGD's
@pytest.mark.parametrize("target", TARGETS)
def test_steps_on_every_target_match_the_formula_and_keep_earlier_values(target, name):
    """Four steps (in place on torch:eager from the second step on) give the formula's
    numbers; values read or derived before a step keep them after it (`.numpy()`, and in
    eager mode a reshape, which torch makes a view), and a `set_value` between steps
    counts."""
    start = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    grads = [g.astype(np.float32) for g in _gradients(start.shape, 4)]
    param = ug.Parameter(start, name="w")
    optimizer = {"sgd": lambda p: ug.optim.SGD(p, lr=0.1),
                 "momentum": lambda p: ug.optim.Momentum(p, lr=0.1, momentum=0.9),
                 "adam": lambda p: ug.optim.Adam(p, lr=0.1)}[name]([param])

    @ug.function
    def step(g):
        optimizer.apply([g])

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        step(grads[0])
        twin = ug.Parameter(np.zeros_like(start), name="twin")
        ug.assign(twin, param)  # eagerly the same native tensor as param's, for a while
        step(grads[1])
        twin_value = twin.numpy().copy()
        flat = ug.reshape(param, (6,)) if t.mode == "eager" else None
        seen = param.numpy()
        after_two = seen.copy()
        step(grads[2])
        after_three = param.numpy().copy()
        param.set_value(start)
        step(grads[3])
        final = param.numpy().copy()
    expected = _formula(name, start, grads, restart_at=4)
    np.testing.assert_array_equal(seen, after_two)
    np.testing.assert_allclose(twin_value, expected[0], rtol=1e-5, atol=1e-6)
    if flat is not None:
        np.testing.assert_array_equal(flat.numpy(), after_two.reshape(6))
    for got, want in [(after_two, expected[1]), (after_three, expected[2]), (final, expected[3])]:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
