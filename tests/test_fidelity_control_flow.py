"""Nested control flow, forward and gradient, on every target, against hand-computed values
and the float64 NumPy reference (issue 12 items 1, 7 and 8).

Each case is a loss written once; `_value_and_grad` runs `ug.value_and_grad` of it inside a
`ug.function`, so static targets build the loop and branch ops of their framework and take
the gradient with the framework's own autodiff.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import BackendError
from unigraph.ir import Graph, Node, Value
from unigraph.plugins import backends


def _loop(n, body, start):
    """`start` put through `body` n times, as a while_loop counted by an int64 tensor."""
    _, out = ug.while_loop(lambda k, a: k < n, lambda k, a: (k + 1, body(a)),
                           (ug.tensor(0), start))
    return out


def cond_in_while(x):
    """The repro of issue 12 item 1: a cond inside a while_loop body."""
    y = _loop(3, lambda a: ug.cond(ug.sum(a) > 0, lambda: a * 1.5, lambda: a * 3.0), x * 1.0)
    return ug.sum(y)


def cond_in_cond(x):
    """The inner branches return a value computed in the outer branch (once unchanged)."""

    def outer_then():
        b = x * 2.0
        return ug.cond(ug.sum(b) > 1.0, lambda: b * 3.0, lambda: b)

    return ug.sum(ug.cond(ug.sum(x) > 0, outer_then, lambda: x * 5.0))


def start_reused(x):
    """A loop's starting value (the function's own input) is used again after the loop."""
    y = _loop(3, lambda a: a * 2.0, x)
    return ug.sum(x + y)


def op_start_reused(x):
    """The starting value is an op output that the backward of another op needs."""
    h = ug.tanh(x)
    y = _loop(2, lambda a: a * 1.5, h)
    return ug.sum(h * y)


def loop_then_cond(x, w):
    """Issue 12 item 7: h = tanh(x @ w), a loop over sigmoid(h) * 2 - 0.5, then a cond."""
    h = ug.tanh(ug.matmul(x, w))
    s = ug.sigmoid(h) * 2.0 - 0.5
    y = _loop(2, lambda a: a * s, s)
    return ug.sum(ug.cond(ug.sum(y) > 0, lambda: y * 2.0, lambda: y - 1.0))


def while_in_cond(x):
    """Issue 12 item 8: a while_loop inside a cond branch."""
    return ug.sum(ug.cond(ug.sum(x) > 0, lambda: _loop(2, lambda a: a * 1.5, x),
                          lambda: x * 3.0))


def cond_in_while_in_cond(x):
    def then():
        return _loop(2, lambda a: ug.cond(ug.sum(a) > 1.0, lambda: a * 2.0, lambda: a + 1.0),
                     x)

    return ug.sum(ug.cond(ug.sum(x) > 0, then, lambda: x * 3.0))


def while_in_while(x):
    """A loop nested in a loop body."""
    return ug.sum(_loop(2, lambda a: _loop(2, lambda b: b * 1.5, a), x))


def loop_returns_captured(x):
    """The body returns a value captured from outside the loop, as it is (paddle:static
    segfaulted in the forward pass); the loop starts from the same value, runs no
    iteration."""
    _, y = ug.while_loop(lambda k, a: k < 0, lambda k, a: (k + 1, x), (ug.tensor(0), x))
    return ug.sum(y)


def loop_returns_captured_twice(x):
    """As above, two iterations, from another start: only the captured path reaches y."""
    return ug.sum(_loop(2, lambda a: x, x * 2.0))


def loop_swaps(x):
    """Each carried value is the other's next: no body op at all."""
    _, a, b = ug.while_loop(lambda k, a, b: k < 3, lambda k, a, b: (k + 1, b, a),
                            (ug.tensor(0), x * 2.0, x * 3.0))
    return ug.sum(a * 10.0 + b)


def loop_body_reads_nothing_back(x):
    """No gradient op of the body reads a forward value (a transpose): paddle:static's
    backward aborted the process."""
    return ug.sum(_loop(3, ug.transpose, x * 1.0) * W)


