"""`Optimizer.apply` makes lr_p = cast(lr * lr_scale, dtype) once per (backend, lr version,
lr_scale, dtype) on eager targets and reuses it (no multiply when lr_scale is 1): the
updates stay bit for bit those of the documented formula, rounded in the parameter's dtype,
when lr changes between steps and parameters differ in lr_scale and dtype."""

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

RNG = np.random.default_rng(19)
INITIAL = [RNG.standard_normal((3, 2)).astype(np.float32),   # lr_scale 1
           RNG.standard_normal((5,)).astype(np.float32),     # lr_scale 0.25
           RNG.standard_normal((4,)).astype(np.float64)]     # lr_scale 1, float64
SCALES = [1.0, 0.25, 1.0]
GRADS = [[RNG.standard_normal(p.shape).astype(p.dtype) for p in INITIAL] for _ in range(4)]
RATES = [0.5, 0.5, 0.125, 0.3]  # opt.lr before each step


def by_formula() -> list:
    """p <- p - dtype(dtype(lr * lr_scale) * g), each op rounded in p's dtype (NumPy)."""
    params = [p.copy() for p in INITIAL]
    for lr, grads in zip(RATES, GRADS):
        for i, g in enumerate(grads):
            rate = params[i].dtype.type(np.float64(lr) * SCALES[i])
            params[i] = params[i] - rate * g
    return params


@pytest.mark.parametrize("target", TARGETS)
def test_sgd_with_changing_lr_and_scales_is_the_formula_bit_for_bit(target):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        params = [ug.Parameter(p, name=f"p{i}", lr_scale=s)
                  for i, (p, s) in enumerate(zip(INITIAL, SCALES))]
        opt = ug.optim.SGD(params, lr=RATES[0])

        @ug.function
        def step(g0, g1, g2):
            opt.apply([g0, g1, g2])
            return g0

        for lr, grads in zip(RATES, GRADS):
            opt.lr = lr
            step(*[ug.tensor(g) for g in grads])
        got = [p.numpy() for p in params]
    for g, want in zip(got, by_formula()):
        assert g.dtype == want.dtype
        np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("target", TARGETS)
def test_eager_steps_reuse_one_rate_per_lr_version_scale_and_dtype(target):
    # (Outside @ug.function the update runs op by op on every target, static ones included.)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        params = [ug.Parameter(p, lr_scale=s) for p, s in zip(INITIAL, SCALES)]
        opt = ug.optim.SGD(params, lr=0.5)
        grads = [ug.tensor(g) for g in GRADS[0]]
        opt.apply(grads)
        first = dict(opt._rates)
        opt.apply(grads)
        second = dict(opt._rates)
        opt.lr = 0.125
        opt.apply(grads)
        after_change = dict(opt._rates)
    # Three distinct (lr_scale, dtype) pairs, made on the first step, reused on the second.
    assert len(first) == 3
    assert second.keys() == first.keys()
    assert all(second[k] is first[k] for k in first)
    # A new lr is a new version: three new rates, with the new value.
    new = [k for k in after_change if k not in first]
    assert len(new) == 3
    values = {k[2:]: float(after_change[k].numpy()) for k in new}
    assert values == {(1.0, "float32"): 0.125, (0.25, "float32"): 0.03125,
                      (1.0, "float64"): 0.125}
