"""Check suites (`unigraph check PATH...`, `ug.check_suite`): the matrix, the merged JSON and
HTML reports, the cache, crashes and timeouts as results, usage errors, and the Ray executor
giving the same report as local worker processes.

The command line runs for real in a subprocess, in a temporary project whose test backends
are a third-party plugin found through its entry points (a `.dist-info` on PYTHONPATH): the
NumPy engine with tanh computed as sigmoid (`badtanh`), one that segfaults on tanh
(`crash`), one that hangs on tanh (`hang`), and one whose compiled graph is off by 0.5 as a
whole while every node agrees alone (`badfetch`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from html.parser import HTMLParser

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS
from unigraph_numpy.backend import NumpyBackend

import unigraph as ug
from unigraph import plugins
from unigraph.hookspecs import hookimpl

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")

PLUGIN = '''
import ctypes
import dataclasses
import time

from unigraph import reference
from unigraph.hookspecs import hookimpl
from unigraph.ops import OPS
from unigraph_numpy.backend import NumpyBackend


class BadTanh(NumpyBackend):
    name = "badtanh"
    ops = {**OPS, "tanh": dataclasses.replace(OPS["tanh"], reference=OPS["sigmoid"].reference)}


class Crash(NumpyBackend):
    name = "crash"

    def eager_op(self, op, inputs, attrs):
        if op == "tanh":
            ctypes.string_at(0)  # reads address 0: SIGSEGV
        return super().eager_op(op, inputs, attrs)


class Hang(NumpyBackend):
    name = "hang"

    def eager_op(self, op, inputs, attrs):
        if op == "tanh":
            time.sleep(600)
        return super().eager_op(op, inputs, attrs)


class OffByHalf(reference.ReferenceExecutable):
    def run(self, inputs):
        outs = super().run(inputs)
        if sum(node.op != "constant" for node in self.graph.nodes) < 2:
            return outs  # one node alone agrees: only the whole graph is off
        return [o + 0.5 if o.dtype.kind == "f" else o for o in outs]


class BadFetch(NumpyBackend):
    name = "badfetch"

    def compile(self, graph, mode):
        super().compile(graph, mode)
        return OffByHalf(graph, self.ops)


def plugin(backend_class):
    class Plugin:
        @hookimpl
        def unigraph_backends(self):
            return [backend_class()]
    return Plugin()


BADTANH, CRASH, HANG, BADFETCH = map(plugin, (BadTanh, Crash, Hang, BadFetch))
'''

ENTRY_POINTS = """[unigraph]
badtanh = suite_plugins:BADTANH
crash = suite_plugins:CRASH
hang = suite_plugins:HANG
badfetch = suite_plugins:BADFETCH
"""

MODEL = '''
import numpy as np
import unigraph as ug


def layer(x):
    return ug.tanh(x * 1.5) * 2.0  # <- tanh


def counter(a, b):
    return ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))


def near_zero(x):
    return ug.log(ug.exp(x)) - x  # float64: ~1e-17; float32: ~1e-7, well within budget


def broken(x):
    raise RuntimeError("this entry is broken")


X = np.linspace(0.1, 1.0, 7)
CHECKS = {"layer": (layer, (X,)), "counter": (counter, (0, 10)),
          "near_zero": (near_zero, (X,)), "broken": (broken, (X,))}
'''
TANH_LINE = next(i for i, line in enumerate(MODEL.splitlines(), 1) if "<- tanh" in line)

OTHER = '''
import numpy as np
import unigraph as ug

CHECKS = {"square": (lambda x: x * x, (np.arange(4.0),))}
'''


@pytest.fixture
def project(tmp_path):
    """A project folder with model.py and other.py, and the test backends installed as a
    plugin distribution on PYTHONPATH."""
    site = tmp_path / "site"
    (site / "suite_plugins-0.1.dist-info").mkdir(parents=True)
    (site / "suite_plugins.py").write_text(PLUGIN)
    (site / "suite_plugins-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: suite-plugins\nVersion: 0.1\n")
    (site / "suite_plugins-0.1.dist-info" / "entry_points.txt").write_text(ENTRY_POINTS)
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "other.py").write_text(OTHER)
    return tmp_path


def cli(project, *args, timeout=300):
    """Run `unigraph check ARGS` in the project; (exit status, stdout, stderr)."""
    env = {**os.environ, "PYTHONPATH": str(project / "site"),
           "UNIGRAPH_PLUGINS": "numpy,badtanh,crash,hang,badfetch"}
    done = subprocess.run([sys.executable, "-m", "unigraph.cli", "check", *args], cwd=project,
                          env=env, capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout, done.stderr


class RowParser(HTMLParser):
    """Rows `<tr class="task ...">`, links and ids of an HTML page."""

    def __init__(self):
        super().__init__()
        self.rows, self.links, self.ids, self.iframes = [], [], set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "tr" and "task" in (attrs.get("class") or "").split():
            self.rows.append(attrs)
        if tag == "a" and attrs.get("href", "").startswith("#"):
            self.links.append(attrs["href"][1:])
        if tag == "iframe":
            self.iframes.append(attrs.get("srcdoc", ""))


def load(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


# -- the matrix, JSON, HTML and the cache ------------------------------------------------
def test_matrix_json_html_and_cache(project):
    args = ["model.py", "other.py", "--targets", "numpy,badtanh:static", "--seeds", "0,1",
            "-j", "2", "--json", "out.json", "--html", "out.html", "--cache", "cache"]
    status, out, err = cli(project, *args)
    assert status == 1, err
    data = load(project / "out.json")
    tasks = data["tasks"]
    # (4 entries of model.py + 1 of other.py) x 3 targets x 2 seeds
    assert len(tasks) == 30 and data["counts"]["cached"] == 0
    by = {(t["entry"], t["target"], t["seed"]): t for t in tasks}
    assert {t["status"] for t in tasks if t["entry"] == "broken"} == {"error"}
    assert "CHECKS['broken'] raised RuntimeError: this entry is broken" in \
        by[("broken", "numpy:eager", 0)]["error"]
    # one entry raising does not stop the others
    assert all(by[(e, t, s)]["status"] == "ok" for e in ("layer", "counter", "near_zero")
               for t in ("numpy:eager", "numpy:static") for s in (0, 1))
    assert by[("layer", "badtanh:static", 1)]["status"] == "disagree"
    assert by[("square", "badtanh:static", 0)]["status"] == "ok"
    # one merged report per (model, seed, dtype), a row per target, like ug.check's
    layer = next(m for m in data["models"] if m["entry"] == "layer" and m["seed"] == 0)
    assert [t["target"] for t in layer["report"]["targets"]] == \
        ["numpy:eager", "numpy:static", "badtanh:static"]
    divergence = layer["report"]["targets"][2]["divergence"]
    assert divergence["op"] == "tanh" and divergence["source"].endswith(f":{TANH_LINE}")
    assert "model.py:broken" in out and "model.py:layer (seed 0, float32)" in out
    assert "FAILED" in out and "CHECKS['broken'] raised" in out

    page = RowParser()
    page.feed((project / "out.html").read_text())
    rows = {(r["data-model"], r["data-target"], r["data-seed"], r["data-dtype"]): r
            for r in page.rows}
    assert set(rows) == {(f"{t['file']}:{t['entry']}", t["target"], str(t["seed"]),
                          "float32") for t in tasks}
    failing = [t for t in tasks if t["status"] != "ok"]
    assert len(page.links) == len(failing) == 2 + 6  # badtanh layer; broken everywhere
    assert set(page.links) <= page.ids
    assert any('class="node diverging"' in frame and 'data-op="tanh"' in frame
               for frame in page.iframes)

    status, _, _ = cli(project, *args)  # nothing changed: every result from the cache
    assert status == 1 and load(project / "out.json")["counts"]["cached"] == 30
    (project / "other.py").write_text(OTHER + "# edited\n")
    status, _, _ = cli(project, *args)
    again = load(project / "out.json")
    assert again["counts"]["cached"] == 24  # other.py's 6 tasks ran again
    assert {t["entry"] for t in again["tasks"] if not t["cached"]} == {"square"}
    assert [m["report"] for m in again["models"]] == [m["report"] for m in data["models"]] \
        or _same_reports(again, data)


def _same_reports(a, b) -> bool:
    def strip(data):
        for model in data["models"]:
            for target in model["report"]["targets"]:
                target["seconds"] = 0
        return data["models"]

    return strip(a) == strip(b)


def test_crash_and_hang_are_results_and_the_others_finish(project):
    started = time.monotonic()
    status, out, err = cli(project, "model.py:layer", "model.py:counter", "--targets",
                           "numpy:eager,crash:eager,hang:eager", "--timeout", "8", "-j", "2",
                           "--json", "out.json")
    assert time.monotonic() - started < 120
    assert status == 1, err
    by = {(t["entry"], t["target"]): t for t in load(project / "out.json")["tasks"]}
    crashed = by[("layer", "crash:eager")]
    assert crashed["status"] == "crashed" and "SIGSEGV" in crashed["error"]
    assert "Fatal Python error" in crashed["log"]  # faulthandler's stack, from the worker
    assert by[("layer", "hang:eager")]["status"] == "timeout"
    # the worker after a crash or a kill is a fresh one: the next tasks still run
    assert by[("counter", "crash:eager")]["status"] == "ok"
    assert by[("counter", "hang:eager")]["status"] == "ok"
    assert by[("layer", "numpy:eager")]["status"] == "ok"
    assert "crashed" in out and "timeout" in out


# -- usage errors (exit status 2) and the report's wording -------------------------------
def test_usage_errors_exit_2_in_the_users_terms(project):
    status, _, err = cli(project, "model.py", "--targets", "numpy,torhc:eager")
    assert status == 2 and "unknown target 'torhc:eager'" in err and "numpy:static" in err
    assert "Traceback" not in err
    (project / "raises.py").write_text("import numpy\nraise ImportError('no missing_dep')\n"
                                       "CHECKS = {}\n")
    status, _, err = cli(project, "raises.py", "--targets", "numpy")
    assert status == 2 and "raises.py" in err and "ImportError: no missing_dep" in err
    assert "Traceback" not in err
    (project / "plain.py").write_text("x = 1\n")
    status, _, err = cli(project, "plain.py")
    assert status == 2 and "defines no CHECKS" in err and "}}" not in err
    status, _, err = cli(project, "model.py:nope", "--targets", "numpy")
    assert status == 2 and "has no check 'nope'" in err and "layer" in err
    status, _, err = cli(project, "model.py", "--dtypes", "float31")
    assert status == 2 and "unknown dtype 'float31'" in err
    status, _, err = cli(project, "missing/", "--targets", "numpy")
    assert status == 2 and "no such file or directory: missing/" in err


def _table_rows(out: str, title: str) -> list:
    """The rows (split on runs of spaces) of the ug.check table headed `title`."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows = []
    for line in lines[start + 3:]:
        if not line.strip() or line.startswith(("OK", "FAILED", "odd", "not")) or \
                ": " in line.split("  ")[0]:
            break
        rows.append([cell.strip() for cell in line.split("  ") if cell.strip()])
    return rows