def empty_from_cond(x, z):
    """A branch result of zero size (z is (0, 1, 3, 3)) beside a non-empty one."""
    y, e = ug.cond(ug.sum(x) > 0,
                   lambda: (x * 2.0, ug.broadcast_to(ug.sum(x), (0, 1, 3, 3))),
                   lambda: (x * 3.0, z * 1.0))
    return ug.sum(y) + ug.sum(e)


def int_then_branch(x):
    """The then-branch result has no gradient (a float -> int -> float cast), the else
    branch's has (paddle:static took the `if` result's stop_gradient from the then-branch
    alone: gradient 0)."""
    return ug.sum(ug.cond(ug.sum(x) < 0, lambda: ug.cast(ug.cast(x * 4.0, "int32"), x.dtype),
                          lambda: x * 3.0))


def two_loops_capture_one_value(x):
    """Two loops capture x, which has another use (paddle:static counted that use's
    gradient twice)."""
    y = _loop(2, lambda a: x * a, _loop(2, lambda a: x * a, x * 1.0))
    return ug.sum(y) + ug.sum(ug.exp(x))


def captured_in_nested_loop(x):
    """A loop in a cond branch whose body reads x from outside: x**3 where x > 0."""
    return ug.sum(ug.cond(ug.sum(x) > 0, lambda: _loop(2, lambda a: a * x, x * 1.0),
                          lambda: x * 3.0))


def captured_in_inner_loop(x):
    """A loop in a loop body, reading x from outside both: x**5 + x."""
    return ug.sum(_loop(2, lambda a: _loop(2, lambda b: b * x, a), x * 1.0) + x)


def captured_in_cond_in_nested_loop(x):
    """A loop in a cond branch; x from outside is read in a cond inside the loop body."""
    def then():
        return _loop(2, lambda a: ug.cond(ug.sum(a) > 1.0, lambda: a * x, lambda: a + x),
                     x * 1.0)

    return ug.sum(ug.cond(ug.sum(x) > 0, then, lambda: x * 3.0))


def captured_used_after(x):
    """v = tanh(x) is read inside a loop nested in a cond branch, and again after it."""
    v = ug.tanh(x)
    y = ug.cond(ug.sum(x) > 0, lambda: _loop(2, lambda a: a * v, x * 1.0), lambda: x * 3.0)
    return ug.sum(y * v) + ug.sum(v)


def captured_two_levels(x):
    """A loop in a cond in a loop in a cond, the innermost reading x from outside all."""
    def then():
        return _loop(2, lambda a: ug.cond(ug.sum(a) > 0,
                                          lambda: _loop(2, lambda b: b * x, a),
                                          lambda: a * x), x * 1.0)

    return ug.sum(ug.cond(ug.sum(x) > 0, then, lambda: x * 3.0))


def squares_in_nested_loop(x):
    """A loop in a cond branch squaring its value: x**4. Its backward reads each step's
    value (paddle:static, run with Paddle's collector off, read the next step's: [0.125,
    30.375] where 4x**3 is [0.5, 13.5])."""
    return ug.sum(ug.cond(ug.sum(x) > 0, lambda: _loop(2, lambda a: a * a, x * 1.0),
                          lambda: x * 3.0))


def squares_in_inner_loop(x):
    """A loop in a loop body, squaring tanh of the outer value."""
    return ug.sum(_loop(2, lambda a: _loop(2, lambda b: b * b, ug.tanh(a)), x * 1.0))


def inner_loop_reads_outer_variable(x):
    """The inner loop reads the outer loop's own variable a (it changes each outer step)."""
    return ug.sum(_loop(2, lambda a: _loop(2, lambda b: b * a, x * 1.0), x * 1.0))


def inner_loop_start_used_again(x):
    """The inner loop starts from a * 1.0, and a is also added to its result."""
    return ug.sum(_loop(2, lambda a: _loop(2, lambda b: b * 1.5, a * 1.0) + a, x * 1.0))


