"""ug.export: every example and a cond and a while_loop program, written in each framework's
own saved format, reloaded in a fresh process that never imports unigraph (only the
framework and NumPy), run on the example inputs, and compared with the float64 reference
(numpy:eager on float64 inputs and weights)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.checking.scripts import load_checks
from unigraph.cli_export import exportable_entry
from unigraph.cli_export import main as export_main
from unigraph.export import FORMATS, ExportError, export, prepare, write

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NATIVE_FORMATS = ("savedmodel", "tflite", "torch", "paddle")


# -- the programs -------------------------------------------------------------------------------
class Gate(ug.nn.Module):
    """Parameters used inside both branches of a cond."""

    def __init__(self):
        super().__init__()
        self.up = ug.nn.Linear(4, 3)
        self.down = ug.nn.Linear(4, 3)

    def forward(self, x):
        return ug.cond(ug.sum(x) > 0, lambda: ug.tanh(self.up(x)), lambda: self.down(x) * 2.0)


@ug.function
def shrink(x, limit):
    """A float while_loop with a captured value and a cond in its body."""
    def body(steps, v):
        v = ug.cond(ug.sum(v) > 0, lambda: v * 0.5 - limit * 0.01, lambda: v * 0.75)
        return steps + 1, v

    return ug.while_loop(lambda steps, v: ug.sum(ug.abs(v)) > limit, body,
                         (ug.tensor(np.int64(0)), x))


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
    for script in sorted(EXAMPLES.glob("*.py")):
        if script.name.startswith("_") or script.name == "run_all.py":
            continue
        for entry_name, entry in load_checks(str(script)).items():
            cases[f"{script.stem}.{entry_name}"] = exportable_entry(entry)
    return cases


PROGRAMS = programs()


def reference(fn, inputs) -> list:
    """The float64 reference: numpy:eager on float64 inputs (and weights, for a Module)."""
    wide = tuple(np.asarray(x).astype(np.float64) if np.asarray(x).dtype.kind == "f" else x
                 for x in inputs)
    if isinstance(fn, ug.nn.Module):
        fn = fn.copy("float64")
    out = run_on("numpy:eager", fn, *wide)
    return out if isinstance(out, list) else [out]


def assert_agrees(got: list, want: list, what: str) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} outputs, expected {len(want)}"
    for index, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"{what}[{index}]: shape {g.shape}, expected {w.shape}"
        scale = max(1.0, float(np.max(np.abs(w)))) if w.size else 1.0
        np.testing.assert_allclose(g.astype(np.float64), w, rtol=1e-4, atol=1e-5 * scale,
                                   err_msg=f"{what}[{index}]")


# -- reloading without unigraph --------------------------------------------------------------
# Each script reads a manifest of artifacts, runs each on its saved inputs and saves the
# outputs; the last line proves unigraph was never imported. One process per format.
PRELUDE = """
import json, sys, traceback
import numpy as np
"""
EPILOGUE = """
def main():
    cases = json.load(open(sys.argv[1]))
    for case in cases:
        feeds = [np.asarray(a) for a in np.load(case["inputs"]).values()]
        try:
            outs = globals()["run_" + case["format"]](case, feeds)
            np.savez(case["result"], *[np.asarray(o) for o in outs])
        except Exception:
            open(case["result"] + ".error", "w").write(traceback.format_exc())
    leaked = sorted(m for m in sys.modules if m.split(".")[0].startswith("unigraph"))
    assert not leaked, f"the reload imported {leaked}"

main()
"""
RELOAD = {
    "savedmodel": """
import tensorflow as tf

def run_savedmodel(case, feeds):
    signature = tf.saved_model.load(case["artifact"]).signatures["serving_default"]
    outs = signature(**{n: tf.constant(x) for n, x in zip(case["input_names"], feeds)})
    return [outs[n].numpy() for n in case["output_names"]]
""",
    "tflite": """
import tensorflow as tf

def run_tflite(case, feeds):
    runner = tf.lite.Interpreter(model_path=case["artifact"]).get_signature_runner()
    outs = runner(**dict(zip(case["input_names"], feeds)))
    return [outs[n] for n in case["output_names"]]
""",
    "torch": """
import torch

def run_torch(case, feeds):
    module = torch.export.load(case["artifact"]).module()
    with torch.no_grad():
        return [o.numpy() for o in module(*[torch.from_numpy(x) for x in feeds])]
""",
    "paddle": """
import paddle
paddle.enable_static()
executor = paddle.static.Executor(paddle.CPUPlace())

def run_paddle(case, feeds):
    program, names, fetches = paddle.static.load_inference_model(case["artifact"], executor)
    return executor.run(program, feed=dict(zip(names, feeds)), fetch_list=fetches)
