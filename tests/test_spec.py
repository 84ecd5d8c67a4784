"""`ug.Spec` / `@ug.function(input_spec=...)`: one graph with unknown dims serves every batch
size on every static target; eager targets check calls against the spec the same way.
Values are compared with a float64 NumPy computation written out by hand."""

import inspect
import re

import numpy as np
import pytest

import unigraph as ug
from tests.conftest import TARGETS
from unigraph.config import Target
from unigraph.errors import ShapeError

BATCHES = (1, 3, 8)
SPEC = [ug.Spec((None, 4), "float32"), ug.Spec((None,), "int64")]


class MLP(ug.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = ug.nn.Linear(4, 5)
        self.fc2 = ug.nn.Linear(5, 3)

    def forward(self, x):
        return self.fc2(ug.nn.functional.relu(self.fc1(x)))


def data(batch: int, seed: int = 0):
    rng = np.random.default_rng(seed + batch)
    return rng.normal(size=(batch, 4)).astype(np.float32), rng.integers(0, 3, batch)


def weights(net) -> list:
    return [np.asarray(p.numpy(), np.float64) for p in
            (net.fc1.weight, net.fc1.bias, net.fc2.weight, net.fc2.bias)]


def reference(w1, b1, w2, b2, x, labels):
    """float64 loss (mean cross-entropy) of the MLP and its gradients, by hand."""
    x = x.astype(np.float64)
    hidden = x @ w1 + b1
    active = np.maximum(hidden, 0.0)
    logits = active @ w2 + b2
    shifted = logits - logits.max(axis=1, keepdims=True)
    probs = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    rows = np.arange(len(labels))
    loss = -np.log(probs[rows, labels]).mean()
    dlogits = probs.copy()
    dlogits[rows, labels] -= 1.0
    dlogits /= len(labels)
    dactive = dlogits @ w2.T
    dhidden = dactive * (hidden > 0)
    return loss, [x.T @ dhidden, dhidden.sum(0), active.T @ dlogits, dlogits.sum(0)]


def close(got, want):
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_one_trace_serves_every_batch_size(target):
    t = Target.parse(target)
    traces = []
    with ug.use_backend(t.backend, t.mode):
        net = MLP()
        w = weights(net)

        @ug.function(input_spec=SPEC)
        def forward(x, labels):
            traces.append(x.shape)
            return net(x), ug.nn.functional.cross_entropy(net(x), labels)

        for batch in BATCHES:
            x, labels = data(batch)
            logits, loss = forward(x, labels)
            hidden = np.maximum(x.astype(np.float64) @ w[0] + w[1], 0.0)
            close(logits.numpy(), hidden @ w[2] + w[3])
            close(loss.numpy(), reference(*w, x, labels)[0])
            assert logits.shape == (batch, 3)
    if t.mode == "eager":  # the body runs on every call, with the concrete shapes
        assert traces == [(b, 4) for b in BATCHES]
    else:  # traced once, the batch dim unknown
        assert traces == [(None, 4)]


@pytest.mark.parametrize("target", TARGETS)
def test_reshape_with_minus_one_over_the_unknown_batch(target):
    """(None, 2, 2) -> (-1, 4): the -1 is resolved when the graph runs; value and gradient
    against float64 by hand, one trace for every batch."""
    t = Target.parse(target)
    w = np.arange(12, dtype=np.float64).reshape(4, 3) / 10
    traces = []
    with ug.use_backend(t.backend, t.mode):
        @ug.function(input_spec=[ug.Spec((None, 2, 2), "float32")])
        def loss(x):
            flat = ug.reshape(x, (-1, 4))
            traces.append(flat.shape)
            return ug.sum(ug.tanh(flat @ w.astype(np.float32)) ** 2)

        for batch in BATCHES:
            x = np.linspace(-1, 1, batch * 4, dtype=np.float32).reshape(batch, 2, 2)
            flat = x.reshape(-1, 4).astype(np.float64)
            h = np.tanh(flat @ w)
            close(loss(x).numpy(), np.sum(h ** 2))
            want = ((2 * h * (1 - h ** 2)) @ w.T).reshape(x.shape)
            close(ug.grad(loss)(x).numpy(), want)
    assert traces[0] == ((1, 4) if t.mode == "eager" else (None, 4))


@pytest.mark.parametrize("target", TARGETS)
def test_gradients_and_a_training_step_with_a_varying_batch(target):
    t = Target.parse(target)
    traces = []
    with ug.use_backend(t.backend, t.mode):
        net = MLP()
        params = [net.fc1.weight, net.fc1.bias, net.fc2.weight, net.fc2.bias]
        opt = ug.optim.SGD(params, lr=0.5)

        def loss(x, labels):
            return ug.nn.functional.cross_entropy(net(x), labels)

        @ug.function(input_spec=SPEC)
        def gradients(x, labels):
            traces.append("grad")
            return ug.value_and_grad(loss, wrt=params)(x, labels)

        @ug.function(input_spec=SPEC)
        def step(x, labels):
            traces.append("step")
            value, grads = ug.value_and_grad(loss, wrt=params)(x, labels)
            opt.step(grads)
            return value

        for batch in BATCHES:
            x, labels = data(batch)
            w = weights(net)
            want_loss, want_grads = reference(*w, x, labels)
            value, grads = gradients(x, labels)
            close(value.numpy(), want_loss)
            for got, want in zip(grads, want_grads):
                close(got.numpy(), want)
            close(step(x, labels).numpy(), want_loss)
            for got, before, grad in zip(weights(net), w, want_grads):
                close(got, before - 0.5 * grad)
    if t.mode != "eager":
        assert traces == ["grad", "step"]


@pytest.mark.parametrize("target", TARGETS)
def test_an_argument_that_does_not_match_its_spec_is_refused_in_the_users_terms(target):
    t = Target.parse(target)

    @ug.function(input_spec=SPEC)
    def forward(x, labels):
        return x.sum() + ug.cast(labels, "float32").sum()

    with ug.use_backend(t.backend, t.mode):
        with pytest.raises(ShapeError) as caught:
            line = inspect.currentframe().f_lineno + 1
            forward(np.ones((2, 5), np.float32), np.zeros(2, np.int64))
        message = str(caught.value)
        assert re.match(rf"@ug.function forward: argument 'x' at \S*test_spec.py:{line} is ",
                        message), message
        assert ("is float32[2, 5], which does not match its input_spec "
                "ug.Spec((None, 4), 'float32'): the dim 1 (5, the spec says 4) differs") in message
        with pytest.raises(ShapeError, match=r"argument 'labels' .* is float32\[2\].*"
                                             r"the dtype differs; cast it"):
            forward(np.ones((2, 4), np.float32), np.zeros(2, np.float32))
        with pytest.raises(ShapeError, match=r"the rank \(1 dims, the spec has 2\) differs"):
            forward(np.ones(4, np.float32), np.zeros(2, np.int64))
        # A Python list takes the spec's dtype; the result is exact in float32.
        assert float(forward([[1.0, 2.0, 3.0, 4.0]], [1]).numpy()) == 11.0


@pytest.mark.parametrize("target", TARGETS)
def test_a_method_spec_skips_self_and_the_shape_reads_none_while_tracing(target):
    t = Target.parse(target)
    seen = []

    class Scale(ug.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = ug.nn.Parameter(np.array([1.0, 2.0], np.float32))

        @ug.function(input_spec=[ug.Spec((None, 2))])
        def forward(self, x):
            seen.append(x.shape[0])
            return x * self.w

    with ug.use_backend(t.backend, t.mode):
        model = Scale()
        for batch in BATCHES:
            x = np.arange(2.0 * batch, dtype=np.float32).reshape(batch, 2)
            np.testing.assert_array_equal(model(x).numpy(), x * [1.0, 2.0])
    assert seen == ([None] if t.mode != "eager" else list(BATCHES))


def test_spec_checks_its_own_arguments():
    assert ug.Spec([None, 3], ug.float64) == ug.Spec((None, 3), "float64")
    assert str(ug.Spec((None,), "int64")) == "ug.Spec((None,), 'int64')"
    assert ug.Spec((None, 3)).fits((7, 3), "float32")
    assert not ug.Spec((None, 3)).fits((7, 4), "float32")
    with pytest.raises(ShapeError, match="dim -1 of shape"):
        ug.Spec((-1, 3))
    with pytest.raises(ShapeError, match="is not a shape"):
        ug.Spec(None)
    with pytest.raises(TypeError, match="input_spec entries must be ug.Spec"):
        ug.function(lambda x: x, input_spec=["float32"])
