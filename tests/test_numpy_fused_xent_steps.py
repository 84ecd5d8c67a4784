"""The NumPy engine's cross-entropy training step made cheaper without changing a bit (issue
19 item 4): the mean of a cross-entropy has one fused VJP call in generated gradient code
(`fast_kernels.mean_cross_entropy_vjp`, made by `grad_codegen`), the label picks go through
flat positions, the non-finite-row subtraction ignores NumPy's `invalid` through its error
state's context variable, and mean's forward divides as a Python float.

Each kernel is checked bit for bit against the records' rules it replaces; the training
steps built from them run on all 9 targets (numpy:static from its third call on runs the
generated code) against numpy:eager, and bad labels raise on every target after good steps.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.ops import OPS
from unigraph.reference import fast_kernels
from unigraph.reference.fast_kernels import kernel, mean_cross_entropy_vjp, vjp_kernel

XENT = "sparse_softmax_cross_entropy"


def _same(got, want):
    assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def _logits(dtype, order="C", bad_rows=True):
    rng = np.random.default_rng(21)
    logits = rng.standard_normal((7, 5)) * 3
    if bad_rows:
        logits[1, 2] = np.inf  # a NaN row, as the record defines it
        logits[4] = -np.inf
        logits[5, 0] = np.nan
    logits = np.asarray(logits.astype(dtype), order=order)
    return logits, np.array([0, 2, 4, 1, 0, 3, 2])


def _two_rules(g, logits, labels, axis, keepdims):
    """mean's VJP kernel, then the cross-entropy's: what the fused call replaces."""
    loss = kernel(XENT, OPS[XENT])(logits, labels)
    mean = np.asarray(OPS["mean"].reference(loss, axis=axis, keepdims=keepdims))
    (spread,) = vjp_kernel("mean", OPS["mean"])(g, [loss], mean, axis=axis, keepdims=keepdims)
    return vjp_kernel(XENT, OPS[XENT])(spread, [logits, labels], loss)[0]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("axis,keepdims", [(None, False), ((0,), False), ((0,), True)])
def test_fused_mean_cross_entropy_vjp_equals_the_two_rules(dtype, order, axis, keepdims):
    logits, labels = _logits(dtype, order)
    g = np.asarray(np.full((1,) if keepdims else (), 0.75), dtype)
    with np.errstate(all="ignore"):
        want = _two_rules(g, logits, labels, axis, keepdims)
        loss = kernel(XENT, OPS[XENT])(logits, labels)  # the forward's memo: its picks
        mean = np.asarray(OPS["mean"].reference(loss, axis=axis, keepdims=keepdims))
        got = mean_cross_entropy_vjp(g, loss, mean, logits, labels, axis=axis,
                                     keepdims=keepdims)
        assert fast_kernels._softmax_memo.entry is None  # taken
        again = mean_cross_entropy_vjp(g, loss, mean, logits, labels, axis=axis,
                                       keepdims=keepdims)  # recomputed
    _same(got, want)
    _same(again, want)


def test_fused_vjp_of_mixed_dtypes_is_the_two_rules():
    logits, labels = _logits(np.float32, bad_rows=False)
    loss = kernel(XENT, OPS[XENT])(logits, labels).astype(np.float64)  # not the logits'
    mean = np.asarray(np.mean(loss))
    g = np.asarray(2.0)
    (spread,) = vjp_kernel("mean", OPS["mean"])(g, [loss], mean, axis=None, keepdims=False)
    want = vjp_kernel(XENT, OPS[XENT])(spread, [logits, labels], loss)[0]
    got = mean_cross_entropy_vjp(g, loss, mean, logits, labels, axis=None, keepdims=False)
    _same(got, want)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("order", ["C", "F"])
def test_cross_entropy_kernels_equal_the_record(dtype, order):
    logits, labels = _logits(dtype, order)
    g = np.linspace(-1.0, 2.0, 7).astype(dtype)
    with np.errstate(all="ignore"):
        want_loss = OPS[XENT].reference(logits, labels)
        want = OPS[XENT].vjp(g, [logits, labels], want_loss)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the NaN rows warn nothing, as the record's
        loss = kernel(XENT, OPS[XENT])(logits, labels)
        got = vjp_kernel(XENT, OPS[XENT])(g, [logits, labels], loss)[0]
    _same(loss, want_loss)
    _same(got, want)


def test_non_finite_rows_ignore_invalid_and_keep_the_callers_other_settings():
    logits, labels = _logits(np.float32)
    want = OPS[XENT].reference(logits, labels)
    with np.errstate(invalid="raise", over="raise"):
        _same(kernel(XENT, OPS[XENT])(logits, labels), want)
        assert np.geterr()["invalid"] == "raise"  # the caller's state again afterwards
        huge = np.array([[-3e38, 3e38]], np.float32)  # -3e38 - 3e38 overflows
        with pytest.raises(FloatingPointError, match="overflow"):
            kernel(XENT, OPS[XENT])(huge, np.array([0]))
    fast_kernels._softmax_memo.entry = None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mean_forward_equals_np_mean(dtype):
    rng = np.random.default_rng(4)
    for size in (1, 3, 100, 1001):
        for scale in (1e-30, 1.0, 1e30):
            x = (rng.standard_normal(size) * scale).astype(dtype)
            _same(kernel("mean", OPS["mean"])(x, axis=None, keepdims=False),
                  np.asarray(np.mean(x)))
    x = np.array([np.inf, 1.0, np.nan], dtype)
    _same(kernel("mean", OPS["mean"])(x, axis=(0,), keepdims=False), np.asarray(np.mean(x)))


def _generated_source_calls_fused(fn, *args) -> bool:
    """Whether fn's gradient, generated on numpy:static, calls the fused VJP."""
    from unigraph.reference import Plan
    from unigraph.reference.grad_codegen import generate
    from unigraph.reference.plan import GradStep

    with ug.use_backend("numpy", "static"):
        plan = Plan(fn.trace(*args))
    (step,) = [s for s in plan.steps if type(s) is GradStep]
    run = generate(step)
    # (the rule itself where its attrs are written as keywords, `codegen.keyword_call`)
    return any(value is mean_cross_entropy_vjp
               or getattr(value, "func", None) is mean_cross_entropy_vjp
               for value in run.__globals__.values())


