"""ug.onnx.export: every op record's samples, every example's CHECKS entries and programs
with control flow, written as ONNX models, checked by `onnx.checker` (full check), run in
ONNX Runtime and compared with the float64 reference (numpy:eager on float64 inputs)."""


import numpy as np
import onnx
import onnxruntime
import pytest
from conftest import TARGETS, floats_as, op_samples, run_on
from export_cases import (
    EXAMPLES,
    Gate,
    SmallCNN,
    compare,
    example_entries,
    gradient_only,
    reference,
    shrink,
    training_step,
)

import unigraph as ug
import unigraph.onnx
from unigraph.cli_export import main as export_main
from unigraph.dispatch import apply
from unigraph.export import ExportError, export
from unigraph.ir import Graph, Node, Value
from unigraph.onnx.export import graph_to_model


def run_model(model: onnx.ModelProto, inputs) -> list:
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: np.asarray(x) for i, x in
                              zip(session.get_inputs(), inputs)})


# -- every op record ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("op, sample", op_samples())
def test_every_op_sample_runs_in_onnxruntime(op, sample, dtype):
    """One model per sample, within the op's tolerance of the float64 reference; float16 and
    float64 take the routes ONNX Runtime has no kernel for (im2col conv, summed pools)."""
    inputs = floats_as(dtype, sample.inputs)
    fn = ug.function(lambda *xs: apply(op.name, list(xs), sample.attrs), name=op.name)
    (got,) = run_model(ug.onnx.to_model(fn, *inputs), inputs)
    assert got.dtype == op.reference(*inputs, **sample.attrs).dtype
    rtol, atol = op.tolerance_for(dtype)
    compare(got, op.reference(*sample.inputs, **sample.attrs), rtol, atol,
            f"{op.name} in {dtype}")


ROUTE_GRID = np.concatenate([np.linspace(-8.0, 8.0, 801), [0.0, 1e-300, 1e-9, 0.0099, 0.0101,
                                                            1.0, -1.0, 1e10, -1e300, np.inf,
                                                            -np.inf, np.nan]])
UNIT_GRID = np.concatenate([np.linspace(-1.0, 1.0, 801), [1 - 1e-15, -1 + 1e-15, 1.5, np.nan]])


@pytest.mark.parametrize("op, grid", [("erf", ROUTE_GRID), ("atan", ROUTE_GRID),
                                      ("sinh", np.clip(ROUTE_GRID, -700, 700)),
                                      ("cosh", np.clip(ROUTE_GRID, -700, 700)),
                                      ("tan", np.linspace(-1.5, 1.5, 301)),
                                      ("asin", UNIT_GRID), ("acos", UNIT_GRID)])
def test_float64_routes_hold_across_the_range(op, grid):
    """The float64 compositions ORT has no kernel for (erf's series and tail, atan's Newton
    step, sinh near 0, asin/acos at +-1): within float64 tolerance of the reference over a
    grid with 0, tiny, huge, inf and NaN, not only at the samples."""
    fn = ug.function(lambda x: apply(op, [x], {}), name=op)
    (got,) = run_model(ug.onnx.to_model(fn, grid), [grid])
    with np.errstate(invalid="ignore"):
        want = unigraph.ops.OPS[op].reference(grid)
    compare(got, want, 1e-10, 1e-12, f"{op} in float64")


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64"])
def test_division_and_products_round_as_numpy(dtype):
    """mod and floor_divide take the divisor's sign in every quadrant; atan2 in every
    quadrant and on the axes; an int32 product wraps as NumPy's (ORT's saturates)."""
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(-10, 10, 400), [0, 3, -3, 7, -7, 6]]).astype(dtype)
    y = np.concatenate([rng.uniform(1, 3, 400) * rng.choice([-1, 1], 400),
                        [1, 2, -2, 2, -2, 3]]).astype(dtype)
    if dtype == "int32":
        ops = ["mod", "floor_divide"]
        product = np.array([[2**20, 2**20, 3], [-7, 2**30, 5]], dtype)
        fn = ug.function(lambda v: ug.prod(v, axis=1), name="prod")
        (got,) = run_model(ug.onnx.to_model(fn, product), [product])
        compare(got, np.prod(product, axis=1, dtype=np.int32), 0, 0, "int32 prod")
    else:
        ops = ["mod", "floor_divide", "atan2"]
        x = np.append(x, [0, 1, -1, 0, 2.5]).astype(dtype)  # by zero, and on the axes
        y = np.append(y, [0, 0, 0, -1, 0]).astype(dtype)
    for op in ops:
        record = unigraph.ops.OPS[op]
        fn = ug.function(lambda a, b, name=op: apply(name, [a, b], {}), name=op)
        (got,) = run_model(ug.onnx.to_model(fn, x, y), [x, y])
        wide = [v.astype(np.float64) if dtype != "int32" else v for v in (x, y)]
        with np.errstate(divide="ignore", invalid="ignore"):
            want = record.reference(*wide)
        compare(got, want, *record.tolerance_for(dtype), f"{op} in {dtype}")


