"""The NumPy engine's fast VJP rules and fused cross-entropy (`fast_kernels.VJP_KERNELS`,
issue 19 item 4) equal the op records' rules bit for bit (signed zeros and NaNs included):
on each record's samples in float16, float32 and float64, and on the edge rows the record
documents (an infinite logit, a single class, an empty batch, reductions over several
axes). The float64 checker keeps the records' rules (`test_fast_kernels.py`)."""

import numpy as np
import pytest
from conftest import op_seed

from unigraph.ops import OPS
from unigraph.reference.fast_kernels import KERNELS, VJP_KERNELS, kernel, vjp_kernel

DTYPES = (np.float64, np.float32, np.float16)


def _same(got, want):
    if want is None:
        assert got is None
        return
    want = np.asarray(want)
    assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def _extra(name):
    """Edge inputs beyond the records' samples."""
    if name == "sparse_softmax_cross_entropy":
        inf_row = np.array([[np.inf, 0.0, 1.0], [0.5, -np.inf, 2.0], [-np.inf] * 3])
        return [((inf_row, np.array([1, 0, 2])), {}),
                ((np.array([[3.0], [-2.0]]), np.array([0, 0])), {}),  # one class: loss 0
                ((np.zeros((0, 4)), np.zeros(0, np.int64)), {})]
    if name != "mean":
        return []
    x = np.arange(24.0).reshape(2, 3, 4) / 7
    return [((x,), {"axis": (0, 2), "keepdims": False}), ((x,), {"axis": (1,), "keepdims": True}),
            ((x,), {"axis": None, "keepdims": False}), ((x[0, 0, :1],), {"axis": None,
                                                                        "keepdims": True})]


def _cases(name):
    op = OPS[name]
    samples = [(s.inputs, s.attrs) for s in op.samples(np.random.default_rng(op_seed(name)))]
    for index, (inputs, attrs) in enumerate(samples + _extra(name)):
        for dtype in DTYPES:
            cast = tuple(np.asarray(x, dtype) if np.asarray(x).dtype.kind == "f" else x
                         for x in inputs)
            yield pytest.param(name, cast, attrs, id=f"{name}-{index}-{np.dtype(dtype).name}")


@pytest.mark.parametrize(("name", "inputs", "attrs"),
                         [case for name in sorted(VJP_KERNELS) for case in _cases(name)])
def test_vjp_kernel_equals_the_records_rule(name, inputs, attrs):
    op = OPS[name]
    with np.errstate(all="ignore"):
        out = np.asarray(op.reference(*inputs, **attrs))
        g = (np.linspace(-1.5, 2.0, out.size).reshape(out.shape) if out.size
             else np.zeros(out.shape)).astype(out.dtype)
        want = op.vjp(g, list(inputs), out, **attrs)
        got = vjp_kernel(name, op)(g, list(inputs), out, **attrs)
    assert len(got) == len(want)
    for one, other in zip(got, want):
        _same(one, other)


@pytest.mark.parametrize(("inputs", "attrs"), [
    pytest.param(inputs, attrs, id=f"{index}-{np.dtype(dtype).name}")
    for index, (inputs, attrs) in enumerate(_extra("sparse_softmax_cross_entropy"))
    for dtype in DTYPES for inputs in [(inputs[0].astype(dtype), inputs[1])]])
def test_fused_cross_entropy_equals_the_reference_on_edge_rows(inputs, attrs):
    name = "sparse_softmax_cross_entropy"
    assert name in KERNELS
    with np.errstate(all="ignore"):
        want = OPS[name].reference(*inputs)
    with np.errstate(all="raise"):  # no warning escapes the kernel where the record has none
        got = kernel(name, OPS[name])(*inputs)
    _same(got, want)


def test_a_replaced_record_keeps_its_own_vjp():
    assert vjp_kernel("mean", OPS["mean"]) is VJP_KERNELS["mean"]
    assert vjp_kernel("mean", OPS["sum"]) is None
    assert vjp_kernel("tanh", OPS["tanh"]) is None