def test_report_wording(project):
    status, out, err = cli(project, "model.py:counter", "model.py:near_zero", "model.py:layer",
                           "--targets", "numpy,badfetch:static", "-v")
    assert status == 1, err
    # integer outputs only: nothing is computed in float32
    assert "ug.check: counter on 3 targets" in out and "counter in float32" not in out
    # a value next to zero (float64 ~1e-17, float32 ~1e-7, within budget): no relative error
    rows = _table_rows(out, "ug.check: near_zero in float32")
    passing = [row for row in rows if "ok" in row]
    assert len(passing) == 5  # all but badfetch:static's output
    assert all(row[row.index("ok") + 2] == "-" for row in passing)
    # a static target whose graph agrees node by node: no eager Python-side state is blamed
    layer = out[out.index("ug.check: layer"):]
    note = layer[layer.index("badfetch:static: not localized"):]
    assert "compiled for badfetch:static" in note.splitlines()[0]
    assert "eager" not in note.split("\n\n")[0] and "Python-side" not in note


# -- the Python API, and Ray against local workers ---------------------------------------
class _CrashOnTanh(NumpyBackend):
    name = "suitecrash"

    def eager_op(self, op, inputs, attrs):
        if op == "tanh":
            import ctypes

            ctypes.string_at(0)
        return super().eager_op(op, inputs, attrs)


