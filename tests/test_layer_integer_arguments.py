"""Layer constructors take integral arguments exactly: padding=1.5 is refused (it used to be
truncated to 1, a different model than the one asked for), 1.0 and NumPy ints mean 1."""

import numpy as np
import pytest

import unigraph as ug
from tests.conftest import TARGETS, run_on

FRACTIONAL = [
    (ug.nn.Conv2D, (2, 3, 3), {"padding": 1.5}),
    (ug.nn.Conv2D, (2, 3, 3), {"stride": (1, 2.5)}),
    (ug.nn.Conv2D, (2, 4, 3), {"groups": 1.5}),
    (ug.nn.Conv1D, (2, 3, 3), {"padding": 0.5}),
    (ug.nn.ConvTranspose2D, (2, 3, 3), {"stride": 1.5}),
    (ug.nn.MaxPool2D, (2.5,), {}),
    (ug.nn.AvgPool2D, (2,), {"stride": 1.5}),
]


@pytest.mark.parametrize("layer, args, kwargs", FRACTIONAL)
def test_a_fractional_argument_is_refused_and_named(layer, args, kwargs):
    with pytest.raises(ValueError, match="must be an int"):
        layer(*args, **kwargs)


@pytest.mark.parametrize("target", TARGETS)
def test_integral_forms_build_the_same_conv(target):
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 5)).astype(np.float32)
    ug.manual_seed(0)
    plain = ug.nn.Conv2D(2, 3, 3, stride=1, padding=1)
    ug.manual_seed(0)
    spelled = ug.nn.Conv2D(2, 3, np.int64(3), stride=(1.0, 1), padding=np.int32(1))
    assert (spelled.stride, spelled.padding, spelled.kernel_size) == ((1, 1), (1, 1), (3, 3))
    want = run_on(target, ug.function(plain), x)
    got = run_on(target, ug.function(spelled), x)
    assert np.asarray(want).shape == (1, 3, 5, 5)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
