"""The NumPy engine's training-step kernels (issue 19 item 4): the cross-entropy forward keeps
its exponentials for the VJP of the same call (`fast_kernels._softmax_memo`), and the fast
forward/VJP kernels of matmul, add, sub, relu and mean. Engine mechanisms are checked on the
kernels (bit for bit against the op records' rules); the training steps built from them on
all 9 targets, against float64 NumPy with hand-derived gradients."""

import threading

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.ops import OPS
from unigraph.reference import fast_kernels
from unigraph.reference.fast_kernels import kernel, vjp_kernel

XENT = "sparse_softmax_cross_entropy"


def _logits(dtype):
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((6, 4)) * 3
    logits[1, 2] = np.inf  # a NaN row, as the record defines it
    logits[4] = -np.inf
    return logits.astype(dtype), np.array([0, 2, 3, 1, 0, 2])


def _same(got, want):
    assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_cross_entropy_vjp_from_the_forwards_exponentials_equals_the_record(dtype):
    logits, labels = _logits(dtype)
    g = np.linspace(-1.0, 2.0, 6).astype(dtype)
    with np.errstate(all="ignore"):
        want = OPS[XENT].vjp(g, [logits, labels], OPS[XENT].reference(logits, labels))[0]
        loss = kernel(XENT, OPS[XENT])(logits, labels)
        if dtype == np.float16:  # the record's kernels (softmax in float32): nothing kept
            assert fast_kernels._softmax_memo.entry is None
        else:
            assert fast_kernels._softmax_memo.entry[0] is loss  # kept for the VJP
        got = vjp_kernel(XENT, OPS[XENT])(g, [logits, labels], loss)[0]
        assert fast_kernels._softmax_memo.entry is None  # taken: a buffer is used once
        again = vjp_kernel(XENT, OPS[XENT])(g, [logits, labels], loss)[0]  # recomputed
    _same(got, want)
    _same(again, want)


def test_cross_entropy_vjp_of_another_call_recomputes():
    logits, labels = _logits(np.float64)
    g = np.ones(6)
    with np.errstate(all="ignore"):
        loss = kernel(XENT, OPS[XENT])(logits, labels)
        kept = fast_kernels._softmax_memo.entry
        other = logits.copy()  # equal numbers, another array: not the forward's call
        got = vjp_kernel(XENT, OPS[XENT])(g, [other, labels], loss.copy())[0]
        want = OPS[XENT].vjp(g, [other, labels], loss)[0]
    assert fast_kernels._softmax_memo.entry is kept  # left for its own VJP
    _same(got, want)
    fast_kernels._softmax_memo.entry = None


def test_cross_entropy_memo_is_per_thread():
    logits, labels = _logits(np.float32)
    g = np.full(6, 0.5, np.float32)
    with np.errstate(all="ignore"):
        loss = kernel(XENT, OPS[XENT])(logits, labels)
        want = OPS[XENT].vjp(g, [logits, labels], loss)[0]
    seen = {}

    def other_thread():
        with np.errstate(all="ignore"):
            seen["grad"] = vjp_kernel(XENT, OPS[XENT])(g, [logits, labels], loss)[0]
        seen["entry"] = getattr(fast_kernels._softmax_memo, "entry", None)

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    assert seen["entry"] is None  # that thread had no entry of its own
    assert fast_kernels._softmax_memo.entry[0] is loss  # this thread's entry is untouched
    _same(seen["grad"], want)
    fast_kernels._softmax_memo.entry = None


def test_out_of_range_labels_still_raise_the_users_error():
    logits, _ = _logits(np.float32)
    for labels, text in ((np.array([0, 1, 4, 0, 0, 0]), "label 4 is out of range"),
                         (np.array([0, -1, 0, 0, 0, 0]), "label -1 is out of range")):
        with pytest.raises(ug.IndexOutOfRangeError, match=text):
            kernel(XENT, OPS[XENT])(logits, labels)


@pytest.mark.parametrize("name", ["matmul", "add", "sub", "relu"])
def test_fast_vjps_on_mixed_or_batched_operands_go_to_the_record(name):
    rng = np.random.default_rng(5)
    if name == "matmul":  # batched: the record unbroadcasts over the batch dims
        inputs = [rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))]
    elif name == "relu":
        inputs = [rng.standard_normal((3, 4))]
    else:  # a float32 x with a float64 g: the record casts each gradient to its input
        inputs = [rng.standard_normal((3, 4)).astype(np.float32),
                  rng.standard_normal(4).astype(np.float32)]
    out = np.asarray(OPS[name].reference(*inputs))
    g = rng.standard_normal(out.shape)  # float64
    want = OPS[name].vjp(g, inputs, out)
    got = vjp_kernel(name, OPS[name])(g, inputs, out)
    for one, other in zip(got, want):
        _same(one, np.asarray(other))


def _hand_step(x, y, params, lr):
    """One SGD step of softmax regression (params w, b) or a relu MLP (w1, b1, w2, b2) in
    float64, gradients derived by hand: the loss and the updated parameters."""
    x = x.astype(np.float64)
    params = [p.astype(np.float64) for p in params]
    hidden = x
    if len(params) == 4:
        pre = x @ params[0] + params[1]
        hidden = np.maximum(pre, 0)
    logits = hidden @ params[-2] + params[-1]
    shifted = logits - logits.max(axis=1, keepdims=True)
    total = np.exp(shifted).sum(axis=1)
    rows = np.arange(len(y))
    loss = np.mean(np.log(total) - shifted[rows, y])
    d_logits = np.exp(shifted) / total[:, None]
    d_logits[rows, y] -= 1
    d_logits /= len(y)
    grads = [hidden.T @ d_logits, d_logits.sum(axis=0)]
    if len(params) == 4:
        d_pre = (d_logits @ params[2].T) * (pre > 0)
        grads = [x.T @ d_pre, d_pre.sum(axis=0)] + grads
    return loss, [p - lr * g for p, g in zip(params, grads)]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("layers", [1, 2])
def test_training_steps_agree_with_hand_derived_float64(target, layers):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((16, 12)) * 0.5).astype(np.float32)
    y = rng.integers(0, 5, 16)
    sizes = [12, 5] if layers == 1 else [12, 8, 5]
    params = []
    for fan_in, fan_out in zip(sizes, sizes[1:]):
        params += [(rng.standard_normal((fan_in, fan_out)) * 0.5).astype(np.float32),
                   (rng.standard_normal(fan_out) * 0.1).astype(np.float32)]

    def steps(x, y):
        model = ug.nn.Sequential(*[ug.nn.Linear(a, b, act="relu" if i < layers - 1 else None)
                                   for i, (a, b) in enumerate(zip(sizes, sizes[1:]))])
        model.load_state_dict({f"{i // 2}.{'weight' if i % 2 == 0 else 'bias'}": p
                               for i, p in enumerate(params)})
        optimizer = ug.optim.SGD(model.parameters(), lr=0.5)

        @ug.function
        def step(x, y):
            loss, grads = ug.value_and_grad(
                lambda: ug.nn.functional.cross_entropy(model(x), y), wrt=optimizer.params)()
            optimizer.apply(grads)
            return loss

        losses = [step(x, y) for _ in range(3)]
        return [*losses, *optimizer.params]

    got = run_on(target, steps, x, y)
    want_params = params
    for i in range(3):
        loss, want_params = _hand_step(x, y, want_params, 0.5)
        np.testing.assert_allclose(got[i], loss, rtol=2e-5, atol=1e-6)
    for param, want in zip(got[3:], want_params):
        np.testing.assert_allclose(param, want, rtol=2e-5, atol=2e-6)
