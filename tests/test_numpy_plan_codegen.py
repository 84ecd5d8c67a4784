"""Scalar control flow as the generated static plan of numpy:static runs it (issue 19 item 4:
`unigraph/reference/codegen.py` writes `cond`/`while_loop` as Python `if`/`while` over
inlined subplans and scalar binary ops as NumPy scalar operators), checked on all 9 targets
against values computed by hand in Python (float64, or exact integers)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.ir import Graph, Node, Value
from unigraph.reference import Plan, codegen, float64


def run_twice(target, fn, *args):
    """The outputs of the second of two calls (a static plan runs its steps on the first
    call, its generated code from the second on), checked equal to the first's."""
    first = run_on(target, fn, *args)
    second = run_on(target, fn, *args)
    for one, other in zip(first if isinstance(first, list) else [first],
                          second if isinstance(second, list) else [second]):
        assert one.dtype == other.dtype
        np.testing.assert_array_equal(one, other)
    return second


@ug.function
def collatz_mix(n, x, y):
    """A loop whose body branches on scalars, mixes int and float carried values, reads a
    captured scalar (`y`) and feeds operator results to other ops (sqrt, cast, maximum)."""

    def body(k, a, acc):
        odd = ug.not_equal(a - (a // 2) * 2, 0)
        a = ug.cond(odd, lambda: a * 3 + 1, lambda: a // 2)
        acc = ug.cond(acc > y, lambda: ug.sqrt(acc) + ug.cast(a, "float32"),
                      lambda: ug.maximum(acc * 2.0, y) - 1.0)
        return k + 1, a, acc

    return ug.while_loop(lambda k, a, acc: ug.logical_and(k < 12, a != 1), body, (0 * n, n, x))


def _collatz_mix_by_hand(n, x, y):
    k, a, acc = 0, n, np.float64(x)
    while k < 12 and a != 1:
        a = a * 3 + 1 if a % 2 else a // 2
        acc = np.sqrt(acc) + a if acc > y else max(acc * 2.0, y) - 1.0
        k += 1
    return k, a, acc


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n, x, y", [(7, 0.75, 2.0), (6, 5.0, 1.5), (1, 3.0, 1.0)])
def test_a_scalar_loop_with_branches_matches_python(target, n, x, y):
    got = run_twice(target, collatz_mix, np.int64(n), np.float32(x), np.float32(y))
    k, a, acc = _collatz_mix_by_hand(n, x, y)
    assert [g.dtype for g in got] == [np.int64, np.int64, np.float32]
    assert got[0].shape == got[1].shape == got[2].shape == ()
    assert (int(got[0]), int(got[1])) == (k, a)
    np.testing.assert_allclose(float(got[2]), acc, rtol=1e-5)


@ug.function
def wrapping_counter(x):
    """int16 arithmetic in a loop that wraps around: the array ufunc wraps silently, and so
    does the generated plan's scalar math."""
    _, out = ug.while_loop(lambda i, v: i < 4, lambda i, v: (i + 1, v * 3 + 20000),
                           (ug.tensor(0), x))
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_integer_overflow_in_a_loop_wraps_without_a_warning(target):
    want = 7
    for _ in range(4):
        want = (want * 3 + 20000 + 2**15) % 2**16 - 2**15  # int16 two's complement
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = run_twice(target, wrapping_counter, np.int16(7))
    assert got.dtype == np.int16 and int(got) == want


@ug.function
def grad_of_a_scalar_loop(x):
    """ug.grad inside a static function, fed by and feeding scalar operator results."""
    scale = x * 2.0 + 1.0

    def cube_then_loop(v):
        _, out = ug.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * v),
                               (ug.tensor(0), v))
        return out * scale

    return ug.grad(cube_then_loop)(x) + scale


@pytest.mark.parametrize("target", TARGETS)
def test_a_gradient_in_a_static_plan_reads_and_gives_scalars(target):
    x = 1.25
    got = run_twice(target, grad_of_a_scalar_loop, np.float32(x))
    # d/dv v**4 * scale, with scale a constant of the inner function: 4 v**3 * scale
    scale = 2 * x + 1
    np.testing.assert_allclose(float(got), 4 * x**3 * scale + scale, rtol=1e-5)


def _nested_loops(depth: int) -> Graph:
    """`depth` while loops nested in each other, each running once and adding 1 to an int64."""
    inner = None
    for level in range(depth):
        cond_in, cond_x = Value((), "int64"), Value((), "int64")
        limit = Value((), "int64")
        keep = Value((), "bool")
        cond = Graph(f"cond{level}", inputs=[cond_in, cond_x], outputs=[keep], nodes=[
            Node("constant", [], [limit], {"value": np.asarray(1, np.int64)}),
            Node("less", [cond_in, limit], [keep])])
        body_in, body_x = Value((), "int64"), Value((), "int64")
        one, done, x_out = Value((), "int64"), Value((), "int64"), Value((), "int64")
        nodes = [Node("constant", [], [one], {"value": np.asarray(1, np.int64)}),
                 Node("add", [body_in, one], [done])]
        if inner is None:
            nodes.append(Node("add", [body_x, one], [x_out]))
        else:
            zero, k_out, x_in = Value((), "int64"), Value((), "int64"), Value((), "int64")
            nodes += [Node("constant", [], [zero], {"value": np.asarray(0, np.int64)}),
                      Node("while_loop", [zero, body_x], [k_out, x_in], {"num_carried": 2},
                           {"cond": inner[0], "body": inner[1]}),
                      Node("add", [x_in, one], [x_out])]
        inner = (cond, Graph(f"body{level}", inputs=[body_in, body_x], nodes=nodes,
                             outputs=[done, x_out]))
    x, zero, k, out = (Value((), "int64") for _ in range(4))
    return Graph("nested", inputs=[x], outputs=[out], nodes=[
        Node("constant", [], [zero], {"value": np.asarray(0, np.int64)}),
        Node("while_loop", [zero, x], [k, out], {"num_carried": 2},
             {"cond": inner[0], "body": inner[1]})])


@pytest.mark.parametrize("depth", [3, 25])
def test_loops_nested_deeper_than_python_compiles_fall_back_to_steps(depth):
    """Python refuses more than 20 nested loops in one function: such a plan runs its steps
    instead, with the same result (the reference's and depth + 5)."""
    graph = _nested_loops(depth)
    graph.verify()
    inputs = [np.asarray(5, np.int64)]
    plan = Plan(graph)
    assert (codegen.generate(plan) is None) == (depth > 20)
    for _ in range(2):  # the steps, then the generated code or (too deep) the steps again
        env, _ = plan.forward(inputs, False)
        assert int(plan.outputs_of(env)[0]) == depth + 5
    assert int(float64.outputs(graph, inputs)[0]) == depth + 5


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "uint8", "int16",
                                   "int32", "int64", "bool"])