# -- programs: control flow, modules, the examples ---------------------------------------------
@ug.function
def loop_in_branch(x, n):
    """A while_loop inside one branch of a cond; the other returns its operand as it is."""
    def doubled():
        return ug.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 2.0),
                             (ug.tensor(np.int64(0)), x))[1]

    return ug.cond(n > 0, doubled, lambda: x)


@ug.function
def math_mix(x, n):
    """The math ops of issue 14 in one program: trigonometry, erf, division, scans."""
    angle = ug.atan2(ug.sin(x), ug.cos(x) + 2.0) + ug.asin(ug.tanh(x)) + ug.acos(ug.tanh(x))
    smooth = ug.erf(x) + ug.softplus(x) + ug.sinh(x) - ug.cosh(x) + ug.tan(x * 0.3)
    steps = ug.floor(x) + ug.ceil(x) + ug.round(x * 3.0) + ug.mod(x, 0.7) + ug.floor_divide(x, 0.3)
    mixed = ug.einsum("ij,kj->ik", angle + smooth, steps) + ug.full((2, 2), 0.5)
    counts = ug.cumsum(ug.mod(n, 3) - ug.floor_divide(n, -2), axis=0)
    return ug.cumsum(mixed, axis=1) * ug.prod(ug.atan(x), axis=(1,), keepdims=True), counts


@ug.function
def never_loops(x):
    """A loop whose condition is false on entry: Loop must return the initial values."""
    return ug.while_loop(lambda v: ug.sum(v) > 1e9, lambda v: (v + 1.0,), (x,))


def programs() -> dict:
    """name -> (function or model, example inputs), every example's CHECKS included."""
    rng = np.random.default_rng(0)
    x4 = rng.standard_normal((2, 4)).astype(np.float32)
    cases = {
        "gate": (Gate(), (x4,)),
        "gate_else": (Gate(), (-np.abs(x4),)),
        "cnn": (SmallCNN().eval(), (rng.standard_normal((2, 2, 6, 6)).astype(np.float32),)),
        "shrink": (shrink, (rng.standard_normal((3,)).astype(np.float32) * 8,
                            np.float32(0.5))),
        "loop_in_branch": (loop_in_branch, (x4, np.int64(3))),
        "loop_in_branch_else": (loop_in_branch, (x4, np.int64(0))),
        "never_loops": (never_loops, (x4,)),
        "math_mix": (math_mix, (rng.standard_normal((2, 4)).astype(np.float32) * 2,
                                np.array([-7, 5, 0, 8], np.int64))),
    }
    cases.update(example_entries())
    return cases


PROGRAMS = programs()


