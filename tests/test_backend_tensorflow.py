"""TensorFlow-specific tests: the lowering table against the op records, hand-built IR graphs
(while_loop, cond, grad, training updates) compiled for tensorflow:static (v1 Graph +
Session) and tensorflow:function (tf.function), the native control-flow ops, compile-once,
parameters, and the tensorflow-after-paddle import order.

The generic targets x ops x dtypes suite lives in test_consistency.py; this file checks what
only the TensorFlow backend can get wrong. The NumPy backend's static engine runs the same
hand-built graphs as the reference.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from unigraph.ir import Graph, Node, Value
from unigraph.ops import OPS, TensorSpec
from unigraph.plugins import backends, get_backend

# Not pytest.importorskip("tensorflow"): that would import TF before paddle (a crash later).
pytestmark = pytest.mark.skipif(not backends()["tensorflow"].status()[0],
                                reason="tensorflow is not installed")

GRAPH_MODES = ("static", "function")


@pytest.fixture(scope="module")
def backend():
    backend = get_backend("tensorflow")
    backend.load()
    return backend


@pytest.fixture(scope="module")
def tf(backend):
    return backend.load()


# -- building IR graphs by hand -----------------------------------------------------------


class Builder:
    """Builds one IR graph by hand: `op` and `const` append a node and return its output."""

    def __init__(self, name, inputs, params=()):
        self.graph = Graph(name, list(inputs), list(params))

    def op(self, op, *inputs, out, **attrs):
        """`out` is the (shape, dtype) of the result."""
        out = Value(*out)
        self.graph.nodes.append(Node(op, list(inputs), [out], attrs))
        return out

    def const(self, value, dtype):
        value = np.asarray(value, dtype=dtype)
        return self.op("constant", out=(value.shape, dtype), value=value)

    def node(self, op, inputs, outputs, attrs, subgraphs):
        self.graph.nodes.append(Node(op, list(inputs), list(outputs), attrs, subgraphs))
        return outputs

    def done(self, *outputs, updates=()):
        self.graph.outputs = list(outputs)
        self.graph.updates = list(updates)
        return self.graph.verify()


def like(value):
    return Value(value.shape, value.dtype)


def counter_graph():
    """while a < b: a, b = a + 2, b + 1 (the seed example), on int64 scalars."""
    a, b = Value((), "int64", "a"), Value((), "int64", "b")
    cond = Builder("cond", [like(a), like(b)])
    cond_out = cond.op("less", *cond.graph.inputs, out=((), "bool"))
    body = Builder("body", [like(a), like(b)])
    ba, bb = body.graph.inputs
    new_a = body.op("add", ba, body.const(2, "int64"), out=((), "int64"))
    new_b = body.op("add", bb, body.const(1, "int64"), out=((), "int64"))
    top = Builder("counter", [a, b])
    outs = top.node("while_loop", [a, b], [like(a), like(b)], {"num_carried": 2},
                    {"cond": cond.done(cond_out), "body": body.done(new_a, new_b)})
    return top.done(*outs)


def branch_graph():
    """x + y if sum(x) > sum(y) else x - y, on float32[?, 3]."""
    x, y = Value((None, 3), "float32", "x"), Value((None, 3), "float32", "y")
    branches = {}
    for name, op in (("then", "add"), ("else", "sub")):
        sub = Builder(name, [like(x), like(y)])
        branches[name] = sub.done(sub.op(op, *sub.graph.inputs, out=((None, 3), "float32")))
    top = Builder("branch", [x, y])
    sums = [top.op("sum", v, out=((), "float32"), axis=None, keepdims=False)
            for v in (x, y)]
    pred = top.op("greater", *sums, out=((), "bool"))
    (out,) = top.node("cond", [pred, x, y], [like(x)], {}, branches)
    return top.done(out)


def flag_graph():
    """neg(x) if flag else x, with a bool[1] flag (the frontend accepts shape [1])."""
    flag, x = Value((1,), "bool", "flag"), Value((2,), "float32", "x")
    then = Builder("then", [like(x)])
    then_graph = then.done(then.op("neg", then.graph.inputs[0], out=((2,), "float32")))
    otherwise = Builder("else", [like(x)])
    else_graph = otherwise.done(otherwise.graph.inputs[0])
    top = Builder("flag", [flag, x])
    (out,) = top.node("cond", [flag, x], [like(x)], {}, {"then": then_graph, "else": else_graph})
    return top.done(out)


def power_loop(builder, x, y, n):
    """x * y**n by a while_loop carrying (i, x) with y and n captured."""
    i0 = builder.const(0, "int64")
    cond = Builder("cond", [like(i0), like(x), like(y), like(n)])
    ci, _, _, cn = cond.graph.inputs
    cond_out = cond.op("less", ci, cn, out=((), "bool"))
    body = Builder("body", [like(i0), like(x), like(y), like(n)])
    bi, bx, by, _ = body.graph.inputs
    next_i = body.op("add", bi, body.const(1, "int64"), out=((), "int64"))
    next_x = body.op("mul", bx, by, out=(x.shape, x.dtype))
    _, out = builder.node("while_loop", [i0, x, y, n], [like(i0), like(x)], {"num_carried": 2},
                          {"cond": cond.done(cond_out), "body": body.done(next_i, next_x)})
    return out


def grad_node(builder, fn: Graph, operands, wrt, output=0):
    outs = [like(v) for v in fn.outputs] + [like(operands[i]) for i in wrt]
    return builder.node("grad", operands, outs, {"wrt": tuple(wrt), "output": output},
                        {"fn": fn})


def loop_grad_graph():
    """value and d/dx, d/dy, d/dn of sum(x * y**n) through a while_loop; n is an int."""
    x, y, n = Value((3,), "float64", "x"), Value((3,), "float64", "y"), Value((), "int64", "n")
    fn = Builder("fn", [like(x), like(y), like(n)])
    fx, fy, fn_n = fn.graph.inputs
    looped = power_loop(fn, fx, fy, fn_n)
    loss = fn.op("sum", looped, out=((), "float64"), axis=None, keepdims=False)
    top = Builder("loop_grad", [x, y, n])
    return top.done(*grad_node(top, fn.done(loss), [x, y, n], wrt=(0, 1, 2)))


def second_derivative_graph():
    """d/dx of sum(d/dx sum(x**3)) = 6x: a grad node inside a grad node's function."""
    x = Value((4,), "float32", "x")
    inner = Builder("inner", [like(x)])
    (ix,) = inner.graph.inputs
    cube = inner.op("mul", inner.op("mul", ix, ix, out=((4,), "float32")), ix,
                    out=((4,), "float32"))
    inner_fn = inner.done(inner.op("sum", cube, out=((), "float32"), axis=None,
                                   keepdims=False))
    outer = Builder("outer", [like(x)])
    (ox,) = outer.graph.inputs
    _, first = grad_node(outer, inner_fn, [ox], wrt=(0,))
    outer_fn = outer.done(outer.op("sum", first, out=((), "float32"), axis=None,
                                   keepdims=False))
    top = Builder("second", [x])
    _, second = grad_node(top, outer_fn, [x], wrt=(0,))
    return top.done(second)


