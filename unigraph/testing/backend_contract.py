"""The contract every backend keeps, as pytest tests any backend can run unchanged.

Every registered backend and mode is covered (found through the plugin registry, so a
third-party backend registered through the `unigraph` entry points is covered too). To run
it in your own project:

    # tests/test_my_backend_contract.py
    from unigraph.testing.backend_contract import *  # noqa: F401,F403

or with `--unigraph-contract=mine` to restrict it to some backends. What it checks:

* eager: every op record has a lowering; NumPy arrays (0-d too) go in and out with their
  dtype as natives; odd arrays (read-only, reversed, Fortran-ordered, zero-size, large
  int64) are taken; `eager_grad` gives zeros for unused and integer leaves (in the leaf's
  dtype) and for an output no leaf reaches, and a partial per operand for a tensor passed
  twice. (`to_native`/`to_numpy` may share memory: the frontend copies
  arrays in and hands out read-only arrays, so the memory contract is kept once, there;
  `get_param` and updates below must not alias);
* static (every mode but "eager"): parameters round-trip exactly (a float32 array is cast
  to the parameter's dtype) and never alias the caller's arrays (64-byte aligned ones
  included); a parameter never set is refused, naming it; an update that stores an input
  copies it; updates and outputs read the old values; the refusals of the `Executable` base
  (parameter never set, wrong number/dtype/shape of inputs, set_param of a wrong shape) keep
  their one wording on every backend; a `None` dim in an input takes any size; a training
  step (a grad node and an update) gives the right gradient and updates its parameter, and
  an inference-only backend refuses it;
  `run_all` returns every top-level value and applies no update; a compiled graph never
  reads the IR again; a graph that went through JSON compiles; `compile(graph, "eager")` is
  refused.
"""

from __future__ import annotations

import numpy as np
import pytest

from unigraph.errors import BackendError, UnigraphError
from unigraph.ir import DTYPES, Graph, Node, Value
from unigraph.ops import OPS
from unigraph.plugins import backends

__all__ = [name for name in dir() if name.startswith("test_")]  # filled in at the end


def _backends():
    return [b for _, b in sorted(backends().items()) if b.status()[0]]


def _static_targets():
    return [(b, mode) for b in _backends() for mode in b.modes if mode != "eager"]


BACKENDS = pytest.mark.parametrize("backend", _backends(), ids=lambda b: b.name)
STATIC = pytest.mark.parametrize("backend, mode", _static_targets(),
                                 ids=[f"{b.name}:{m}" for b, m in _static_targets()])


def _to_numpy(backend, native) -> np.ndarray:
    return native if isinstance(native, np.ndarray) else backend.to_numpy(native)


# -- hand-built graphs ----------------------------------------------------------------------
def _v(shape=(), dtype="float64", name=""):
    value = Value(shape, dtype)
    value.name = name
    return value


def counter_graph() -> Graph:
    """while a < b: a, b = a + 2, b + 1."""
    a, b = _v((), "int64"), _v((), "int64")
    ca, cb, less = _v((), "int64"), _v((), "int64"), _v((), "bool")
    cond = Graph("cond", [ca, cb], [], [Node("less", [ca, cb], [less])], [less])
    ba, bb, two, one = (_v((), "int64") for _ in range(4))
    na, nb = _v((), "int64"), _v((), "int64")
    body = Graph("body", [ba, bb], [], [
        Node("constant", [], [two], {"value": np.array(2)}),
        Node("constant", [], [one], {"value": np.array(1)}),
        Node("add", [ba, two], [na]),
        Node("add", [bb, one], [nb]),
    ], [na, nb])
    out_a, out_b = _v((), "int64"), _v((), "int64")
    loop = Node("while_loop", [a, b], [out_a, out_b], {"num_carried": 2},
                {"cond": cond, "body": body})
    return Graph("counter", [a, b], [], [loop], [out_a, out_b]).verify()


def scale_graph() -> Graph:
    """y = x * w (w a parameter named "w"), w <- w + x: one output, one update."""
    x, w = _v((3,)), _v((3,), name="w")
    y, new_w = _v((3,)), _v((3,))
    nodes = [Node("mul", [x, w], [y]), Node("add", [w, x], [new_w])]
    return Graph("scale", [x], [w], nodes, [y], [(w, new_w)]).verify()


def store_graph() -> Graph:
    """w <- x, returning the old w."""
    x, w = _v((2,)), _v((2,), name="w")
    return Graph("store", [x], [w], [], [w], [(w, x)]).verify()


