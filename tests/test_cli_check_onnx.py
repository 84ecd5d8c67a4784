"""`unigraph check model.onnx`: an ONNX file is a check case (issue 18).

The command runs for real in a subprocess, on a small ONNX model written here with
`onnx.helper` (a dense layer and tanh, with a symbolic batch dimension), next to the suite
tests' plugin backends (`badtanh`: tanh computed as sigmoid) so that a disagreement can be
seen. Every target is checked against the float64 reference and ONNX Runtime running the
file itself (`onnxruntime:file`); that row is also shown to fail when the file computes
something else than what the reference computed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from conftest import TARGETS, run_on
from onnx import TensorProto, helper, numpy_helper
from test_check_suite import ENTRY_POINTS, PLUGIN

import unigraph as ug

RNG = np.random.default_rng(7)
W = RNG.standard_normal((4, 3)).astype(np.float32)
B = RNG.standard_normal(3).astype(np.float32)


def write_model(path, activation="Tanh", weight=W, batch="batch", domain="") -> None:
    """y = activation(x @ weight + B), x: (batch, 4) float32, as an ONNX file (the
    activation from another `domain` than ONNX's own: no importer can know it)."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="dense_matmul"),
             helper.make_node("Add", ["h", "B"], ["a"], name="dense_add"),
             helper.make_node(activation, ["a"], ["y"], name="act", domain=domain)]
    graph = helper.make_graph(
        nodes, "dense", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])],
        [numpy_helper.from_array(weight, "W"), numpy_helper.from_array(B, "B")])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=opsets)
    if not domain:
        onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))


@pytest.fixture
def project(tmp_path):
    """models/dense.onnx, and the suite tests' plugin backends on PYTHONPATH."""
    site = tmp_path / "site"
    (site / "suite_plugins-0.1.dist-info").mkdir(parents=True)
    (site / "suite_plugins.py").write_text(PLUGIN)
    (site / "suite_plugins-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: suite-plugins\nVersion: 0.1\n")
    (site / "suite_plugins-0.1.dist-info" / "entry_points.txt").write_text(ENTRY_POINTS)
    (tmp_path / "models").mkdir()
    write_model(tmp_path / "models" / "dense.onnx")
    return tmp_path


