"""Autograph converts what converted code calls, whatever kind of callable it is: a
callable object's `__call__` (also one given to `ug.function`), a lambda written outside
converted code (also one given to `ug.function`; two of one code, each with its closure), a
function of a user module whose name is also a standard library module's (`types.py`),
besides functions, bound methods, static and class methods and partials
(tests/test_autograph_calls.py). Before, these ran as written: eager targets took the
branch, static ones raised TracingError at the tensor `if`. A function with no source (made
by exec) still runs as written; on a static target its tensor `if` now names it and the
fix. Expected values are worked out with NumPy in the test."""

from __future__ import annotations

import functools
import gc
import importlib.util
import pathlib
import warnings

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.autograph import calls
from unigraph.config import Target

POSITIVE = np.array([1.0, 2.0, 3.0], np.float32)
NEGATIVE = np.array([-1.0, 0.5, -3.0], np.float32)


def double_or_negate_reference(x):
    return x * 2.0 if x.sum() > 0 else -x


class Doubler:
    """A callable object of a plain class (not a Module): its `__call__` has a tensor `if`."""

    def __call__(self, x):
        if ug.sum(x) > 0.0:
            return x * 2.0
        return -x


class Tools:
    @staticmethod
    def static_double(x):
        if ug.sum(x) > 0.0:
            return x * 2.0
        return -x

    @classmethod
    def class_double(cls, x):
        if ug.sum(x) > 0.0:
            return x * 2.0
        return -x


class HelperNet(ug.nn.Module):
    def helper(self, x):
        if ug.sum(x) > 0.0:
            return x * 2.0
        return -x

    def forward(self, x):
        return self.helper(x)


def scale(x, factor):
    if ug.sum(x) > 0.0:
        return x * factor
    return x - factor


DOUBLER = Doubler()
outer_lambda = lambda x: x * 2.0 if ug.sum(x) > 0.0 else -x
# Two lambdas on one line: each converts as its own.
pick_first, pick_second = lambda x: x + 1.0 if ug.sum(x) > 0.0 else x, lambda x: -x
TRIPLE = functools.partial(scale, factor=3.0)


def make_scaler(factor):
    return lambda x: x * factor if ug.sum(x) > 0.0 else x - factor


# Two lambdas of one code, made outside converted code, each with its own `factor`: each
# converts (the converted code is made once), reading its own closure.
SCALERS = [make_scaler(2.0), make_scaler(3.0)]
NET = HelperNet()

_spec = importlib.util.spec_from_file_location(
    "types", pathlib.Path(__file__).parent / "stdlib_named" / "types.py")
user_types_module = importlib.util.module_from_spec(_spec)  # not put in sys.modules
_spec.loader.exec_module(user_types_module)
double_from_types_py = user_types_module.double_or_negate


@ug.function
def calls_callable_object(x):
    return DOUBLER(x)


@ug.function
def calls_callable_object_made_here(x):
    return Doubler()(x)


@ug.function
def calls_outer_lambda(x):
    return outer_lambda(x)


@ug.function
def calls_lambdas_of_one_line(x):
    return pick_first(x) + pick_second(x)


@ug.function
def calls_lambdas_of_one_code(x):
    return SCALERS[0](x) + SCALERS[1](x)


@ug.function
def calls_static_method(x):
    return Tools.static_double(x)


@ug.function
def calls_class_method(x):
    return Tools.class_double(x)


@ug.function
def calls_module_level_partial(x):
    return TRIPLE(x)


@ug.function
def calls_module_helper_method(x):
    return NET(x)


@ug.function
def calls_types_py_function(x):
    return double_from_types_py(x)


@ug.function
def calls_types_py_attribute(x):
    return user_types_module.double_or_negate(x)


given_lambda = ug.function(lambda x: x * 2.0 if ug.sum(x) > 0.0 else -x)
given_callable_object = ug.function(Doubler())

