"""conv2d with a stride above 1 along an axis that has one output, on all 9 targets,
forward and gradient, against numpy:eager in float64.

TF 2.21's CPU Conv2D gives float32 values of uninitialised memory there (stride (1, 2),
one output column, one input channel, a batch of 2; eager and in graphs). Found by the
random-program tester (seed 5007, tensorflow:eager: 1.058 and 1e29 where the reference
was -0.0075). The TF lowering now convolves with stride 1 along that axis and keeps the
first output (the same window).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

CASES = {  # x shape, w shape, attrs
    "stride (1, 2), one column": ((2, 1, 4, 4), (2, 1, 1, 3),
                                  {"stride": (1, 2), "padding": (0, 0)}),
    "dilated, padded": ((2, 1, 4, 4), (2, 1, 1, 3),
                        {"stride": (1, 2), "padding": (1, 0), "dilation": (2, 1)}),
    "stride (2, 1), one row": ((2, 1, 3, 5), (3, 1, 3, 2), {"stride": (2, 1), "padding": (0, 0)}),
    "stride (2, 2), one output, bias": ((3, 1, 3, 3), (2, 1, 3, 3),
                                        {"stride": (2, 2), "padding": (0, 0), "bias": True}),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("target", TARGETS)
def test_conv2d_with_one_strided_output(target, case, dtype):
    x_shape, w_shape, attrs = CASES[case]
    attrs = dict(attrs)
    rng = np.random.default_rng(7)
    arrays = [rng.normal(size=x_shape).astype(dtype), rng.normal(size=w_shape).astype(dtype)]
    if attrs.pop("bias", False):
        arrays.append(rng.normal(size=(w_shape[0],)).astype(dtype))
    weights = None

    def conv(*xs):
        return ug.conv2d(*xs, **attrs)

    def loss(*xs):
        return ug.sum(conv(*xs) * weights)

    def both():
        return ug.function(conv), ug.function(
            lambda *xs: ug.grad(loss, argnums=tuple(range(len(xs))))(*xs))

    wide = [a.astype(np.float64) for a in arrays]
    with ug.use_backend("numpy", "eager"):
        forward, grad = both()
        out = forward(*wide).numpy()
        weights = np.cos(np.arange(out.size) + 0.5).reshape(out.shape)
        expected = [out] + [g.numpy() for g in grad(*wide)]
    weights = weights.astype(dtype)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        forward, grad = both()
        got = [forward(*arrays).numpy()] + [g.numpy() for g in grad(*arrays)]
    for name, a, e in zip(["output", "grad x", "grad w", "grad bias"], got, expected):
        assert a.shape == e.shape, name
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-4, err_msg=name)
