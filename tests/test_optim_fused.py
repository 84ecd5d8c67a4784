"""`ug.optim.Adam(fused=True)`: the fused update `adam_update` (`unigraph.ops.updates`).

Its reference is the documented formula, bit for bit the hand-written float32 steps of
test_optim_same_bits. On a backend that does not lower it, fused=True runs the formula:
the bits of fused=False. On every target, fused=True agrees with the float64 formula
after several steps, also when `fused` changes between steps of one compiled step function
(it retraces: `fused` is one of the numbers the trace bakes in).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS
from test_optim_same_bits import STEPS, _gradients, _initial, adam_by_hand

import unigraph as ug
from unigraph.config import Target
from unigraph.in_place import lowers
from unigraph.ops.updates import ADAM_UPDATE
from unigraph.plugins import get_backend


def test_the_reference_is_the_formula_bit_for_bit():
    params = _initial()
    ms = [np.zeros_like(p) for p in params]
    vs = [np.zeros_like(p) for p in params]
    for step in range(STEPS):
        for i, g in enumerate(_gradients(step)):
            params[i], ms[i], vs[i] = ADAM_UPDATE.reference(
                params[i], g, ms[i], vs[i], np.float64(1e-3), np.float64(step + 1),
                beta1=0.9, beta2=0.999, eps=1e-8)
    for got, want in zip(params, adam_by_hand(_initial())):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want)


def test_the_update_checks_its_operands():
    spec = ug.ops.TensorSpec((3,), "float32")
    scalar = ug.ops.TensorSpec((), "float64")
    attrs = {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8}
    assert ADAM_UPDATE.infer(spec, spec, spec, spec, scalar, scalar, **attrs) == (spec,) * 3
    with pytest.raises(ug.ShapeError, match="m .* must have param's shape"):
        ADAM_UPDATE.infer(spec, spec, ug.ops.TensorSpec((4,), "float32"), spec, scalar,
                          scalar, **attrs)
    with pytest.raises(ug.ShapeError, match="lr .* must be a float64 scalar"):
        ADAM_UPDATE.infer(spec, spec, spec, spec, ug.ops.TensorSpec((), "float32"), scalar,
                          **attrs)


def _trained(target, fused):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        params = [ug.Parameter(p, name=f"p{i}") for i, p in enumerate(_initial())]
        optimizer = ug.optim.Adam(params, lr=1e-3, fused=fused)

        @ug.function
        def apply(*grads):
            optimizer.apply(list(grads))
            return ug.tensor(0.0)

        for step in range(STEPS):
            apply(*_gradients(step))
        return [p.numpy().copy() for p in params], optimizer.state_dict()


@pytest.mark.parametrize("target", TARGETS)
def test_fused_agrees_with_the_formula(target):
    """Where the backend lowers `adam_update`, its kernels (other rounding, within the
    float32 budget); elsewhere the formula itself (the same bits). The state dict has the
    same keys, shapes and dtypes either way."""
    fused, fused_state = _trained(target, True)
    plain, plain_state = _trained(target, False)
    assert {k: (np.shape(v), np.asarray(v).dtype) for k, v in fused_state.items()} == \
        {k: (np.shape(v), np.asarray(v).dtype) for k, v in plain_state.items()}
    native = lowers(get_backend(*target.split(":")), "adam_update")
    for i, (f, p) in enumerate(zip(fused, plain)):
        assert f.dtype == np.float32
        if native:
            np.testing.assert_allclose(f, p, rtol=1e-5, atol=1e-6, err_msg=f"p{i}")
        else:
            np.testing.assert_array_equal(f, p, err_msg=f"p{i}")
    for key, value in fused_state.items():
        if native:
            np.testing.assert_allclose(value, plain_state[key], rtol=1e-5, atol=1e-9,
                                       err_msg=key)
        else:
            np.testing.assert_array_equal(value, plain_state[key], err_msg=key)


def test_fused_must_be_a_bool():
    with pytest.raises(TypeError, match="fused must be True or False"):
        ug.optim.Adam([ug.Parameter(np.zeros(2, np.float32))], fused="yes")
