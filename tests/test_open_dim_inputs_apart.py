"""Inputs whose dims `input_spec` leaves open are sizes of their own, on every target that
runs forward (the 9 and onnxruntime:static), and in the saved `.onnx` file.

The ONNX model named dim 0 of every input `batch`: one dim_param, which ONNX reads as one
size shared by all of them. ONNX Runtime's memory planner then reused a buffer of one
input's size for the other's (`max(a)` and `max(b)` of 4 and 1 rows: "Shape mismatch
attempting to re-use buffer. {1,2} != {4,2}"; random tester, seed 5016, max depth 0).
Every open dim of every input now has a name no other dim has.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from conftest import FORWARD_TARGETS

import unigraph as ug
from unigraph.config import Target

RNG = np.random.default_rng(16)
A = RNG.normal(size=(4, 2)).astype(np.float32)
B = RNG.normal(size=(1, 2)).astype(np.float32)
C = RNG.normal(size=(3, 5)).astype(np.float32)
ROW = RNG.normal(size=(1, 3)).astype(np.float32)
SQUARE = RNG.normal(size=(3, 3)).astype(np.float32)
OPEN2 = ug.Spec((None, 2), "float32")


def two_maxima(a, b):
    return ug.max(a, axis=1, keepdims=True), ug.max(b, axis=1, keepdims=True)


def two_sums(a, b):
    return ug.sum(a * 2.0, axis=0), ug.sum(b - 1.0, axis=1)


def both_dims(x):
    return ug.exp(x) * 0.5, ug.max(x, axis=0), ug.max(x, axis=1)


def broadcast(a, b):
    return ug.exp(a + b), ug.max(a, axis=1, keepdims=True), ug.max(b, axis=1, keepdims=True)


# name -> (function, input_spec, inputs)
CASES = {
    "the reproducer": (two_maxima, [OPEN2, OPEN2], (A, B)),
    "two sums": (two_sums, [OPEN2, OPEN2], (A, B)),
    "different open dims": (two_sums, [OPEN2, ug.Spec((3, None), "float32")], (A, C)),
    "one input, two open dims": (both_dims, [ug.Spec((None, None), "float32")], (C,)),
    "rows that broadcast": (broadcast, [ug.Spec((None, 3), "float32")] * 2, (SQUARE, ROW)),
    "rows that are equal": (broadcast, [ug.Spec((None, 3), "float32")] * 2,
                            (SQUARE, SQUARE[::-1].copy())),
    "every dim open": (broadcast, [ug.Spec((None, None), "float32")] * 2, (ROW, SQUARE)),
}


def outputs(fn, spec, inputs) -> list:
    out = ug.function(fn, input_spec=spec)(*inputs)
    return [np.asarray(o.numpy()) for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_open_dims_of_inputs_are_sizes_of_their_own(target, case):
    fn, spec, inputs = CASES[case]
    with ug.use_backend("numpy", "eager"):
        want = outputs(fn, spec, inputs)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        got = outputs(fn, spec, inputs)
    assert [g.shape for g in got] == [w.shape for w in want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_the_saved_onnx_file_names_each_open_dim_apart(tmp_path):
    path = ug.onnx.export(two_maxima, A, B, path=tmp_path / "two.onnx",
                          input_spec=[OPEN2, OPEN2])
    model = onnx.load(path)
    dims = [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
            for i in model.graph.input]
    assert dims == [["a_0", 2], ["b_0", 2]]
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = session.run(None, {"a": A, "b": B})
    np.testing.assert_array_equal(got[0], A.max(axis=1, keepdims=True))
    np.testing.assert_array_equal(got[1], B.max(axis=1, keepdims=True))


def test_one_input_with_an_open_dim_0_keeps_batch(tmp_path):
    path = ug.onnx.export(both_dims, C, path=tmp_path / "one.onnx",
                          input_spec=[ug.Spec((None, None), "float32")])
    (x,) = onnx.load(path).graph.input
    assert [d.dim_param for d in x.type.tensor_type.shape.dim] == ["batch", "x_1"]
