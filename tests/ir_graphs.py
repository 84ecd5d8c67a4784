"""Hand-built IR graphs shared by the backend tests (the NumPy reference needs none)."""

import numpy as np

from unigraph.ir import Graph, Node, Value
from unigraph.testing.backend_contract import counter_graph  # noqa: F401  (shared)


def value(shape=(), dtype="float64"):
    return Value(shape, dtype)


def descent_graph() -> Graph:
    """Gradient descent on (x - 3)**2 for `steps` steps (lr 0.25), all inside one graph: a
    `grad` node inside a `while_loop` body. Inputs: x (float64), steps (int64)."""
    x, steps = value(), value((), "int64")
    cx, ci, cn, more = value(), value((), "int64"), value((), "int64"), value((), "bool")
    cond = Graph("cond", [cx, ci, cn], [], [Node("less", [ci, cn], [more])], [more])
    bx, bi, bn = value(), value((), "int64"), value((), "int64")
    fx, three, diff, sq = value(), value(), value(), value()
    fn = Graph("fn", [fx], [], [
        Node("constant", [], [three], {"value": np.array(3.0)}),
        Node("sub", [fx, three], [diff]),
        Node("mul", [diff, diff], [sq]),
    ], [sq])
    loss, dx, rate, step, nx = value(), value(), value(), value(), value()
    one, ni = value((), "int64"), value((), "int64")
    body = Graph("body", [bx, bi, bn], [], [
        Node("grad", [bx], [loss, dx], {"wrt": (0,), "output": 0}, {"fn": fn}),
        Node("constant", [], [rate], {"value": np.array(0.25)}),
        Node("mul", [rate, dx], [step]),
        Node("sub", [bx, step], [nx]),
        Node("constant", [], [one], {"value": np.array(1)}),
        Node("add", [bi, one], [ni]),
    ], [nx, ni])
    zero, out_x, out_i = value((), "int64"), value(), value((), "int64")
    graph = Graph("descent", [x, steps], [], [
        Node("constant", [], [zero], {"value": np.array(0)}),
        Node("while_loop", [x, zero, steps], [out_x, out_i], {"num_carried": 2},
             {"cond": cond, "body": body}),
    ], [out_x])
    return graph.verify()


def second_derivative_graph() -> Graph:
    """d2/dx2 of x**3 at input x (float64): a grad node whose function holds a grad node.
    Outputs: the first derivative, x**3, the second derivative."""
    x = value()
    ix, cube_sq, cube = value(), value(), value()
    inner_fn = Graph("fn", [ix], [], [
        Node("mul", [ix, ix], [cube_sq]), Node("mul", [cube_sq, ix], [cube]),
    ], [cube])
    ox, inner_value, inner_grad = value(), value(), value()
    outer_fn = Graph("fn", [ox], [], [
        Node("grad", [ox], [inner_value, inner_grad], {"wrt": (0,), "output": 0},
             {"fn": inner_fn}),
    ], [inner_grad, inner_value])
    first, cube_value, second = value(), value(), value()
    graph = Graph("second", [x], [], [
        Node("grad", [x], [first, cube_value, second], {"wrt": (0,), "output": 0},
             {"fn": outer_fn}),
    ], [first, cube_value, second])
    return graph.verify()