def test_the_operators_equal_the_kernels_on_numpy_scalars(dtype):
    """What the generated code writes (`x + y` on NumPy scalars) gives the kernel's (the
    ufunc's) value and dtype, on random pairs and the edges (0, extremes, inf, NaN)."""
    from unigraph.reference.fast_kernels import KERNELS, OPERATORS

    rng = np.random.default_rng(11)
    if dtype == "bool":
        xs, ys = rng.random(64) < 0.5, rng.random(64) < 0.5
    elif dtype.startswith("float"):
        edges = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 65504.0, 1e-7])
        xs = np.concatenate([rng.standard_normal(60) * 100, edges]).astype(dtype)
        ys = np.concatenate([rng.standard_normal(60) * 3, edges[::-1]]).astype(dtype)
    else:
        info = np.iinfo(dtype)
        xs = np.concatenate([rng.integers(info.min, info.max, 60, endpoint=True),
                             [info.min, info.max, 0, 1]]).astype(dtype)
        ys = np.concatenate([rng.integers(info.min, info.max, 60, endpoint=True),
                             [info.max, info.max, 0, info.min]]).astype(dtype)
    for name, operator in OPERATORS.items():
        if name == "div" and not dtype.startswith("float"):
            continue  # a float-only record
        if name in ("logical_and", "logical_or") and dtype != "bool":
            continue  # bool-only records
        if name in ("add", "sub", "mul") and dtype == "bool":
            continue  # the generated code calls the ufunc for bools
        run = eval(f"lambda x, y: x {operator} y")  # noqa: S307 - the operator under test
        with np.errstate(all="ignore"):
            for x, y in zip(xs, ys):
                want = KERNELS[name](np.asarray(x), np.asarray(y))
                got = run(x, y)
                assert np.asarray(got).dtype == want.dtype, (name, x, y)
                np.testing.assert_array_equal(got, want, err_msg=f"{name}({x!r}, {y!r})")
                assert np.signbit(got) == np.signbit(want), (name, x, y)