""",
}
# One fresh process per framework (paddle and tensorflow never share one).
FRAMEWORKS = {"savedmodel": "tensorflow", "tflite": "tensorflow", "torch": "torch",
              "paddle": "paddle"}


def reload_all(framework: str, cases: list, folder: Path) -> None:
    formats = [f for f in NATIVE_FORMATS if FRAMEWORKS[f] == framework]
    script = folder / f"reload_{framework}.py"
    script.write_text(PRELUDE + "".join(RELOAD[f] for f in formats) + EPILOGUE)
    manifest = folder / f"{framework}.json"
    manifest.write_text(json.dumps(cases))
    # Run from the artifacts' folder with no PYTHONPATH: nothing of unigraph is on the way.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    done = subprocess.run([sys.executable, str(script), str(manifest)], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def export_and_reload(framework: str, folder: Path) -> dict:
    """{format: {case name: outputs from the fresh process, or the error it raised}} for
    the formats of `framework`."""
    cases = []
    for format in (f for f in NATIVE_FORMATS if FRAMEWORKS[f] == framework):
        for name, (fn, inputs) in PROGRAMS.items():
            prepared = prepare(fn, inputs)
            stem = f"{name}.{format}"
            artifact = write(prepared, str(folder / (stem + FORMATS[format].suffix)), format)
            np.savez(folder / f"{stem}.inputs.npz", *prepared.example_inputs)
            cases.append({"format": format, "name": name, "artifact": artifact,
                          "inputs": str(folder / f"{stem}.inputs.npz"),
                          "result": str(folder / f"{stem}.out.npz"),
                          "input_names": prepared.input_names,
                          "output_names": prepared.output_names})
    reload_all(framework, cases, folder)
    results: dict = {}
    for case in cases:
        error = Path(case["result"] + ".error")
        results.setdefault(case["format"], {})[case["name"]] = error.read_text() \
            if error.exists() else list(np.load(case["result"]).values())
    return results


@pytest.fixture(scope="module")
def reloaded(tmp_path_factory):
    """reloaded(format) -> {case name: outputs or error}, one export and reload per
    framework for the whole module."""
    done: dict = {}

    def results(format: str) -> dict:
        framework = FRAMEWORKS[format]
        if framework not in done:
            done[framework] = export_and_reload(framework, tmp_path_factory.mktemp(framework))
        return done[framework][format]

    return results


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("format", NATIVE_FORMATS)
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


@pytest.mark.parametrize("target", TARGETS)
def test_artifacts_agree_with_every_target(reloaded, target):
    """What each format computes is what every target computes for the same programs."""
    for name in ("gate", "shrink", "counter_loop.counter"):
        fn, inputs = PROGRAMS[name]
        got = run_on(target, fn, *inputs)
        for format in NATIVE_FORMATS:
            assert_agrees(reloaded(format)[name], got if isinstance(got, list) else [got],
                          f"{name} as {format} vs {target}")


# -- control flow stays the format's own -------------------------------------------------------
def test_control_flow_is_native(tmp_path):
    import paddle  # noqa: F401  (before tensorflow, always)
    import tensorflow as tf
    import torch

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


def test_names_follow_the_signature(tmp_path):
    prepared = prepare(*PROGRAMS["shrink"])
    assert prepared.input_names == ["x", "limit"]
    assert prepared.output_names == ["output_0", "output_1"]
    assert prepare(*PROGRAMS["gate"]).output_names == ["output"]
    import torch

    fn, inputs = PROGRAMS["cond.branch"]
    program = torch.export.load(export(fn, *inputs, path=tmp_path / "b.pt2", format="torch"))
    assert [s.arg.name for s in program.graph_signature.input_specs] == ["x", "y"]


# -- what is refused ----------------------------------------------------------------------------
def training_step():
    model = ug.nn.Linear(3, 2)
    optimizer = ug.optim.SGD(model.parameters(), lr=0.1)

    @ug.function
    def step(x):
        loss, grads = ug.value_and_grad(lambda: ug.mean(model(x)),
                                        wrt=model.parameters())()
        optimizer.apply(grads)
        return loss

    return step


@ug.function
def gradient_only(x):
    return ug.grad(lambda v: ug.sum(v * v))(x)


@pytest.mark.parametrize("target", TARGETS)
def test_training_graphs_are_refused(target, tmp_path):
    """Whatever target is current, updates, gradients and random draws are refused with the
    reason and the fix, before any framework is asked to write anything."""
    x = np.ones((4, 3), np.float32)
    backend, mode = target.split(":")
    with ug.use_backend(backend, mode):
        with pytest.raises(ExportError, match=r"updates parameters .*model.eval\(\)"):
            export(training_step(), x, path=tmp_path / "a.pt2", format="torch")
        with pytest.raises(ExportError, match=r"computes a gradient .*test_export.py:\d+"):
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
    assert sorted(p.name for p in (tmp_path / "mlp").iterdir()) == ["forward.pt2",
                                                                   "training.pt2"]
    assert "training step is not exported" in capsys.readouterr().out


def test_cli_reports_a_missing_entry(tmp_path, capsys):
    assert export_main([f"{EXAMPLES / 'cond.py'}:nope", "-f", "torch", "-o",
                        str(tmp_path / "x")]) == 2
    assert "its CHECKS are: branch, branch_python" in capsys.readouterr().err