def descent_loop_graph(steps=3, rate=0.25):
    """x <- x - rate * d/dx sum(x * x), `steps` times: a grad node inside a loop body."""
    x = Value((3,), "float32", "x")
    cond = Builder("cond", [Value((), "int64"), like(x)])
    cond_out = cond.op("less", cond.graph.inputs[0], cond.const(steps, "int64"),
                       out=((), "bool"))
    fn = Builder("fn", [like(x)])
    (fx,) = fn.graph.inputs
    square = fn.op("sum", fn.op("mul", fx, fx, out=((3,), "float32")), out=((), "float32"),
                   axis=None, keepdims=False)
    body = Builder("body", [Value((), "int64"), like(x)])
    bi, bx = body.graph.inputs
    _, g = grad_node(body, fn.done(square), [bx], wrt=(0,))
    step = body.op("mul", g, body.const(rate, "float32"), out=((3,), "float32"))
    new_x = body.op("sub", bx, step, out=((3,), "float32"))
    new_i = body.op("add", bi, body.const(1, "int64"), out=((), "int64"))
    top = Builder("descent", [x])
    i0 = top.const(0, "int64")
    _, out = top.node("while_loop", [i0, x], [like(i0), like(x)], {"num_carried": 2},
                      {"cond": cond.done(cond_out), "body": body.done(new_i, new_x)})
    return top.done(out)


