"""conv2d whose weight is an input with dims left open by `input_spec`, on every target
that runs forward (the 9 and onnxruntime:static), float32 and float64.

onnxruntime:static writes a float64 conv2d as an im2col composition (ORT has no float64
Conv: quirk table), which read the weight's out channels while tracing and raised a raw
TypeError (None // int) where input_spec left them open (found by the random-program tester
with open dims, seed 5004). Out channels are now the size each Reshape infers; an open
kernel size or input channel count there is a BackendError naming the line and the fix.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import BackendError

RNG = np.random.default_rng(3)
X = RNG.normal(size=(2, 2, 6, 4))
W = RNG.normal(size=(3, 2, 2, 2))
B = RNG.normal(size=(3,))


def conv(x, w, b):
    return ug.conv2d(x, w, b, stride=(1, 2), padding=(0, 1))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_conv_of_a_weight_with_open_out_channels(target, dtype):
    t = Target.parse(target)
    arrays = [a.astype(dtype) for a in (X, W, B)]
    with ug.use_backend("numpy", "eager"):
        want = conv(*(a.astype(np.float64) for a in arrays)).numpy()
    spec = [ug.Spec((None, 2, 6, 4), dtype), ug.Spec((None, 2, 2, 2), dtype),
            ug.Spec((None,), dtype)]
    with ug.use_backend(t.backend, t.mode):
        got = ug.function(conv, input_spec=spec)(*arrays).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12,
                               atol=1e-5 if dtype == "float32" else 1e-12)


def test_a_float64_conv_of_an_open_kernel_size_names_the_fix_on_onnxruntime():
    spec = [ug.Spec((None, 2, 6, 4), "float64"), ug.Spec((3, 2, None, 2), "float64"),
            ug.Spec((3,), "float64")]
    with ug.use_backend("onnxruntime", "static"):
        f = ug.function(conv, input_spec=spec)
        with pytest.raises(BackendError, match=r"float64 conv2d at .*"
                                              r"test_open_dim_conv_weights\.py:\d+: .*kernel size"):
            f(X, W, B)


@pytest.mark.parametrize("groups", [1, 3])
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_an_empty_batch_of_a_conv_of_a_weight_with_open_out_channels(target, groups):
    """No rows: the im2col form's last Reshape could not infer the out channels from an
    empty product (-1 beside a 0; random tester with open dims, seed 5017)."""
    x, w, b = np.zeros((0, 3, 4, 5)), RNG.normal(size=(3, 3 // groups, 1, 3)), np.ones(3)
    spec = [ug.Spec((None, 3, 4, 5), "float64"), ug.Spec((None, 3 // groups, 1, 3), "float64"),
            ug.Spec((None,), "float64")]

    def dilated(x, w, b):
        return ug.conv2d(x, w, b, stride=(2, 1), dilation=(2, 2), groups=groups)

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        got = ug.function(dilated, input_spec=spec)(x, w, b).numpy()
    assert got.shape == (0, 3, 2, 1)