def swap_graph() -> Graph:
    """a <- b, b <- a: each update must read the value from before the run."""
    x, a, b = _v((1,)), _v((1,), name="a"), _v((1,), name="b")
    return Graph("swap", [x], [a, b], [], [x], [(a, b), (b, a)]).verify()


def training_graph() -> Graph:
    """loss = mean((x @ w - t)**2); w <- w - 0.1 * dloss/dw; returns loss and the gradient."""
    x, t, w = _v((4, 3)), _v((4, 1)), _v((3, 1), name="w")
    fx, ft, fw = _v((4, 3)), _v((4, 1)), _v((3, 1))
    pred, err, sq, loss = _v((4, 1)), _v((4, 1)), _v((4, 1)), _v()
    fn = Graph("fn", [fx, ft, fw], [], [
        Node("matmul", [fx, fw], [pred]),
        Node("sub", [pred, ft], [err]),
        Node("mul", [err, err], [sq]),
        Node("mean", [sq], [loss], {"axis": None, "keepdims": False}),
    ], [loss])
    value, dw, lr, step, new_w = _v(), _v((3, 1)), _v(), _v((3, 1)), _v((3, 1))
    return Graph("train", [x, t], [w], [
        Node("grad", [x, t, w], [value, dw], {"wrt": (2,), "output": 0}, {"fn": fn}),
        Node("constant", [], [lr], {"value": np.array(0.1)}),
        Node("mul", [lr, dw], [step]),
        Node("sub", [w, step], [new_w]),
    ], [value, dw], [(w, new_w)]).verify()


def aligned(values, dtype="float64") -> np.ndarray:
    """A copy of `values` starting on a 64-byte boundary: some runtimes (a TF Session) take
    such arrays without copying them, which is where aliasing bugs hide."""
    values = np.asarray(values, dtype=dtype)
    raw = np.empty(values.nbytes + 64, np.uint8)
    start = -raw.ctypes.data % 64
    array = raw[start: start + values.nbytes].view(dtype).reshape(values.shape)
    array[...] = values
    return array


# -- eager ----------------------------------------------------------------------------------
@BACKENDS
def test_every_op_record_has_a_lowering(backend):
    backend.load()
    lowerings = backend.lowerings
    if lowerings is None:
        pytest.fail(f"backend {backend.name!r} has no `lowerings` table after load()")
    assert set(OPS) <= set(lowerings), sorted(set(OPS) - set(lowerings))


@BACKENDS
@pytest.mark.parametrize("dtype", DTYPES)
def test_arrays_round_trip_with_their_dtype(backend, dtype):
    matrix = (np.arange(6).reshape(2, 3) % 3).astype(dtype)
    for array in (matrix, matrix[1, 2]):  # and a 0-d one
        native = backend.to_native(array)
        assert backend.is_native(native)
        back = backend.to_numpy(native)
        assert back.dtype == array.dtype and back.shape == array.shape
        np.testing.assert_array_equal(back, array)


@BACKENDS
def test_odd_arrays_are_taken(backend):
    frozen = np.arange(4.0)
    frozen.flags.writeable = False
    reversed_view = np.arange(6.0).reshape(2, 3)[:, ::-1]
    odd = (frozen, reversed_view, np.asfortranarray(np.ones((2, 3))), np.zeros((0, 3)),
           np.array(2**60 + 1))  # zero-size; an int64 no float can hold
    for array in odd:
        back = backend.to_numpy(backend.to_native(array))
        assert (back.dtype, back.shape) == (array.dtype, array.shape)
        np.testing.assert_array_equal(back, array)
    scalar = backend.to_numpy(backend.to_native(np.array(True)))
    assert scalar.dtype == np.bool_ and scalar.shape == ()


@BACKENDS
def test_eager_grad_gives_zeros_for_unused_and_integer_leaves(backend):
    x = backend.to_native(np.array([1.0, 2.0]))
    unused = backend.to_native(np.array([3.0]))
    count = backend.to_native(np.array(4))

    def fn(a, b, n):
        square = backend.eager_op("mul", [a, a], {})
        return [backend.eager_op("sum", [square], {"axis": None, "keepdims": False}), a]

    if backend.inference_only:  # e.g. onnxruntime: gradients are refused, clearly
        with pytest.raises(BackendError, match="inference"):
            backend.eager_grad(fn, [x, unused, count])
        return
    outputs, (dx, db, dn) = backend.eager_grad(fn, [x, unused, count])
    assert float(_to_numpy(backend, outputs[0])) == 5.0
    np.testing.assert_array_equal(_to_numpy(backend, dx), [2.0, 4.0])
    np.testing.assert_array_equal(_to_numpy(backend, db), [0.0])
    assert int(_to_numpy(backend, dn)) == 0 and _to_numpy(backend, dn).dtype == np.int64

    def product(a, b):
        return [backend.eager_op("sum", [backend.eager_op("mul", [a, b], {})],
                                 {"axis": None, "keepdims": False})]

    # one tensor passed twice: each operand gets its own partial (of a * b: b, then a)
    _, (da, db) = backend.eager_grad(product, [x, x])
    np.testing.assert_array_equal(_to_numpy(backend, da), [1.0, 2.0])
    np.testing.assert_array_equal(_to_numpy(backend, db), [1.0, 2.0])
    constant = backend.to_native(np.array(3.0))  # an output that no leaf reaches
    _, (dc,) = backend.eager_grad(lambda a: [constant], [x])
    np.testing.assert_array_equal(_to_numpy(backend, dc), [0.0, 0.0])