def unconnected_grad_graph():
    """grad of sum(x) with respect to x, an unused float z, an int k, and x again."""
    x, z, k = Value((2,), "float32", "x"), Value((2,), "float32", "z"), Value((2,), "int32", "k")
    fn = Builder("fn", [like(x), like(z), like(k), like(x)])
    fx = fn.graph.inputs[0]
    fn_graph = fn.done(fn.op("sum", fx, out=((), "float32"), axis=None, keepdims=False))
    top = Builder("unconnected", [x, z, k])
    return top.done(*grad_node(top, fn_graph, [x, z, k, x], wrt=(0, 1, 2, 3)))


def training_graph(lr=0.5):
    """One SGD step of softmax regression: loss, then w -= lr * dw and b -= lr * db."""
    x, labels = Value((None, 4), "float32", "x"), Value((None,), "int64", "labels")
    w, b = Value((4, 3), "float32", "fc.weight"), Value((3,), "float32", "fc.bias")
    fn = Builder("loss", [like(x), like(labels), like(w), like(b)])
    fx, fl, fw, fb = fn.graph.inputs
    logits = fn.op("add", fn.op("matmul", fx, fw, out=((None, 3), "float32")), fb,
                   out=((None, 3), "float32"))
    per_row = fn.op("sparse_softmax_cross_entropy", logits, fl, out=((None,), "float32"))
    loss = fn.op("mean", per_row, out=((), "float32"), axis=None, keepdims=False)
    top = Builder("train_step", [x, labels], [w, b])
    top_loss, dw, db = grad_node(top, fn.done(loss), [x, labels, w, b], wrt=(2, 3))
    rate = top.const(lr, "float32")
    new_w = top.op("sub", w, top.op("mul", dw, rate, out=((4, 3), "float32")),
                   out=((4, 3), "float32"))
    new_b = top.op("sub", b, top.op("mul", db, rate, out=((3,), "float32")),
                   out=((3,), "float32"))
    return top.done(top_loss, updates=[(w, new_w), (b, new_b)])


def reference_run(graph, inputs, params=(), steps=1):
    executable = get_backend("numpy").compile(graph, "static")
    for i, value in enumerate(params):
        executable.set_param(i, value)
    for _ in range(steps):
        outputs = executable.run(inputs)
    return [np.asarray(o) for o in outputs], [executable.get_param(i) for i in range(len(params))]


def run_numpy(executable, inputs):
    return [np.asarray(o) for o in executable.run(inputs)]


# -- the lowering table and the eager mode --------------------------------------------------


def _samples():
    return [(name, i) for name, op in sorted(OPS.items())
            for i in range(len(op.samples(np.random.default_rng(0))))]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,index", _samples(), ids=[f"{n}-{i}" for n, i in _samples()])
def test_eager_op_matches_reference(backend, name, index, dtype):
    op = OPS[name]
    sample = op.samples(np.random.default_rng(0))[index]
    inputs = [x.astype(dtype) if x.dtype.kind == "f" else x for x in sample.inputs]
    got = backend.to_numpy(backend.eager_op(name, [backend.to_native(x) for x in inputs],
                                            sample.attrs))
    want = op.reference(*sample.inputs, **sample.attrs)
    assert got.dtype == op.reference(*inputs, **sample.attrs).dtype
    assert got.shape == want.shape
    rtol, atol = op.tolerance_for(dtype)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol, atol)


