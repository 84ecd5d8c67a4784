"""`ug.set_threads(n)` / `UNIGRAPH_THREADS`: every framework's pools, read back from the
framework itself, on every target. Each backend runs in its own process: thread pools are
process-wide, and TensorFlow fixes its pools at its first op."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = sorted({target.split(":")[0] for target in TARGETS})

SCRIPT = r"""
import json, sys
import numpy as np
import unigraph as ug
from unigraph.threads import ThreadsError

backend, modes = sys.argv[1], sys.argv[2].split(",")

@ug.function
def f(x):
    return ug.matmul(x, x) + 1.0

x = np.eye(3, dtype=np.float32) * 2
for mode in modes:
    with ug.use_backend(backend, mode):
        assert np.array_equal(f(x).numpy(), 4 * np.eye(3) + 1), mode
result = {"first": ug.get_threads()}
try:
    ug.set_threads(2)
    with ug.use_backend(backend, modes[-1]):
        assert np.array_equal(f(x).numpy(), 4 * np.eye(3) + 1)
    result["second"] = ug.get_threads()
except ThreadsError as error:
    result["error"] = str(error)
print(json.dumps(result))
"""


def run_script(backend: str, env_threads: str | None) -> dict:
    modes = [target.split(":")[1] for target in TARGETS if target.startswith(backend + ":")]
    env = {key: value for key, value in os.environ.items()
           if key not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                          "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
                          "UNIGRAPH_THREADS", "UNIGRAPH_BACKEND", "UNIGRAPH_MODE")}
    env.update({"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"})
    if env_threads is not None:
        env["UNIGRAPH_THREADS"] = env_threads
    done = subprocess.run([sys.executable, "-c", SCRIPT, backend, ",".join(modes)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def expected(backend: str, n: int) -> dict:
    # NumPy's BLAS is loaded in every process; the backend's framework besides.
    return {"numpy": n} if backend == "numpy" else {backend: n, "numpy": n}


def picked(threads: dict, backend: str) -> dict:
    return {key: value for key, value in threads.items() if key in ("numpy", backend)}


@pytest.mark.parametrize("backend", BACKENDS)
def test_threads_set_every_pool_on_every_mode(backend):
    """UNIGRAPH_THREADS=1, applied when the first target is chosen (before the framework is
    imported): every mode of the backend runs, and the framework and NumPy's BLAS report
    one thread. Then ug.set_threads(2) changes torch, Paddle and NumPy; TensorFlow has
    fixed its pools at its first op and refuses, naming the fix."""
    result = run_script(backend, "1")
    assert picked(result["first"], backend) == expected(backend, 1)
    if backend == "tensorflow":
        assert "before the first TensorFlow op" in result["error"]
        assert "UNIGRAPH_THREADS" in result["error"]
    else:
        assert picked(result["second"], backend) == expected(backend, 2)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_set_threads_refuses_a_bad_count(bad):
    with pytest.raises(ValueError, match="positive integer"):
        ug.set_threads(bad)


def test_bad_environment_value_names_the_variable(monkeypatch):
    from unigraph import config

    monkeypatch.setenv("UNIGRAPH_THREADS", "two")
    with pytest.raises(ConfigError, match="UNIGRAPH_THREADS='two'"):
        config.threads()
    monkeypatch.setenv("UNIGRAPH_THREADS", "3")
    assert config.threads() == 3