# -- static ---------------------------------------------------------------------------------
@STATIC
def test_params_round_trip_exactly_and_never_alias(backend, mode):
    executable = backend.compile(scale_graph(), mode)
    w = aligned([0.1, 1.0 / 3.0, 2.0])
    executable.set_param(0, w)
    w[0] = 99.0  # the caller's array is not the stored parameter
    got = executable.get_param(0)
    np.testing.assert_array_equal(got, [0.1, 1.0 / 3.0, 2.0])
    assert got.dtype == np.float64
    try:
        got[1] = 99.0  # nor is what get_param hands out
    except ValueError:
        pass
    np.testing.assert_array_equal(executable.get_param(0), [0.1, 1.0 / 3.0, 2.0])
    executable.set_param(0, np.ones(3, np.float32))  # cast to the parameter's dtype
    assert executable.get_param(0).dtype == np.float64


@STATIC
def test_a_scalar_parameter_comes_back_as_an_array(backend, mode):
    x, w = _v((), name="x"), _v((), name="w")
    y = _v(())
    graph = Graph("scalar", [x], [w], [Node("mul", [x, w], [y])], [y]).verify()
    executable = backend.compile(graph, mode)
    executable.set_param(0, np.array(1.5))
    got = executable.get_param(0)
    assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == np.float64
    (out,) = executable.run([np.array(2.0)])
    assert float(_to_numpy(backend, out)) == 3.0


@STATIC
def test_a_parameter_never_set_is_refused_by_name(backend, mode):
    executable = backend.compile(scale_graph(), mode)
    with pytest.raises(UnigraphError, match="parameters? 'w'.*never set"):
        executable.run([np.ones(3)])
    executable = backend.compile(swap_graph(), mode)
    executable.set_param(0, np.array([1.0]))  # a set, b not: b is named
    with pytest.raises(UnigraphError, match="parameters? 'b'.*never set"):
        executable.run([np.array([0.0])])


# The refusals the `Executable` base makes for every backend, word for word: a backend that
# overrides run/set_param/get_param instead of the hooks shows up here.
NEVER_SET = ("{target}: parameter 'w' of graph 'scale' was never set: call "
             "set_param(index, array) before run (a @ug.function does this for you)")
WRONG_FEED = ("{target}: input 0 of graph 'scale' is float64[3]; run got {got} (a compiled "
              "graph takes one signature: compile again for another, or cast the input)")


def _refused(call, text: str) -> None:
    with pytest.raises(BackendError) as caught:
        call()
    assert str(caught.value) == text


@STATIC
def test_a_parameter_never_set_is_refused_in_one_wording(backend, mode):
    executable = backend.compile(scale_graph(), mode)
    text = NEVER_SET.format(target=f"{backend.name}:{mode}")
    _refused(lambda: executable.run([np.ones(3)]), text)
    _refused(lambda: executable.run_all([np.ones(3)]), text)
    _refused(lambda: executable.get_param(0), text)


@STATIC
def test_wrong_inputs_are_refused_in_one_wording(backend, mode):
    target = f"{backend.name}:{mode}"
    executable = backend.compile(scale_graph(), mode)
    executable.set_param(0, np.ones(3))
    _refused(lambda: executable.run([np.ones(3), np.ones(3)]),
             f"{target}: graph 'scale' takes 1 input; run got 2")
    _refused(lambda: executable.run([np.ones(3, np.float32)]),
             WRONG_FEED.format(target=target, got="float32[3]"))
    _refused(lambda: executable.run_all([np.ones((2, 3))]),
             WRONG_FEED.format(target=target, got="float64[2, 3]"))
    _refused(lambda: executable.set_param(0, np.ones(4)),
             f"{target}: parameter 'w' of graph 'scale' is float64[3]; set_param got an array "
             "of shape [4]")
    (y,) = executable.run([[1.0, 2.0, 3.0]])  # a list becomes an array of the input's dtype
    np.testing.assert_array_equal(_to_numpy(backend, y), [1.0, 2.0, 3.0])


