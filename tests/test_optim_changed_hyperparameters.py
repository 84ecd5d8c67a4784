"""An optimizer's hyperparameters changed between steps (`opt.momentum = ...`, Adam's
`betas`, `eps`) take effect at the next step on all 9 targets: the eager in-place updates
keep the natives of those numbers between steps (`in_place.constant_natives`), keyed by
their values, so a new value must give new natives; a static target's compiled step reads
them as constants, so it retraces after a change (`Optimizer.apply` notes them as the trace's
Python state). Checked against float64 by the documented formulas, and against numpy:eager
for weight decay, Nesterov and each parameter's `trainable` and `lr_scale`."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS
from optim_reference import least_squares_data

import unigraph as ug
from unigraph.config import Target

LR = 0.1
# (attribute values before, after) the change, per optimizer
CHANGES = {
    "momentum": ({"momentum": 0.9}, {"momentum": 0.5}),
    "adam": ({"beta1": 0.9, "beta2": 0.999, "eps": 1e-8},
             {"beta1": 0.8, "beta2": 0.99, "eps": 1e-3}),
}


def _by_formula(name: str, steps: int) -> list:
    """[w, b] in float64 after `steps` steps before the change and `steps` after."""
    x, y, w, b = (a.astype(np.float64) for a in least_squares_data(seed=3, rows=6))
    params = [w, b]
    slots = [{"velocity": np.zeros_like(p), "m": np.zeros_like(p), "v": np.zeros_like(p)}
             for p in params]
    for t in range(1, 2 * steps + 1):
        h = CHANGES[name][t > steps]
        r = 2 * (x @ params[0] + params[1] - y) / len(x)
        for p, g, s in zip(params, [x.T @ r, r.sum(0)], slots):
            if name == "momentum":
                s["velocity"] = h["momentum"] * s["velocity"] + g
                p -= LR * s["velocity"]
            else:
                b1, b2 = h["beta1"], h["beta2"]
                s["m"] = b1 * s["m"] + (1 - b1) * g
                s["v"] = b2 * s["v"] + (1 - b2) * g * g
                m_hat, v_hat = s["m"] / (1 - b1**t), s["v"] / (1 - b2**t)
                p -= LR * m_hat / (np.sqrt(v_hat) + h["eps"])
    return params


@pytest.mark.parametrize("name", list(CHANGES))
@pytest.mark.parametrize("target", TARGETS)
def test_a_changed_hyperparameter_takes_effect_at_the_next_step(target, name):
    steps = 3
    x, y, w, b = least_squares_data(seed=3, rows=6)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        params = [ug.Parameter(w, name="w"), ug.Parameter(b, name="b")]
        if name == "momentum":
            optimizer = ug.optim.Momentum(params, lr=LR, momentum=0.9)
        else:
            optimizer = ug.optim.Adam(params, lr=LR)

        def loss_fn():
            r = ug.matmul(ug.tensor(x), params[0]) + params[1] - ug.tensor(y)
            return ug.sum(r * r) / float(len(x))

        @ug.function  # one step function, compiled once per set of numbers
        def step():
            loss, grads = ug.value_and_grad(loss_fn, wrt=optimizer.params)()
            optimizer.step(grads)
            return loss

        for values in CHANGES[name]:
            for attribute, value in values.items():
                setattr(optimizer, attribute, value)
            for _ in range(steps):
                step()
        got = [p.numpy().astype(np.float64) for p in params]
    for value, expected in zip(got, _by_formula(name, steps)):
        np.testing.assert_allclose(value, expected, rtol=2e-5, atol=2e-6)


# (optimizer, what changes after two steps of one compiled step function)
OTHER_CHANGES = {
    "weight decay": (lambda params: ug.optim.SGD(params, lr=LR),
                     lambda opt: setattr(opt, "weight_decay", 0.5)),
    "nesterov": (lambda params: ug.optim.Momentum(params, lr=LR, momentum=0.9),
                 lambda opt: setattr(opt, "nesterov", True)),
    "frozen": (lambda params: ug.optim.SGD(params, lr=LR),
               lambda opt: setattr(opt.params[1], "trainable", False)),
    "lr_scale": (lambda params: ug.optim.Momentum(params, lr=LR, momentum=0.9),
                 lambda opt: setattr(opt.params[0], "lr_scale", 0.25)),
}


def _steps(target: str, name: str, changed: bool = True) -> list:
    """[w, b] after two steps of one @ug.function step, the change (if `changed`), then two
    more."""
    x, y, w, b = least_squares_data(seed=4, rows=6)
    make, change = OTHER_CHANGES[name]
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        params = [ug.Parameter(w, name="w"), ug.Parameter(b, name="b")]
        optimizer = make(params)

        @ug.function
        def step():
            def loss_fn():
                r = ug.matmul(ug.tensor(x), params[0]) + params[1] - ug.tensor(y)
                return ug.sum(r * r) / float(len(x))

            loss, grads = ug.value_and_grad(loss_fn, wrt=optimizer.params)()
            optimizer.step(grads)
            return loss

        for i in range(4):
            if i == 2 and changed:
                change(optimizer)
            step()
        return [p.numpy() for p in params]


@pytest.mark.parametrize("name", list(OTHER_CHANGES))
@pytest.mark.parametrize("target", TARGETS)
def test_a_compiled_step_takes_changed_numbers_as_eagerly(target, name):
    expected = _steps("numpy:eager", name)
    for got, want in zip(_steps(target, name), expected):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    unchanged = _steps("numpy:eager", name, changed=False)
    assert any(not np.allclose(e, u) for e, u in zip(expected, unchanged)), "no change seen"