def _loss(kind):
    def loss(z, y):
        other = ug.sum(z * z) * 0.5 if kind == "logits_twice" else None
        per_row = ug.sparse_softmax_cross_entropy(z, y)
        if kind in ("mean", "logits_twice"):
            # (logits_twice: the fused gradient of z is added to another one)
            return ug.mean(per_row) if other is None else other + ug.mean(per_row)
        if kind == "mean_axis0":
            return ug.mean(per_row, axis=0)
        if kind == "scaled_mean":  # the mean's gradient is not the seed
            return ug.mean(per_row) * 3.0
        if kind == "two_reads":  # the loss vector read twice: no fusion
            return ug.mean(per_row) + ug.sum(per_row * 2.0)
        return ug.sum(per_row)  # no mean: no fusion
    return loss


KINDS = ["mean", "mean_axis0", "scaled_mean", "two_reads", "logits_twice", "sum"]


@pytest.mark.parametrize("kind", KINDS)
def test_which_gradients_fuse(kind):
    fn = ug.function(lambda z, y: ug.value_and_grad(_loss(kind))(z, y))
    z, y = _logits(np.float32, bad_rows=False)
    fused = _generated_source_calls_fused(fn, z, y)
    assert fused == (kind in ("mean", "mean_axis0", "scaled_mean", "logits_twice"))


