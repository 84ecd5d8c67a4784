"""ug.export: every example and a cond and a while_loop program, written in each framework's
own saved format, reloaded in a fresh process that never imports unigraph (only the
framework and NumPy), run on the example inputs, and compared with the float64 reference
(numpy:eager on float64 inputs and weights)."""

from pathlib import Path

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, run_on
from export_cases import (
    EXAMPLES,
    Gate,
    example_entries,
    gradient_only,
    reference,
    shrink,
    training_step,
)

import unigraph as ug
from unigraph.cli_export import main as export_main
from unigraph.export import FORMATS, ExportError, export, prepare, write
from unigraph.export.verify import RELOADERS, Artifact, Verification, reload_outputs, verify

SAVED_FORMATS = ("savedmodel", "tflite", "torch", "paddle", "onnx")


# -- the programs -------------------------------------------------------------------------------
@ug.function
def non_finite(x):
    """Constants holding NaN and +-inf, and the ops whose lowerings build them (relu,
    argmax: Paddle writes non-finite attributes its own loader rejects)."""
    edges = np.array([-np.inf, 0.25, np.inf, np.nan], np.float32)
    return ug.maximum(ug.relu(x), edges), ug.argmax(x * edges), ug.relu(x - np.inf)


@ug.function
def loop_in_branch(x, n):
    """A while_loop inside a cond branch."""
    def loop():
        start = (ug.tensor(np.int64(0)), x)
        return ug.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 1.5), start)[1]

    return ug.cond(ug.sum(x) > 0, loop, lambda: x - 1.0)


def programs() -> dict:
    """name -> (function or model, example inputs), every example's CHECKS included."""
    rng = np.random.default_rng(0)
    cases = {
        "gate": (Gate(), (rng.standard_normal((2, 4)).astype(np.float32),)),
        "gate_else": (Gate(), (-np.abs(rng.standard_normal((2, 4))).astype(np.float32),)),
        "shrink": (shrink, (rng.standard_normal((3,)).astype(np.float32) * 8,
                            np.float32(0.5))),
        "loop_in_branch": (loop_in_branch, (np.array([1.0, 2.0], np.float32), 3)),
        "non_finite": (non_finite, (np.array([1.5, -2.0, np.nan, 3.0], np.float32),)),
    }
    cases.update(example_entries())
    return cases


PROGRAMS = programs()


def assert_agrees(got: list, want: list, what: str) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} outputs, expected {len(want)}"
    for index, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"{what}[{index}]: shape {g.shape}, expected {w.shape}"
        scale = max(1.0, float(np.max(np.abs(w)))) if w.size else 1.0
        np.testing.assert_allclose(g.astype(np.float64), w, rtol=1e-4, atol=1e-5 * scale,
                                   err_msg=f"{what}[{index}]")


# -- reloading without unigraph --------------------------------------------------------------
def export_and_reload(framework: str, folder: Path) -> dict:
    """{format: {case name: outputs from a fresh process without unigraph, or the error it
    raised}} for every program, in each format `framework` reloads."""
    artifacts, names = [], []
    for format in (f for f in SAVED_FORMATS if RELOADERS[f][0] == framework):
        for name, (fn, inputs) in PROGRAMS.items():
            prepared = prepare(fn, inputs)
            path = str(folder / f"{name}.{format}{FORMATS[format].suffix}")
            artifacts.append(Artifact(format, write(prepared, path, format),
                                      prepared.input_names, prepared.output_names,
                                      prepared.example_inputs))
            names.append(name)
    results: dict = {}
    for artifact, name, got in zip(artifacts, names, reload_outputs(artifacts, str(folder))):
        results.setdefault(artifact.format, {})[name] = got
    return results


