"""The PyTorch backend on its own: lowerings against the op records, eager autograd against
the VJP rules, and hand-built IR graphs (while_loop, cond, grad, updates) compiled by
`torch:static`. What every backend must do (round trips, parameters, updates, refusals,
run_all) is the backend contract (unigraph.testing.backend_contract, run on every backend by
test_backend_contract.py); this file keeps what only torch can get wrong. The cross-target
consistency suite lives in test_consistency.py."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import floats_as, op_samples
from ir_graphs import counter_graph, descent_graph, second_derivative_graph
from ir_graphs import value as _v

from unigraph.ir import DTYPES, Graph, Node

torch = pytest.importorskip("torch")

from unigraph_torch.backend import TorchBackend  # noqa: E402
from unigraph_torch.lowerings import LOWERINGS  # noqa: E402

from unigraph.testing.backend_contract import training_graph as _training_graph  # noqa: E402

FLOATS = ("float16", "float32", "float64")


@pytest.fixture(scope="module")
def backend():
    return TorchBackend()


SAMPLES = op_samples()


def _attrsfloats_as(dtype, attrs):
    value = attrs.get("value")
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return {**attrs, "value": value.astype(dtype)}
    return attrs


# -- lowerings ----------------------------------------------------------------------------


def test_plugin_does_not_import_torch():
    code = (
        "import sys, numpy as np\n"
        "from unigraph_torch.plugin import unigraph_backends\n"
        "(backend,) = unigraph_backends()\n"
        "assert backend.name == 'torch' and backend.modes == ('eager', 'static')\n"
        "assert not backend.is_native(np.zeros(2))\n"
        "assert backend.status()[0]\n"
        "assert {q.op for q in backend.quirks()} >= {'relu', 'maximum', 'max_pool2d'}\n"
        "assert 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def _grad_fn_names(out) -> set:
    """The names of the autograd nodes behind `out`."""
    names, todo = set(), [out.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None:
            names.add(type(node).__name__)
            todo.extend(next_fn for next_fn, _ in node.next_functions)
    return names


def test_max_pool2d_takes_the_unfold_route_only_for_a_nan_under_autograd():
    """The quirk workaround (unigraph_torch/quirks.py) costs nothing in the common case:
    without a NaN, torch's own pooling kernel and its backward run."""
    x = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]], requires_grad=True)
    pool = {"kernel": (2, 2), "stride": (1, 1), "padding": (0, 0)}
    assert "MaxPool2DWithIndicesBackward0" in _grad_fn_names(LOWERINGS["max_pool2d"](x, **pool))
    with_nan = torch.tensor([[[[1.0, float("nan")], [float("nan"), 4.0]]]], requires_grad=True)
    out = LOWERINGS["max_pool2d"](with_nan, **pool)
    assert "GatherBackward0" in _grad_fn_names(out)
    out.sum().backward()
    assert with_nan.grad.flatten().tolist() == [0.0, 1.0, 0.0, 0.0]  # the first NaN


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op, sample", SAMPLES)
def test_eager_op_matches_reference(backend, op, sample, dtype):
    inputs = floats_as(dtype, sample.inputs)
    attrs = _attrsfloats_as(dtype, sample.attrs)
    with np.errstate(all="ignore"):
        expected = op.reference(*inputs, **attrs)  # in the run's dtype: gives the type
        exact = op.reference(*floats_as("float64", inputs), **attrs)  # the float64 truth
    native = backend.eager_op(op.name, [backend.to_native(x) for x in inputs], attrs)
    assert backend.is_native(native)
    out = backend.to_numpy(native)
    assert (out.shape, out.dtype) == (expected.shape, expected.dtype)
    if out.dtype.kind == "f":
        rtol, atol = op.tolerance_for(dtype)
        np.testing.assert_allclose(out.astype("float64"), exact.astype("float64"),
                                   rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(out, expected)


DIFFERENTIABLE = [case for case in SAMPLES if case.values[0].vjp is not None]


@pytest.mark.parametrize("op, sample", DIFFERENTIABLE)
def test_eager_grad_matches_vjp_rule(backend, op, sample):
    """torch.autograd and the op record's VJP agree (ties, kinks and padding included)."""
    inputs = sample.inputs
    out = op.reference(*inputs, **sample.attrs)
    cotangent = np.random.default_rng(0).standard_normal(out.shape)
    expected = op.vjp(cotangent, inputs, out, **sample.attrs)
    weights = torch.from_numpy(cotangent)

    def fn(*leaves):
        value = LOWERINGS[op.name](*leaves, **sample.attrs)
        return [torch.sum(value * weights)]

    outputs, grads = backend.eager_grad(fn, [backend.to_native(x) for x in inputs])
    np.testing.assert_allclose(outputs[0].numpy(), np.sum(out * cotangent), rtol=1e-10)
    # The cotangent flows back in the output's dtype (cast to float32 rounds it).
    rtol, atol = op.tolerance_for(out.dtype.name if out.dtype.kind == "f" else "float64")
    for x, grad, want in zip(inputs, grads, expected):
        assert grad.shape == x.shape
        if want is None:
            np.testing.assert_array_equal(grad.numpy(), 0)  # ints, labels: zeros
        else:
            np.testing.assert_allclose(grad.numpy(), want, rtol=max(rtol, 1e-9), atol=atol)


# -- eager --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_to_native_gives_the_torch_dtype(backend, dtype):
    """(The round trip itself is in the backend contract.)"""
    native = backend.to_native((np.arange(6).reshape(2, 3) % 3).astype(dtype))
    assert native.dtype == getattr(torch, dtype)


def test_eager_grad_leaks_no_autograd_graph(backend):
    """(Zeros for unused and integer leaves are in the backend contract.)"""
    x = backend.to_native(np.array([1.0, 2.0]))
    unused = backend.to_native(np.array([3.0]))
    count = backend.to_native(np.array(4))

    def fn(a, b, n):
        return [torch.sum(a * a), a + 1]

    outputs, (dx, db, dn) = backend.eager_grad(fn, [x, unused, count])
    np.testing.assert_array_equal(dx.numpy(), [2.0, 4.0])
    assert not any(o.requires_grad for o in outputs)  # no autograd graph leaks out
    assert not dx.requires_grad
    assert not x.requires_grad  # the caller's tensor is untouched


def test_eager_grad_of_a_grad(backend):
    x = backend.to_native(np.array(1.5))

    def inner(a):
        return [a * a * a]

    def outer(a):
        _, (da,) = backend.eager_grad(inner, [a])
        return [da]

    (first,), (second,) = backend.eager_grad(outer, [x])
    assert first.item() == pytest.approx(3 * 1.5**2)
    assert second.item() == pytest.approx(6 * 1.5)


def test_eager_grad_restores_grad_mode(backend):
    x = backend.to_native(np.array([1.0]))
    with torch.no_grad():
        _, (dx,) = backend.eager_grad(lambda a: [torch.sum(a * 3)], [x])
        assert not torch.is_grad_enabled()
    assert dx.item() == 3.0


# -- static: hand-built graphs ------------------------------------------------------------


def _branch_graph() -> Graph:
    """x + y if x > y else x - y, with y captured by both branches."""
    x, y, pred = _v(), _v(), _v((), "bool")
    branches = {}
    for name, op in (("then", "add"), ("else", "sub")):
        bx, by, out = _v(), _v(), _v()
        branches[name] = Graph(name, [bx, by], [], [Node(op, [bx, by], [out])], [out])
    result = _v()
    return Graph("branch", [x, y], [], [
        Node("greater", [x, y], [pred]),
        Node("cond", [pred, x, y], [result], {}, branches),
    ], [result]).verify()


def test_static_while_loop_is_a_python_while(backend):
    executable = backend.compile(counter_graph(), "static")
    assert "while True:" in executable.source
    out = executable.run([np.array(0), np.array(10)])
    assert [int(o) for o in out] == [20, 20]
    out = executable.run([torch.tensor(5), torch.tensor(3)])  # natives feed too; no iteration
    assert [int(o) for o in out] == [5, 3]


def test_static_cond_is_a_python_if(backend):
    executable = backend.compile(_branch_graph(), "static")
    assert re.search(r"^ +if t\d+:$", executable.source, re.MULTILINE)
    assert re.search(r"^ +else:$", executable.source, re.MULTILINE)
    (taken,) = executable.run([np.array(3.0), np.array(1.0)])
    (other,) = executable.run([np.array(1.0), np.array(3.0)])
    assert (float(taken), float(other)) == (4.0, -2.0)


def test_static_training_step_restores_grad_mode(backend):
    """(The step's numbers are in the backend contract.)"""
    rng = np.random.default_rng(1)
    x, t, w = rng.standard_normal((4, 3)), rng.standard_normal((4, 1)), rng.standard_normal((3, 1))
    executable = backend.compile(_training_graph(), "static")
    executable.set_param(0, w)
    loss, grad = executable.run([x, t])
    np.testing.assert_allclose(grad.numpy(), 2 * x.T @ (x @ w - t) / 4, rtol=1e-12)
    assert torch.is_grad_enabled()  # the run restored grad mode
    assert not loss.requires_grad and not grad.requires_grad


def test_static_grad_of_grad(backend):
    """d2/dx2 of x**3, as a grad node whose function holds a grad node."""
    graph = second_derivative_graph()
    first, value, second = backend.compile(graph, "static").run([np.array(1.5)])
    assert float(value) == pytest.approx(1.5**3)
    assert float(first) == pytest.approx(3 * 1.5**2)
    assert float(second) == pytest.approx(6 * 1.5)


def test_static_grad_inside_a_loop(backend):
    """Gradient descent on (x - 3)**2 for a fixed number of steps, all inside one graph."""
    graph = descent_graph()
    (result,) = backend.compile(graph, "static").run([np.array(1.0), np.array(3)])
    assert float(result) == pytest.approx(3 - 2 * 0.5**3)  # each step halves the distance


def test_static_leaves_torch_state_alone(backend):
    threads = torch.get_num_threads()
    executable = backend.compile(_training_graph(), "static")
    executable.set_param(0, np.ones((3, 1)))
    with torch.no_grad():
        executable.run([np.ones((4, 3)), np.ones((4, 1))])  # grad works under no_grad too
        assert not torch.is_grad_enabled()
    assert torch.is_grad_enabled()
    assert torch.get_num_threads() == threads


@pytest.mark.parametrize("mode", ["eager", "static"])
def test_frontend_counter(mode):
    import unigraph as ug

    @ug.function
    def counter(a, b):
        return ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))

    with ug.use_backend("torch", mode=mode):
        a, b = counter(0, 10)
    assert (int(a.numpy()), int(b.numpy())) == (20, 20)
