"""`ug.optim.Adam(fused=True)`: the fused update `adam_update` (`unigraph.ops.updates`).

Its reference is the documented formula, bit for bit the hand-written float32 steps of
test_optim_same_bits. On a backend that does not lower it, fused=True runs the formula:
the bits of fused=False. On every target, fused=True agrees with the float64 formula
after several steps, also when `fused` changes between steps of one compiled step function
(it retraces: `fused` is one of the numbers the trace bakes in).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS
from optim_reference import least_squares_data
from optim_steps import least_squares_step
from test_optim_same_bits import STEPS, _gradients, _initial, adam_by_hand

import unigraph as ug
from unigraph.config import Target
from unigraph.in_place import lowers
from unigraph.ops.updates import ADAM_UPDATE
from unigraph.plugins import get_backend


def test_the_reference_is_the_formula_bit_for_bit():
    params = _initial()
    ms = [np.zeros_like(p) for p in params]
    vs = [np.zeros_like(p) for p in params]
    for step in range(STEPS):
        for i, g in enumerate(_gradients(step)):
            params[i], ms[i], vs[i] = ADAM_UPDATE.reference(
                params[i], g, ms[i], vs[i], np.float64(1e-3), np.float64(step + 1),
                beta1=0.9, beta2=0.999, eps=1e-8)
    for got, want in zip(params, adam_by_hand(_initial())):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want)


def test_the_update_checks_its_operands():
    spec = ug.ops.TensorSpec((3,), "float32")
    scalar = ug.ops.TensorSpec((), "float64")
    attrs = {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8}
    assert ADAM_UPDATE.infer(spec, spec, spec, spec, scalar, scalar, **attrs) == (spec,) * 3
    with pytest.raises(ug.ShapeError, match="m .* must have param's shape"):
        ADAM_UPDATE.infer(spec, spec, ug.ops.TensorSpec((4,), "float32"), spec, scalar,
                          scalar, **attrs)
    with pytest.raises(ug.ShapeError, match="lr .* must be a float scalar"):
        ADAM_UPDATE.infer(spec, spec, spec, spec, ug.ops.TensorSpec((1,), "float64"), scalar,
                          **attrs)


def _trained(target, fused):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        params = [ug.Parameter(p, name=f"p{i}") for i, p in enumerate(_initial())]
        optimizer = ug.optim.Adam(params, lr=1e-3, fused=fused)

        @ug.function
        def apply(*grads):
            optimizer.apply(list(grads))
            return ug.tensor(0.0)

        for step in range(STEPS):
            apply(*_gradients(step))
        return [p.numpy().copy() for p in params], optimizer.state_dict()


@pytest.mark.parametrize("target", TARGETS)
def test_fused_agrees_with_the_formula(target):
    """Where the backend lowers `adam_update`, its kernels (other rounding, within the
    float32 budget); elsewhere the formula itself (the same bits). The state dict has the
    same keys, shapes and dtypes either way."""
    fused, fused_state = _trained(target, True)
    plain, plain_state = _trained(target, False)
    assert {k: (np.shape(v), np.asarray(v).dtype) for k, v in fused_state.items()} == \
        {k: (np.shape(v), np.asarray(v).dtype) for k, v in plain_state.items()}
    t = Target.parse(target)
    native = lowers(get_backend(t.backend, t.mode), "adam_update", t.mode)
    for i, (f, p) in enumerate(zip(fused, plain)):
        assert f.dtype == np.float32
        if native:
            np.testing.assert_allclose(f, p, rtol=1e-5, atol=1e-6, err_msg=f"p{i}")
        else:
            np.testing.assert_array_equal(f, p, err_msg=f"p{i}")
    for key, value in fused_state.items():
        if native:
            # Paddle's and TF's kernels weigh g * g by 1 - float32(beta2), the formula by
            # float32(1 - beta2): their v is 1.3e-5 smaller, relatively
            # (test_paddle_adam_fused).
            rtol = 3e-5 if key.endswith(".v") and not target.startswith("torch:") else 1e-5
            # TF's kernel computes m + (g - m) * (1 - beta1): where m and g nearly cancel,
            # the new m is off by an ulp of theirs (1.2e-7 at 1), not of its own.
            atol = 1e-6 if target.startswith("tensorflow:") else 1e-9
            np.testing.assert_allclose(value, plain_state[key], rtol=rtol, atol=atol,
                                       err_msg=key)
        else:
            np.testing.assert_array_equal(value, plain_state[key], err_msg=key)


def test_fused_must_be_a_bool():
    with pytest.raises(TypeError, match="fused must be True or False"):
        ug.optim.Adam([ug.Parameter(np.zeros(2, np.float32))], fused="yes")
    optimizer = ug.optim.Adam([ug.Parameter(np.zeros(2, np.float32))])
    with pytest.raises(TypeError, match="fused must be True or False"):
        optimizer.fused = 1
    optimizer.fused = True
    assert optimizer.hyperparameters()["fused"] is True
    assert optimizer.copy_for([ug.Parameter(np.zeros(2, np.float32))]).fused is True


# -- against torch.optim.Adam, and fused switched on and off between steps ------------------

@pytest.mark.parametrize("mode", ["eager", "static"])
def test_torch_gives_the_bits_of_torch_optim_adam(mode, monkeypatch):
    """torch's lowering is torch.optim.Adam's own kernel sequence (default CPU path): the
    same bits after five steps, for every size. From the second step on the parameter's
    own tensor is written (`adam_update_`), as torch.optim does, eagerly and in
    torch:static's step."""
    torch = pytest.importorskip("torch")
    from unigraph_torch import lowerings

    written = []
    original = lowerings.adam_update_

    def counted(param, *args, **attrs):
        out = original(param, *args, **attrs)
        written.append(out[0] is param)
        return out

    monkeypatch.setitem(lowerings.LOWERINGS, "adam_update_", counted)
    initial = _initial()
    natives = [torch.nn.Parameter(torch.tensor(p)) for p in initial]
    native_opt = torch.optim.Adam(natives, lr=1e-3)
    with ug.use_backend("torch", mode):
        params = [ug.Parameter(p, name=f"p{i}") for i, p in enumerate(initial)]
        optimizer = ug.optim.Adam(params, lr=1e-3, fused=True)

        @ug.function
        def apply(*grads):
            optimizer.apply(list(grads))
            return ug.tensor(0.0)

        for step in range(5):
            grads = _gradients(step % STEPS)
            apply(*grads)
            for native, g in zip(natives, grads):
                native.grad = torch.tensor(g)
            native_opt.step()
        # (read at the end: a NumPy copy shares the memory, and the next step would then
        # write a new tensor)
        saved = optimizer.state_dict()
        for i, (param, native) in enumerate(zip(params, natives)):
            np.testing.assert_array_equal(param.numpy(), native.detach().numpy(),
                                          err_msg=f"p{i}")
            state = native_opt.state[native]
            np.testing.assert_array_equal(saved[f"p{i}.m"], state["exp_avg"].numpy())
            np.testing.assert_array_equal(saved[f"p{i}.v"], state["exp_avg_sq"].numpy())
            assert saved[f"p{i}.step"] == float(state["step"]) == 5.0
    # 4 parameters, steps 2-5 written in place (eagerly the first step writes the slots'
    # first tensors; torch:static calls adam_update_ every step, at the end of the run)
    assert written[-16:] == [True] * 16 and len(written) == (20 if mode == "static" else 16)