def cli(project, *args, plugins=None, timeout=400):
    """Run `unigraph check ARGS` in the project; (exit status, stdout, stderr)."""
    env = {**os.environ, "PYTHONPATH": str(project / "site")}
    if plugins:
        env["UNIGRAPH_PLUGINS"] = plugins
    done = subprocess.run([sys.executable, "-m", "unigraph.cli", "check", *args], cwd=project,
                          env=env, capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout, done.stderr


def load(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def rows(data) -> dict:
    """{target: its report row} of the one model of a suite's JSON report."""
    (model,) = data["models"]
    return {row["target"]: row for row in model["report"]["targets"]}


@pytest.mark.parametrize("target", TARGETS)
def test_onnx_file_on_every_target_with_gradients(project, target):
    """The target agrees with the reference, outputs and gradients with respect to both
    initializers; ONNX Runtime running the file agrees with the same reference. (In this
    process: the frameworks are imported already; the CLI runs below.)"""
    report = ug.check_suite([str(project / "models" / "dense.onnx")], targets=target,
                            dims={"batch": 5}, grads=True, executor="inline")
    assert report.ok, report.table()
    by = {task.target: task.target_report for task in report.tasks}
    assert set(by) == {target, "onnxruntime:file"}
    assert {"output", "grad(W)", "grad(B)"} <= {c.name for c in by[target].comparisons}
    assert [c.name for c in by["onnxruntime:file"].comparisons] == ["output"]


def test_cli_reports_a_disagreeing_target_in_json_and_html(project):
    """Through the real CLI: a target computing tanh as sigmoid is caught at tanh (the ONNX
    node 'act'), the others and ONNX Runtime running the file agree."""
    status, out, err = cli(project, "models/dense.onnx", "--dim", "batch=5", "--grads",
                           "--targets", "numpy,badtanh:static", "--json", "out.json",
                           "--html", "out.html", plugins="numpy,onnxruntime,badtanh")
    assert status == 1, err  # badtanh disagrees
    by = rows(load(project / "out.json"))
    assert set(by) == {"numpy:eager", "numpy:static", "badtanh:static", "onnxruntime:file"}
    for target in ("numpy:eager", "numpy:static", "onnxruntime:file"):
        assert by[target]["status"] == "ok", (target, by[target])
    assert {"output", "grad(W)", "grad(B)"} <= {c["name"] for c in by["numpy:eager"][
        "comparisons"]}
    assert by["badtanh:static"]["status"] == "disagree"
    assert by["badtanh:static"]["divergence"]["op"] == "tanh"
    # Named by the ONNX node the diverging op came from, in the JSON and the text report.
    assert by["badtanh:static"]["divergence"]["source"] == "dense.onnx: node 'act' (Tanh)"
    assert "dense.onnx: node 'act' (Tanh)" in out
    assert "models/dense.onnx:dense" in out and "FAILED" in out
    assert 'data-model="models/dense.onnx:dense"' in (project / "out.html").read_text()


def test_inputs_from_npz_cache_by_content_and_folders(project):
    """--inputs matched by name; the cache is keyed by the file's (and the .npz's) content;
    a folder and a glob find .onnx files."""
    x = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)
    np.savez(project / "inputs.npz", x=x)
    args = ["models/dense.onnx", "--inputs", "inputs.npz", "--targets", "numpy",
            "--json", "out.json", "--cache", "cache"]
    status, out, err = cli(project, *args, plugins="numpy,onnxruntime")
    assert status == 0, err + out
    data = load(project / "out.json")
    assert data["counts"]["tasks"] == 3 and data["counts"]["cached"] == 0
    assert rows(data)["onnxruntime:file"]["comparisons"][0]["shape"] == [2, 3]
    assert cli(project, *args, plugins="numpy,onnxruntime")[0] == 0
    assert load(project / "out.json")["counts"]["cached"] == 3
    write_model(project / "models" / "dense.onnx", weight=W * 2)  # new content: run again
    assert cli(project, *args, plugins="numpy,onnxruntime")[0] == 0
    assert load(project / "out.json")["counts"]["cached"] == 0
    np.savez(project / "inputs.npz", x=x + 1)  # new inputs: run again
    assert cli(project, *args, plugins="numpy,onnxruntime")[0] == 0
    assert load(project / "out.json")["counts"]["cached"] == 0

    (project / "models" / "script.py").write_text(
        "import numpy as np\nimport unigraph as ug\n"
        "CHECKS = {'square': (lambda x: x * x, (np.arange(3.0),))}\n")
    for path in ("models", "models/*.onnx"):
        status, out, err = cli(project, path, "--dim", "batch=2", "--targets", "numpy:eager",
                               "--json", "out.json", plugins="numpy,onnxruntime")
        assert status == 0, err + out
        models = {m["entry"] for m in load(project / "out.json")["models"]}
        assert models == ({"dense", "square"} if path == "models" else {"dense"})


def test_usage_errors_name_the_input_and_the_fix(project):
    """Exit 2, no traceback: a symbolic dimension without --dim; missing, extra and
    misshapen --inputs; a file that is not ONNX; an op unigraph cannot import."""
    def error(*args):
        status, _, err = cli(project, *args, "--targets", "numpy:eager", plugins="numpy")
        assert status == 2 and "Traceback" not in err, err
        return err

    err = error("models/dense.onnx")
    assert "input 'x' (batch, 4) has the symbolic dimension 'batch'" in err
    assert "--dim batch=N" in err
    assert "--dim: expected NAME=SIZE" in error("models/dense.onnx", "--dim", "batch")
    np.savez(project / "other.npz", z=np.zeros((2, 4), np.float32))
    err = error("models/dense.onnx", "--inputs", "other.npz")
    assert "missing 'x'" in err and "not inputs of the model: 'z'" in err
    np.savez(project / "bad.npz", x=np.zeros((2, 5), np.float32))
    err = error("models/dense.onnx", "--inputs", "bad.npz")
    assert "'x' has shape (2, 5)" in err and "declares (batch, 4)" in err
    (project / "models" / "junk.onnx").write_bytes(b"not a model")
    assert "junk.onnx: cannot read it as an ONNX model" in error("models/junk.onnx")
    write_model(project / "models" / "odd.onnx", activation="Swoosh", domain="com.example")
    err = error("models/odd.onnx", "--dim", "batch=2")
    assert "Swoosh (act)" in err


def test_onnxruntime_file_row_fails_when_the_file_computes_something_else(tmp_path):
    """The reference runs unigraph's reading of a model; the onnxruntime:file row runs the
    file. Reading one file (tanh) and running another (sigmoid) must disagree."""
    from unigraph.checking.onnx_case import load_onnx_checks, run_file_on_onnxruntime

    write_model(tmp_path / "tanh.onnx", batch=3)
    write_model(tmp_path / "sigmoid.onnx", activation="Sigmoid", batch=3)
    entry = load_onnx_checks(str(tmp_path / "tanh.onnx"))["tanh"]
    same = run_file_on_onnxruntime(entry, str(tmp_path / "tanh.onnx"), "float32", 0)
    assert same.ok, same.table()
    x = entry.inputs[0].astype(np.float64)
    expected = np.tanh(x @ W.astype(np.float64) + B)  # by hand, in float64
    assert same.targets[0].comparisons[0].figures.max_abs < 1e-5
    np.testing.assert_allclose(run_on("numpy:eager", entry.target, entry.inputs[0]),
                               expected, rtol=1e-5, atol=1e-6)  # what the reference reads
    other = run_file_on_onnxruntime(entry, str(tmp_path / "sigmoid.onnx"), "float32", 0)
    assert other.targets[0].status == "disagree"
    float64 = run_file_on_onnxruntime(entry, str(tmp_path / "tanh.onnx"), "float64", 0)
    assert not float64.targets and "onnxruntime:file" in float64.skipped