def assert_agrees(got: list, want: list, what: str) -> None:
    """float32 against float64: the budget of an accumulating op, scaled to the values."""
    assert len(got) == len(want), f"{what}: {len(got)} outputs, expected {len(want)}"
    for index, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        scale = max(1.0, float(np.max(np.abs(w)))) if w.size and w.dtype.kind == "f" else 1.0
        compare(g, w, 1e-4, 1e-5 * scale, f"{what}[{index}]")


@pytest.fixture(scope="module")
def exported():
    """name -> (ONNX model, example inputs as arrays), each model written once."""
    out = {}
    for name, (fn, inputs) in PROGRAMS.items():
        out[name] = (ug.onnx.to_model(fn, *inputs), [np.asarray(x) for x in inputs])
    return out


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_runs_in_onnxruntime_like_the_reference(exported, name):
    model, inputs = exported[name]
    onnx.checker.check_model(model, full_check=True)
    fn, raw = PROGRAMS[name]
    assert_agrees(run_model(model, inputs), reference(fn, raw), f"{name} in ONNX Runtime")


@pytest.mark.parametrize("target", TARGETS)
def test_onnx_agrees_with_every_target(exported, target):
    """What ONNX Runtime computes from the export is what every target computes."""
    for name in ("gate", "cnn", "shrink", "loop_in_branch", "counter_loop.counter", "math_mix"):
        model, inputs = exported[name]
        fn, raw = PROGRAMS[name]
        got = run_on(target, fn, *raw)
        assert_agrees(run_model(model, inputs), got if isinstance(got, list) else [got],
                      f"{name} in ONNX Runtime vs {target}")


def test_control_flow_is_if_and_loop(exported):
    def op_types(graph):
        found = set()
        for node in graph.node:
            found.add(node.op_type)
            for attr in node.attribute:
                if attr.g.node:
                    found |= op_types(attr.g)
        return found

    assert {"Loop", "If"} <= op_types(exported["shrink"][0].graph)
    assert "If" in op_types(exported["gate"][0].graph)
    assert {"Loop", "If"} <= op_types(exported["loop_in_branch"][0].graph)


def test_names_follow_the_signature_and_parameters_are_initializers(exported):
    shrink_model = exported["shrink"][0]
    assert [i.name for i in shrink_model.graph.input] == ["x", "limit"]
    assert [o.name for o in shrink_model.graph.output] == ["output_0", "output_1"]
    gate_model = exported["gate"][0]
    assert [i.name for i in gate_model.graph.input] == ["x"]
    gate = PROGRAMS["gate"][0]
    stored = {t.name: onnx.numpy_helper.to_array(t) for t in gate_model.graph.initializer}
    assert sorted(stored) == sorted(name for name, _ in gate.named_parameters())
    for name, param in gate.named_parameters():
        np.testing.assert_array_equal(stored[name], param.numpy())


def test_a_none_dim_is_a_symbolic_batch():
    """A graph whose batch is known only at run time runs on any batch size."""
    x, w = Value((None, 3), "float32", "x"), Value((3, 2), "float32", "w")
    y, z = Value((None, 2), "float32"), Value((None, 2), "float32")
    graph = Graph("dense", [x], [w], [Node("matmul", [x, w], [y]), Node("relu", [y], [z])], [z])
    weight = np.arange(6, dtype=np.float32).reshape(3, 2) - 2.5
    model = graph_to_model(graph.verify(), [weight], ["x"], ["y"])
    onnx.checker.check_model(model, full_check=True)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert (dims[0].dim_param, dims[1].dim_value) == ("batch", 3)
    for batch in (1, 5, 0):
        feed = np.linspace(-1, 1, batch * 3, dtype=np.float32).reshape(batch, 3)
        (got,) = run_model(model, [feed])
        want = np.maximum(feed.astype(np.float64) @ weight.astype(np.float64), 0)
        compare(got, want, 1e-5, 1e-6, f"batch {batch}")


