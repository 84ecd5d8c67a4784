"""The NumPy engine's eager calls for `ug.nn.functional`'s composites (`Backend.composites`,
`unigraph.reference.eager.COMPOSITES`): an eager `F.linear` (2-D input, 1-D bias) is one
call of the `matmul` and `add` kernels and one tape record, a mean `F.cross_entropy` one
call of the cross-entropy and mean kernels with the fused mean cross-entropy VJP.

On all 9 targets: the loss, the gradients (with respect to the input too) and the weights
after SGD steps of `F.linear` + `F.cross_entropy` (a softmax regression, a relu MLP) are
bit for bit those of the same model written with the op records (`ug.matmul` + bias,
`ug.mean(ug.sparse_softmax_cross_entropy(...))`), except on torch:eager, whose composites
are torch's own kernels (`tests/test_torch_eager_composites.py`): there within float32
rounding. On numpy:eager: which calls ran, and the tape's records."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

F = ug.nn.functional


def _data():
    rng = np.random.default_rng(11)
    return {"x": rng.standard_normal((9, 6)).astype(np.float32),
            "y": rng.integers(0, 4, 9).astype(np.int64),
            "w1": rng.standard_normal((6, 5)).astype(np.float32),
            "b1": rng.standard_normal(5).astype(np.float32),
            "w2": rng.standard_normal((5, 4)).astype(np.float32),
            "b2": rng.standard_normal(4).astype(np.float32)}


def _composites(x, y, w1, b1, w2, b2):
    hidden = ug.relu(F.linear(x, w1, b1))
    return F.cross_entropy(F.linear(hidden, w2, b2), y)


def _records(x, y, w1, b1, w2, b2):
    hidden = ug.relu(ug.matmul(x, w1) + b1)
    return ug.mean(ug.sparse_softmax_cross_entropy(ug.matmul(hidden, w2) + b2, y))


def _steps(target, loss_fn, data, steps=3, lr=0.5):
    """The losses and the gradients (x, w1, b1, w2, b2) of `steps` SGD steps, then the
    weights."""
    t = Target.parse(target)
    names = ("x", "w1", "b1", "w2", "b2")
    out = []
    with ug.use_backend(t.backend, t.mode):
        grad = ug.function(ug.value_and_grad(loss_fn, argnums=(0, 2, 3, 4, 5)))
        values = {k: np.array(v) for k, v in data.items()}
        for _ in range(steps):
            loss, grads = grad(*(values[k] for k in ("x", "y", "w1", "b1", "w2", "b2")))
            out.append(np.asarray(loss.numpy()))
            out.extend(np.asarray(g.numpy()) for g in grads)
            for name, g in zip(names[1:], grads[1:]):
                values[name] = (values[name] - np.float32(lr) * np.asarray(g.numpy()))
    return out + [values[k] for k in names[1:]]


@pytest.mark.parametrize("target", TARGETS)
def test_composites_give_the_records_numbers(target):
    data = _data()
    got = _steps(target, _composites, data)
    want = _steps(target, _records, data)
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype and a.shape == b.shape, i
        if target == "torch:eager":
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=str(i))
        else:
            assert a.tobytes() == b.tobytes(), (i, a, b)


def _trained(target, data, fused):
    """The losses of 4 SGD steps of `ug.nn.Linear` + cross-entropy inside `@ug.function`
    (the bench's step), `F.cross_entropy(model(x), y)` or the records written out, then
    the weights."""
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        model = ug.nn.Linear(6, 4)
        model.load_state_dict({"weight": data["w1"][:, :4], "bias": data["b2"]})
        opt = ug.optim.SGD(model.parameters(), lr=0.5)

        def loss_fn(x, y):
            if fused:
                return F.cross_entropy(model(x), y)
            z = ug.matmul(x, model.weight) + model.bias
            return ug.mean(ug.sparse_softmax_cross_entropy(z, y))

        @ug.function
        def step(x, y):
            loss, grads = ug.value_and_grad(lambda: loss_fn(x, y), wrt=opt.params)()
            opt.apply(grads)
            return loss

        x, y = ug.tensor(data["x"]), ug.tensor(data["y"])
        losses = [np.asarray(step(x, y).numpy()) for _ in range(4)]
        return losses + [np.array(v) for v in model.state_dict().values()]


@pytest.mark.parametrize("target", TARGETS)
def test_a_linear_model_trains_as_its_records(target):
    data = _data()
    got, want = _trained(target, data, True), _trained(target, data, False)
    for i, (a, b) in enumerate(zip(got, want)):
        if target == "torch:eager":
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=str(i))
        else:
            assert a.tobytes() == b.tobytes(), (i, a, b)


def test_numpy_eager_runs_the_composites_with_one_tape_record_each(monkeypatch):
    from unigraph.plugins import get_backend
    from unigraph.reference import eager

    calls, records = [], []
    for name, fn in list(eager.COMPOSITES.items()):
        monkeypatch.setitem(eager.COMPOSITES, name,
                            lambda *a, fn=fn, name=name: calls.append(name) or fn(*a))
    record = eager.Tape.record
    monkeypatch.setattr(eager.Tape, "record",
                        lambda self, op, *rest: records.append(op.name) or record(self, op, *rest))
    data = _data()
    with ug.use_backend("numpy", "eager"):
        args = [ug.tensor(data[k]) for k in ("x", "y", "w1", "b1", "w2", "b2")]
        ug.value_and_grad(_composites, argnums=(2, 3, 4, 5))(*args)
    assert calls == ["linear", "linear", "cross_entropy_mean"]
    assert records == ["linear", "relu", "linear", "cross_entropy_mean"]
    # numpy:static traces the records (its plan fuses on its own); a replaced op table or
    # a watched eager_op (the random tester) runs the records eagerly too
    calls.clear()
    with ug.use_backend("numpy", "static"):
        ug.function(ug.value_and_grad(_composites, argnums=(2, 3, 4, 5)))(
            *(data[k] for k in ("x", "y", "w1", "b1", "w2", "b2")))
    assert calls == []
    backend = get_backend("numpy", "eager")
    monkeypatch.setattr(backend, "ops", dict(backend.ops))
    with ug.use_backend("numpy", "eager"):
        _composites(*args)
    assert calls == []
