"""A `cond` whose branch returns a value and another result made from it ((v, v * 2.0)),
or the same value twice ({"a": v, "b": v}), or a Python `if` that assigns two variables
the second of which reads the first, and the gradient through it, on all 9 targets (and
onnxruntime:static forward): numpy:eager's values. paddle:static's `if` op backward gave
such a value one result's cotangent only, silently (d/dx of v + 0.5 * v * 1.0 came out
as that of v: random tester, seed 11006, a `ug.cond` returning a tuple). Its while op's
backward did the same with a `while_loop` body's results (found probing the same fault).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, INFERENCE_TARGETS, run_on

import unigraph as ug

X = np.array([[0.5, -0.3, 1.2], [0.7, 0.2, -0.4]], np.float32)
WEIGHTS = np.cos(np.arange(6.0) + 0.5).reshape(2, 3)


@ug.function
def _tuple(x):
    def then():
        v = x * x
        return v, v * 2.0

    a, b = ug.cond(ug.sum(x) > 0.0, then, lambda: (ug.tanh(x), ug.sin(x)))
    return a + 0.5 * b


@ug.function
def _dict(x):
    def then():
        v = ug.sin(x) * x
        return {"a": v, "b": v}

    p = ug.cond(ug.sum(x) > 0.0, then, lambda: {"a": x * 3.0, "b": ug.cos(x)})
    return p["a"] + 0.5 * p["b"]


@ug.function  # autograph converts the `if`
def _python_if(x):
    if ug.sum(x) > 0.0:
        a = x * x
        b = ug.exp(a) - 1.0
    else:
        a = ug.tanh(x)
        b = x * 2.0
    return a * 3.0 + b


@ug.function
def _loop(x):
    def body(k, a, b):
        v = a * 1.1
        return k + 1, v, v * 0.5 + b

    _, a, b = ug.while_loop(lambda k, a, b: k < 3, body, (ug.tensor(0), x, x * 2.0))
    return a + b


@ug.function
def _loop_twice(x):
    def body(k, a, b):
        v = ug.sin(a)
        return k + 1, v, v

    _, a, b = ug.while_loop(lambda k, a, b: k < 3, body, (ug.tensor(0), x, x * 2.0))
    return a + 0.5 * b


PROGRAMS = {"tuple": _tuple, "dict": _dict, "python if": _python_if, "loop": _loop,
            "loop twice": _loop_twice}


def _loss(program):
    return lambda x: ug.sum(program(x) * WEIGHTS.astype(x.dtype))


@pytest.mark.parametrize("sign", [1.0, -1.0])  # either branch taken (loops: signs)
@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_results_that_share_a_value(target, name, sign):
    program = PROGRAMS[name]
    x = X * np.float32(sign)
    with ug.use_backend("numpy", "eager"):
        wide = ug.tensor(x.astype(np.float64))
        expected = program(wide).numpy()
        expected_grad = ug.function(lambda a: ug.grad(_loss(program))(a))(wide).numpy()
    np.testing.assert_allclose(run_on(target, program, x), expected, rtol=1e-5)
    if target in INFERENCE_TARGETS:
        return
    grad = run_on(target, ug.function(lambda a: ug.grad(_loss(program))(a)), x)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-5, atol=1e-6)
