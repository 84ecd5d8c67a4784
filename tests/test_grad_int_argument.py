"""`ug.grad` / `ug.value_and_grad` with respect to an int argument is refused on every
target with a message naming the user's line (the call of the differentiated function)
and the fix (a float argument, or that position left out of argnums); the message used to
name neither the file nor the line."""

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug


def scaled_sum(x, n):
    return ug.sum(x * n)


X = np.ones(3, np.float32)
N = np.array(2, np.int32)


def _assert_names_line_and_fix(error, line: int, dtype: str):
    text = str(error.value)
    assert f"{__file__}:{line}" in text or f"test_grad_int_argument.py:{line}" in text, text
    assert "argument 1" in text and dtype in text, text
    assert "ug.cast" in text and "argnums" in text, text


def _line_of(marker: str) -> int:
    with open(__file__) as source:
        return next(i for i, line in enumerate(source, 1)
                    if marker in line and "_line_of" not in line)


@pytest.mark.parametrize("target", TARGETS)
def test_grad_of_an_int_argument_names_the_line(target):
    with pytest.raises(ug.UnigraphError) as error:
        run_on(target, lambda: ug.grad(scaled_sum, argnums=1)(X, N))  # grad-call
    _assert_names_line_and_fix(error, _line_of("# grad-call"), "int32")


@pytest.mark.parametrize("target", TARGETS)
def test_value_and_grad_of_an_int_argument_names_the_line(target):
    both = ug.value_and_grad(scaled_sum, argnums=(0, 1))
    with pytest.raises(ug.UnigraphError) as error:
        run_on(target, lambda: both(X, np.array([2, 3, 4], np.int64))[0])  # vag-call
    _assert_names_line_and_fix(error, _line_of("# vag-call"), "int64")


@pytest.mark.parametrize("target", TARGETS)
def test_grad_of_an_int_argument_inside_a_function_names_the_line(target):
    @ug.function
    def step(x, n):
        return ug.grad(scaled_sum, argnums=1)(x, n)  # traced-call

    with pytest.raises(ug.UnigraphError) as error:
        run_on(target, step, X, np.array(2, np.int32))
    _assert_names_line_and_fix(error, _line_of("# traced-call"), "int32")