def inner_loop_starts_from_captured(x):
    """The inner loop starts from x, which the outer loop captures (found by the
    random-program tester: paddle:static's gradient was wrong)."""
    return ug.sum(_loop(2, lambda a: ug.tanh(_loop(2, ug.tanh, x)) * a, x * 1.0))


# (loss, arguments, hand-computed (value, gradient of the first argument) or None)
POS, NEG = np.array([0.5, 1.5]), np.array([-0.5, -1.5])
SMALL = np.array([0.1, 0.2])
W = np.array([[0.3, -0.2], [0.1, 0.4]])
X2 = np.array([[0.5, -1.0], [1.5, 0.25]])
EMPTY = np.zeros((0, 1, 3, 3))
CASES = {
    "cond_in_while-taken": (cond_in_while, (POS,), (2 * 1.5**3, [1.5**3] * 2)),
    "cond_in_while-other": (cond_in_while, (NEG,), (-2 * 27.0, [27.0] * 2)),
    "cond_in_cond-inner_then": (cond_in_cond, (POS,), (12.0, [6.0] * 2)),
    "cond_in_cond-inner_passes": (cond_in_cond, (SMALL,), (0.6, [2.0] * 2)),
    "cond_in_cond-outer_else": (cond_in_cond, (NEG,), (-10.0, [5.0] * 2)),
    "start_reused": (start_reused, (POS,), (18.0, [9.0] * 2)),
    "op_start_reused": (op_start_reused, (POS,), None),
    "loop_then_cond": (loop_then_cond, (X2, W), None),
    "while_in_cond-taken": (while_in_cond, (POS,), (4.5, [2.25] * 2)),
    "while_in_cond-other": (while_in_cond, (NEG,), (-6.0, [3.0] * 2)),
    "cond_in_while_in_cond": (cond_in_while_in_cond, (SMALL,), None),
    "while_in_while": (while_in_while, (POS,), (2 * 1.5**4, [1.5**4] * 2)),
    "loop_returns_captured": (loop_returns_captured, (POS,), (2.0, [1.0] * 2)),
    "loop_returns_captured_twice": (loop_returns_captured_twice, (POS,), (2.0, [1.0] * 2)),
    "loop_swaps": (loop_swaps, (POS,), (32 * 2.0, [32.0] * 2)),
    "loop_body_reads_nothing_back": (loop_body_reads_nothing_back, (X2,),
                                     (np.sum(X2.T * W), W.T)),
    "int_then_branch-else": (int_then_branch, (POS,), (6.0, [3.0] * 2)),
    "int_then_branch-then": (int_then_branch, (NEG,), (-8.0, [0.0] * 2)),
    "two_loops_capture_one_value": (two_loops_capture_one_value, (POS,),
                                    (np.sum(POS**5 + np.exp(POS)), 5 * POS**4 + np.exp(POS))),
    "empty_from_cond-taken": (empty_from_cond, (POS, EMPTY), (4.0, [2.0] * 2)),
    "empty_from_cond-other": (empty_from_cond, (NEG, EMPTY), (-6.0, [3.0] * 2)),
    "captured_in_nested_loop": (captured_in_nested_loop, (POS,), (3.5, 3 * POS**2)),
    "captured_in_inner_loop": (captured_in_inner_loop, (POS,),
                               (np.sum(POS**5 + POS), 5 * POS**4 + 1)),
    "captured_in_cond_in_nested_loop-mul": (captured_in_cond_in_nested_loop, (POS,),
                                            (np.sum(POS**3), 3 * POS**2)),
    "captured_in_cond_in_nested_loop-add": (captured_in_cond_in_nested_loop, (SMALL,),
                                            (np.sum(3 * SMALL), [3.0] * 2)),
    "captured_used_after": (captured_used_after, (POS,), None),
    "captured_two_levels": (captured_two_levels, (POS,), (np.sum(POS**5), 5 * POS**4)),
    "squares_in_nested_loop": (squares_in_nested_loop, (POS,), (np.sum(POS**4), 4 * POS**3)),
    "squares_in_inner_loop": (squares_in_inner_loop, (POS,), None),
    "inner_loop_reads_outer_variable": (inner_loop_reads_outer_variable, (POS,), None),
    "inner_loop_starts_from_captured": (inner_loop_starts_from_captured, (POS,), None),
    "inner_loop_start_used_again": (inner_loop_start_used_again, (POS,),
                                    (np.sum(3.25**2 * POS), [3.25**2] * 2)),
}


