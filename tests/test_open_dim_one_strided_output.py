"""conv2d with a stride above 1 along an axis that has one output, where `input_spec`
leaves that axis open (its size known only when the program runs), on all 9 targets,
forward and gradient, against numpy:eager in float64.

TF 2.21's CPU Conv2D gives float32 values of uninitialised memory there (the quirk of
tests/test_conv_one_strided_output.py). Its workaround read the spatial sizes from the
trace, so where the height or width was open, tensorflow:static and tensorflow:function ran
TF's kernel as it is and returned those values (a silent wrong answer).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS
from test_conv_one_strided_output import CASES
from test_open_dim_images import _run

import unigraph as ug
from unigraph.config import Target

OPEN = {  # which dims of x the spec leaves open
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
def test_conv2d_with_one_strided_output_open(target, case, opened, dtype):
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


POOLS = {  # x shape, kernel, attrs: one output along a strided axis
    "stride (1, 2), one column": ((2, 1, 4, 4), (1, 3), {"stride": (1, 2)}),
    "stride (2, 2), one output, padded": ((3, 2, 3, 3), (3, 3), {"stride": (2, 2),
                                                                "padding": (1, 1)}),
    "stride (2, 1), one row, dilated": ((2, 1, 5, 4), (2, 2), {"stride": (2, 1),
                                                              "dilation": (3, 1)}),
}


# avg_pool2d takes no dilation
POOL_CASES = [(op, case) for op in ("max_pool2d", "avg_pool2d") for case in POOLS
              if op == "max_pool2d" or "dilation" not in POOLS[case][2]]


@pytest.mark.parametrize("opened", list(OPEN))
@pytest.mark.parametrize("op, case", POOL_CASES)
@pytest.mark.parametrize("target", TARGETS)
def test_pools_with_one_strided_output_open(target, op, case, opened):
    x_shape, kernel, attrs = POOLS[case]
    x = np.random.default_rng(8).normal(size=x_shape).astype(np.float32)
    pool = getattr(ug, op)
    _run(lambda x: pool(x, kernel, **attrs), [x], [OPEN[opened]], target)


@pytest.mark.parametrize("opened", list(OPEN))
@pytest.mark.parametrize("target", TARGETS)
def test_global_average_pooling_with_open_dims(target, opened):
    """AdaptiveAvgPool2D(1) (a mean over H and W) of open H and W: every static target
    refused it with a ShapeError while eager targets ran it."""
    x = np.random.default_rng(9).normal(size=(2, 3, 3, 5)).astype(np.float32)
    _run(lambda x: ug.nn.AdaptiveAvgPool2D(1)(x), [x], [OPEN[opened]], target)


@pytest.mark.parametrize("target", TARGETS)
def test_adaptive_pooling_to_more_than_one_cell_needs_known_spatial_dims(target):
    """Its windows depend on H and W: refused while tracing, naming the line, where they
    are open (eager targets know them and run it)."""
    x = np.random.default_rng(9).normal(size=(2, 3, 4, 6)).astype(np.float32)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        run = ug.function(lambda x: ug.nn.AdaptiveAvgPool2D((2, 3))(x),
                          input_spec=[ug.Spec((2, 3, None, None), "float32")])
        if t.mode == "eager":
            assert run(x).numpy().shape == (2, 3, 2, 3)
            return
        with pytest.raises(ug.ShapeError, match="test_open_dim_one_strided_output.py:.*input_spec"):
            run(x)
