"""The faster Paddle paths of issue 19 keep every answer: cross-entropy composed as
`log_total - shifted[label]` (never Paddle's saturating fused kernel), conv2d's bias added as
[N, C, H*W] + [C, 1], eager relu's NaN through a detached alias, and eager gradients by
Paddle's `backward()` at the outermost level (`run_partial_grad` only when nested).

Results are checked on all 9 targets against float64 NumPy or hand-computed values; the
Paddle mechanisms (which engine ran, bit-for-bit equality with Paddle's own functions) on
the Paddle targets."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
import unigraph.nn.functional as F
from unigraph.errors import UnigraphError

# Row 0: ordinary logits. Row 1: the label's class 80 below the max (Paddle's fused kernel
# floors x - max at -64: loss 64, not 80). Row 2: classes 80 below the labelled max, whose
# gradient e**-80 / N is a normal float32 (1.8e-35 / 4) that the floor makes 4e-29. Row 3:
# a -inf logit (probability and gradient exactly 0).
LOGITS = np.array([[1.0, -0.5, 2.0, 0.25],
                   [0.0, -80.0, 0.5, 0.0],
                   [3.0, -77.0, -77.0, 2.0],
                   [0.5, -np.inf, 1.0, 0.0]], np.float32)
LABELS = np.array([2, 1, 0, 3], np.int64)


def _cross_entropy_reference():
    """Mean sparse cross-entropy and its gradient with respect to the logits, float64."""
    x = LOGITS.astype(np.float64)
    shifted = x - x.max(axis=1, keepdims=True)
    total = np.exp(shifted).sum(axis=1, keepdims=True)
    losses = np.log(total)[:, 0] - shifted[np.arange(len(x)), LABELS]
    grad = (np.exp(shifted) / total - np.eye(x.shape[1])[LABELS]) / len(x)
    return losses.mean(), grad


@pytest.mark.parametrize("target", TARGETS)
def test_cross_entropy_value_and_gradient_do_not_saturate(target):
    def loss_and_grad(logits, labels):
        return ug.value_and_grad(lambda z: F.cross_entropy(z, labels))(logits)

    loss, grad = run_on(target, ug.function(loss_and_grad), LOGITS, LABELS)
    want_loss, want_grad = _cross_entropy_reference()
    np.testing.assert_allclose(loss, want_loss, rtol=1e-6)
    # Relative, entry by entry: the 1e-36 entries of row 2 must be themselves, not 4e-29.
    np.testing.assert_allclose(grad, want_grad, rtol=2e-5, atol=0)
    assert grad[3, 1] == 0.0


@pytest.mark.parametrize("target", TARGETS)
def test_cross_entropy_refuses_a_label_out_of_range(target):
    @ug.function
    def losses(logits, labels):
        return ug.sparse_softmax_cross_entropy(logits, labels)

    with pytest.raises(ug.IndexOutOfRangeError, match="4"):
        run_on(target, losses, LOGITS, np.array([0, 4, 1, 2], np.int64))


def _conv_reference(x, w, b, r, groups):
    """float64 conv2d (stride 1, padding 1) and the gradients of sum(conv * r)."""
    x, w, b, r = (a.astype(np.float64) for a in (x, w, b, r))
    n, c, h, width = x.shape
    filters, per_group, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, filters, h + 2 - kh + 1, width + 2 - kw + 1))
    dxp, dw = np.zeros_like(xp), np.zeros_like(w)
    out_per_group = filters // groups
    for f in range(filters):
        cs = slice((f // out_per_group) * per_group, (f // out_per_group + 1) * per_group)
        for i in range(kh):
            for j in range(kw):
                window = xp[:, cs, i:i + out.shape[2], j:j + out.shape[3]]
                out[:, f] += np.einsum("nchw,c->nhw", window, w[f, :, i, j])
                dw[f, :, i, j] = np.einsum("nchw,nhw->c", window, r[:, f])
                dxp[:, cs, i:i + out.shape[2], j:j + out.shape[3]] += (
                    w[f, :, i, j][None, :, None, None] * r[:, f][:, None])
        out[:, f] += b[f]
    return out, dxp[:, :, 1:-1, 1:-1], dw, r.sum(axis=(0, 2, 3))


@pytest.mark.parametrize("groups", [1, 2], ids=["dense", "depthwise"])
@pytest.mark.parametrize("target", TARGETS)
def test_conv2d_bias_value_and_gradients(target, groups):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 2, 5, 4)).astype(np.float32)
    w = rng.standard_normal((4, 2 // groups, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    r = rng.standard_normal((3, 4, 5, 4)).astype(np.float32)

    @ug.function
    def conv_and_grads(x, w, b):
        def loss(x, w, b):
            return ug.sum(ug.conv2d(x, w, b, padding=1, groups=groups) * r)

        out = ug.conv2d(x, w, b, padding=1, groups=groups)
        return (out, *ug.grad(loss, argnums=(0, 1, 2))(x, w, b))

    got = run_on(target, conv_and_grads, x, w, b)
    for value, want in zip(got, _conv_reference(x, w, b, r, groups)):
        np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_relu_at_nan_infinities_and_zeros(target):
    x = np.array([-1.0, 0.0, -0.0, 2.0, np.nan, -np.inf, np.inf], np.float32)

    @ug.function
    def relu_and_grad(x):
        return ug.relu(x), ug.grad(lambda v: ug.sum(ug.relu(v) * 3.0))(x)

    value, grad = run_on(target, relu_and_grad, x)
    np.testing.assert_array_equal(value, [0.0, 0.0, 0.0, 2.0, np.nan, 0.0, np.inf])
    np.testing.assert_array_equal(grad, [0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 3.0])


@pytest.mark.parametrize("target", TARGETS)
def test_second_derivative_through_nested_gradients(target):
    @ug.function
    def second(x):
        return ug.grad(lambda v: ug.sum(ug.grad(lambda u: ug.sum(u * u * u))(v)))(x)

    x = np.array([2.0, -1.5], np.float32)
    if target.startswith("numpy:"):  # documented: its VJP rules are not differentiable ops
        with pytest.raises(UnigraphError, match="second order"):
            run_on(target, second, x)
        return
    np.testing.assert_allclose(run_on(target, second, x), [12.0, -9.0], rtol=1e-6)  # 6 x


# -- Paddle mechanisms -----------------------------------------------------------------------
def _paddle_backend():
    from unigraph.plugins import backends

    backend = backends()["paddle"]
    backend.load()
    return backend


def test_paddle_eager_gradient_engine(monkeypatch):
    """The outermost gradient runs `run_backward`, a nested one `run_partial_grad`; the
    gradients are paddle.grad's bit for bit and need no gradient themselves."""
    backend = _paddle_backend()
    import paddle

    calls = []
    for name in ("_run_backward", "_partial_grad"):
        original = getattr(backend, name)
        monkeypatch.setattr(backend, name, lambda *a, _f=original, _n=name: (
            calls.append(_n), _f(*a))[1])
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((5, 3))
    w = w.astype(np.float32)
    labels = np.array([0, 2, 1, 1, 0, 2])

    def loss(w):
        return F.cross_entropy(ug.matmul(ug.tensor(x), w), labels)

    with ug.use_backend("paddle", "eager"):
        (g,) = [ug.grad(loss)(ug.tensor(w))]
        assert calls == ["_run_backward"]
        assert g.native().stop_gradient
        leaf = paddle.to_tensor(w)
        leaf.stop_gradient = False
        logits = paddle.matmul(paddle.to_tensor(x), leaf)
        from unigraph_paddle.lowerings import sparse_softmax_cross_entropy

        native_loss = paddle.mean(sparse_softmax_cross_entropy(logits, paddle.to_tensor(labels)))
        (want,) = paddle.grad([native_loss], [leaf])
        np.testing.assert_array_equal(g.numpy(), want.numpy())
        calls.clear()
        ug.grad(lambda v: ug.sum(ug.grad(lambda u: ug.sum(u * u))(v) * v))(ug.tensor(w))
        assert calls == ["_partial_grad", "_run_backward"]