class _Plugin:
    @hookimpl
    def unigraph_backends(self):
        return [_CrashOnTanh()]


SUITE_CRASH = _Plugin()


def _comparable(report) -> list:
    """The merged reports without timings (they differ from run to run)."""
    models = report.to_dict()["models"]
    for model in models:
        for target in model["report"]["targets"]:
            target["seconds"] = 0
    return models


def test_ray_executor_gives_the_local_report(tmp_path):
    """Every example (training entries left out, to stay near a minute on 2 cores) x every
    target x 2 seeds, on a local Ray and on local workers: the same merged report, and a
    task that segfaults on Ray is a "crashed" result while the others finish. An .onnx
    file, too (with its onnxruntime:file row)."""
    import ray
    from test_cli_check_onnx import write_model

    write_model(tmp_path / "dense.onnx")
    dense = dict(paths=[str(tmp_path / "dense.onnx")], targets="numpy", dims={"batch": 2})
    script = tmp_path / "layer.py"
    script.write_text(MODEL.replace('"broken": (broken, (X,))', '"sum": (ug.sum, (X,))'))
    ray.init(_node_ip_address="127.0.0.1", include_dashboard=False, num_cpus=1,
             log_to_driver=False)
    try:
        remote = ug.check_suite([EXAMPLES], seeds=[0, 1], training_steps=0, executor="ray")
        dense_remote = ug.check_suite(**dense, executor="ray")
        plugins.register_plugin(SUITE_CRASH, name="suitecrash")
        try:
            crashing = ug.check_suite([f"{script}:layer", f"{script}:sum"],
                                      targets="numpy:eager,suitecrash:eager", executor="ray")
        finally:
            plugins.unregister_plugin(SUITE_CRASH)
    finally:
        ray.shutdown()
    local = ug.check_suite([EXAMPLES], seeds=[0, 1], training_steps=0, executor="local",
                           jobs=1)
    entries = 7  # cond 2, conv2d 1, counter_loop 2, mlp 1, softmax_regression 1
    assert local.counts["tasks"] == entries * len(FORWARD_TARGETS) * 2  # onnxruntime too
    assert local.ok, local.table()
    assert _comparable(remote) == _comparable(local)
    dense_local = ug.check_suite(**dense, executor="local")
    assert [t.target for t in dense_local.tasks] == \
        ["numpy:eager", "numpy:static", "onnxruntime:file"]
    assert dense_local.ok and _comparable(dense_remote) == _comparable(dense_local)
    by = {(t.entry, t.target): t for t in crashing.tasks}
    assert by[("layer", "suitecrash:eager")].status == "crashed"
    assert "SIGSEGV" in by[("layer", "suitecrash:eager")].error
    assert by[("sum", "suitecrash:eager")].status == "ok"
    assert by[("layer", "numpy:eager")].status == "ok"


