"""Flatten with a dim that input_spec leaves open, on all 9 targets: `ug.nn.Flatten` /
`F.flatten` of a batch of images, `ug.flatten` of any axes. One open dim is -1 in the
reshape (the merged axis, or its own place), so the program runs as eagerly, gradients
included; so are several open dims all among the merged axes; open dims that would need two
-1s run too (tests/test_open_dim_flatten_kept.py). (Before, every static target refused
`ug.nn.Flatten()` of an open batch: a reshape to [None, -1]; then any two open dims.)"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug

F = ug.nn.functional
X = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5) / 100


def _spec(*shape):
    return [ug.Spec(shape, "float32")]


CASES = {
    # name: (program, input_spec shape, expected from X)
    "layer_open_batch": (lambda x: ug.nn.Flatten()(x), (None, 3, 4, 5), X.reshape(2, 60)),
    "functional_open_batch": (lambda x: F.flatten(x, 2), (None, 3, 4, 5), X.reshape(2, 3, 20)),
    "functional_open_merged": (lambda x: F.flatten(x), (2, None, 4, 5), X.reshape(2, 60)),
    "functional_negative_axis": (lambda x: F.flatten(x, -2), (None, 3, 4, 5),
                                 X.reshape(2, 3, 20)),
    "api_all_open_batch": (lambda x: ug.flatten(x), (None, 3, 4, 5), X.reshape(-1)),
    "api_middle_open_last": (lambda x: ug.flatten(x, 1, 2), (2, 3, 4, None),
                             X.reshape(2, 12, 5)),
    "api_middle_open_merged": (lambda x: ug.flatten(x, 1, 2), (2, None, 4, 5),
                               X.reshape(2, 12, 5)),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", list(CASES))
def test_flatten_with_one_open_dim_runs(target, case):
    program, shape, expected = CASES[case]
    out = run_on(target, ug.function(program, input_spec=_spec(*shape)), X)
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("target", TARGETS)
def test_a_cnn_head_with_an_open_batch_trains(target):
    """Conv2D -> Flatten -> Linear with an open batch: the gradient of the weights agrees
    with the same program traced with the batch known."""
    ug.manual_seed(0)
    model = ug.nn.Sequential(ug.nn.Conv2D(3, 2, 3, padding=1), ug.nn.Flatten(),
                             ug.nn.Linear(2 * 4 * 5, 3))

    def loss(x):
        return ug.mean(model(x) ** 2)

    def grads(x):
        return ug.grad(loss, wrt=model.parameters())(x)

    open_batch = run_on(target, ug.function(grads, input_spec=_spec(None, 3, 4, 5)), X)
    known = run_on(target, ug.function(grads), X)
    assert len(open_batch) == len(known) == 4
    for a, b in zip(open_batch, known):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
        assert np.abs(a).sum() > 0


TWO_OPEN = {
    # name: (program, input_spec shape; its open dims are all among the merged)
    "api_all": (lambda x: ug.flatten(x), (2, 1, None, None)),
    "api_from_1": (lambda x: ug.flatten(x, 1), (2, 1, None, None)),
    "functional_from_2": (lambda x: F.flatten(x, 2), (2, 1, None, None)),
    "layer_open_batch_and_rows": (lambda x: ug.nn.Flatten()(x), (2, None, None, 3)),
}


def _two_open_input(shape, size):
    dims = [size if d is None else d for d in shape]
    return np.arange(int(np.prod(dims)), dtype=np.float32).reshape(dims) / 8 - 1


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("size", [3, 0])
@pytest.mark.parametrize("case", list(TWO_OPEN))
def test_two_open_dims_merged_into_one_run(target, case, size):
    """Open dims all among the merged axes are one -1 (the random tester, seed 12201:
    flatten of [2, 1, None, None] was refused on every static target)."""
    program, shape = TWO_OPEN[case]
    x = _two_open_input(shape, size)
    expected = run_on("numpy:eager", ug.function(program), x)
    out = run_on(target, ug.function(program, input_spec=_spec(*shape)), x)
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("size", [3, 0])
@pytest.mark.parametrize("case", list(TWO_OPEN))
def test_their_gradient_agrees(target, case, size):
    program, shape = TWO_OPEN[case]

    def loss(x):
        flat = program(x)
        return ug.sum(flat * flat * 0.5 + ug.cumsum(flat, axis=-1))

    x = _two_open_input(shape, size)
    expected = run_on("numpy:eager", ug.function(ug.grad(loss)), x)
    got = run_on(target, ug.function(ug.grad(loss), input_spec=_spec(*shape)), x)
    assert got.shape == x.shape
    np.testing.assert_allclose(got, expected, rtol=1e-6)