def test_a_numpy_array_is_not_native(backend):
    """(The round trip of every dtype is in the backend contract.)"""
    array = np.arange(6.0).reshape(2, 3)
    assert backend.is_native(backend.to_native(array)) and not backend.is_native(array)


def single_op_graph(name, inputs, attrs):
    values = [Value(x.shape, x.dtype.name) for x in inputs]
    spec = OPS[name].infer(*[TensorSpec(v.shape, v.dtype) for v in values], **attrs)
    top = Builder(name, values)
    return top.done(top.op(name, *values, out=(spec.shape, spec.dtype), **attrs))


@pytest.mark.parametrize("mode", ("eager",) + GRAPH_MODES)
def test_ordered_comparisons_take_bools(backend, mode):
    # TF's Less/Greater kernels have no bool version; the lowering goes through int8.
    x, y = np.array([False, False, True, True]), np.array([False, True, False, True])
    for name in ("less", "less_equal", "greater", "greater_equal"):
        if mode == "eager":
            got = backend.eager_op(name, [backend.to_native(x), backend.to_native(y)], {})
            got = backend.to_numpy(got)
        else:
            (got,) = run_numpy(backend.compile(single_op_graph(name, [x, y], {}), mode), [x, y])
        np.testing.assert_array_equal(got, OPS[name].reference(x, y), err_msg=name)


def test_argmax_counts_nan_as_the_maximum(backend):
    x = np.array([[1.0, np.nan, 3.0], [2.0, 5.0, 1.0]], dtype=np.float32)
    got = backend.eager_op("argmax", [backend.to_native(x)], {"axis": 1, "keepdims": False})
    np.testing.assert_array_equal(backend.to_numpy(got), [1, 1])


def test_eager_grad_nests(backend, tf):
    x = backend.to_native(np.array([1.0, 2.0]))

    def first(x):
        _, (g,) = backend.eager_grad(lambda x: [tf.reduce_sum(x * x * x)], [x])
        return [tf.reduce_sum(g)]

    _, (second,) = backend.eager_grad(first, [x])
    np.testing.assert_allclose(second, [6.0, 12.0])


# conv2d takes three routes in TF (see lowerings.conv2d): plain, stride-1 dilation through
# SpaceToBatchND, and strided dilation through a zero-filled filter; groups split per group.
CONV_CASES = [
    # groups, stride, dilation, padding
    (1, (1, 1), (1, 1), (0, 0)),
    (2, (2, 1), (1, 1), (1, 2)),
    (1, (1, 1), (2, 2), (1, 1)),
    (3, (1, 1), (1, 2), (0, 1)),
    (2, (1, 2), (2, 1), (2, 0)),
    (1, (2, 2), (1, 3), (0, 3)),
]