@STATIC
def test_a_native_feed_is_checked_like_an_array(backend, mode):
    executable = backend.compile(scale_graph(), mode)
    executable.set_param(0, np.full(3, 2.0))
    good = backend.to_native(np.array([1.0, 2.0, 3.0]))
    (y,) = executable.run([good])
    np.testing.assert_array_equal(_to_numpy(backend, y), [2.0, 4.0, 6.0])
    wrong = backend.to_native(np.ones(3, np.float32))
    _refused(lambda: executable.run([wrong]),
             WRONG_FEED.format(target=f"{backend.name}:{mode}", got="float32[3]"))


@STATIC
def test_a_none_dim_takes_any_size(backend, mode):
    x, w = _v((None, 2), name="x"), _v((2,), name="w")
    y, total = _v((None, 2)), _v((2,))
    nodes = [Node("mul", [x, w], [y]), Node("sum", [y], [total], {"axis": (0,), "keepdims": False})]
    graph = Graph("rows", [x], [w], nodes, [y, total]).verify()
    executable = backend.compile(graph, mode)
    executable.set_param(0, np.array([1.0, 10.0]))
    for batch in (1, 3, 0):
        rows = np.arange(2.0 * batch).reshape(batch, 2)
        out, summed = executable.run([rows])
        np.testing.assert_array_equal(_to_numpy(backend, out), rows * [1.0, 10.0])
        np.testing.assert_array_equal(_to_numpy(backend, summed), (rows * [1.0, 10.0]).sum(0))
    _refused(lambda: executable.run([np.ones((3, 4))]),
             f"{backend.name}:{mode}: input 0 ('x') of graph 'rows' is float64[None, 2]; run got "
             "float64[3, 4] (a compiled graph takes one signature: compile again for another, "
             "or cast the input)")