def half_square(x):
    return ug.sum(x * x * 0.5)


@pytest.mark.parametrize("target", TARGETS)
def test_suite_matrix_runs_what_ug_check_runs_on_every_target(tmp_path, target):
    """Each (dtype, seed) task of a suite is `ug.check` of that entry on that target with
    that dtype: the same tensors, in that dtype, with the same figures."""
    (tmp_path / "square.py").write_text(
        "import numpy as np\nimport unigraph as ug\n"
        "def half_square(x):\n    return ug.sum(x * x * 0.5)\n"
        "CHECKS = {'square': (half_square, (np.array([1.0, -2.0, 3.0]),))}\n")
    report = ug.check_suite([str(tmp_path / "square.py")], targets=target, seeds="0,3",
                            dtypes="float32,float64", executor="inline")
    assert report.ok, report.table()
    assert [(t.seed, t.dtype) for t in report.tasks] == \
        [(0, "float32"), (0, "float64"), (3, "float32"), (3, "float64")]
    for task in report.tasks:
        expected = ug.check(half_square, np.array([1.0, -2.0, 3.0]), targets=target,
                            dtype=task.dtype, seed=task.seed)
        got = task.target_report.comparisons
        assert [(c.name, c.dtype) for c in got] == [("output", task.dtype),
                                                     ("grad(x)", task.dtype)]
        assert [c.figures.max_abs for c in got] == \
            [c.figures.max_abs for c in expected.targets[0].comparisons]
        assert [c.budget for c in got] == [c.budget for c in expected.targets[0].comparisons]


TRAINING = '''
import numpy as np
import unigraph as ug

ug.manual_seed(0)
NET = ug.nn.Linear(3, 2)
X = np.linspace(-1, 1, 12).reshape(4, 3)
CHECKS = {
    "forward": (NET, (X,)),
    "training": {"model": NET, "loss_fn": lambda out, y: ug.mean(out * out),
                 "optimizer": lambda m: ug.optim.SGD(m, lr=0.1),
                 "batches": [(X, np.zeros(4))], "steps": 3},
}
'''


def test_training_steps_option(tmp_path):
    """`--training STEPS` sets the steps of training entries; 0 leaves them out."""
    (tmp_path / "net.py").write_text(TRAINING)
    path = str(tmp_path / "net.py")
    report = ug.check_suite([path], targets="numpy", training_steps=2, executor="inline")
    assert report.ok, report.table()
    training = [t for t in report.tasks if t.entry == "training"]
    assert len(training) == 2 and all(t.report.kind == "training" for t in training)
    assert training[0].target_report.comparisons[0].name == "loss[0:2]"
    default = ug.check_suite([f"{path}:training"], targets="numpy:eager", executor="inline")
    assert default.tasks[0].target_report.comparisons[0].name == "loss[0:3]"
    without = ug.check_suite([path], targets="numpy", training_steps=0, executor="inline")
    assert {t.entry for t in without.tasks} == {"forward"}
