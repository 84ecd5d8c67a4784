"""ug.check catches what it claims to catch: test backends with one deliberately wrong op
(forward or gradient), one that crashes, one that hangs, and legitimate float32 rounding
that must not be flagged.

The test backends are the NumPy engine with one op swapped, registered at run time. They
and the checked functions live at module level so that isolated workers can import them.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import time

import numpy as np
import pytest
from conftest import TARGETS
from unigraph_numpy.backend import NumpyBackend

import unigraph as ug
from unigraph import plugins
from unigraph.checking import Report, check, check_training, resolve_targets
from unigraph.checking.compare import compare
from unigraph.hookspecs import hookimpl
from unigraph.ops import OPS


# -- test backends -----------------------------------------------------------------------
class BadTanhBackend(NumpyBackend):
    """Computes tanh as sigmoid, eagerly and in compiled plans."""

    name = "badtanh"
    ops = {**OPS, "tanh": dataclasses.replace(OPS["tanh"], reference=OPS["sigmoid"].reference)}


def _wrong_tanh_vjp(g, inputs, output):
    return [g * (1.0 - output)]  # should be g * (1 - output ** 2)


class BadGradBackend(NumpyBackend):
    """Right tanh, wrong gradient of tanh."""

    name = "badgrad"
    ops = {**OPS, "tanh": dataclasses.replace(OPS["tanh"], vjp=_wrong_tanh_vjp)}


class CrashBackend(NumpyBackend):
    """Segfaults on tanh, like a framework bug would."""

    name = "crash"

    def eager_op(self, op, inputs, attrs):
        if op == "tanh":
            ctypes.string_at(0)  # reads address 0: SIGSEGV
        return super().eager_op(op, inputs, attrs)


class HangBackend(NumpyBackend):
    name = "hang"

    def eager_op(self, op, inputs, attrs):
        if op == "tanh":
            time.sleep(120)
        return super().eager_op(op, inputs, attrs)


class SequentialSumBackend(NumpyBackend):
    """Sums float32 strictly left to right (no pairwise summation): legitimate rounding."""

    name = "seqsum"

    def eager_op(self, op, inputs, attrs):
        out = super().eager_op(op, inputs, attrs)  # records the op for gradients
        x = inputs[0] if inputs else None
        if op == "sum" and attrs.get("axis") is None and x.dtype == np.float32 and x.size:
            out[...] = np.cumsum(x.reshape(-1), dtype=np.float32)[-1]  # same object
        return out


class PluginForTest:
    def __init__(self, backend_class):
        self.backend_class = backend_class

    @hookimpl
    def unigraph_backends(self):
        return [self.backend_class()]


BADTANH = PluginForTest(BadTanhBackend)
BADGRAD = PluginForTest(BadGradBackend)
CRASH = PluginForTest(CrashBackend)
HANG = PluginForTest(HangBackend)
SEQSUM = PluginForTest(SequentialSumBackend)


@pytest.fixture
def registered():
    """Register test plugins for one test: `registered(BADTANH, ...)`."""
    added = []

    def register(*plugin_objects):
        for plugin in plugin_objects:
            plugins.register_plugin(plugin, name=plugin.backend_class.name)
            added.append(plugin)

    yield register
    for plugin in added:
        plugins.unregister_plugin(plugin)


# -- checked functions -------------------------------------------------------------------
WEIGHT = ug.Parameter(np.random.default_rng(1).normal(size=(6, 5)) * 0.5, name="w",
                      dtype="float32")


def chain20(x):
    """Twenty ops (not counting constants), with tanh in the middle."""
    h = ug.matmul(x, WEIGHT)  # 1
    h = h + 0.5  # 2
    h = ug.relu(h) + ug.abs(h) * 0.1  # 3 4 5 6
    h = ug.exp(h * -0.5)  # 7 8
    h = ug.log(h + 1.0) - 0.3  # 9 10 11
    h = ug.maximum(h, -2.0) * 3.0  # 12 13
    h = ug.tanh(h)  # 14  <- the op the bad backends get wrong
    h = ug.sigmoid(h * 2.0)  # 15 16
    h = ug.softmax(h, axis=1)  # 17
    h = ug.sqrt(h + 0.01)  # 18 19
    return ug.sum(h, axis=1), ug.mean(h * h)  # 20 21 22


TANH_LINE = next(i for i, line in enumerate(open(__file__), 1) if "<- the op" in line)


def chain20_in_cond(x):
    return ug.cond(ug.sum(x) > -1e9, lambda: chain20(x)[0], lambda: ug.sum(x, axis=1))


def tanh_loop(x):
    def body(i, h):
        return i + 1, ug.tanh(h * 1.5 + 0.1)  # <- tanh in a loop

    return ug.while_loop(lambda i, h: i < 3, body, (0, x))[1]


LOOP_LINE = next(i for i, line in enumerate(open(__file__), 1) if "<- tanh in a loop" in line)


def long_sum(x):
    return ug.sum(x)


X = np.random.default_rng(2).normal(size=(4, 6))


# -- tests -------------------------------------------------------------------------------
def test_agreeing_targets_pass():
    report = check(chain20, X, targets="numpy")
    assert report.ok, report
    assert [t.target for t in report.targets] == ["numpy:eager", "numpy:static"]
    names = [c.name for c in report.targets[0].comparisons]
    assert names == ["output[0]", "output[1]", "grad(x)", "grad(w)"]
    report.assert_ok()
    assert "OK: all 2 targets agree" in str(report)


@pytest.mark.parametrize("mode", ["eager", "static"])
def test_wrong_forward_op_is_localized_to_its_node_and_line(registered, mode):
    registered(BADTANH)
    report = check(chain20, X, targets=["numpy", f"badtanh:{mode}"])
    assert not report.ok
    bad = report[f"badtanh:{mode}"]
    assert bad.status == "disagree"
    assert report["numpy:eager"].ok and report["numpy:static"].ok
    divergence = bad.divergence
    assert divergence.kind == "forward"
    assert divergence.op == "tanh"
    assert divergence.source.endswith(f"test_check.py:{TANH_LINE}")
    assert divergence.inputs == ["float32[4, 5]"]
    assert not divergence.own.ok and divergence.own.max_abs > 0.1
    assert divergence.carried is not None
    text = str(report)
    assert f"test_check.py:{TANH_LINE}" in text and "tanh" in text
    assert f"odd one out: badtanh:{mode}" in text
    with pytest.raises(AssertionError, match="badtanh"):
        report.assert_ok()


def test_wrong_op_inside_cond_is_localized_inside_the_branch(registered):
    registered(BADTANH)
    report = check(chain20_in_cond, X, targets=["badtanh:static"], grads=False)
    divergence = report["badtanh:static"].divergence
    assert divergence.op == "tanh"
    assert divergence.source.endswith(f":{TANH_LINE}")
    assert divergence.within and "then branch" in divergence.within[0]


@pytest.mark.parametrize("mode", ["eager", "static"])
def test_wrong_op_inside_while_loop_forward_and_backward(registered, mode):
    registered(BADTANH, BADGRAD)
    report = check(tanh_loop, np.linspace(-1, 1, 5), targets=[f"badtanh:{mode}",
                                                               f"badgrad:{mode}"])
    forward = report[f"badtanh:{mode}"].divergence
    assert (forward.kind, forward.op) == ("forward", "tanh")
    assert forward.source.endswith(f":{LOOP_LINE}") and "first iteration" in forward.within[0]
    backward = report[f"badgrad:{mode}"].divergence
    assert (backward.kind, backward.op) == ("gradient", "tanh")
    assert backward.source.endswith(f":{LOOP_LINE}")
    assert backward.within[0] == "the checked gradient"


def dense_tanh_onnx(path) -> None:
    """y = tanh(x @ W + b)**2 as an ONNX file whose nodes have names, x: (2, 6) float32."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(18)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="fc_matmul"),
             helper.make_node("Add", ["h", "b"], ["a"], name="fc_bias"),
             helper.make_node("Tanh", ["a"], ["t"], name="act_3"),
             helper.make_node("Mul", ["t", "t"], ["y"], name="square")]
    graph = helper.make_graph(
        nodes, "dense", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(rng.standard_normal((6, 3)).astype(np.float32) * 0.5, "W"),
         numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


@pytest.mark.parametrize("mode", ["eager", "static"])
def test_imported_onnx_model_divergence_names_the_onnx_node(registered, tmp_path, mode):
    """The first diverging op of an imported model is named by the ONNX node it came from
    (file, node name, op type), forward and backward."""
    registered(BADTANH, BADGRAD)
    dense_tanh_onnx(tmp_path / "model.onnx")
    model = ug.onnx.load(tmp_path / "model.onnx")
    report = check(model, X[:2], targets=["numpy:static", f"badtanh:{mode}", f"badgrad:{mode}"])
    assert report["numpy:static"].ok
    forward = report[f"badtanh:{mode}"].divergence
    assert (forward.kind, forward.op) == ("forward", "tanh")
    assert forward.source == "model.onnx: node 'act_3' (Tanh)"
    assert "at tanh (model.onnx: node 'act_3' (Tanh))" in str(report)
    backward = report[f"badgrad:{mode}"].divergence
    assert (backward.kind, backward.op) == ("gradient", "tanh")
    assert backward.source == "model.onnx: node 'act_3' (Tanh)"


@pytest.mark.parametrize("mode", ["eager", "static"])
def test_wrong_gradient_is_caught_and_localized(registered, mode):
    registered(BADGRAD)
    report = check(chain20, X, targets=["numpy:eager", f"badgrad:{mode}"])
    bad = report[f"badgrad:{mode}"]
    assert bad.status == "disagree"
    by_name = {c.name: c for c in bad.comparisons}
    assert by_name["output[0]"].ok and by_name["output[1]"].ok  # forward is right
    assert not by_name["grad(x)"].ok and not by_name["grad(w)"].ok
    divergence = bad.divergence
    assert divergence.kind == "gradient"
    assert divergence.op == "tanh"
    assert divergence.source.endswith(f":{TANH_LINE}")
    # Without grads=True the same backend passes: only the gradient is wrong.
    assert check(chain20, X, targets=[f"badgrad:{mode}"], grads=False).ok


def test_float32_rounding_of_a_long_reduction_is_not_flagged(registered):
    registered(SEQSUM)
    x = np.random.default_rng(3).random(100_000)
    report = check(long_sum, x, targets=["numpy", "seqsum:eager"])
    seq = report["seqsum:eager"].comparisons[0]
    exact = np.sum(x.astype(np.float32).astype(np.float64))
    naive = np.cumsum(x.astype(np.float32), dtype=np.float32)[-1]
    assert naive != np.float32(exact)  # the naive order really rounds differently
    assert seq.figures.max_abs > 0
    assert report.ok, report


def test_tolerances_come_from_the_ops_and_can_be_overridden():
    def elementwise(x):
        return x * 2.0 + 1.0

    def reduction(x):
        return ug.sum(x)

    x = np.ones(8)
    small = check(elementwise, x, targets="numpy:eager").targets[0].comparisons[0]
    wide = check(reduction, x, targets="numpy:eager").targets[0].comparisons[0]
    assert small.budget == ug.ops.base.DEFAULT_TOLERANCE["float32"]
    assert wide.budget == OPS["sum"].tolerance_for("float32")
    assert wide.budget[0] > small.budget[0]
    custom = check(elementwise, x, targets="numpy:eager", rtol={"output": 0.5}, atol=0.25)
    comparisons = custom.targets[0].comparisons
    assert comparisons[0].budget == (0.5, 0.25)
    assert comparisons[1].name == "grad(x)" and comparisons[1].budget[1] == 0.25


def test_compare_figures():
    reference = np.array([1.0, 2.0, 0.0, np.nan, np.inf])
    good = compare(np.float32([1.0, 2.0, 0.0, np.nan, np.inf]), reference, (1e-5, 1e-6))
    assert good.ok and good.nonfinite_match
    off = compare(np.float32([1.0, 2.1, 0.0, np.nan, np.inf]), reference, (1e-5, 1e-6))
    assert off.status == "FAIL"
    assert off.max_abs == pytest.approx(0.1, rel=1e-5)
    assert off.max_rel == pytest.approx(0.05, rel=1e-5)
    assert off.worst == (1,)
    # the needed tolerance is the budget scaled to just pass
    assert off.needed_atol / 1e-6 == pytest.approx(off.needed_rtol / 1e-5)
    rescaled = compare(np.float32([1.0, 2.1, 0.0, np.nan, np.inf]), reference,
                       (off.needed_rtol * 1.0001, off.needed_atol * 1.0001))
    assert rescaled.ok
    nan_moved = compare(np.float32([1.0, 2.0, np.nan, 0.0, np.inf]), reference, (1, 1))
    assert nan_moved.status == "nan/inf" and not nan_moved.nonfinite_match
    assert compare(np.int64([1, 2]), np.int64([1, 3]), (1, 1)).status == "FAIL"
    assert compare(np.zeros(3), np.zeros(4), (1, 1)).status == "shape"
    assert compare(np.zeros(3), np.zeros(3), (1, 1), dtype="float32").status == "dtype"


def test_report_json_and_module_and_integer_outputs():
    class Net(ug.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = ug.nn.Linear(6, 3)

        def forward(self, x):
            logits = self.fc(x)
            return {"logits": logits, "label": ug.argmax(logits, axis=1)}

    report = check(Net(), X, targets="numpy")
    assert report.ok, report
    names = [c.name for c in report.targets[0].comparisons]
    assert names[:2] == ["output[logits]", "output[label]"]
    assert {"grad(x)", "grad(fc.weight)", "grad(fc.bias)"} <= set(names)
    label = report.targets[0].comparisons[1]
    assert label.budget == (0.0, 0.0) and label.dtype == "int64"
    data = json.loads(report.to_json())
    assert data["ok"] is True and data["targets"][0]["target"] == "numpy:eager"
    assert data["targets"][0]["comparisons"][0]["figures"]["status"] == "ok"


def test_parameters_are_restored_between_targets():
    counter = ug.Parameter(np.zeros(3, dtype=np.float32), name="counter")

    def bump(x):
        ug.assign(counter, counter + x)
        return x * 2.0

    report = check(bump, np.ones(3), targets="numpy", grads=False)
    assert report.ok, report
    assert np.all(counter.numpy() == 0)


def test_errors_are_reported_per_target(registered):
    class Broken(NumpyBackend):
        name = "broken"

        def eager_op(self, op, inputs, attrs):
            if op == "exp":
                raise RuntimeError("exp is not lowered")
            return super().eager_op(op, inputs, attrs)

    plugin = PluginForTest(Broken)
    registered(plugin)
    report = check(chain20, X, targets=["numpy:eager", "broken:eager"])
    broken = report["broken:eager"]
    assert broken.status == "error" and "exp is not lowered" in broken.error
    assert broken.divergence.kind == "error" and broken.divergence.op == "exp"
    assert report["numpy:eager"].ok
    assert "broken:eager" in str(report)


def test_resolve_targets(registered):
    registered(BADTANH)
    chosen, _ = resolve_targets("all")
    names = [str(t) for t in chosen]
    assert {"numpy:eager", "numpy:static", "badtanh:eager", "badtanh:static"} <= set(names)
    chosen, _ = resolve_targets("numpy:static, badtanh")
    assert [str(t) for t in chosen] == ["numpy:static", "badtanh:eager", "badtanh:static"]


def test_isolated_crash_and_hang_are_reported_and_the_others_finish(registered):
    registered(CRASH, HANG)
    started = time.monotonic()
    report = check(chain20, X, targets=["numpy:eager", "crash:eager", "hang:eager"],
                   isolate=True, timeout=5)
    assert time.monotonic() - started < 60
    assert report["numpy:eager"].ok
    crashed = report["crash:eager"]
    assert crashed.status == "crashed" and "SIGSEGV" in crashed.error
    assert report["hang:eager"].status == "timeout"
    assert not report.ok
    assert "crashed" in str(report)


def test_isolated_disagreement_is_localized_in_the_worker(registered):
    registered(BADTANH)
    report = check(chain20, X, targets=["numpy:static", "badtanh:static"], isolate=True)
    assert report["numpy:static"].ok
    divergence = report["badtanh:static"].divergence
    assert divergence.op == "tanh" and divergence.source.endswith(f":{TANH_LINE}")


NO_GUARD = """
import sys
import numpy as np
import unigraph as ug

def layer(x):
    return ug.tanh(x * 1.5) * 2.0

print("module level ran")
report = ug.check(layer, np.linspace(-1.0, 1.0, 5), targets=sys.argv[1].split(","),
                  isolate=True, timeout=300)
print(report)
report.assert_ok()
print("rows:", ",".join(f"{t.target}={t.status}" for t in report.targets))
"""


def _run_script(path, *args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True,
                          timeout=600, cwd=path.parent)


def test_isolate_from_a_script_without_a_main_guard(tmp_path):
    """Issue 16 item 8: `ug.check(isolate=True)` at module level of a script with no
    `if __name__ == "__main__":` guard runs once, on every target (each in a worker that
    loads the script by path), and the workers do not run the script's check again.
    Loading happens before a worker touches a framework, so the NumPy targets stand for all
    (9 spawned framework imports cost ~3 minutes on 2 cores)."""
    path = tmp_path / "noguard.py"
    path.write_text(NO_GUARD)
    targets = ["numpy:eager", "numpy:static"]
    done = _run_script(path, ",".join(targets))
    assert done.returncode == 0, done.stdout + done.stderr
    rows = dict(item.split("=") for item in done.stdout.split("rows: ")[1].split()[0]
                .split(","))
    assert rows == {target: "ok" for target in targets}
    assert done.stdout.count("module level ran") == 1  # the workers' prints are silenced
    assert "not run here" not in done.stdout and "Traceback" not in done.stderr


LOCAL = """
import numpy as np
import unigraph as ug

def main():
    @ug.function
    def inner(x):
        return x * 3.0
    try:
        ug.check(inner, np.ones(3), targets=["numpy:eager"], isolate=True)
    except ValueError as error:
        print("refused:", error)
    try:
        ug.check(lambda x: x + 1.0, np.ones(3), targets=["numpy:eager"], isolate=True)
    except ValueError as error:
        print("refused:", error)

main()
"""


def test_isolate_refuses_a_local_function_up_front(tmp_path):
    """A local function or lambda has no name a worker can import: refused before any worker
    starts, naming the function, where it is defined, and the fix."""
    path = tmp_path / "local.py"
    path.write_text(LOCAL)
    started = time.monotonic()
    done = _run_script(path)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 60
    refusals = [line for line in done.stdout.splitlines() if line.startswith("refused:")]
    assert len(refusals) == 2, done.stdout
    inner_line = LOCAL.splitlines().index("    @ug.function") + 1
    assert f"main.<locals>.inner (defined at {path}:{inner_line})" in refusals[0]
    assert "<lambda>" in refusals[1] and f"{path}:" in refusals[1]
    assert all("Define it at module level" in r and "isolate=False" in r for r in refusals)


def test_check_training_compares_losses_and_weights(registered):
    registered(BADTANH)
    ug.manual_seed(0)

    class Net(ug.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = ug.nn.Linear(6, 8)
            self.fc2 = ug.nn.Linear(8, 3)

        def forward(self, x):
            return self.fc2(ug.tanh(self.fc1(x)))

    net = Net()
    before = net.state_dict()
    y = np.array([0, 1, 2, 1])
    report = check_training(net, ug.nn.functional.cross_entropy,
                            lambda model: ug.optim.Momentum(model, lr=0.1), [(X, y)],
                            steps=3, targets=["numpy", "badtanh:eager"])
    assert report["numpy:eager"].ok and report["numpy:static"].ok, report
    assert report["badtanh:eager"].status == "disagree"
    assert report["badtanh:eager"].divergence.op == "tanh"
    names = [c.name for c in report["numpy:eager"].comparisons]
    assert names == ["loss[0:3]", "weight(fc1.weight)", "weight(fc1.bias)",
                     "weight(fc2.weight)", "weight(fc2.bias)"]
    after = net.state_dict()
    assert all(np.array_equal(before[k], after[k]) for k in before)  # restored


def test_assert_agree_and_report_type():
    from unigraph.testing import assert_agree

    report = assert_agree(chain20, X, targets="numpy")
    assert isinstance(report, Report) and report.ok


# -- the command line and the pytest plugin ----------------------------------------------
SCRIPT = '''
import numpy as np
import unigraph as ug

W = ug.Parameter(np.linspace(-1, 1, 12).reshape(3, 4), name="w", dtype="float32")

def layer(x):
    return ug.tanh(x @ W)

class Net(ug.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = ug.nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x)

NET = Net()
X = np.linspace(0, 1, 6).reshape(2, 3)

CHECKS = {
    "layer": (layer, (X,)),
    "net": (NET, (X,), {"rtol": 1e-4}),
    "training": {"model": NET, "loss_fn": lambda out, y: ug.mean(out * out),
                 "optimizer": lambda m: ug.optim.SGD(m, lr=0.1),
                 "batches": [(X, np.zeros(2))], "steps": 2},
}

if __name__ == "__main__":
    raise SystemExit("the checker must import the script, not run it")
'''


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(SCRIPT)
    return str(path)


def test_cli_check_table_json_and_exit_status(registered, script, capsys):
    from unigraph.cli_check import main

    assert main([script, "--targets", "numpy", "--executor", "inline", "-v"]) == 0
    out = capsys.readouterr().out
    assert "ug.check: layer" in out and "ug.check: net" in out
    assert "ug.check_training: training" in out and "OK: all 2 targets" in out

    assert main([f"{script}:layer", "--targets", "numpy", "--format", "json",
                 "--executor", "inline"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and [m["entry"] for m in data["models"]] == ["layer"]

    registered(BADTANH)
    assert main([f"{script}:layer", "--targets", "numpy:eager,badtanh:static",
                 "--executor", "inline"]) == 1
    out = capsys.readouterr().out
    assert "model.py:8" in out and "FAILED" in out

    assert main([f"{script}:nope"]) == 2
    assert "has no check 'nope'" in capsys.readouterr().err


def test_cli_check_without_checks_is_a_usage_error(tmp_path, capsys):
    from unigraph.cli_check import main

    path = tmp_path / "plain.py"
    path.write_text("x = 1\n")
    assert main([str(path)]) == 2
    assert "defines no CHECKS" in capsys.readouterr().err


def test_cli_check_isolated(script, capsys):
    from unigraph.cli_check import main

    assert main([f"{script}:net", "--targets", "numpy", "--isolate", "--no-grads", "-v"]) == 0
    out = capsys.readouterr().out
    assert "numpy:static" in out and "OK" in out and "grad(" not in out


def test_pytest_plugin_parametrizes_target(tmp_path):
    import subprocess
    import sys

    test_file = tmp_path / "test_user.py"
    test_file.write_text(
        "import unigraph as ug\n"
        "def test_runs_on_target(target):\n"
        "    assert isinstance(target, ug.Target)\n"
        "    assert ug.current_target() == target\n"
        "def test_plain():\n"
        "    pass\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(test_file), "-v", "-p", "no:cacheprovider",
         "--unigraph-targets=numpy"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "test_runs_on_target[numpy:eager] PASSED" in result.stdout
    assert "test_runs_on_target[numpy:static] PASSED" in result.stdout
    assert "3 passed" in result.stdout


# -- ug.check is the function, whatever was imported (issue 11 item 1) ------------------
@pytest.mark.parametrize("target", TARGETS)
def test_ug_check_stays_callable_after_the_checking_package_is_imported(target):
    import importlib

    import unigraph.checking
    from unigraph.testing import assert_agree

    importlib.import_module("unigraph.testing.pytest_plugin")
    assert ug.Report is Report and ug.check_training is check_training
    assert ug.check is unigraph.checking.check and callable(ug.check)
    report = ug.check(chain20, X, targets=[target])
    assert report.ok, report
    assert assert_agree(chain20, X, targets=[target]).ok
    assert ug.check is unigraph.checking.check


# -- dtype casts the whole computation, parameters included (issue 11 item 6) -----------
class TinyNet(ug.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = ug.nn.Linear(6, 3)

    def forward(self, x):
        return ug.tanh(self.fc(x) * 0.7)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("target", TARGETS)
def test_check_dtype_casts_parameters_and_budgets_follow(target, dtype):
    with ug.random.seeded(5):
        net = TinyNet()
    before = {name: p.numpy().copy() for name, p in net.named_parameters()}
    report = check(net, X, targets=[target], dtype=dtype)
    assert report.ok, report
    comparisons = report[target].comparisons
    assert [c.name for c in comparisons] == ["output", "grad(x)", "grad(fc.weight)",
                                             "grad(fc.bias)"]
    for comparison in comparisons:
        # compare() fails a tensor of another dtype, so these ran in `dtype` end to end
        assert comparison.dtype == dtype and comparison.figures.status == "ok"
        assert comparison.budget[0] >= ug.ops.base.DEFAULT_TOLERANCE[dtype][0]
    output = comparisons[0]
    assert output.budget == (OPS["matmul"].tolerance_for(dtype)[0],
                             OPS["matmul"].tolerance_for(dtype)[1])
    if dtype == "float64":  # float32 weights anywhere would leave ~1e-8
        assert max(c.figures.max_abs for c in comparisons) < 1e-12
    if dtype == "float16":  # so would float32 arithmetic: float16 rounds at ~1e-4
        assert output.figures.max_abs > 1e-5
    for name, param in net.named_parameters():  # the user's parameters are untouched
        assert param.dtype == "float32"
        assert param.numpy().dtype == np.float32
        np.testing.assert_array_equal(param.numpy(), before[name])


# -- second derivatives: no reference, so the targets are compared (issue 11 item 16) ---
def _inner(y):
    return ug.sum(ug.tanh(y) * y * y)


def _first(x):
    return ug.sum(ug.grad(_inner)(x) * 1.5)


def second_derivative(x):
    return ug.grad(_first)(x)


def _second_derivative_by_hand(x):
    t = np.tanh(x)
    s = 1.0 - t * t  # tanh'
    # d/dx of 1.5 * (s x^2 + 2 t x), the first derivative of tanh(x) x^2 times 1.5
    return 1.5 * (-2.0 * t * s * x * x + 2.0 * s * x + 2.0 * s * x + 2.0 * t)


SECOND_X = np.linspace(-1.0, 1.0, 5)


def test_second_order_check_compares_the_targets_with_each_other():
    report = check(second_derivative, SECOND_X)
    assert report.ok, report
    ran = {t.target for t in report.targets}
    for target in TARGETS:  # every target either agrees or says why it cannot run it
        if target.startswith("numpy:"):
            assert target not in ran and "second order" in report.skipped[target]
        else:
            assert target in ran
            got = np.asarray(next(c for c in report[target].comparisons
                                  if c.name == "output").figures.max_abs)
            assert got < 1e-4
    assert report.across == ["forward", "gradient"]
    assert "targets' median" in str(report) and "agree with each other" in str(report)
    # the targets agree with the hand-computed second derivative, not just with each other
    with ug.use_backend("torch", "static"):
        np.testing.assert_allclose(second_derivative(SECOND_X.astype(np.float32)).numpy(),
                                   _second_derivative_by_hand(SECOND_X), rtol=1e-5, atol=1e-5)


def test_first_order_function_gradient_check_falls_back_only_for_gradients():
    report = check(ug.grad(_inner), SECOND_X, targets=["numpy", "torch"])
    assert report.ok, report
    assert report.across == ["gradient"]
    numpy_eager = report["numpy:eager"]
    assert [c.name for c in numpy_eager.comparisons] == ["output"]  # against the reference
    assert "second order" in numpy_eager.error
    assert "gradient not checked" in str(report)


def test_a_single_target_without_reference_is_unchecked_not_ok():
    report = check(second_derivative, SECOND_X, targets=["torch:eager"], grads=False)
    assert not report.ok
    assert report["torch:eager"].comparisons[0].figures.status == "unchecked"


class BadTorchTanh:
    """torch:eager with tanh computed as sigmoid: a wrong op that torch can differentiate
    twice, so the second-order check has something to catch."""

    @staticmethod
    def make():
        from unigraph_torch.backend import TorchBackend

        class BadTorch(TorchBackend):
            name = "badtorch"
            modes = ("eager",)

            def eager_op(self, op, inputs, attrs):
                return super().eager_op("sigmoid" if op == "tanh" else op, inputs, attrs)

        return BadTorch


BADTORCH = PluginForTest(BadTorchTanh.make())


def test_second_order_check_fails_the_target_that_disagrees(registered):
    registered(BADTORCH)
    report = check(second_derivative, SECOND_X, targets=["torch", "tensorflow:eager",
                                                         "badtorch:eager"])
    assert not report.ok
    assert report["badtorch:eager"].status == "disagree"
    for target in ("torch:eager", "torch:static", "tensorflow:eager"):
        assert report[target].ok, report
    assert report.odd_one_out.startswith("badtorch:eager")
    # two targets that disagree both fail: the median is half way between them
    pair = check(second_derivative, SECOND_X, targets=["torch:eager", "badtorch:eager"],
                 grads=False)
    assert not pair["torch:eager"].ok and not pair["badtorch:eager"].ok


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_check_training_dtype_casts_weights_and_optimizer_state(dtype):
    with ug.random.seeded(6):
        net = TinyNet()
    before = {name: p.numpy().copy() for name, p in net.named_parameters()}
    report = check_training(net, ug.nn.functional.cross_entropy,
                            lambda model: ug.optim.Momentum(model, lr=0.1),
                            [(X, np.array([0, 1, 2, 1]))], steps=2, dtype=dtype)
    assert report.ok, report
    assert sorted(t.target for t in report.targets) == sorted(TARGETS)
    for target in report.targets:
        weights = [c for c in target.comparisons if c.kind == "weight"]
        assert len(weights) == 2 and all(c.dtype == dtype for c in weights)
        if dtype == "float64":
            assert max(c.figures.max_abs for c in target.comparisons) < 1e-12, report
    for name, param in net.named_parameters():
        assert param.dtype == "float32"
        np.testing.assert_array_equal(param.numpy(), before[name])


# -- budgets derived from accumulation length (issue 18) ---------------------------------
def _conv2d_vjp_skipping_last_row(g, inputs, out, needs=None, **attrs):
    """conv2d's gradient with the weight gradient's sum missing the last row of output
    positions (an off-by-one loop bound): a bug the size of the sum it hides in."""
    right = OPS["conv2d"].vjp(g, inputs, out, needs=needs, **attrs)
    skipped = g.copy()
    skipped[:, :, -1, :] = 0
    wrong = OPS["conv2d"].vjp(skipped, inputs, out, needs=needs, **attrs)
    return [right[0], wrong[1], *right[2:]]


class SkippedRowBackend(NumpyBackend):
    name = "skiprow"
    ops = {**OPS, "conv2d": dataclasses.replace(OPS["conv2d"],
                                                vjp=_conv2d_vjp_skipping_last_row)}


SKIPROW = PluginForTest(SkippedRowBackend)


def _wide_conv():
    """512 input channels, 3x3: a forward sum of 4608 terms per output; positive inputs
    (as after a ReLU), so the weight gradient's sums over the 2 x 16 x 16 positions cancel
    to near zero for some weights. With the records' budgets alone (1e-4, 1e-5) this fails
    on correct code (numpy:eager and tensorflow:eager needed 1.3x that budget, torch:eager
    1.7x at 24 x 24)."""
    ug.manual_seed(0)
    conv = ug.nn.Conv2D(512, 4, 3, padding=1)
    x = np.random.default_rng(5).uniform(0, 3, (2, 512, 16, 16)).astype(np.float32)
    return conv, x


def test_budgets_grow_with_accumulation_length():
    from unigraph.checking.compare import budget_for, op_budget
    from unigraph.checking.run import prepare

    assert op_budget("conv2d", "float32") == (1e-4, 1e-5)
    assert op_budget("conv2d@256", "float32") == (1e-4, 1e-5)  # the records' reference
    rtol, atol = op_budget("conv2d@4096", "float32")  # 16x the terms: 4x rtol, 16x atol
    assert (rtol, atol) == pytest.approx((4e-4, 1.6e-4))
    assert budget_for({"add", "conv2d", "conv2d@4096"}, "float32") == (rtol, atol)
    conv, x = _wide_conv()
    case = prepare(conv, (x,))
    # The forward sums 512 x 3 x 3 = 4608 terms; the weight gradient 2 x 16 x 16 = 512.
    assert case.default_budgets["output"] == pytest.approx((1e-4 * (4608 / 256) ** 0.5,
                                                            1e-5 * 4608 / 256))
    assert case.default_budgets["grad(weight)"] == case.default_budgets["output"]
    small = prepare(ug.nn.Conv2D(4, 4, 3, padding=1), (x[:1, :4, :8, :8],))
    assert small.default_budgets["grad(weight)"] == (1e-4, 1e-5)  # <= 256 terms: unchanged
    # The same conv's weight gradient over 4 x 16 x 16 = 1024 positions grows.
    longer = prepare(ug.nn.Conv2D(4, 4, 3, padding=1), (np.concatenate([x[:, :4]] * 2),))
    assert longer.default_budgets["grad(weight)"] == pytest.approx((2e-4, 4e-5))


def test_the_records_budgets_alone_flag_the_512_channel_conv(monkeypatch):
    """The case below is a real stress: without the rule, correct code fails."""
    from unigraph.checking import accumulation

    monkeypatch.setattr(accumulation, "REFERENCE_TERMS", 10 ** 12)
    conv, x = _wide_conv()
    report = check(conv, x, targets="numpy:eager")
    assert not report.ok
    by_name = {c.name: c for c in report["numpy:eager"].comparisons}
    assert not by_name["grad(weight)"].ok


def test_a_512_channel_conv_gradient_passes_on_every_target():
    conv, x = _wide_conv()
    report = check(conv, x, targets=",".join(TARGETS))
    report.assert_ok()
    assert all(target in str(report) for target in TARGETS)


def test_a_skipped_row_in_that_gradient_is_still_caught(registered):
    registered(SKIPROW)
    conv, x = _wide_conv()
    report = check(conv, x, targets=["skiprow:eager"])
    by_name = {c.name: c for c in report["skiprow:eager"].comparisons}
    assert by_name["output"].ok and by_name["grad(x)"].ok
    assert not by_name["grad(weight)"].ok
    assert by_name["grad(weight)"].figures.ratio > 10  # far outside, not at the edge