@pytest.mark.parametrize("opset", [13, 17, 18, 21])
def test_opsets(opset):
    """Reductions take their axes as an attribute before opset 18, as an input from it."""
    @ug.function
    def stats(x):
        return ug.mean(x, axis=1), ug.max(x, axis=0), ug.argmax(x, axis=1), ug.sum(x)

    x = np.array([[1.0, np.nan, 2.0], [4.0, -1.0, 0.5]], np.float32)
    model = ug.onnx.to_model(stats, x, opset=opset)
    assert model.opset_import[0].version == opset
    got = run_model(model, [x])
    want = reference(stats, (x,))
    for index, (g, w) in enumerate(zip(got, want)):
        compare(g, w, 1e-5, 1e-6, f"output {index} at opset {opset}")


def test_export_writes_a_file_and_export_takes_the_format(tmp_path):
    fn, inputs = PROGRAMS["counter_loop.counter"]
    path = ug.onnx.export(fn, *inputs, path=tmp_path / "sub" / "counter.onnx")
    assert path == str(tmp_path / "sub" / "counter.onnx")
    onnx.checker.check_model(path, full_check=True)
    again = export(fn, *inputs, path=tmp_path / "c2.onnx", format="onnx")
    model = onnx.load(again)
    assert_agrees(run_model(model, inputs), reference(fn, inputs), "counter via ug.export")


def test_the_command_line_writes_onnx(tmp_path):
    out = tmp_path / "branch.onnx"
    assert export_main([f"{EXAMPLES / 'cond.py'}:branch", "--format", "onnx",
                        "-o", str(out)]) == 0
    fn, inputs = PROGRAMS["cond.branch"]
    assert_agrees(run_model(onnx.load(out), inputs), reference(fn, inputs), "cond.py:branch")


# -- what is refused -----------------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
def test_training_graphs_and_opsets_are_refused(target, tmp_path):
    """Whatever target is current: updates, gradients and random draws are refused with the
    reason, the line and the fix, and nothing is written."""
    x = np.ones((4, 3), np.float32)
    backend, mode = target.split(":")
    with ug.use_backend(backend, mode):
        with pytest.raises(ExportError, match=r"updates parameters .*model.eval\(\)"):
            ug.onnx.export(training_step(), x, path=tmp_path / "a.onnx")
        with pytest.raises(ExportError, match=r"computes a gradient .*export_cases.py:\d+"):
            ug.onnx.export(gradient_only, x, path=tmp_path / "b.onnx")
        dropout = ug.nn.Sequential(ug.nn.Linear(3, 3), ug.nn.Dropout(0.5)).train()
        with pytest.raises(ExportError, match=r"draws random numbers.*model.eval\(\)"):
            ug.onnx.export(dropout, x, path=tmp_path / "c.onnx")
        with pytest.raises(ExportError, match=r"opset 9 .* from 13"):
            ug.onnx.export(never_loops, x, path=tmp_path / "d.onnx", opset=9)
    assert not list(tmp_path.iterdir())


def test_a_grad_node_and_an_unknown_op_name_the_line():
    x, y, dx = Value((3,), "float32"), Value((), "float32"), Value((3,), "float32")
    v, square, total = Value((3,), "float32"), Value((3,), "float32"), Value((), "float32")
    fn = Graph("fn", [v], [], [Node("mul", [v, v], [square]),
                               Node("sum", [square], [total], {"axis": None, "keepdims": False})],
               [total])
    grad = Node("grad", [x], [y, dx], {"wrt": (0,), "output": 0}, {"fn": fn},
                source="model.py:7")
    with pytest.raises(ExportError, match=r"ug.grad / ug.value_and_grad at model.py:7"):
        graph_to_model(Graph("g", [x], [], [grad], [dx]).verify(), [], ["x"], ["dx"])
    out = Value((3,), "float32")
    unknown = Node("fft", [x], [out], source="model.py:12")
    with pytest.raises(ExportError, match=r"op 'fft' at model.py:12 has no ONNX equivalent"):
        graph_to_model(Graph("g", [x], [], [unknown], [out]), [], ["x"], ["y"])