def _by_formula(steps_each: int, lr: float, weight_decay: float, scales: tuple) -> list:
    """[w, b] in float64 after 2 * `steps_each` Adam steps (L2 weight decay added to the
    gradient, each parameter's lr times its scale)."""
    x, y, w, b = (a.astype(np.float64) for a in least_squares_data(seed=3, rows=6))
    params = [w, b]
    slots = [{"m": np.zeros_like(p), "v": np.zeros_like(p)} for p in params]
    b1, b2, eps = 0.9, 0.999, 1e-8
    for t in range(1, 2 * steps_each + 1):
        r = 2 * (x @ params[0] + params[1] - y) / len(x)
        for p, g, s, scale in zip(params, [x.T @ r, r.sum(0)], slots, scales):
            g = g + weight_decay * p
            s["m"] = b1 * s["m"] + (1 - b1) * g
            s["v"] = b2 * s["v"] + (1 - b2) * g * g
            m_hat, v_hat = s["m"] / (1 - b1**t), s["v"] / (1 - b2**t)
            p -= lr * scale * m_hat / (np.sqrt(v_hat) + eps)
    return params


@pytest.mark.parametrize("target", TARGETS)
def test_switching_fused_takes_effect_at_the_next_step(target, monkeypatch):
    """One compiled step function, fused=False then True: the float64 formula (with weight
    decay and a parameter's lr_scale) within float32 budgets on every target; on a backend
    that lowers `adam_update`, its lowering runs after the switch (a static step retraced)
    and not before."""
    t = Target.parse(target)
    backend = get_backend(t.backend, t.mode)
    native = lowers(backend, "adam_update", t.mode)
    calls = []
    if native:
        table = backend.lowering_table(t.mode)
        for name in {"adam_update", "adam_update_"} & table.keys():
            original = table[name]

            def counted(*args, _original=original, **attrs):
                calls.append(1)
                return _original(*args, **attrs)

            monkeypatch.setitem(table, name, counted)
    steps, lr, weight_decay, scales = 3, 0.1, 0.01, (1.0, 0.5)
    x, y, w, b = least_squares_data(seed=3, rows=6)
    with ug.use_backend(t.backend, t.mode):
        params = [ug.Parameter(w, name="w"), ug.Parameter(b, name="b", lr_scale=scales[1])]
        optimizer = ug.optim.Adam(params, lr=lr, weight_decay=weight_decay)

        step = least_squares_step(x, y, params, optimizer)

        counts = []
        for fused in (False, True):
            optimizer.fused = fused
            for _ in range(steps):
                step()
            counts.append(len(calls))
        got = [p.numpy().astype(np.float64) for p in params]
    if native:  # eager: a call per parameter and step; static: the compiled step's
        assert counts == ([0, 2 * steps] if t.mode == "eager" else [0, counts[1]])
        assert counts[1] > 0
    else:
        assert counts == [0, 0]
    for value, expected in zip(got, _by_formula(steps, lr, weight_decay, scales)):
        np.testing.assert_allclose(value, expected, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_check_training_agrees_with_fused_true(target):
    """`ug.check_training` (which casts the optimizer's state, its learning rate and step
    counts too, to the checked dtype) finds fused=True within budget on every target."""
    rng = np.random.default_rng(0)
    net = ug.nn.Sequential(ug.nn.Linear(8, 16, act="relu"), ug.nn.Linear(16, 3))
    x = rng.standard_normal((5, 8)).astype(np.float32)
    y = rng.integers(0, 3, 5).astype(np.int64)
    report = ug.check_training(net, ug.nn.functional.cross_entropy,
                               lambda model: ug.optim.Adam(model, lr=1e-2, fused=True),
                               [(x, y)], steps=4, targets=[target])
    report.assert_ok()
