"""Eager native calls for `ug.nn.functional`'s composites (`Backend.composites`): on
torch:eager, `linear` is one `torch.addmm` and a mean `cross_entropy` one `F.cross_entropy`,
the calls torch:static's plan makes (so both give the same bits); elsewhere, and while
tracing, the op records.

On all 9 targets: the loss, the gradients and one SGD step of a Linear + cross-entropy
model against a float64 NumPy reference (gradients derived by hand); shapes the native call
does not take (no bias, a 3-D input) still compose; bad labels (out of range, -100) raise
unigraph's error naming the label. On torch: which calls ran, and eager == static bit for
bit over SGD steps of a softmax regression and an MLP."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on
from train_steps import cross_entropy_float64, sgd_cross_entropy_step

import unigraph as ug
from unigraph.config import Target

F = ug.nn.functional
LR = 0.5
RTOL, ATOL = 1e-5, 1e-6  # float32 against float64: a few ulps per op


def _data():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    y = np.array([0, 2, 1, 1, 0, 2], np.int64)
    return x, w, b, y


def _reference(x, w, b, y):
    """float64 loss, dL/dw, dL/db of mean(cross_entropy(x @ w + b, y))."""
    x, w, b = (a.astype(np.float64) for a in (x, w, b))
    loss, dz = cross_entropy_float64(x @ w + b, y)
    return loss, x.T @ dz, dz.sum(0)


def _loss_and_grads(x, w, b, y):
    loss, (dw, db) = ug.value_and_grad(lambda w, b: F.cross_entropy(F.linear(x, w, b), y),
                                       argnums=(0, 1))(w, b)
    return loss, dw, db


@pytest.mark.parametrize("target", TARGETS)
def test_linear_cross_entropy_loss_and_gradients_match_float64(target):
    x, w, b, y = _data()
    loss, dw, db = run_on(target, ug.function(_loss_and_grads), x, w, b, y)
    want_loss, want_dw, want_db = _reference(x, w, b, y)
    np.testing.assert_allclose(loss, want_loss, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(dw, want_dw, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(db, want_db, rtol=RTOL, atol=ATOL)


def _linear_model(w, b):
    model = ug.nn.Linear(*w.shape)
    model.load_state_dict({"weight": w, "bias": b})
    return model


@pytest.mark.parametrize("target", TARGETS)
def test_one_sgd_step_of_a_linear_model_matches_float64(target):
    x, w, b, y = _data()
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        model = _linear_model(w, b)
        loss = sgd_cross_entropy_step(model, LR)(x, y)
        got = {k: np.array(v, np.float64) for k, v in model.state_dict().items()}
    want_loss, dw, db = _reference(x, w, b, y)
    np.testing.assert_allclose(np.asarray(loss.numpy()), want_loss, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got["weight"], w - LR * dw, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got["bias"], b - LR * db, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("target", TARGETS)
def test_linear_shapes_without_a_native_call_still_compose(target):
    x, w, b, _ = _data()
    x3 = np.stack([x, 2 * x])  # [2, 6, 4]: batched, not addmm's 2-D

    def both(x, x3, w, b):
        return F.linear(x, w), F.linear(x3, w, b)

    plain, batched = run_on(target, ug.function(both), x, x3, w, b)
    x, x3, w, b = (a.astype(np.float64) for a in (x, x3, w, b))
    np.testing.assert_allclose(plain, x @ w, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(batched, x3 @ w + b, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("label", [3, -100])
@pytest.mark.parametrize("target", TARGETS)
def test_bad_labels_raise_unigraphs_error_naming_the_label(target, label):
    # -100 is F.cross_entropy's ignore_index: the op's check must still refuse it.
    x, w, b, y = _data()
    y[2] = label
    with pytest.raises(ug.IndexOutOfRangeError, match=f"{label}"):
        run_on(target, ug.function(_loss_and_grads), x, w, b, y)


# -- torch: which calls ran, eager against static ------------------------------------------


def test_torch_eager_makes_the_native_calls_and_static_tracing_does_not(monkeypatch):
    from unigraph.plugins import get_backend

    backend = get_backend("torch", "eager")
    backend.load()
    calls = []
    for name in ("linear", "cross_entropy_mean"):
        fn = backend.composites[name]
        monkeypatch.setitem(backend.composites, name,
                            lambda *a, fn=fn, name=name: calls.append(name) or fn(*a))
    for op in ("matmul", "sparse_softmax_cross_entropy", "mean"):
        fn = backend.lowerings[op]
        monkeypatch.setitem(backend.lowerings, op,
                            lambda *a, fn=fn, op=op, **k: calls.append(op) or fn(*a, **k))
    x, w, b, y = _data()
    with ug.use_backend("torch", "eager"):
        z = F.linear(ug.tensor(x), ug.tensor(w), ug.tensor(b))
        loss = F.cross_entropy(z, ug.tensor(y))
        _loss_and_grads(ug.tensor(x), ug.tensor(w), ug.tensor(b), ug.tensor(y))
    assert calls == ["linear", "cross_entropy_mean"] * 2
    want_loss = _reference(x, w, b, y)[0]
    np.testing.assert_allclose(float(loss.numpy()), want_loss, rtol=RTOL, atol=ATOL)
    calls.clear()
    with ug.use_backend("torch", "static"):
        ug.function(_loss_and_grads)(x, w, b, y)
    assert "linear" not in calls and "cross_entropy_mean" not in calls


def _softmax_regression(data):
    return _linear_model(data["w"], data["b"])


def _mlp(data):
    model = ug.nn.Sequential(ug.nn.Linear(*data["w1"].shape, act="relu"),
                             ug.nn.Linear(*data["w2"].shape))
    model.load_state_dict({"0.weight": data["w1"], "0.bias": data["b1"],
                           "1.weight": data["w2"], "1.bias": data["b2"]})
    return model


@pytest.mark.parametrize("build", [_softmax_regression, _mlp])
def test_torch_eager_equals_torch_static_bit_for_bit(build):
    rng = np.random.default_rng(3)
    data = {"x": rng.standard_normal((16, 12)).astype(np.float32),
            "y": rng.integers(0, 5, 16).astype(np.int64),
            "w": rng.standard_normal((12, 5)).astype(np.float32),
            "b": rng.standard_normal(5).astype(np.float32),
            "w1": rng.standard_normal((12, 8)).astype(np.float32),
            "b1": rng.standard_normal(8).astype(np.float32),
            "w2": rng.standard_normal((8, 5)).astype(np.float32),
            "b2": rng.standard_normal(5).astype(np.float32)}
    results = {}
    for mode in ("eager", "static"):
        with ug.use_backend("torch", mode):
            model = build(data)
            step = sgd_cross_entropy_step(model, 0.1)
            losses = [np.asarray(step(data["x"], data["y"]).numpy()) for _ in range(3)]
            results[mode] = losses, {k: np.array(v) for k, v in model.state_dict().items()}
    (eager_losses, eager_weights), (static_losses, static_weights) = results.values()
    np.testing.assert_array_equal(eager_losses, static_losses)
    for name in eager_weights:
        np.testing.assert_array_equal(eager_weights[name], static_weights[name], err_msg=name)


def test_torch_gradients_of_a_scalar_loss_call_the_engine_as_autograd_grad_does():
    # gradients() skips torch.autograd.grad's wrapper for a 0-d float loss: same tensors
    # bit for bit, zeros for an unused leaf, ints passed over, the wrapper for the rest.
    import torch
    from unigraph_torch.gradients import _plain_scalar, gradients, leaf

    rng = np.random.default_rng(5)
    a, b, unused = (torch.from_numpy(rng.standard_normal(4).astype(np.float32))
                    for _ in range(3))
    labels = torch.tensor([1, 2])
    leaves = [leaf(x) for x in (a, b, unused, labels)]
    with torch.enable_grad():
        loss = (leaves[0].exp() * leaves[1]).sum() / 3
        assert _plain_scalar(loss) and not _plain_scalar(loss.reshape(1))
        want = torch.autograd.grad(loss, leaves[:2], retain_graph=True)
        got = gradients(loss, leaves)
    for g, w in zip(got[:2], want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    np.testing.assert_array_equal(got[2].numpy(), np.zeros(4, np.float32))
    assert got[3].dtype == torch.int64 and not got[3].any()
    # Hand-derived: d/da = exp(a) * b / 3, d/db = exp(a) / 3.
    a64, b64 = a.double().numpy(), b.double().numpy()
    np.testing.assert_allclose(got[0].numpy(), np.exp(a64) * b64 / 3, rtol=1e-6)
    np.testing.assert_allclose(got[1].numpy(), np.exp(a64) / 3, rtol=1e-6)