@pytest.fixture(scope="module")
def reloaded(tmp_path_factory):
    """reloaded(format) -> {case name: outputs or error}, one export and reload per
    framework for the whole module."""
    done: dict = {}

    def results(format: str) -> dict:
        framework = RELOADERS[format][0]
        if framework not in done:
            done[framework] = export_and_reload(framework, tmp_path_factory.mktemp(framework))
        return done[framework][format]

    return results


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("format", SAVED_FORMATS)
def test_reloaded_artifact_agrees_with_the_reference(reloaded, format, name):
    got = reloaded(format)[name]
    assert not isinstance(got, str), f"{format} reload of {name} failed:\n{got}"
    fn, inputs = PROGRAMS[name]
    want = reference(fn, inputs)
    if format == "tflite" and name == "non_finite":
        # TFLite's documented limits: +-inf in a constant array is stored as +-3.4e38, and
        # MAXIMUM drops a NaN first operand. Every finite reference value still agrees.
        finite = [np.isfinite(w) for w in want]
        got = [np.where(f, g, 0) for f, g in zip(finite, got)]
        want = [np.where(f, w, 0) for f, w in zip(finite, want)]
    assert_agrees(got, want, f"{name} as {format}")


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_artifacts_agree_with_every_target(reloaded, target):
    """What each format computes is what every target computes for the same programs."""
    for name in ("gate", "shrink", "counter_loop.counter"):
        fn, inputs = PROGRAMS[name]
        got = run_on(target, fn, *inputs)
        for format in SAVED_FORMATS:
            assert_agrees(reloaded(format)[name], got if isinstance(got, list) else [got],
                          f"{name} as {format} vs {target}")


# -- control flow stays the format's own -------------------------------------------------------
@pytest.mark.filterwarnings("ignore:.*tf.lite.Interpreter is deprecated:UserWarning")
def test_control_flow_is_native(tmp_path):
    from unigraph.plugins import get_backend

    tf = get_backend("tensorflow").load()  # paddle first, quietly
    torch = get_backend("torch").load()

    fn, inputs = PROGRAMS["shrink"]
    program = torch.export.load(export(fn, *inputs, path=tmp_path / "s.pt2", format="torch"))
    code = program.graph_module.print_readable(print_output=False)
    assert "while_loop" in code and "cond" in code
    tflite = export(fn, *inputs, path=tmp_path / "s.tflite", format="tflite")
    ops = {op["op_name"] for op in tf.lite.Interpreter(model_path=tflite)._get_ops_details()}
    assert "WHILE" in ops, ops
    sm = export(fn, *inputs, path=tmp_path / "sm", format="savedmodel")
    graph = tf.saved_model.load(sm).signatures["serving_default"].graph.as_graph_def()
    names = {f.signature.name for f in graph.library.function}
    assert any("while" in n.lower() for n in names) or \
        any(n.op in ("While", "StatelessWhile") for n in graph.node)


def test_ug_export_is_callable(tmp_path):
    """`unigraph.export` is the package once anything imported it, and also the function."""
    import unigraph.export

    fn, inputs = PROGRAMS["cond.branch"]
    path = tmp_path / "b.pt2"
    assert unigraph.export(fn, *inputs, path=path, format="torch") == str(path)
    assert path.is_file()


def test_names_follow_the_signature(tmp_path):
    prepared = prepare(*PROGRAMS["shrink"])
    assert prepared.input_names == ["x", "limit"]
    assert prepared.output_names == ["output_0", "output_1"]
    assert prepare(*PROGRAMS["gate"]).output_names == ["output"]
    import torch

    fn, inputs = PROGRAMS["cond.branch"]
    program = torch.export.load(export(fn, *inputs, path=tmp_path / "b.pt2", format="torch"))
    assert [s.arg.name for s in program.graph_signature.input_specs] == ["x", "y"]
    from unigraph_paddle.static import StaticMode

    from unigraph.plugins import get_backend

    paddle = get_backend("paddle").load()
    prefix = export(fn, *inputs, path=tmp_path / "b", format="paddle")
    with StaticMode(paddle):
        executor = paddle.static.Executor(paddle.CPUPlace())
        _, feed_names, _ = paddle.static.load_inference_model(prefix, executor)
    assert feed_names == ["x", "y"]


# -- what is refused ----------------------------------------------------------------------------
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_training_graphs_are_refused(target, tmp_path):
    """Whatever target is current, updates, gradients and random draws are refused with the
    reason and the fix, before any framework is asked to write anything."""
    x = np.ones((4, 3), np.float32)
    backend, mode = target.split(":")
    with ug.use_backend(backend, mode):
        with pytest.raises(ExportError, match=r"updates parameters .*model.eval\(\)"):
            export(training_step(), x, path=tmp_path / "a.pt2", format="torch")
        with pytest.raises(ExportError, match=r"computes a gradient .*export_cases.py:\d+"):
            export(gradient_only, x, path=tmp_path / "b.pt2", format="torch")
        dropout = ug.nn.Sequential(ug.nn.Linear(3, 3), ug.nn.Dropout(0.5)).train()
        with pytest.raises(ExportError, match=r"draws random numbers.*model.eval\(\)"):
            export(dropout, x, path=tmp_path / "c.pt2", format="torch")
    assert not list(tmp_path.iterdir())


