"""`unigraph check ARTIFACT` for a saved model without provenance (issue 15): a `.tflite`
file, a `.pt2` program, a SavedModel folder or a Paddle inference model that `unigraph
export` did not write (no `.unigraph.json` beside it) is loaded by its own framework alone,
run on seeded random inputs of its signature (or `--inputs`), and reported with its shapes,
saying plainly that nothing was compared. The artifacts are written here with `ug.export`,
which writes no provenance file; the command runs for real in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import unigraph as ug

W = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)
FORMATS = {"torch": "dense.pt2", "tflite": "dense.tflite", "savedmodel": "dense_saved",
           "paddle": "dense_paddle"}


@ug.function
def dense(x):
    return ug.tanh(ug.matmul(x, ug.constant(W)) + 1.0)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("artifacts")
    x = np.ones((2, 4), np.float32)
    for format, name in FORMATS.items():
        ug.export(dense, x, path=str(folder / name), format=format)
    ug.export(dense, x, path=str(folder / "batch.tflite"), format="tflite", dynamic_batch=True)
    assert not list(folder.glob("*.unigraph.json"))  # no provenance
    return folder


def cli(folder, *args):
    done = subprocess.run([sys.executable, "-m", "unigraph.cli", "check", *args], cwd=folder,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "UNIGRAPH_PLUGINS": "numpy"})
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("format", FORMATS)
def test_an_artifact_without_provenance_loads_runs_and_says_it_is_not_checked(artifacts,
                                                                              format):
    status, out, err = cli(artifacts, FORMATS[format], "--format", "json")
    assert status == 0, out + err
    probe = json.loads(out)
    assert (probe["format"], probe["ran"], probe["checked"]) == (format, True, False)
    assert [(i["shape"], i["dtype"]) for i in probe["inputs"]] == [([2, 4], "float32")]
    assert [(o["shape"], o["dtype"], o["finite"]) for o in probe["outputs"]] == \
        [([2, 3], "float32", True)]  # x (2, 4) @ W (4, 3)
    assert "no provenance file" in probe["note"] and "no reference" in probe["note"]


def test_a_dynamic_dim_needs_inputs_and_the_table_says_not_checked(artifacts):
    status, out, _ = cli(artifacts, "batch.tflite")
    assert status == 1
    assert "FAILED to load or run" in out and "no fixed size on axis 0" in out
    assert "--inputs FILE.npz" in out
    np.savez(artifacts / "batch.npz", x=np.zeros((3, 4), np.float32))
    status, out, err = cli(artifacts, "batch.tflite", "--inputs", "batch.npz")
    assert status == 0, out + err
    assert "float32[3, 3]" in out and "NOT CHECKED" in out and "no provenance" in out


def test_artifacts_and_scripts_are_not_mixed(artifacts):
    (artifacts / "script.py").write_text("CHECKS = {}\n")
    status, _, err = cli(artifacts, "dense.pt2", "script.py")
    assert status == 2 and "separate runs" in err
