"""The NumPy engine's fast kernels (unigraph.reference.fast_kernels) equal the op records'
references, which stay the definitions: on every sample of each record, in float32 and
float64, and on convolutions with stride, padding, dilation and bias. The engine runs them
on numpy:eager and numpy:static; the float64 checker does not."""

import numpy as np
import pytest
from conftest import floats_as, op_seed

import unigraph as ug
from unigraph.ops import OPS
from unigraph.reference import float64
from unigraph.reference.fast_kernels import KERNELS, kernel


def _cases(name):
    op = OPS[name]
    for index, sample in enumerate(op.samples(np.random.default_rng(op_seed(name)))):
        for dtype in (np.float64, np.float32):
            yield pytest.param(name, floats_as(dtype, sample.inputs), sample.attrs,
                               id=f"{name}-{index}-{np.dtype(dtype).name}")


@pytest.mark.parametrize(("name", "inputs", "attrs"),
                         [case for name in sorted(KERNELS) for case in _cases(name)])
def test_kernel_equals_the_reference_on_the_records_samples(name, inputs, attrs):
    want = np.asarray(OPS[name].reference(*inputs, **attrs))
    got = kernel(name, OPS[name])(*inputs, **attrs)
    assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape
    if name == "conv2d":  # BLAS sums in its own order
        np.testing.assert_allclose(got, want, rtol=1e-5 if want.dtype == np.float32 else 1e-12,
                                   atol=1e-6 if want.dtype == np.float32 else 1e-12)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("stride", "padding", "dilation", "bias"), [
    ((1, 1), (1, 1), (1, 1), True), ((2, 1), (0, 2), (1, 1), False),
    ((1, 2), (1, 0), (2, 1), True), ((3, 3), (2, 2), (2, 2), False),
])
def test_conv2d_kernel_against_a_float64_loop(dtype, stride, padding, dilation, bias):
    """Hand-written loops in float64 (not the reference): every output element."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 9, 8)).astype(dtype)
    w = rng.standard_normal((4, 3, 3, 2)).astype(dtype)
    b = rng.standard_normal(4).astype(dtype) if bias else None
    got = KERNELS["conv2d"](x, w, b, stride=stride, padding=padding, dilation=dilation,
                            groups=1)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    oh = (xp.shape[2] - dilation[0] * 2 - 1) // stride[0] + 1
    ow = (xp.shape[3] - dilation[1] * 1 - 1) // stride[1] + 1
    want = np.zeros((2, 4, oh, ow))
    for i in range(oh):
        for j in range(ow):
            for ki in range(3):
                for kj in range(2):
                    pixel = xp[:, :, i * stride[0] + ki * dilation[0],
                               j * stride[1] + kj * dilation[1]]  # [N, C]
                    want[:, :, i, j] += pixel @ w[:, :, ki, kj].astype(np.float64).T
    if bias:
        want += b.astype(np.float64)[:, None, None]
    assert got.dtype == dtype and got.shape == want.shape and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-5 if dtype == np.float32 else 1e-12)


def test_a_replaced_record_keeps_its_own_reference():
    """A test's deliberately wrong op table is not bypassed by a kernel."""
    assert kernel("add", OPS["add"]) is KERNELS["add"]
    assert kernel("add", OPS["sub"]) is None
    assert kernel("tanh", OPS["tanh"]) is None


def test_the_float64_checker_runs_the_definitions(monkeypatch):
    """The checker's float64 interpreter calls the records' references, never a kernel;
    the engine's targets call the kernels."""
    monkeypatch.setitem(KERNELS, "add", lambda x, y: np.asarray(x + y + 1))

    @ug.function
    def f(x, y):
        return x + y

    ones = np.ones(2, np.float32)
    with ug.use_backend("numpy", "static"):
        graph = f.trace(ones, ones)
        engine = f(ones, ones).numpy()
    np.testing.assert_array_equal(float64.outputs(graph, [ones, ones])[0], [2.0, 2.0])
    values, _ = float64.cotangents(graph, [ones, ones], ["ones"])
    np.testing.assert_array_equal(values[graph.outputs[0].id], [2.0, 2.0])
    np.testing.assert_array_equal(engine, [3.0, 3.0])  # the (patched) kernel ran
