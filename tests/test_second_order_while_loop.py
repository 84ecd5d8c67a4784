"""The gradient of a gradient through a while_loop: torch and TensorFlow compute it, the
NumPy engine refuses every second order, and paddle:static refuses this one with unigraph's
error naming both lines and the way out (Paddle 3.3.1's Program backward cannot
differentiate a while loop's gradient: it raised a raw ValueError about phi::DataType;
quirk "while_loop (second order)"). Found by `ug.check` of a hand-written function that
takes a gradient through a loop (its gradient check differentiates it again)."""

import inspect

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import BackendError, UnigraphError


def cubed(x):
    """x ** 3 as a loop multiplying by x twice."""
    _, v = ug.while_loop(lambda k, v: k < 2, lambda k, v: (k + 1, v * x), (ug.tensor(0), x))
    return ug.sum(v)


def squared_gradient(x):
    return ug.sum(ug.grad(cubed)(x) ** 2)


@pytest.mark.parametrize("target", TARGETS)
def test_a_gradient_of_a_gradient_through_a_while_loop(target):
    x = np.array([0.3, -0.7, 1.25])
    second = ug.function(lambda x: ug.grad(squared_gradient)(x))
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        if t.backend == "numpy":
            with pytest.raises(UnigraphError, match="second order"):
                second(x)
        elif target == "paddle:static":
            with pytest.raises(BackendError) as refusal:
                second(x)
            message = str(refusal.value)
            loop_line = inspect.getsourcelines(cubed)[1] + 2
            assert f"test_second_order_while_loop.py:{loop_line}" in message, message
            assert "second order" in message and "paddle:eager" in message, message
        else:  # d/dx sum((3 x**2)**2) = 36 x**3
            np.testing.assert_allclose(second(x).numpy(), 36 * x ** 3, rtol=1e-12)