CASES = {
    "callable-object": (calls_callable_object, double_or_negate_reference),
    "callable-object-made-here": (calls_callable_object_made_here, double_or_negate_reference),
    "outer-lambda": (calls_outer_lambda, double_or_negate_reference),
    "lambdas-of-one-line": (calls_lambdas_of_one_line,
                            lambda x: (x + 1.0 if x.sum() > 0 else x) - x),
    "lambdas-of-one-code": (calls_lambdas_of_one_code,
                            lambda x: x * 5.0 if x.sum() > 0 else x * 2.0 - 5.0),
    "ug-function-of-lambda": (given_lambda, double_or_negate_reference),
    "ug-function-of-callable-object": (given_callable_object, double_or_negate_reference),
    "staticmethod": (calls_static_method, double_or_negate_reference),
    "classmethod": (calls_class_method, double_or_negate_reference),
    "module-level-partial": (calls_module_level_partial,
                             lambda x: x * 3.0 if x.sum() > 0 else x - 3.0),
    "module-method": (calls_module_helper_method, double_or_negate_reference),
    "types-py-function": (calls_types_py_function, double_or_negate_reference),
    "types-py-attribute": (calls_types_py_attribute, double_or_negate_reference),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("target", TARGETS)
def test_a_called_callable_runs_converted(target, case):
    function, reference = CASES[case]
    for x in (POSITIVE, NEGATIVE):
        np.testing.assert_allclose(run_on(target, function, x), reference(x.astype(np.float64)),
                                   rtol=1e-6)


_namespace = {"ug": ug}
exec("def made_by_exec(x):\n    if ug.sum(x) > 0.0:\n        return x * 2.0\n    return -x\n",
     _namespace)
made_by_exec = _namespace["made_by_exec"]


@ug.function
def calls_made_by_exec(x):
    return made_by_exec(x)


@pytest.mark.parametrize("target", TARGETS)
def test_a_function_without_source_is_named_with_the_fix(target):
    """No source to convert: it runs as written (eager targets take the branch), and on a
    static target its tensor `if` is a TracingError naming the function, its line and the
    fix (before, the error named the line only)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "could not convert made_by_exec": once per place
        if Target.parse(target).mode == "eager":
            np.testing.assert_allclose(run_on(target, calls_made_by_exec, POSITIVE),
                                       POSITIVE * 2.0)
            return
        with pytest.raises(ug.TracingError) as error:
            run_on(target, calls_made_by_exec, POSITIVE)
    message = str(error.value)
    assert "traced tensor at <string>:2" in message
    assert "`made_by_exec` runs as written: autograph could not convert it" in message
    assert "define it in a file" in message and "ug.cond" in message


@pytest.mark.parametrize("target", TARGETS)
def test_code_run_as_written_is_forgotten_when_freed(target):
    """Code that runs as written is recorded once, weakly: a lambda made by eval on every
    call (no source: it runs as written) leaves no record once it is freed. Before, each
    call's code stayed recorded for good."""

    def calls_an_eval_lambda(x):
        # A new code object per call. The lambda runs no op itself: under pytest, a lambda
        # whose frame ran a tensorflow:eager op stayed referenced after the run by
        # something outside Python's gc (not found; not so in a plain script).
        return eval("lambda y: y")(x) * 2.0

    gc.collect()
    before = len(calls._AS_WRITTEN)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):  # a new Function each time: static targets trace it again
            np.testing.assert_allclose(
                run_on(target, ug.function(calls_an_eval_lambda), POSITIVE), POSITIVE * 2.0)
    gc.collect()
    assert len(calls._AS_WRITTEN) == before


@ug.function
def makes_a_function_of_a_lambda(x):
    inner = ug.function(lambda y: y * 2.0 if ug.sum(y) > 0.0 else -y)
    return inner(x)


@pytest.mark.parametrize("target", TARGETS)
def test_a_lambda_of_converted_code_is_not_converted_again(target):
    """A lambda written inside converted code is converted with it: given to ug.function
    there, it runs as it is. (Converting lambdas first tried to convert it again: a warning,
    "could not convert ...: SyntaxError: duplicate argument 'ag__'", on every target.)"""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for x in (POSITIVE, NEGATIVE):
            np.testing.assert_allclose(run_on(target, makes_a_function_of_a_lambda, x),
                                       double_or_negate_reference(x.astype(np.float64)),
                                       rtol=1e-6)
