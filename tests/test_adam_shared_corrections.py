"""Adam's bias corrections (1 - beta ** t, per parameter, t its step count) made once per
value of t in a torch:static run (`unigraph_torch.fusions.BiasCorrections`), as torch:eager
and the other eager targets make them once a step, and handed to every parameter whose step
has that value.

On all 9 targets: parameters whose step counts differ (loaded from a state_dict) or agree
each get the corrections of their own count: after two steps the weights and moments are
bit for bit the float32 formula's, op by op in NumPy (small tensors: every target's kernels
round these ops as NumPy does). On torch:static: the generated run makes the call, and
each distinct (t, beta) is computed once a run."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

F32 = np.float32
LR, B1, B2, EPS = 0.05, 0.9, 0.999, 1e-8
# w and u share a step count, b has its own
STEPS = {"w": 4.0, "u": 4.0, "b": 9.0}


def _start():
    rng = np.random.default_rng(23)
    weights = {"w": rng.standard_normal((3, 2)), "u": rng.standard_normal((3, 2)),
               "b": rng.standard_normal(2)}
    grads = {name: rng.standard_normal(value.shape) for name, value in weights.items()}
    moments = {name: np.abs(rng.standard_normal(value.shape)) * 0.1
               for name, value in weights.items()}
    as32 = lambda d: {k: v.astype(F32) for k, v in d.items()}  # noqa: E731
    return as32(weights), as32(grads), as32(moments)


def _by_formula(steps: int):
    """The documented formula in float32, op by op, as the optimizer rounds it."""
    weights, grads, moments = _start()
    m = {k: v.copy() for k, v in moments.items()}
    v = {k: (x * x).astype(F32) for k, x in moments.items()}
    for i in range(1, steps + 1):
        for name, g in grads.items():
            t = STEPS[name] + i
            c1, c2 = F32(1.0 - B1 ** t), F32(1.0 - B2 ** t)
            m[name] = m[name] * F32(B1) + g * F32(1.0 - B1)
            v[name] = v[name] * F32(B2) + (g * g) * F32(1.0 - B2)
            denominator = np.sqrt(v[name] / c2) + F32(EPS)
            weights[name] = weights[name] - ((m[name] / c1) * F32(LR)) / denominator
    return weights, m, v


def _trained(target: str, steps: int):
    weights, grads, moments = _start()
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        params = [ug.Parameter(weights[name], name=name) for name in weights]
        optimizer = ug.optim.Adam(params, lr=LR)
        state = {"lr": np.asarray(LR)}
        for name in weights:
            state[f"{name}.m"] = moments[name]
            state[f"{name}.v"] = (moments[name] * moments[name]).astype(F32)
            state[f"{name}.step"] = np.asarray(STEPS[name])
        optimizer.load_state_dict(state)
        given = [ug.tensor(grads[name]) for name in weights]

        @ug.function
        def step(*gs):
            optimizer.step(list(gs))

        for _ in range(steps):
            step(*given)
        saved = optimizer.state_dict()
        return ({p.name: np.array(p.numpy()) for p in params},
                {name: np.array(saved[f"{name}.m"]) for name in weights},
                {name: np.array(saved[f"{name}.v"]) for name in weights}, step)


@pytest.mark.parametrize("target", TARGETS)
def test_each_parameter_gets_its_own_steps_corrections(target):
    got = _trained(target, 2)[:3]
    for got_part, want_part in zip(got, _by_formula(2)):
        for name, want in want_part.items():
            np.testing.assert_array_equal(got_part[name].view(np.uint32),
                                          want.view(np.uint32), err_msg=name)


def test_torch_static_makes_each_correction_once_a_run(monkeypatch):
    from unigraph_torch import fusions

    made = []
    original = fusions.LOWERINGS["pow"]
    monkeypatch.setitem(fusions.LOWERINGS, "pow",
                        lambda beta, t: made.append(float(t)) or original(beta, t))
    *_, step = _trained("torch:static", 2)
    run_source = next(iter(step._cache.values())).executable.source.split("\n\n\n")[0]
    assert run_source.count("op_bias_correction(") == 6 and "op_pow(" not in run_source
    # two steps; each: beta1 and beta2 for t = 5 (w and u) and t = 10 (b), then 6 and 11
    assert sorted(made) == [5.0] * 2 + [6.0] * 2 + [10.0] * 2 + [11.0] * 2


def test_torch_static_corrections_follow_the_value_of_t():
    """Alternating values of t (runs of one executable on two threads, or steps loaded
    anew) each get their own numbers; the same value, the same tensor."""
    import torch
    from unigraph_torch.fusions import BiasCorrections

    corrections = BiasCorrections()
    one, beta = torch.tensor(1.0, dtype=torch.float64), torch.tensor(B1, dtype=torch.float64)
    for t in (5.0, 6.0, 5.0, float("nan"), 6.0):
        step = torch.tensor(t, dtype=torch.float64)
        got = corrections(step, one, beta, torch.float32, 1.0, B1)
        want = torch.sub(one, torch.pow(beta, step)).to(torch.float32)
        assert torch.equal(got, want) or (t != t and bool(torch.isnan(got)))
        assert corrections(step, one, beta, torch.float32, 1.0, B1) is got or t != t
