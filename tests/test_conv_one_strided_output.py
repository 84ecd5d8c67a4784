"""conv2d with a stride above 1 along an axis that has one output, on all 9 targets,
forward and gradient, against numpy:eager in float64.

TF 2.21's CPU Conv2D gives float32 values of uninitialised memory there (stride (1, 2),
one output column, one input channel, a batch of 2; eager and in graphs). Found by the
random-program tester (seed 5007, tensorflow:eager: 1.058 and 1e29 where the reference
was -0.0075). The TF lowering now convolves with stride 1 along that axis and keeps the
first output (the same window); where `input_spec` leaves the height or width open, a
`tf.cond` on the output count when the graph runs (before it, tensorflow:static and
tensorflow:function ran TF's kernel as it is there: a silent wrong answer).
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
OPEN = {  # which dims of x input_spec leaves open
    "no dim": (),
    "height and width": (2, 3),
    "every dim": (0, 1, 2, 3),
}


def _spec(arrays, x_axes):
    opened = [x_axes] + [()] * (len(arrays) - 1)
    return [ug.Spec(tuple(None if axis in axes else d for axis, d in enumerate(a.shape)),
                    str(a.dtype)) for a, axes in zip(arrays, opened)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("opened", list(OPEN))
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("target", TARGETS)
def test_conv2d_with_one_strided_output(target, case, opened, dtype):
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

    def both(spec):
        return ug.function(conv, input_spec=spec), ug.function(
            lambda *xs: ug.grad(loss, argnums=tuple(range(len(xs))))(*xs), input_spec=spec)

    wide = [a.astype(np.float64) for a in arrays]
    with ug.use_backend("numpy", "eager"):
        forward, grad = both(None)
        out = forward(*wide).numpy()
        weights = np.cos(np.arange(out.size) + 0.5).reshape(out.shape)
        expected = [out] + [g.numpy() for g in grad(*wide)]
    weights = weights.astype(dtype)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        forward, grad = both(_spec(arrays, OPEN[opened]))
        # three runs: uninitialised memory may hold the right values once
        runs = [[forward(*arrays).numpy()] + [g.numpy() for g in grad(*arrays)]
                for _ in range(3)]
    for got in runs:
        for name, a, e in zip(["output", "grad x", "grad w", "grad bias"], got, expected):
            assert a.shape == e.shape, name
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-4, err_msg=name)
