"""x[mask] with a NumPy boolean mask over dims `input_spec` leaves open, on all 9 targets
and onnxruntime:static: the mask's shape gives those dims their sizes (checked when the
program runs), so every target selects what eager does, gradients included.

Found beside the random tester's `x[mask]` draw: every static target refused it while
tracing, saying that a mask of shape [3] "does not match" the leading dims of a [None, 2]
tensor (they did match, when the program ran); eager targets ran it.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, INFERENCE_TARGETS

import unigraph as ug
from unigraph.config import Target

RNG = np.random.default_rng(7)
CASES = {  # name: (x's shape, its input_spec shape, the mask)
    "rows of an open batch": ((3, 2), (None, 2), np.array([True, False, True])),
    "every dim open": ((4, 3), (None, None), np.array([False, True, True, True])),
    "a 2-d mask, the rest open": ((2, 3, 2), (None, 3, None),
                                  np.array([[True, False, True], [False, False, True]])),
    "nothing selected": ((3, 2), (None, 2), np.array([False, False, False])),
}


def _select(mask):
    def select(x, w):
        return x[mask] * w
    return select


def _run(name, target, grads):
    shape, spec, mask = CASES[name]
    x = RNG.standard_normal(shape).astype(np.float32)
    selected = x[mask]
    w = RNG.standard_normal(selected.shape[1:]).astype(np.float32)
    fn = _select(mask)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        specs = [ug.Spec(spec, "float32"), ug.Spec(w.shape, "float32")]
        got = ug.function(fn, input_spec=specs)(x, w).numpy()
        np.testing.assert_allclose(got, selected * w, rtol=1e-6)
        if grads:
            loss = ug.function(ug.grad(lambda x, w: ug.sum(fn(x, w) * 2.0), argnums=(0, 1)),
                               input_spec=specs)
            gx, gw = loss(x, w)
            want = np.zeros_like(x)
            want[mask] = 2.0 * w
            np.testing.assert_allclose(gx.numpy(), want, rtol=1e-6)
            np.testing.assert_allclose(gw.numpy(), 2.0 * selected.sum(axis=0), rtol=1e-5,
                                       atol=1e-6)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_numpy_mask_over_open_dims_selects_on_every_target(target, name):
    _run(name, target, grads=target not in INFERENCE_TARGETS)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_mask_of_another_size_than_the_run_is_an_error_naming_the_line(target):
    """The open dim is 4 when the program runs, the mask has 3 entries: eager refuses the
    call, a static target when the program runs, both naming the `x[mask]` line."""
    mask = np.array([True, False, True])
    x = np.ones((4, 2), np.float32)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        fn = ug.function(lambda x: x[mask] * 2.0, input_spec=[ug.Spec((None, 2), "float32")])
        with pytest.raises((IndexError, ug.ShapeError),
                           match=r"mask.*test_open_dim_mask_select.py:\d+"):
            fn(x).numpy()