@pytest.mark.parametrize("batch", [1, 64])
def test_paddle_conv2d_lowering_is_f_conv2d_bit_for_bit(batch):
    """The bias added as [N, C, H*W] + [C, 1] and _C_ops.conv2d: F.conv2d's numbers, value
    and every gradient (the bias gradient sums in the same order)."""
    _paddle_backend()
    import paddle
    import paddle.nn.functional as PF
    from unigraph_paddle.lowerings import conv2d

    rng = np.random.default_rng(batch)
    arrays = [rng.standard_normal(s).astype(np.float32)
              for s in ((batch, 3, 12, 10), (8, 3, 3, 3), (8,), (batch, 8, 12, 10))]
    results = []
    for conv in (lambda x, w, b: PF.conv2d(x, w, b, padding=[1, 1]),
                 lambda x, w, b: conv2d(x, w, b, stride=(1, 1), padding=(1, 1),
                                        dilation=(1, 1), groups=1)):
        x, w, b = (paddle.to_tensor(a, stop_gradient=False) for a in arrays[:3])
        out = conv(x, w, b)
        grads = paddle.grad([out], [x, w, b], paddle.to_tensor(arrays[3]))
        results.append([out.numpy()] + [g.numpy() for g in grads])
    for want, got in zip(*results):
        np.testing.assert_array_equal(got, want)


def test_paddle_static_runs_on_the_calling_thread_and_restores_the_flag():
    """paddle:static runs its interpreter serially, on the calling thread (whose FTZ/DAZ
    flags then apply to the kernels: 1e-40 * 1 flushes to 0), and leaves Paddle's
    process-wide flag as it found it, also with two threads running at once."""
    import threading

    torch = pytest.importorskip("torch")  # sets this thread's FTZ/DAZ bits; in the venv
    paddle = _paddle_backend().load()
    flag = "FLAGS_new_executor_serial_run"
    assert paddle.get_flags([flag])[flag] is False

    @ug.function
    def times_one(x):
        return x * 1.0

    tiny = np.full(16, 1e-40, np.float32)
    with ug.use_backend("paddle", "static"):
        np.testing.assert_array_equal(times_one(tiny).numpy(), tiny)
        torch.set_flush_denormal(True)
        try:
            flushed = times_one(tiny).numpy()
        finally:
            torch.set_flush_denormal(False)
        np.testing.assert_array_equal(flushed, np.zeros(16, np.float32))
        assert paddle.get_flags([flag])[flag] is False

        @ug.function
        def counter(a, b):
            return ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))

        results, errors = [], []

        def run(fn, args, want):
            try:
                for _ in range(30):
                    results.append([np.asarray(o.numpy()) for o in fn(*args)] == want)
            except Exception as error:  # noqa: BLE001 - reported below
                errors.append(error)

        threads = [threading.Thread(target=run, args=(counter, (0, 10), [20, 20])),
                   threading.Thread(target=run, args=(counter, (1, 7), [13, 13]))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not errors and len(results) == 60 and all(results)
    assert paddle.get_flags([flag])[flag] is False