def test_tflite_refuses_float64_saying_why(tmp_path):
    x = np.array([1.0, 2.0])
    with pytest.raises(ExportError, match=r"TensorFlow Lite cannot convert shrink: no TFLite "
                                          r"builtin for .*float64.*model.copy\('float32'\)"):
        export(shrink, x, 0.5, path=tmp_path / "s.tflite", format="tflite")
    assert not (tmp_path / "s.tflite").exists()


def test_verify_reports_agreement_and_catches_a_difference(tmp_path):
    fn, inputs = PROGRAMS["shrink"]
    result = verify(fn, *inputs, path=tmp_path / "s.onnx", format="onnx")
    assert result.ok and not result.error, result.summary()
    assert "agrees with the float64 reference" in result.summary()
    wrong = Verification("s.onnx", "onnx", outputs=[result.outputs[0], result.outputs[1] * 1.01],
                         reference=result.reference)
    assert not wrong.ok and "DISAGREES" in wrong.summary()


def test_a_failing_reload_is_reported_not_raised(tmp_path):
    (tmp_path / "broken.onnx").write_bytes(b"not a model")
    x = np.ones(2, np.float32)
    (got,) = reload_outputs([Artifact("onnx", str(tmp_path / "broken.onnx"), ["x"],
                                      ["output"], [x])])
    assert isinstance(got, str) and "broken.onnx" in got


def test_unknown_format_names_the_formats(tmp_path):
    with pytest.raises(ExportError, match="savedmodel, tflite, torch, paddle, onnx"):
        export(shrink, np.ones(3, np.float32), np.float32(1), path=tmp_path / "x", format="tf")


# -- the command line ---------------------------------------------------------------------------
def test_cli_exports_one_entry_and_a_whole_script(tmp_path, capsys):
    out = tmp_path / "branch.pt2"
    assert export_main([f"{EXAMPLES / 'cond.py'}:branch", "--format", "torch",
                        "-o", str(out)]) == 0
    assert out.is_file()
    assert export_main([str(EXAMPLES / "mlp.py"), "--format", "torch",
                        "-o", str(tmp_path / "mlp")]) == 0
    assert sorted(p.name for p in (tmp_path / "mlp").iterdir()) == [
        "forward.pt2", "forward.pt2.unigraph.json", "training.pt2", "training.pt2.unigraph.json"]
    assert "training step is not exported" in capsys.readouterr().out


def test_cli_verify_reloads_and_compares(tmp_path, capsys):
    out = tmp_path / "counter.onnx"
    assert export_main([f"{EXAMPLES / 'counter_loop.py'}:counter", "-f", "onnx", "-o",
                        str(out), "--verify"]) == 0
    printed = capsys.readouterr().out
    assert "reloaded without unigraph, agrees with the float64 reference" in printed


SWAPPABLE = """
import numpy as np
import unigraph as ug

x = np.array([1.0, -2.0, 3.0], np.float32)
CHECKS = {"plus": (lambda v: v + 1.0, (x,)), "minus": (lambda v: v - 1.0, (x,))}
"""


def test_check_artifact_against_the_entry_it_came_from(tmp_path, capsys):
    from unigraph.cli_export import run_check_artifact

    script = tmp_path / "swappable.py"
    script.write_text(SWAPPABLE)
    for name in ("plus", "minus"):
        assert export_main([f"{script}:{name}", "-f", "onnx", "-o",
                            str(tmp_path / f"{name}.onnx")]) == 0
    assert run_check_artifact(str(tmp_path / "plus.onnx")) == 0
    assert "agrees with the float64 reference" in capsys.readouterr().out
    # The artifact of another entry, under this one's name: it no longer agrees.
    (tmp_path / "plus.onnx").write_bytes((tmp_path / "minus.onnx").read_bytes())
    assert run_check_artifact(str(tmp_path / "plus.onnx")) == 1
    assert "DISAGREES" in capsys.readouterr().out
    assert run_check_artifact(str(tmp_path / "nowhere.onnx")) == 2
    assert "export it with `unigraph export FILE:NAME`" in capsys.readouterr().err


def test_cli_reports_a_missing_entry(tmp_path, capsys):
    assert export_main([f"{EXAMPLES / 'cond.py'}:nope", "-f", "torch", "-o",
                        str(tmp_path / "x")]) == 2
    assert "its CHECKS are: branch, branch_python" in capsys.readouterr().err
