"""The checker's own runs of a graph with a dim `input_spec` leaves open raise the error a
user's call raises, on all 9 targets and onnxruntime:static, and its float64 reference too.

A @ug.function call checked its graph before the run (a cond's path not taken, a max over
an open axis a run leaves empty: `shape_checks.check_before_run`), but the checker runs
graphs itself (`checking.execute.target_outputs` and `target_env`, the float64 reference,
the training reference), and those runs returned the path taken's value or the
framework's error. The check is now made by every compiled run (`Executable.run` and
`run_all`) and by the checker's eager interpreter.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS

import unigraph as ug
from unigraph.checking.execute import target_env, target_outputs
from unigraph.config import Target
from unigraph.errors import ControlFlowError, ShapeError
from unigraph.plugins import get_backend
from unigraph.reference import float64

SPECS = [ug.Spec((None, 3), "float32")]
ONE = -np.ones((1, 3), np.float32)  # sum < 0: the known path
TWO = -np.ones((2, 3), np.float32)
W = np.array([[0.5, -1.0, 2.0]], np.float32)


def known_path_taken(x):
    z = ug.tensor(W)
    return ug.cond(ug.sum(x) > 0.0, lambda: x * 2.0, lambda: z - 1.0) * 3.0  # the cond


def _line(marker: str) -> int:
    with open(__file__) as source:
        return next(i for i, text in enumerate(source, 1) if text.rstrip().endswith(marker))


def _graph(function, x):
    return ug.function(function, input_spec=SPECS).trace_full(x).graph


def _outputs(graph, backend, mode, x):
    return target_outputs(graph, backend, mode, [x])[0]


def _env(graph, backend, mode, x):
    return target_env(graph, backend, mode, [x], [])[graph.outputs[0].id]


RUNS = {"target_outputs": _outputs, "target_env": _env}


@pytest.mark.parametrize("run", list(RUNS))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_the_checkers_runs_check_the_path_not_taken(target, run):
    t = Target.parse(target)
    graph = _graph(known_path_taken, ONE)
    backend = get_backend(t.backend, t.mode)
    np.testing.assert_allclose(RUNS[run](graph, backend, t.mode, ONE), (W - 1.0) * 3.0,
                               rtol=1e-6)
    line = rf"cond at .*test_open_dim_checker_runs\.py:{_line('# the cond')}: value 0 "
    with pytest.raises(ShapeError, match=line) as caught:
        RUNS[run](graph, backend, t.mode, TWO)
    assert isinstance(caught.value, ControlFlowError)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_the_checkers_runs_check_a_max_over_an_open_axis_left_empty(target):
    t = Target.parse(target)
    x = np.array([[1.0, 5.0, -2.0], [4.0, 0.5, 3.0]], np.float32)
    graph = _graph(lambda x: ug.max(x, axis=0), x)
    backend = get_backend(t.backend, t.mode)
    np.testing.assert_array_equal(_outputs(graph, backend, t.mode, x), [4.0, 5.0, 3.0])
    with pytest.raises(ShapeError, match=r"max: reducing float32\[0, 3\] over axis \(0,\) has "
                                         rf"no elements to compare \(on {target} at .*"
                                         r"test_open_dim_checker_runs\.py:\d+\)"):
        _outputs(graph, backend, t.mode, np.zeros((0, 3), np.float32))


def test_the_float64_reference_checks_the_path_not_taken():
    graph = _graph(known_path_taken, ONE)
    np.testing.assert_allclose(float64.outputs(graph, [ONE])[0], (W - 1.0) * 3.0, rtol=1e-6)
    with pytest.raises(ShapeError, match=r"cond at .*test_open_dim_checker_runs\.py"):
        float64.outputs(graph, [TWO])
    executable = float64.compile_float64(graph)  # (as the training check's reference runs)
    with pytest.raises(ShapeError, match=r"cond at .*test_open_dim_checker_runs\.py"):
        executable.run([float64.upcast(TWO)])
