"""The NumPy engine's training-step kernels (unigraph.reference.fast_kernels) after issue 19's
NumPy work: bit for bit the op records' definitions on the inputs their shortcuts could get
wrong (a row maximum over a transposed copy: rows whose top is a tie of +0 and -0, NaN and
infinite rows, short and long rows; bias gradients by one reduction), and cross-entropy
training results on every target against a float64 NumPy reference."""

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.ops import OPS
from unigraph.reference import fast_kernels
from unigraph.reference.fast_kernels import KERNELS, VJP_KERNELS

XENT = OPS["sparse_softmax_cross_entropy"]


def _same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # signed zeros too


def _awkward_logits(columns, dtype):
    rng = np.random.default_rng(columns)
    x = rng.standard_normal((12, columns)).astype(dtype)
    x[0, :] = -1.0
    x[0, 0], x[0, 1] = 0.0, -0.0  # the top is a tie of +0 and -0
    x[1, :] = -0.0  # only zeros, of one sign
    x[2, :2] = (-np.inf, -np.inf)
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("columns", [2, 10, fast_kernels._SHORT_ROWS,
                                     fast_kernels._SHORT_ROWS + 1, 100])
def test_cross_entropy_and_its_vjp_equal_the_record_bit_for_bit(dtype, columns):
    logits = _awkward_logits(columns, dtype)
    labels = np.arange(12) % columns
    labels[0], labels[1] = 1, 0  # the -0 of the tie; a zero of the all-zero row
    want = XENT.reference(logits, labels)
    got = KERNELS["sparse_softmax_cross_entropy"](logits, labels)
    _same_bits(got, want)
    g = np.linspace(0.5, 2.0, 12).astype(dtype)
    want_grad = XENT.vjp(g, [logits, labels], want)[0]
    _same_bits(VJP_KERNELS["sparse_softmax_cross_entropy"](g, [logits, labels], got)[0],
               want_grad)  # from the forward's exponentials
    _same_bits(VJP_KERNELS["sparse_softmax_cross_entropy"](g, [logits, labels], want)[0],
               want_grad)  # recomputed (another call's loss)


@pytest.mark.parametrize("columns", [3, 50])
def test_non_finite_rows_are_nan_silently_as_the_record(columns):
    logits = _awkward_logits(columns, np.float32)
    logits[3, 1] = np.inf
    logits[4, 2] = np.nan
    logits[5, :] = -np.inf
    labels = np.full(12, columns - 1, np.int64)  # a finite logit in every finite row
    with np.errstate(all="raise"):  # no warning may escape from the kernel
        got = KERNELS["sparse_softmax_cross_entropy"](logits, labels)
        grad = VJP_KERNELS["sparse_softmax_cross_entropy"](np.ones(12, np.float32),
                                                           [logits, labels], got)[0]
    assert np.isnan(got[3:6]).all() and np.isfinite(np.delete(got, [3, 4, 5])).all()
    _same_bits(got, XENT.reference(logits, labels))
    with np.errstate(invalid="ignore"):
        want_grad = XENT.vjp(np.ones(12, np.float32), [logits, labels], got)[0]
    _same_bits(grad, want_grad)


@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize(("x_shape", "y_shape"), [
    ((5, 4), (4,)), ((5, 4), ()), ((2, 3, 4), (4,)), ((2, 3, 4), (3, 4)), ((5, 4), (1, 4)),
    ((5, 4), (5, 4)), ((4,), (5, 4)), ((0, 4), (4,)),
])
def test_bias_gradients_equal_the_record(op, x_shape, y_shape):
    rng = np.random.default_rng(len(x_shape) * 10 + len(y_shape))
    x = rng.standard_normal(x_shape).astype(np.float32)
    y = rng.standard_normal(y_shape).astype(np.float32)
    out = OPS[op].reference(x, y)
    g = rng.standard_normal(out.shape).astype(np.float32)
    for got, want in zip(VJP_KERNELS[op](g, [x, y], out), OPS[op].vjp(g, [x, y], out)):
        assert type(got) is np.ndarray
        _same_bits(got, want)


def _float64_step(x, labels, w, b, lr):
    """Softmax regression, one SGD step, derived by hand in float64."""
    x, w, b = x.astype(np.float64), w.astype(np.float64), b.astype(np.float64)
    z = x @ w + b
    e = np.exp(z - z.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    rows = np.arange(len(labels))
    loss = -np.log(p[rows, labels]).mean()
    d = p.copy()
    d[rows, labels] -= 1
    d /= len(labels)
    return loss, w - lr * (x.T @ d), b - lr * d.sum(axis=0)


@pytest.mark.parametrize("target", TARGETS)
def test_a_cross_entropy_step_with_tied_zero_logits_on_every_target(target):
    """Rows whose top logits tie at +0 and -0 (the bias is 0, a row of x is 0): the loss,
    the updated weights and bias against the float64 derivation."""
    rng = np.random.default_rng(19)
    x = (rng.standard_normal((8, 6)) * 0.5).astype(np.float32)
    x[0] = 0.0
    x[1] = -0.0
    labels = (np.arange(8) % 5).astype(np.int64)
    w0 = (rng.standard_normal((6, 5)) * 0.3).astype(np.float32)
    b0 = np.zeros(5, np.float32)
    model = ug.nn.Linear(6, 5)
    model.load_state_dict({"weight": w0, "bias": b0})
    opt = ug.optim.SGD(model.parameters(), lr=0.5)

    @ug.function
    def step(x, y):
        loss, grads = ug.value_and_grad(
            lambda: ug.nn.functional.cross_entropy(model(x), y), wrt=opt.params)()
        opt.apply(grads)
        return loss, model.weight, model.bias

    loss, w, b = run_on(target, step, x, labels)
    want_loss, want_w, want_b = _float64_step(x, labels, w0, b0, 0.5)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
    np.testing.assert_allclose(w, want_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b, want_b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["add", "sub"])
def test_a_numpy_scalar_cotangent_gives_array_gradients(op):
    """A 0-d ufunc result (relu's VJP of a 0-d input) is a NumPy scalar: the gradients are
    still arrays, as the record's."""
    x, y = np.asarray(np.float32(1.5)), np.asarray(np.float32(-2.0))
    g = np.float32(0.25)
    got = VJP_KERNELS[op](g, [x, y], OPS[op].reference(x, y))
    assert all(type(a) is np.ndarray for a in got)
    assert [float(a) for a in got] == [0.25, 0.25 if op == "add" else -0.25]