@STATIC
def test_a_run_applies_the_updates_after_reading(backend, mode):
    executable = backend.compile(scale_graph(), mode)
    executable.set_param(0, np.array([1.0, 2.0, 3.0]))
    (y,) = executable.run([np.array([2.0, 2.0, 2.0])])
    np.testing.assert_array_equal(_to_numpy(backend, y), [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(executable.get_param(0), [3.0, 4.0, 5.0])
    (y,) = executable.run([np.array([1.0, 1.0, 1.0])])
    np.testing.assert_array_equal(_to_numpy(backend, y), [3.0, 4.0, 5.0])


@STATIC
def test_an_update_from_an_input_copies_it(backend, mode):
    executable = backend.compile(store_graph(), mode)
    executable.set_param(0, np.zeros(2))
    fed = aligned([1.0, 2.0])
    (old,) = executable.run([fed])
    np.testing.assert_array_equal(_to_numpy(backend, old), [0.0, 0.0])
    fed[:] = 7.0
    np.testing.assert_array_equal(executable.get_param(0), [1.0, 2.0])


@STATIC
def test_updates_read_the_values_from_before_the_run(backend, mode):
    executable = backend.compile(swap_graph(), mode)
    executable.set_param(0, np.array([1.0]))
    executable.set_param(1, np.array([2.0]))
    executable.run([np.array([0.0])])
    assert (executable.get_param(0)[0], executable.get_param(1)[0]) == (2.0, 1.0)


@STATIC
def test_outputs_are_read_before_the_updates(backend, mode):
    """p <- q, q <- x, returning p, q, p again and the input x itself."""
    p, q, x = _v((2,), name="p"), _v((2,), name="q"), _v((2,))
    graph = Graph("shift", [x], [p, q], [], [p, q, p, x], [(p, q), (q, x)]).verify()
    executable = backend.compile(graph, mode)
    executable.set_param(0, np.array([1.0, 2.0]))
    executable.set_param(1, np.array([3.0, 4.0]))
    fed = aligned([5.0, 6.0])
    out = [_to_numpy(backend, o) for o in executable.run([fed])]
    np.testing.assert_array_equal(out, [[1.0, 2.0], [3.0, 4.0], [1.0, 2.0], [5.0, 6.0]])
    fed[:] = 7.0
    np.testing.assert_array_equal(executable.get_param(0), [3.0, 4.0])
    np.testing.assert_array_equal(executable.get_param(1), [5.0, 6.0])


@STATIC
def test_an_output_that_is_an_input_or_a_view_of_one_is_a_copy(backend, mode):
    """Returning x, reshape(x) and x[1:]: writing to the fed array afterwards changes none
    of the outputs (a runtime that takes the feed without copying would hand it back)."""
    x, flat, tail = _v((2, 2)), _v((4,)), _v((1, 2))
    graph = Graph("views", [x], [], [
        Node("reshape", [x], [flat], {"shape": (4,)}),
        Node("slice", [x], [tail], {"begin": (1, 0), "end": (2, 2), "stride": (1, 1)}),
    ], [x, flat, tail]).verify()
    executable = backend.compile(graph, mode)
    fed = aligned([[1.0, 2.0], [3.0, 4.0]])
    out = [_to_numpy(backend, o) for o in executable.run([fed])]
    fed[:] = 7.0
    np.testing.assert_array_equal(out[0], [[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(out[1], [1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(out[2], [[3.0, 4.0]])


@STATIC
def test_a_training_step_computes_its_gradient_and_updates(backend, mode):
    """A grad node and an SGD update in one graph: run_all shows the loss, gradient and new
    weight without applying it; each run applies it (checked against the gradient by hand).
    An inference-only backend refuses the graph, clearly."""
    graph = training_graph()
    if backend.inference_only:
        with pytest.raises(BackendError, match="inference"):
            backend.compile(graph, mode)
        return
    rng = np.random.default_rng(1)
    x, t, w = (rng.standard_normal(shape) for shape in ((4, 3), (4, 1), (3, 1)))
    executable = backend.compile(graph, mode)
    executable.set_param(0, w)
    values = executable.run_all([x, t])
    (loss, dw), (new_w,) = graph.outputs, [new for _, new in graph.updates]
    grad = 2 * x.T @ (x @ w - t) / 4
    np.testing.assert_allclose(values[loss.id], np.mean((x @ w - t) ** 2), rtol=1e-12)
    np.testing.assert_allclose(values[dw.id], grad, rtol=1e-12)
    np.testing.assert_allclose(values[new_w.id], w - 0.1 * grad, rtol=1e-12)
    np.testing.assert_array_equal(executable.get_param(0), w)
    for _ in range(3):
        got_loss, got_grad = executable.run([x, t])
        grad = 2 * x.T @ (x @ w - t) / 4
        np.testing.assert_allclose(_to_numpy(backend, got_loss), np.mean((x @ w - t) ** 2),
                                   rtol=1e-12)
        np.testing.assert_allclose(_to_numpy(backend, got_grad), grad, rtol=1e-12)
        w = w - 0.1 * grad
        np.testing.assert_allclose(executable.get_param(0), w, rtol=1e-12)


@STATIC
def test_run_all_gives_every_top_level_value_and_updates_nothing(backend, mode):
    graph = scale_graph()
    executable = backend.compile(graph, mode)
    executable.set_param(0, np.array([1.0, 2.0, 3.0]))
    values = executable.run_all([np.array([2.0, 2.0, 2.0])])
    top_level = {v.id for v in graph.inputs + graph.params}
    top_level |= {v.id for node in graph.nodes for v in node.outputs}
    assert top_level <= set(values)
    assert all(isinstance(v, np.ndarray) for v in values.values())
    np.testing.assert_array_equal(values[graph.outputs[0].id], [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(executable.get_param(0), [1.0, 2.0, 3.0])


@STATIC
def test_a_compiled_graph_never_reads_the_ir_again(backend, mode):
    graph = counter_graph()
    executable = backend.compile(graph, mode)
    graph.nodes.clear()
    out = executable.run([np.array(0), np.array(10)])
    assert [int(_to_numpy(backend, o)) for o in out] == [20, 20]


@STATIC
def test_a_graph_from_json_compiles(backend, mode):
    graph = Graph.from_json(counter_graph().to_json())
    out = backend.compile(graph, mode).run([np.array(1), np.array(4)])
    assert [int(_to_numpy(backend, o)) for o in out] == [7, 7]


@STATIC
def test_each_compile_is_independent(backend, mode):
    first, second = backend.compile(scale_graph(), mode), backend.compile(scale_graph(), mode)
    first.set_param(0, np.ones(3))
    second.set_param(0, np.zeros(3))
    first.run([np.ones(3)])
    np.testing.assert_array_equal(second.get_param(0), np.zeros(3))
    np.testing.assert_array_equal(first.get_param(0), np.full(3, 2.0))


@BACKENDS
def test_compiling_for_eager_mode_is_refused(backend):
    with pytest.raises(BackendError):
        backend.compile(counter_graph(), "eager")


__all__ = [name for name in dir() if name.startswith("test_")]
