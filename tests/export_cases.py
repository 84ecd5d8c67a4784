"""Programs and helpers shared by the export tests (test_export, test_onnx_export,
test_backend_onnxruntime, test_onnx_import): the float64 reference, an array comparison,
programs with control flow and weights, and two training graphs every exporter must
refuse."""

from pathlib import Path

import numpy as np
from conftest import run_on

import unigraph as ug
from unigraph.checking.scripts import load_checks
from unigraph.cli_export import exportable_entry

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def example_entries() -> dict:
    """{"script.entry": (function or model, inputs)} for every CHECKS entry of every example,
    as `unigraph export` exports it (a training entry: its model in eval mode)."""
    entries = {}
    for script in sorted(EXAMPLES.glob("*.py")):
        if script.name.startswith("_") or script.name == "run_all.py":
            continue
        for name, entry in load_checks(str(script)).items():
            entries[f"{script.stem}.{name}"] = exportable_entry(entry)
    return entries


def compare(got, want, rtol, atol, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=atol, err_msg=what)


def reference(fn, inputs) -> list:
    """The float64 reference: numpy:eager on float64 inputs (and weights, for a Module)."""
    wide = tuple(np.asarray(x).astype(np.float64) if np.asarray(x).dtype.kind == "f" else x
                 for x in inputs)
    if isinstance(fn, ug.nn.Module):
        fn = fn.copy("float64")
    out = run_on("numpy:eager", fn, *wide)
    return out if isinstance(out, list) else [out]


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


class Gate(ug.nn.Module):
    """Parameters used inside both branches of a cond."""

    def __init__(self):
        super().__init__()
        self.up = ug.nn.Linear(4, 3)
        self.down = ug.nn.Linear(4, 3)

    def forward(self, x):
        return ug.cond(ug.sum(x) > 0, lambda: ug.tanh(self.up(x)), lambda: self.down(x) * 2.0)


class SmallCNN(ug.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = ug.nn.Conv2D(2, 4, 3, padding=1, act="relu")
        self.pool = ug.nn.MaxPool2D(2, 2)
        self.fc = ug.nn.Linear(4 * 3 * 3, 5)

    def forward(self, x):
        h = self.pool(self.conv(x))
        return ug.log_softmax(self.fc(ug.reshape(h, (x.shape[0], -1))), axis=1)


@ug.function
def shrink(x, limit):
    """A float while_loop with a captured value and a cond in its body."""
    def body(steps, v):
        v = ug.cond(ug.sum(v) > 0, lambda: v * 0.5 - limit * 0.01, lambda: v * 0.75)
        return steps + 1, v

    return ug.while_loop(lambda steps, v: ug.sum(ug.abs(v)) > limit, body,
                         (ug.tensor(np.int64(0)), x))
