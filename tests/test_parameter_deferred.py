"""`Parameter._deferred`, the constructor `ug.init.parameter` makes a layer's weights with
(the value drawn when first read): the same parameter as `ug.Parameter` of that value, in
every attribute, and the same behaviour on all 9 targets (read, trained, saved)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

OPTIONS = {"name": "w", "trainable": True, "lr_scale": 0.5, "order": "F"}


def _pair():
    """(deferred, eager) parameters of the same seeded draw and options."""
    ug.manual_seed(5)
    deferred = ug.init.parameter(ug.init.xavier_uniform(), (6, 4), "float32", **OPTIONS)
    ug.manual_seed(5)
    drawn = ug.init.xavier_uniform()((6, 4), "float32", 6, 4)
    return deferred, ug.Parameter(drawn, **OPTIONS)


def test_same_attributes_as_the_constructor():
    deferred, eager = _pair()
    assert type(deferred) is ug.Parameter
    for name in ("shape", "dtype", "name", "trainable", "lr_scale", "order", "version",
                 "_natives", "_backend", "_native", "_value", "_builder"):
        assert getattr(deferred, name) == getattr(eager, name), name
        assert type(getattr(deferred, name)) is type(getattr(eager, name)), name
    assert deferred._array is None and deferred._home is not None  # nothing drawn yet
    assert deferred.numpy().tobytes() == eager.numpy().tobytes()


def test_bad_order_is_refused_as_by_the_constructor():
    with pytest.raises(ValueError, match="order must be 'C'"):
        ug.init.parameter(ug.init.zeros(), (3,), order="K")


def _trained(param, x):
    optimizer = ug.optim.SGD([param], lr=0.1)

    @ug.function
    def step(x):
        loss, grads = ug.value_and_grad(lambda: ug.sum(ug.tanh(ug.matmul(x, param))),
                                        wrt=[param])()
        optimizer.apply(grads)
        return loss

    losses = [step(x).numpy().tobytes() for _ in range(3)]
    return losses, param.numpy().tobytes(), param.version


@pytest.mark.parametrize("target", TARGETS)
def test_trained_like_a_constructed_parameter(target):
    t = Target.parse(target)
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(2, 6)
    with ug.use_backend(t.backend, t.mode):
        deferred, eager = (_trained(param, x) for param in _pair())
    assert deferred == eager