def conv_case(groups, stride, dilation, padding):
    rng = np.random.default_rng(groups + 10 * dilation[1])
    x = rng.standard_normal((2, 6, 9, 10))
    w = rng.standard_normal((6, 6 // groups, 3, 2))
    attrs = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    out = OPS["conv2d"].reference(x, w, **attrs)
    cotangent = rng.standard_normal(out.shape)
    return x, w, attrs, out, cotangent, OPS["conv2d"].vjp(cotangent, [x, w], out, **attrs)


def conv_grad_graph(x, w, attrs, out, cotangent):
    fn = Builder("fn", [Value(x.shape, "float64"), Value(w.shape, "float64")])
    conv = fn.op("conv2d", *fn.graph.inputs, out=(out.shape, "float64"), **attrs)
    weighted = fn.op("mul", conv, fn.const(cotangent, "float64"), out=(out.shape, "float64"))
    loss = fn.op("sum", weighted, out=((), "float64"), axis=None, keepdims=False)
    top = Builder("conv_grad", [Value(x.shape, "float64"), Value(w.shape, "float64")])
    return top.done(*grad_node(top, fn.done(conv, loss), top.graph.inputs, wrt=(0, 1),
                               output=1))


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv2d_routes_forward_and_gradient_eager(backend, tf, case):
    x, w, attrs, want, cotangent, (want_dx, want_dw) = conv_case(*case)
    natives = [backend.to_native(x), backend.to_native(w)]
    g = backend.to_native(cotangent)

    def loss(x, w):
        out = backend.eager_op("conv2d", [x, w], attrs)
        return [tf.reduce_sum(out * g), out]

    (_, out), (dx, dw) = backend.eager_grad(loss, natives)
    np.testing.assert_allclose(backend.to_numpy(out), want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(backend.to_numpy(dx), want_dx, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(backend.to_numpy(dw), want_dw, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("mode", GRAPH_MODES)
@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv2d_routes_forward_and_gradient_compiled(backend, case, mode):
    x, w, attrs, want, cotangent, (want_dx, want_dw) = conv_case(*case)
    executable = backend.compile(conv_grad_graph(x, w, attrs, want, cotangent), mode)
    out, _, dx, dw = run_numpy(executable, [x, w])
    np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dw, want_dw, rtol=1e-10, atol=1e-10)


def unknown_batch_graph():
    """conv2d, max_pool2d and avg_pool2d of x [?, 2, 5, 5] (a batch known only at run time),
    and d/dx, d/dw of the sum of all three."""
    x, w = Value((None, 2, 5, 5), "float64", "x"), Value((3, 2, 3, 3), "float64", "w")
    fn = Builder("fn", [like(x), like(w)])
    fx, fw = fn.graph.inputs
    conv = fn.op("conv2d", fx, fw, out=((None, 3, 3, 3), "float64"), stride=(1, 1),
                 padding=(0, 0), dilation=(1, 1), groups=1)
    pools = [fn.op(op, fx, out=((None, 2, 3, 3), "float64"), kernel=(3, 3), stride=(2, 2),
                   padding=(1, 1)) for op in ("max_pool2d", "avg_pool2d")]
    sums = [fn.op("sum", v, out=((), "float64"), axis=None, keepdims=False)
            for v in (conv, *pools)]
    loss = fn.op("add", fn.op("add", sums[0], sums[1], out=((), "float64")), sums[2],
                 out=((), "float64"))
    top = Builder("unknown_batch", [x, w])
    return top.done(*grad_node(top, fn.done(conv, *pools, loss), [x, w], wrt=(0, 1),
                               output=3))


@pytest.mark.parametrize("mode", GRAPH_MODES)
def test_conv_and_pools_over_a_batch_known_only_at_run_time(backend, mode):
    # An empty batch takes the zeros branch (TF's Conv2D would return its input, and
    # oneDNN's MaxPoolGrad would abort the process); a full one the conv and pools.
    executable = backend.compile(unknown_batch_graph(), mode)
    rng = np.random.default_rng(5)
    w = rng.standard_normal((3, 2, 3, 3))
    pool_attrs = {"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1)}
    conv_attrs = {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1}
    for batch in (0, 2):
        x = rng.standard_normal((batch, 2, 5, 5))
        conv, max_pool, avg_pool, _, dx, dw = run_numpy(executable, [x, w])
        want_conv = OPS["conv2d"].reference(x, w, **conv_attrs)
        want = [want_conv, *(OPS[op].reference(x, **pool_attrs)
                             for op in ("max_pool2d", "avg_pool2d"))]
        for got, expected in zip((conv, max_pool, avg_pool), want):
            assert got.shape == expected.shape
            np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)
        want_dx, want_dw = OPS["conv2d"].vjp(np.ones(want_conv.shape), [x, w], want_conv,
                                             **conv_attrs)
        if batch:  # the reference's max_pool2d VJP takes no empty batch
            for op, out in (("max_pool2d", want[1]), ("avg_pool2d", want[2])):
                want_dx = want_dx + OPS[op].vjp(np.ones(out.shape), [x], out, **pool_attrs)[0]
        np.testing.assert_allclose(dx, want_dx, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(dw, want_dw, rtol=1e-10, atol=1e-10)


# -- compiled graphs: static (Session) and function (tf.function) ---------------------------


@pytest.mark.parametrize("mode", GRAPH_MODES)
def test_counter_while_loop(backend, mode):
    executable = backend.compile(counter_graph(), mode)
    out = run_numpy(executable, [np.array(0), np.array(10)])
    assert [o.item() for o in out] == [20, 20]
    assert all(o.dtype == np.int64 for o in out)


@pytest.mark.parametrize("mode", GRAPH_MODES)
def test_cond_takes_each_branch(backend, mode):
    executable = backend.compile(branch_graph(), mode)
    x = np.ones((2, 3), np.float32)
    for y in (x * 0.5, x * 2.0):
        (got,) = run_numpy(executable, [x, y])
        (want,), _ = reference_run(branch_graph(), [x, y])
        np.testing.assert_allclose(got, want)


@pytest.mark.parametrize("mode", GRAPH_MODES)
def test_cond_with_a_one_element_predicate(backend, mode):
    # The raw If op would take any non-empty predicate as true; tf.cond squeezes it first.
    executable = backend.compile(flag_graph(), mode)
    x = np.array([1.0, -2.0], np.float32)
    np.testing.assert_array_equal(run_numpy(executable, [np.array([False]), x])[0], x)
    np.testing.assert_array_equal(run_numpy(executable, [np.array([True]), x])[0], -x)


@pytest.mark.parametrize("mode", GRAPH_MODES)
def test_grad_through_while_loop_with_captured_values(backend, mode):
    graph = loop_grad_graph()
    inputs = [np.array([1.0, -2.0, 0.5]), np.array([1.5, 0.5, -1.0]), np.array(3)]
    got = run_numpy(backend.compile(graph, mode), inputs)
    x, y, n = inputs
    np.testing.assert_allclose(got[0], np.sum(x * y**3))
    np.testing.assert_allclose(got[1], y**3)
    np.testing.assert_allclose(got[2], 3 * x * y**2)
    assert got[3].dtype == np.int64 and got[3] == 0  # int operand: zero gradient


@pytest.mark.parametrize("mode", GRAPH_MODES)
def test_second_derivative(backend, mode):
    x = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    (got,) = run_numpy(backend.compile(second_derivative_graph(), mode), [x])
    np.testing.assert_allclose(got, 6 * x, rtol=1e-6)


@pytest.mark.parametrize("mode", GRAPH_MODES)
def test_grad_inside_a_loop_body(backend, mode):
    x = np.array([1.0, -2.0, 4.0], np.float32)
    (got,) = run_numpy(backend.compile(descent_loop_graph(), mode), [x])
    np.testing.assert_allclose(got, x * 0.5**3)  # each step: x - 0.25 * 2x = x / 2


@pytest.mark.parametrize("mode", GRAPH_MODES)
def test_unconnected_gradients_are_zeros(backend, mode):
    x, z, k = np.array([1.0, 2.0], np.float32), np.ones(2, np.float32), np.ones(2, np.int32)
    _, gx, gz, gk, gx_again = run_numpy(backend.compile(unconnected_grad_graph(), mode),
                                        [x, z, k])
    np.testing.assert_array_equal(gx, [1.0, 1.0])
    np.testing.assert_array_equal(gz, [0.0, 0.0])
    np.testing.assert_array_equal(gk, [0, 0])
    # x passed twice, only the first use feeds the loss: each operand has its own partial.
    np.testing.assert_array_equal(gx_again, [0.0, 0.0])


@pytest.mark.parametrize("mode", GRAPH_MODES)
def test_training_steps_update_parameters(backend, mode):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 4)).astype(np.float32)
    labels = rng.integers(0, 3, 8)
    w0 = rng.standard_normal((4, 3)).astype(np.float32)
    b0 = np.zeros(3, np.float32)
    executable = backend.compile(training_graph(), mode)
    executable.set_param(0, w0)
    executable.set_param(1, b0)
    losses = [float(run_numpy(executable, [x, labels])[0]) for _ in range(5)]
    want_out, (want_w, want_b) = reference_run(training_graph(), [x, labels], [w0, b0], steps=5)
    assert losses[-1] < losses[0]
    np.testing.assert_allclose(losses[-1], want_out[0], rtol=1e-5)
    np.testing.assert_allclose(executable.get_param(0), want_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(executable.get_param(1), want_b, rtol=1e-5, atol=1e-6)


def test_static_loads_every_parameter_set_in_one_session_run(backend):
    # One Session.run per parameter costs parameters x graph size (issue 19 item 7).
    executable = backend.compile(training_graph(), "static")
    calls = []
    session_run = executable._session.run
    executable._session.run = lambda *args, **kwargs: (calls.append(args[0]),
                                                        session_run(*args, **kwargs))[1]
    w, b = np.full((4, 3), 0.5, np.float32), np.array([1.0, 2.0, 3.0], np.float32)
    executable.set_param(0, w)
    executable.set_param(1, b)
    w[:] = 9.0  # set_param keeps its own copy until the values go in
    assert calls == []
    x, labels = np.ones((2, 4), np.float32), np.array([0, 2])
    (loss,) = executable.run([x, labels])
    assert len(calls) == 1  # the two parameters together; the step runs on a prepared callable
    # logits = 4 * 0.5 + b = [3, 4, 5] on each row; labels 0 and 2.
    log_sum = np.log(np.exp([3.0, 4.0, 5.0]).sum())
    np.testing.assert_allclose(loss, np.mean([log_sum - 3.0, log_sum - 5.0]), rtol=1e-6)
    executable.set_param(1, np.zeros(3, np.float32))
    np.testing.assert_array_equal(executable.get_param(1), np.zeros(3))


# -- the native graph itself ------------------------------------------------------------------


def _static_op_types(executable) -> set:
    graph_def = executable.native_graph.as_graph_def()
    types = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        types |= {node.op for node in function.node_def}
    return types


def _function_op_types(executable) -> set:
    graph_def = executable.concrete.graph.as_graph_def()
    types = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        types |= {node.op for node in function.node_def}
    return types


def _native_graph(executable):
    return getattr(executable, "native_graph", None) or executable.concrete.graph


@pytest.mark.parametrize("mode", GRAPH_MODES)
def test_activation_after_conv_runs_on_the_nhwc_side(backend, mode):
    # relu(conv2d(x, w, b)) in a graph: Relu takes the BiasAdd directly, so Grappler can fuse
    # conv + bias + relu. On oneDNN's NCHW kernels nothing is transposed; on the NHWC route
    # the one transpose back to NCHW comes after the Relu.
    x, w, b = Value((1, 2, 5, 5), "float32"), Value((3, 2, 3, 3), "float32"), Value((3,),
                                                                                    "float32")
    top = Builder("conv_relu", [x, w, b])
    conv = top.op("conv2d", x, w, b, out=((1, 3, 3, 3), "float32"), stride=(1, 1),
                  padding=(0, 0), dilation=(1, 1), groups=1)
    graph = top.done(top.op("relu", conv, out=((1, 3, 3, 3), "float32")))
    ops = _native_graph(backend.compile(graph, mode)).get_operations()
    (relu,) = [op for op in ops if op.type == "Relu"]
    assert relu.inputs[0].op.type == "BiasAdd"
    from unigraph_tensorflow import nchw_conv

    after = [consumer.type for consumer in relu.outputs[0].consumers()]
    # Both graph modes keep a conv whose result they return NHWC (the Transpose after the
    # Relu is built, never run; a function returns the Relu's result through an Identity);
    # with a later op that is no output, oneDNN's NCHW kernels run where TF has them.
    assert sorted(after) == (["Transpose"] if mode == "static" else ["Identity", "Transpose"])
    flat = top.op("reshape", graph.outputs[0], out=((1, 27), "float32"), shape=(1, 27))
    graph = top.done(flat)
    ops = _native_graph(backend.compile(graph, mode)).get_operations()
    (relu,) = [op for op in ops if op.type == "Relu"]
    after = [consumer.type for consumer in relu.outputs[0].consumers()]
    if not nchw_conv.supported():
        assert after == ["Transpose"]
    else:
        assert "Transpose" not in after


def test_static_graph_uses_tf_control_flow_ops(backend):
    types = _static_op_types(backend.compile(counter_graph(), "static"))
    assert types & {"While", "StatelessWhile"}, types
    types = _static_op_types(backend.compile(branch_graph(), "static"))
    assert types & {"If", "StatelessIf"}, types
    types = _static_op_types(backend.compile(training_graph(), "static"))
    assert {"VarHandleOp", "AssignVariableOp", "Placeholder"} <= types
    assert "SparseSoftmaxCrossEntropyWithLogits" in types


def test_function_graph_uses_tf_control_flow_ops(backend):
    types = _function_op_types(backend.compile(counter_graph(), "function"))
    assert types & {"While", "StatelessWhile"}, types
    types = _function_op_types(backend.compile(branch_graph(), "function"))
    assert types & {"If", "StatelessIf"}, types
    types = _function_op_types(backend.compile(training_graph(), "function"))
    assert {"ReadVariableOp", "AssignVariableOp"} <= types


def test_static_graph_is_built_once(backend):
    executable = backend.compile(branch_graph(), "static")
    assert executable.native_graph.finalized  # a run cannot add ops
    count = len(executable.native_graph.get_operations())
    for rows in (1, 2, 5):
        executable.run([np.ones((rows, 3), np.float32)] * 2)
    executable.run_all([np.ones((2, 3), np.float32)] * 2)
    assert len(executable.native_graph.get_operations()) == count


def test_function_is_traced_once(backend):
    executable = backend.compile(branch_graph(), "function")
    for rows in (1, 2, 5):
        executable.run([np.ones((rows, 3), np.float32)] * 2)
    assert executable.function.experimental_get_tracing_count() == 1


def test_compiling_changes_nothing_process_wide(backend, tf):
    backend.compile(training_graph(), "static")
    backend.compile(training_graph(), "function")
    assert tf.executing_eagerly()
    assert tf.compat.v1.executing_eagerly_outside_functions()
    assert tf.compat.v1.control_flow_v2_enabled()
    assert tf.compat.v1.get_default_graph().get_operations() == []


def test_session_follows_tf_thread_settings(backend, tf):
    from unigraph_tensorflow.static import session_config

    config = session_config(tf)
    assert config.intra_op_parallelism_threads == (
        tf.config.threading.get_intra_op_parallelism_threads())
    assert config.inter_op_parallelism_threads == (
        tf.config.threading.get_inter_op_parallelism_threads())


# -- imports ----------------------------------------------------------------------------------


def _python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=300)


def test_unigraph_does_not_import_tensorflow():
    result = _python("""
        import sys
        import unigraph
        from unigraph.plugins import backends
        backend = backends()["tensorflow"]
        backend.status(), backend.version()
        assert backend.quirks(), "the TF quirks are listed"
        assert "tensorflow" not in sys.modules, "tensorflow imported"
    """)
    assert result.returncode == 0, result.stderr


def test_loading_tensorflow_then_paddle_does_not_crash():
    pytest.importorskip("paddle")
    # Importing tensorflow before paddle segfaults; through unigraph that order is unreachable.
    result = _python("""
        import logging, os, sys
        from unigraph.plugins import get_backend
        tf = get_backend("tensorflow").load()
        assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "2"  # set before the import
        assert tf.get_logger().level == logging.ERROR
        x = tf.constant([1.0, 2.0])
        import paddle
        assert list(sys.modules).index("paddle") < list(sys.modules).index("tensorflow")
        print("paddle sum", float(paddle.to_tensor([1.0, 2.0, 3.0]).sum()))
        print("tf sum", float(tf.reduce_sum(x)))
    """)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "paddle sum 6.0" in result.stdout and "tf sum 3.0" in result.stdout
