"""ug.scatter / ug.scatter_add with indices of rank 2 (or 0) where the updates' layout
along the positions needs two dims input_spec leaves open (of x, or of x and the indices),
on all 9 targets and onnxruntime:static: the updates are laid out by a reshape to sizes
counted when the program runs (`merge_axes`), so it runs as eagerly, gradients included,
and an index outside the run's size is take's IndexOutOfRangeError naming the line. (Before,
every static target refused it while tracing: "...needs every dim".)"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug

BLOCK = [[0, 2], [1, 2]]  # rank-2 indices along axis 1; 2 repeats

CASES = {
    # name: (program of x, idx, u; input_spec shapes of x, idx, u)
    "open_lead_and_trail_replace": (
        lambda x, idx, u: ug.scatter(x, np.array(BLOCK), u, axis=1),
        ((None, 3, None), (2, 2), (1, 1, 1, 1))),
    "open_lead_and_trail_add": (
        lambda x, idx, u: ug.scatter_add(x, np.array(BLOCK), u * 2.0, axis=1),
        ((None, 3, None), (2, 2), (1, 1, 1, 1))),
    "open_x_and_open_indices_add": (
        lambda x, idx, u: ug.scatter_add(x, idx, u, axis=1),
        ((None, 3, 2), (None, 2), (1, 1, 1, 1))),
    "open_x_and_open_indices_replace": (
        lambda x, idx, u: ug.scatter(x, idx, u, axis=1),
        ((None, 3, 2), (None, 2), (1, 1, 1, 1))),
    "scalar_index_two_open": (
        lambda x, idx, u: ug.scatter(x, np.array(1), ug.reshape(u, (1, 1)), axis=1),
        ((None, 3, None), (2, 2), (1, 1, 1, 1))),
}


def _inputs(idx=BLOCK):
    x = np.arange(2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2) / 4 - 1
    return x, np.array(idx, np.int64), np.array(0.75, np.float32).reshape(1, 1, 1, 1)


def _specs(shapes):
    return [ug.Spec(shapes[0], "float32"), ug.Spec(shapes[1], "int64"),
            ug.Spec(shapes[2], "float32")]


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("case", list(CASES))
def test_scatter_runs_as_eagerly(target, case):
    program, shapes = CASES[case]
    expected = run_on("numpy:eager", ug.function(program), *_inputs())
    out = run_on(target, ug.function(program, input_spec=_specs(shapes)), *_inputs())
    assert out.shape == expected.shape == (2, 3, 2)
    np.testing.assert_array_equal(out, expected)
    assert not np.array_equal(out, _inputs()[0])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", list(CASES))
def test_gradients_of_x_and_the_updates_agree(target, case):
    program, shapes = CASES[case]

    def loss(x, idx, u):
        out = program(x * x, idx, u * u)
        return ug.sum(out * ug.cumsum(out, axis=1))

    grads = ug.grad(loss, argnums=(0, 2))
    expected = run_on("numpy:eager", ug.function(grads), *_inputs())
    got = run_on(target, ug.function(grads, input_spec=_specs(shapes)), *_inputs())
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    assert np.abs(expected[1]).sum() > 0


def scatter_beyond(x, idx, u):
    return ug.scatter_add(x, idx, u, axis=1)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_an_index_outside_the_run_size_is_eagers_error(target):
    line = f"{__file__.rsplit('/', 1)[-1]}:{scatter_beyond.__code__.co_firstlineno + 1}"
    shapes = CASES["open_x_and_open_indices_add"][1]
    with pytest.raises(IndexError, match=line):
        run_on(target, ug.function(scatter_beyond, input_spec=_specs(shapes)),
               *_inputs([[0, 2], [1, 3]]))