# paddle:static refuses these at build time, naming the inner loop's line: a
# differentiated loop nested in another loop's body that reads a value needing a gradient
# which changes from one outer step to the next, or starts from a value that also reaches
# the result another way or that the outer loop captures (Paddle 3.3.1's backward gets
# those gradients wrong). paddle:eager runs them, and the forward runs everywhere. Loops
# nested in cond branches, and loops in loops reading values the outer loop captures (the
# same in each of its steps) without starting from them, compute.
PADDLE_STATIC_REFUSES = (inner_loop_reads_outer_variable, inner_loop_start_used_again,
                         inner_loop_starts_from_captured)


def _value_and_grad(loss):
    return ug.function(lambda *args: ug.value_and_grad(loss)(*args))


def _reference(loss, args):
    value, grad = run_on("numpy:eager", _value_and_grad(loss), *args)
    return value, grad


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_value_and_gradient(case, target):
    loss, args, hand = CASES[case]
    if hand is not None:
        value, grad = _reference(loss, args)  # the reference agrees with the hand values
        np.testing.assert_allclose(value, hand[0], rtol=1e-12)
        np.testing.assert_allclose(grad, hand[1], rtol=1e-12)
    expected = _reference(loss, args)
    if target == "paddle:static" and loss in PADDLE_STATIC_REFUSES:
        with pytest.raises(BackendError, match=r"while_loop nested .*"
                                               r"\(tests/test_fidelity_control_flow\.py:\d+\)"):
            run_on(target, _value_and_grad(loss), *args)
        return
    value, grad = run_on(target, _value_and_grad(loss), *args)
    np.testing.assert_allclose(value, expected[0], rtol=1e-12)
    np.testing.assert_allclose(grad, expected[1], rtol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
def test_loop_start_used_after_the_loop_forward(target):
    """Issue 12 item 7, forward only: `x + y` where y came from a loop started at x."""

    @ug.function
    def fn(x):
        return x + _loop(3, lambda a: a * 2.0, x)

    np.testing.assert_allclose(run_on(target, fn, POS), POS * 9.0, rtol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("loss", PADDLE_STATIC_REFUSES, ids=lambda f: f.__name__)
def test_nested_loops_forward(loss, target):
    """What paddle:static refuses to differentiate, it still runs forward."""
    expected = run_on("numpy:eager", ug.function(loss), POS)
    np.testing.assert_allclose(run_on(target, ug.function(loss), POS), expected, rtol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("x", [POS, NEG], ids=["taken", "other"])
def test_empty_cond_results_keep_shape_and_dtype(x, target):
    """A zero-size `cond` result is (0, 1, 3, 3) float32, empty, on every target (Paddle's
    `if` op returned it with no memory: None, then shape (0,)); run twice, as a static
    target's second run takes another path."""

    @ug.function
    def fn(x, z):
        return ug.cond(ug.sum(x) > 0,
                       lambda: (ug.broadcast_to(ug.sum(x), (0, 1, 3, 3)), x * 2.0),
                       lambda: (z * 3.0, x * 3.0))

    args = (x.astype(np.float32), EMPTY.astype(np.float32))
    for _ in range(2):
        empty, y = run_on(target, fn, *args)
        assert (empty.shape, empty.dtype) == ((0, 1, 3, 3), np.float32)
        np.testing.assert_allclose(y, x * (2.0 if x is POS else 3.0), rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("source", ["cond", "constant"])
def test_gradient_through_a_matmul_of_an_empty_value(source, target):
    """An empty value, from a `cond` or a constant, multiplied by a weight: the weight's
    gradient is zeros and the empty input's is empty (Paddle's matmul_grad raised "Required
    tensor shall not be nullptr" on such a value, eager and static: found by the random
    tester, seed 2027)."""

    def loss(x, z, w):
        empty = (ug.cond(ug.sum(x) > 0, lambda: z * 2.0, lambda: ug.tanh(z)) if source == "cond"
                 else ug.zeros((0, 1, 3, 3)))
        return ug.sum(ug.tanh(empty)) + ug.sum(ug.matmul(empty, w)) + ug.sum(x) + ug.sum(z)

    fn = ug.function(ug.grad(loss, argnums=(0, 1, 2)))
    x, w = np.array([0.5, 1.5], np.float32), np.array([[1.5], [0.5], [-0.5]], np.float32)
    dx, dz, dw = run_on(target, fn, x, EMPTY.astype(np.float32), w)
    np.testing.assert_array_equal(dx, np.ones(2, np.float32))
    assert (dz.shape, dw.shape) == (EMPTY.shape, (3, 1))
    np.testing.assert_array_equal(dw, np.zeros((3, 1), np.float32))


def _empty_cond_graph() -> Graph:
    """cond(p, x * 2, -x) over x of shape (None, 0): a zero-size result whose other dim is
    known only when the graph runs."""
    x, p, two = Value((None, 0), "float32"), Value((), "bool"), Value((), "float32")
    tx, ty, ex, ey, out = (Value((None, 0), "float32") for _ in range(5))
    then = Graph("then", [tx], [], [
        Node("constant", [], [two], {"value": np.array(2.0, np.float32)}),
        Node("mul", [tx, two], [ty]),
    ], [ty])
    other = Graph("else", [ex], [], [Node("neg", [ex], [ey])], [ey])
    graph = Graph("empty_cond", [p, x], [], [
        Node("cond", [p, x], [out], {}, {"then": then, "else": other}),
    ], [out])
    graph.verify()
    return graph


@pytest.mark.parametrize("target", TARGETS)
def test_empty_cond_result_with_unknown_dims(target):
    """A static target compiles the (None, 0) graph once and runs it on 2 rows and on 0
    (Paddle's `if` returned such a result with no memory: None); an eager target runs the
    same cond on each input. The result is (rows, 0) float32 either way."""
    t = Target.parse(target)
    if t.mode == "eager":
        fn = ug.function(lambda p, x: ug.cond(p, lambda: x * 2.0, lambda: -x))
        run = lambda p, x: run_on(target, fn, p, x)  # noqa: E731
    else:
        executable = backends()[t.backend].compile(_empty_cond_graph(), t.mode)
        run = lambda p, x: np.asarray(executable.run([p, x])[0])  # noqa: E731
    for rows in (2, 0, 3):
        for p in (True, False):
            y = run(np.array(p), np.zeros((rows, 0), np.float32))
            assert (y.shape, y.dtype) == ((rows, 0), np.float32), (rows, p)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("taken", ["then", "else"])
def test_gradient_through_a_pass_through_loop_nested_in_a_branch(target, taken):
    """A while_loop in a cond branch whose body yields a loop variable unchanged (`v = v`):
    paddle:static's backward failed with 'should be in name map' (found by the 2,000-program
    run). Value and gradient against float64 by hand, both branches."""
    w = np.array([0.5, -1.5, 2.0], np.float32)

    def loss(x):
        sq = x ** 2

        def other():
            return ug.while_loop(
                lambda v, k: ug.logical_and(k < 1, ug.sum(v) < 40.0),
                lambda v, k: (v, k + 1),  # v passes through unchanged
                (sq, ug.tensor(0)))[0]

        y = ug.cond(ug.sum(x) > 0 if taken == "then" else ug.sum(x) < 0,
                    lambda: sq, other)
        return ug.sum(y * w)

    x = np.array([0.25, 1.0, 0.75], np.float32)
    got = run_on(target, ug.function(ug.grad(loss)), x)
    np.testing.assert_allclose(got, 2 * w.astype(np.float64) * x, rtol=1e-6)
