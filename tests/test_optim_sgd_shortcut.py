"""SGD's eager update on the native tensors (`SGD._update_in_place`, like Momentum's and
Adam's): taken from the second step on (the first writes the parameters' first eager
tensors) on the eager targets with in-place lowerings, never while tracing, and bit for bit
the op-by-op path's numbers (`lr * g`, then `p - that`) on all 9 targets, with a weight
decay and a per-parameter learning-rate scale too (and float64's formula). That the
shortcut's `sub_` writes the parameter's own tensor, and never under a value the user holds:
tests/test_optim_in_place.py."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

SHAPES = [(80, 70), (70,), (3, 5), ()]
STEPS = 3
IN_PLACE = {"numpy:eager", "torch:eager", "paddle:eager"}


def _gradients(step):
    rng = np.random.default_rng(200 + step)
    # Magnitudes over several decades: every rounding shows.
    return [(rng.standard_normal(s) * 10.0 ** rng.integers(-4, 2, s)).astype(np.float32)
            for s in SHAPES]


def _initial():
    rng = np.random.default_rng(9)
    return [rng.standard_normal(s).astype(np.float32) for s in SHAPES]


OPTIONS = {"plain": {}, "decay": {"weight_decay": 0.01}, "scaled": {}}


def _trained(target, options):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        scale = 0.3 if options == "scaled" else 1.0
        params = [ug.Parameter(p, name=f"p{i}", lr_scale=scale if i % 2 else 1.0)
                  for i, p in enumerate(_initial())]
        optimizer = ug.optim.SGD(params, lr=0.1, **OPTIONS[options])

        @ug.function
        def apply(*grads):
            optimizer.apply(list(grads))
            return ug.tensor(0.0)

        for step in range(STEPS):
            apply(*_gradients(step))
        return [p.numpy().copy() for p in params]


def _bits_apart(got, want) -> np.ndarray:
    return np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))


@pytest.mark.parametrize("options", list(OPTIONS))
@pytest.mark.parametrize("target", TARGETS)
def test_shortcut_keeps_the_bits_of_the_op_by_op_path(target, options, monkeypatch):
    done = []
    original = ug.optim.SGD._update_in_place

    def counted(self, *args):
        done.append(original(self, *args))
        return done[-1]

    monkeypatch.setattr(ug.optim.SGD, "_update_in_place", counted)
    fast = _trained(target, options)
    eager = target.endswith(":eager")
    assert done == ([False] * 4 + [target in IN_PLACE] * 8 if eager else [])
    monkeypatch.setattr(ug.optim.SGD, "_update_in_place", lambda self, *args: False)
    slow = _trained(target, options)
    for i, (f, s) in enumerate(zip(fast, slow)):
        assert not _bits_apart(f, s).any(), f"p{i} {SHAPES[i]}"
    # and the formula, in float64
    want = [p.astype(np.float64) for p in _initial()]
    for step in range(STEPS):
        for i, g in enumerate(_gradients(step)):
            g = g + OPTIONS[options].get("weight_decay", 0.0) * want[i]
            rate = 0.1 * (0.3 if options == "scaled" and i % 2 else 1.0)
            want[i] = want[i] - rate * g
    for i, (f, w) in enumerate(zip(fast, want)):
        np.testing.assert_allclose(f, w, rtol=1e-5, atol=1e-6, err_msg=f"p{i}")



@pytest.mark.parametrize("name", ["sgd", "momentum", "adam"])
@pytest.mark.parametrize("target", TARGETS)
def test_a_gradient_of_another_shape_is_refused(target, name):
    """The error names the parameter and both shapes, and no parameter is written (not
    even one before the refused one: every gradient is checked first); a gradient count
    that fits neither the parameters nor the trainable ones is refused before any update."""
    make = {"sgd": ug.optim.SGD, "momentum": ug.optim.Momentum, "adam": ug.optim.Adam}[name]
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        first = ug.Parameter(np.ones((2, 3), np.float32), name="first")
        second = ug.Parameter(np.ones((3,), np.float32), name="second")
        optimizer = make([first, second], lr=0.1)
        good, bad = np.ones((2, 3), np.float32), np.ones((1, 3), np.float32)

        @ug.function
        def apply(g1, g2):
            optimizer.apply([g1, g2])
            return ug.tensor(0.0)

        @ug.function
        def apply_one(g1):
            optimizer.apply([g1])
            return ug.tensor(0.0)

        apply(good, good[0])
        before = [first.numpy().copy(), second.numpy().copy()]
        with pytest.raises(ValueError, match=r"gradient of 'second' has shape \[1, 3\], but "
                                             r"the parameter has \[3\]"):
            apply(good, bad)
        np.testing.assert_array_equal(first.numpy(), before[0])
        np.testing.assert_array_equal(second.numpy(), before[1])
        before = [first.numpy().copy(), second.numpy().copy()]
        with pytest.raises(ValueError, match="got 1 gradients for 2 parameters"):
            apply_one(good)
        np.testing.assert_array_equal(first.numpy(), before[0])
        np.testing.assert_array_equal(second.numpy(), before[1])
