"""Flatten where the dims input_spec leaves open need two -1s in one reshape (one merged and
one kept, or two kept), on all 9 targets and onnxruntime:static: the reshape takes its sizes
when the program runs (the `reshape` record's `sizes` input, each open dim's size counted
then), so the program runs as eagerly, empty open dims and gradients included. (Before,
every static target refused them while tracing: "...needs every dim".)"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug

F = ug.nn.functional

CASES = {
    # name: (program, input_spec shape; its open dims need two -1s)
    "layer_batch_kept_rows_merged": (lambda x: ug.nn.Flatten()(x), (None, None, 4, 5)),
    "functional_two_kept": (lambda x: F.flatten(x, 2), (None, None, 4, 5)),
    "api_first_and_last_kept": (lambda x: ug.flatten(x, 1, 2), (None, 3, 4, None)),
    "api_two_merged_one_kept": (lambda x: ug.flatten(x, 0, 1), (None, None, 4, None)),
    "api_all_but_last_open": (lambda x: ug.flatten(x, 0, 1), (2, None, 4, None)),
}


def _input(shape, size):
    dims = [size if d is None else d for d in shape]
    return np.arange(int(np.prod(dims)), dtype=np.float32).reshape(dims) / 8 - 1


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("size", [3, 1, 0])
@pytest.mark.parametrize("case", list(CASES))
def test_flatten_needing_two_open_sizes_runs(target, case, size):
    program, shape = CASES[case]
    x = _input(shape, size)
    expected = run_on("numpy:eager", ug.function(program), x)
    out = run_on(target, ug.function(program, input_spec=[ug.Spec(shape, "float32")]), x)
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("size", [3, 0])
@pytest.mark.parametrize("case", list(CASES))
def test_its_gradient_agrees(target, case, size):
    program, shape = CASES[case]

    def loss(x):
        flat = program(x)
        return ug.sum(flat * flat * 0.5 + ug.cumsum(flat, axis=-1))

    x = _input(shape, size)
    expected = run_on("numpy:eager", ug.function(ug.grad(loss)), x)
    got = run_on(target, ug.function(ug.grad(loss), input_spec=[ug.Spec(shape, "float32")]),
                 x)
    assert got.shape == x.shape
    np.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_a_layer_after_it_sees_the_known_dims(target):
    """The kept known dims stay known to the trace: a Linear over the merged 20 builds."""
    ug.manual_seed(0)
    layer = ug.nn.Linear(20, 2)
    program = ug.function(lambda x: layer(F.flatten(x, 2)),
                          input_spec=[ug.Spec((None, None, 4, 5), "float32")])
    x = _input((None, None, 4, 5), 3)
    expected = run_on("numpy:eager", ug.function(lambda x: layer(F.flatten(x, 2))), x)
    np.testing.assert_allclose(run_on(target, program, x), expected, rtol=1e-5, atol=1e-6)
