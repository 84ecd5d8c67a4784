"""A `ug.cond` (and autograph's `if`) whose two paths give one value a known dim and a dim
left open by `input_spec`, on all 9 targets.

Eagerly both paths must give one shape, and they do here: `z` has one row, and so has `y`,
whose rows the spec leaves open, on the inputs given. A trace knew [1, 2] on one path and
[None, 2] on the other and every static target refused the program ("value 0 is
float32[1, 2] in true_fn but float32[None, 2] in false_fn"; found by the random-program
tester with open dims). The traced cond's value now has the dim open where the paths
differ, its size the run's.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ControlFlowError

SPECS = [ug.Spec((None, 2), "float32"), ug.Spec((None, 2), "float32"),
         ug.Spec((1, 2), "float32")]
X = np.array([[1.0, -2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
Y = np.array([[0.5, 7.0]], np.float32)
Z = np.array([[-1.5, 2.5]], np.float32)


def with_cond(x, y, z):
    out = ug.cond(ug.sum(x) > 0.0, lambda: z * 2.0, lambda: y - 1.0)
    return out * 3.0 + ug.sum(y)


def with_if(x, y, z):
    if ug.sum(x) > 0.0:
        out = z * 2.0
    else:
        out = y - 1.0
    return out * 3.0 + ug.sum(y)


def expected(x, y, z):
    out = z * 2.0 if x.sum() > 0 else y - 1.0
    return out * 3.0 + y.sum()


@pytest.mark.parametrize("program", [with_cond, with_if], ids=["ug.cond", "if"])
@pytest.mark.parametrize("target", TARGETS)
def test_a_cond_of_a_known_and_an_open_dim(target, program):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        forward = ug.function(program, input_spec=SPECS)
        inner = ug.function(program)  # (autograph converts a @ug.function's own body)

        def loss(x, y, z):
            return ug.sum(inner(x, y, z) * 1.5)

        def gradients(x, y, z):
            return ug.grad(loss, argnums=(1, 2))(x, y, z)

        grad = ug.function(gradients, input_spec=SPECS)
        for x in (X, -X):  # each path
            got = forward(x, Y, Z)
            want = expected(x, Y, Z)
            assert got.numpy().shape == want.shape
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
            gy, gz = grad(x, Y, Z)
            taken = x.sum() > 0
            np.testing.assert_allclose(gy.numpy(), np.full_like(Y, 3.0 if taken else 7.5),
                                       rtol=1e-6)
            np.testing.assert_allclose(gz.numpy(), np.full_like(Z, 9.0 if taken else 0.0),
                                       rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_paths_of_two_known_shapes_are_still_refused(target):
    """[1, 2] against [2, 2]: no run can make them one shape, on any target."""
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        f = ug.function(lambda x: ug.cond(ug.sum(x) > 0.0, lambda: x[:1], lambda: x[:2]),
                        input_spec=[ug.Spec((3, 2), "float32")])
        with pytest.raises(ControlFlowError, match=r"value 0 is float32\[[12], 2\] in .* but "
                                                   r"float32\[[12], 2\] in "):
            f(X)
