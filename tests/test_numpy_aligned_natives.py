"""A tensor of 4 KiB or more made from a C-contiguous array holds a native on a 64-byte
boundary on the NumPy targets (`reference.aligned_copy`: BLAS reads an operand 16 bytes
off a boundary ~40% slower); its values are the same bits on all 9 targets (a product of
it NumPy's own on the NumPy targets), and the caller's array stays its own."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

RNG = np.random.default_rng(64)
LARGE = RNG.normal(size=(100, 784)).astype(np.float32)  # 313.6 kB
SMALL = RNG.normal(size=(3, 4)).astype(np.float32)


def _misplaced(array: np.ndarray) -> np.ndarray:
    """A copy of `array` whose data starts 16 bytes past a 64-byte boundary."""
    buffer = np.empty(array.nbytes + 80, np.uint8)
    offset = (-buffer.ctypes.data % 64) + 16
    out = buffer[offset:offset + array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("target", TARGETS)
def test_a_large_tensor_is_aligned_and_the_same(target, layout):
    x = _misplaced(LARGE) if layout == "C" else np.asfortranarray(LARGE)
    w = RNG.normal(size=(784, 10)).astype(np.float32)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        tensor = ug.tensor(x)
        product = ug.function(lambda a, b: ug.matmul(a, b))(tensor, ug.tensor(w))
        np.testing.assert_array_equal(tensor.numpy(), LARGE)
        if t.backend == "numpy":  # NumPy's own product, bit for bit
            np.testing.assert_array_equal(product.numpy(), np.matmul(LARGE, w))
        else:
            np.testing.assert_allclose(product.numpy(), np.matmul(LARGE, w), rtol=1e-5,
                                       atol=1e-4)
        native = tensor.native_for(tensor._backend) if t.backend == "numpy" else None
    if native is not None:
        assert native.ctypes.data % 64 == 0 or layout == "F", native.ctypes.data % 64
        assert native.flags.f_contiguous == (layout == "F")
        assert not np.shares_memory(native, x)
    x[0, 0] = 7.0  # the caller's array is its own
    np.testing.assert_array_equal(tensor.numpy()[0, 0], LARGE[0, 0])


@pytest.mark.parametrize("target", TARGETS)
def test_a_small_tensor_is_the_same(target):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        tensor = ug.tensor(SMALL)
        np.testing.assert_array_equal((tensor * 2.0).numpy(), SMALL * np.float32(2.0))