def _gradient_runs(kind, dtype, bad_rows):
    """The loss and gradient of `kind` at 3 sets of logits (numpy:static generates its
    gradient code on the second run)."""
    rng = np.random.default_rng(8)
    fn = ug.function(lambda z, y: ug.value_and_grad(_loss(kind))(z, y))
    runs = []
    for i in range(3):
        z, y = _logits(dtype, bad_rows=bad_rows)
        z = (z * (1 + i)).astype(dtype)
        y = rng.integers(0, 5, 7)
        with np.errstate(invalid="ignore"):  # targets other than NumPy's own may warn
            runs += list(fn(z, y))
    return runs


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_gradients_agree_with_numpy_eager(target, kind, dtype):
    want = run_on("numpy:eager", lambda: _gradient_runs(kind, dtype, False))
    got = run_on(target, lambda: _gradient_runs(kind, dtype, False))
    for one, other in zip(got, want):
        assert one.dtype == other.dtype
        if target.startswith("numpy:"):
            _same(np.asarray(one), np.asarray(other))
        else:
            np.testing.assert_allclose(one, other, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_non_finite_rows_give_nan_rows_on_every_target(target):
    got = run_on(target, lambda: _gradient_runs("mean", np.float32, True))
    want = run_on("numpy:eager", lambda: _gradient_runs("mean", np.float32, True))
    for one, other in zip(got, want):
        np.testing.assert_array_equal(np.isnan(one), np.isnan(other))
        if target.startswith("numpy:"):
            _same(np.asarray(one), np.asarray(other))
    for dz in got[1::2]:
        assert np.isnan(dz[[1, 4, 5]]).all() and not np.isnan(dz[[0, 2, 3, 6]]).any()


def _mlp_steps(labels_seq, layers):
    """SGD steps of a relu MLP (or softmax regression) on mean cross-entropy, one per
    labels array: [loss, ...] then the parameters, or the error a step raised."""
    rng = np.random.default_rng(12)
    x = (rng.standard_normal((9, 6)) * 0.5).astype(np.float32)
    sizes = [6, 5] if layers == 1 else [6, 8, 5]
    model = ug.nn.Sequential(*[ug.nn.Linear(a, b, act="relu" if i < layers - 1 else None)
                               for i, (a, b) in enumerate(zip(sizes, sizes[1:]))])
    model.load_state_dict({name: (rng.standard_normal(p.shape) * 0.5).astype(np.float32)
                           for name, p in model.state_dict().items()})
    optimizer = ug.optim.SGD(model.parameters(), lr=0.5)

    @ug.function
    def step(x, y):
        loss, grads = ug.value_and_grad(
            lambda: ug.nn.functional.cross_entropy(model(x), y), wrt=optimizer.params)()
        optimizer.apply(grads)
        return loss

    losses = [step(x, y) for y in labels_seq]
    return [*losses, *optimizer.params]


GOOD = [np.array([0, 1, 2, 3, 4, 0, 1, 2, 3]), np.array([4, 4, 3, 2, 1, 0, 0, 1, 2])] * 2


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("layers", [1, 2])
def test_training_steps_agree_with_numpy_eager(target, layers):
    got = run_on(target, lambda: _mlp_steps(GOOD, layers))
    want = run_on("numpy:eager", lambda: _mlp_steps(GOOD, layers))
    for one, other in zip(got, want):
        if target.startswith("numpy:"):
            _same(np.asarray(one), np.asarray(other))
        else:
            np.testing.assert_allclose(one, other, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("label", [5, -1, 1000])
def test_a_bad_label_after_good_steps_raises(target, label):
    bad = GOOD[0].copy()
    bad[3] = label
    with pytest.raises(ug.IndexOutOfRangeError, match=f"{label}"):
        run_on(target, lambda: _mlp_steps([*GOOD, bad], 2))


@pytest.mark.parametrize("under", ["ignore", "raise", "warn"])
def test_an_underflowing_mean_share_keeps_numpys_error_state(under):
    logits, labels = _logits(np.float32, bad_rows=False)
    g = np.asarray(np.float32(1e-38))  # g / 7 underflows (subnormal, inexact)
    outcomes = []
    for fused in (False, True):
        with np.errstate(under=under), warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                if fused:
                    loss = kernel(XENT, OPS[XENT])(logits, labels)
                    mean = np.asarray(np.mean(loss))
                    got = mean_cross_entropy_vjp(g, loss, mean, logits, labels, axis=None,
                                                 keepdims=False)
                else:
                    got = _two_rules(g, logits, labels, None, False)
                outcomes.append((got.tobytes(), [str(w.message) for w in seen]))
            except FloatingPointError as error:
                outcomes.append(("raised", str(error)))
        fast_kernels._softmax_memo.entry = None
    assert outcomes[0] == outcomes[1]
    if under == "raise":
        assert outcomes[0] == ("raised", "underflow encountered in divide")
    else:  # (the products underflow too)
        assert ("underflow encountered in divide" in outcomes[0][1]) == (under == "warn")
