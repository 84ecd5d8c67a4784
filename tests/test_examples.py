"""Every example on every target agrees with numpy:eager — forward outputs, and for the
training examples the weights after 20 steps from the same initial weights and batches
(the comparison `make demo` prints, as a test)."""

import sys
from pathlib import Path

import pytest
from conftest import TARGETS

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES_DIR))

import run_all  # noqa: E402  (examples/run_all.py)

REFERENCE = {}


def _reference(name):
    if name not in REFERENCE:
        REFERENCE[name] = run_all.run_example(name, "numpy:eager")
    return REFERENCE[name]


@pytest.mark.parametrize("name", run_all.EXAMPLES)
@pytest.mark.parametrize("target", TARGETS)
def test_example_agrees_with_numpy(target, name):
    got = run_all.run_example(name, target)
    ok, note = run_all.compare(_reference(name), got)
    assert ok, f"examples/{name}.py on {target}: {note}"


def test_training_examples_report_weights():
    for name in ("softmax_regression", "mlp"):
        assert any(key.startswith("weights.") for key in _reference(name)), name


def test_compare_catches_a_difference():
    reference = _reference("conv2d")
    changed = {key: value * 1.01 for key, value in reference.items()}
    ok, note = run_all.compare(reference, changed)
    assert not ok and "differs" in note
