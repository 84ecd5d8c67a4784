"""The eager frontend's per-op fast paths of a training step (issue 19 item 3), on all 9
targets: Parameters as operands of the elementwise, matmul and reduction wrappers (no
promotion when the dtypes already agree, promotion as before when they do not), the
cross-entropy of integer class ids, and `ug.value_and_grad` / `ug.grad` called eagerly with
tensors (straight to the differentiated function). Values are checked against float64 NumPy
or hand-derived gradients; the mechanism tests check which path ran."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on
from train_steps import sgd_cross_entropy_step

import unigraph as ug
from unigraph.errors import IndexOutOfRangeError, ShapeError, UnigraphError

F = ug.nn.functional
X = np.array([[0.5, -1.25, 2.0], [1.5, 0.25, -0.75]], np.float32)
W = np.array([[0.25, -0.5], [1.0, 0.75], [-1.5, 0.5]], np.float32)
B = np.array([0.125, -0.25], np.float32)
LABELS = np.array([1, 0], np.int64)


def _close(got, want, dtype="float32", tol=1e-5):
    got = np.asarray(got)
    assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


def _softmax_rows(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("target", TARGETS)
def test_parameter_operands_agree_with_numpy(target):
    w, b = ug.Parameter(W), ug.Parameter(B)
    w64 = ug.Parameter(W.astype(np.float64))

    @ug.function
    def f(x):
        return (x @ w, ug.matmul(x, w) + b, b + b, b * 2.0, 0.5 * b, ug.exp(b), -b,
                ug.mean(w), ug.sum(w), w.mean(), x @ w64, b - 1)

    out = run_on(target, f, X)
    x, wd, bd = X.astype(np.float64), W.astype(np.float64), B.astype(np.float64)
    want = [(x @ wd, "float32"), (x @ wd + bd, "float32"), (bd + bd, "float32"),
            (bd * 2, "float32"), (0.5 * bd, "float32"), (np.exp(bd), "float32"),
            (-bd, "float32"), (wd.mean(), "float32"), (wd.sum(), "float32"),
            (wd.mean(), "float32"), (x @ wd, "float64"),  # float32 @ float64 promotes
            (bd - 1, "float32")]
    assert len(out) == len(want)
    for got, (value, dtype) in zip(out, want):
        _close(got, value, dtype)


@pytest.mark.parametrize("target", TARGETS)
def test_linear_cross_entropy_step_matches_hand_gradients(target):
    layer = ug.nn.Linear(3, 2)
    layer.load_state_dict({"weight": W, "bias": B})
    step = sgd_cross_entropy_step(layer, 0.5, also=lambda layer, x, grads: grads)  # loss, dw, db
    x, wd, bd = X.astype(np.float64), W.astype(np.float64), B.astype(np.float64)
    for _ in range(2):  # the second step runs from the cached plans and in place
        loss, grad_w, grad_b = run_on(target, step, X, LABELS)
        p = _softmax_rows(x @ wd + bd)
        want_loss = -np.log(p[np.arange(2), LABELS]).mean()
        g = (p - np.eye(2)[LABELS]) / 2  # d mean / d logits
        _close(loss, want_loss)
        _close(grad_w, x.T @ g)
        _close(grad_b, g.sum(axis=0))
        wd, bd = wd - 0.5 * (x.T @ g), bd - 0.5 * g.sum(axis=0)
    _close(layer.weight.numpy(), wd)
    _close(layer.bias.numpy(), bd)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("labels_dtype", ["int64", "int32", "uint8"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_of_class_ids(target, labels_dtype, reduction):
    labels = LABELS.astype(labels_dtype)
    got = run_on(target, ug.function(lambda z, y: F.cross_entropy(z, y, reduction)),
                 X[:, :2], labels)
    z = X[:, :2].astype(np.float64)
    losses = -np.log(_softmax_rows(z)[np.arange(2), labels.astype(np.int64)])
    want = {"mean": losses.mean(), "sum": losses.sum(), "none": losses}[reduction]
    _close(got, want)


@pytest.mark.parametrize("target", TARGETS)
def test_cross_entropy_keeps_its_errors_and_float_labels(target):
    onehot = np.eye(2, dtype=np.float32)[LABELS]
    got = run_on(target, ug.function(lambda z, y: F.cross_entropy(z, y)), X[:, :2], onehot)
    z = X[:, :2].astype(np.float64)
    _close(got, -np.log(_softmax_rows(z)[np.arange(2), LABELS]).mean())
    with pytest.raises(ShapeError, match="logits must be"):
        run_on(target, ug.function(lambda z, y: F.cross_entropy(z, y)), X[0], LABELS[:1])
    with pytest.raises(IndexOutOfRangeError):
        run_on(target, ug.function(lambda z, y: F.cross_entropy(z, y)), X[:, :2],
               np.array([0, 2], np.int64))


@pytest.mark.parametrize("target", TARGETS)
def test_value_and_grad_results_on_every_call_path(target):
    def loss_and_aux(x, y):
        return ug.sum(x * x * y), x + 1.0, 3, 2.5

    def run_all(x, y):
        (value, aux, three, half), (gx, gy) = ug.value_and_grad(loss_and_aux, (0, 1))(x, y)
        gx_only = ug.grad(lambda x: ug.sum(x * x * y))(x)
        return value, aux, three, half, gx, gy, gx_only

    x, y = X[0], X[1]
    xd, yd = x.astype(np.float64), y.astype(np.float64)
    want = [(np.sum(xd * xd * yd), "float32"), (xd + 1.0, "float32"), (3, "int64"),
            (2.5, "float32"),  # numbers beside the loss: a plain @ug.function's dtypes
            (2 * xd * yd, "float32"), (xd * xd, "float32"), (2 * xd * yd, "float32")]
    for fn in (ug.function(run_all), run_all):  # in a function, and called directly
        out = run_on(target, fn, x, y)
        assert len(out) == len(want)
        for got, (value, dtype) in zip(out, want):
            _close(got, value, dtype)


@pytest.mark.parametrize("target", TARGETS)
def test_value_and_grad_still_refuses_a_non_tensor_loss(target):
    with pytest.raises(UnigraphError, match="must return a floating scalar"):
        run_on(target, ug.function(lambda x: ug.grad(lambda x: 2.0)(x)), X[0])


@pytest.mark.parametrize("target", TARGETS)
def test_which_path_runs(target, monkeypatch):
    """A Parameter operand of a Tensor's dtype skips promotion (a mixed pair is promoted);
    an eager call of ug.grad with tensors skips Function.__call__ (static targets and
    non-tensor arguments still take it)."""
    from unigraph.api import elementwise, linalg, reductions
    from unigraph.function import Function

    promoted, generic_calls = [], []
    for module in (elementwise, linalg, reductions):
        original = module.promote_for
        monkeypatch.setattr(module, "promote_for",
                            lambda *a, _original=original, **k: promoted.append(a[0])
                            or _original(*a, **k))
    call = Function.__call__

    def counting_call(self, *args, **kwargs):
        generic_calls.append(self.name)
        return call(self, *args, **kwargs)

    monkeypatch.setattr(Function, "__call__", counting_call)
    w = ug.Parameter(W)
    grad_of = ug.grad(lambda x: ug.sum(ug.matmul(x, w) + w[0]) + ug.mean(w))
    got = run_on(target, lambda: grad_of(ug.tensor(X)))
    _close(got, np.tile(W.astype(np.float64).sum(axis=1), (2, 1)))
    assert promoted == []  # same-dtype Parameters: as they are, traced or eager
    assert (generic_calls == []) == target.endswith(":eager"), generic_calls
    w64 = ug.Parameter(W.astype(np.float64))
    _close(run_on(target, ug.function(lambda x: x @ w64), X),
           X.astype(np.float64) @ W.astype(np.float64), "float64")
    assert promoted == ["matmul"]  # mixed dtypes: promoted, as before
    generic_calls.clear()
    got = run_on(target, grad_of, X)  # a NumPy array: Function.__call__ converts it
    _close(got, np.tile(W.astype(np.float64).sum(axis=1), (2, 1)))
    assert generic_calls
