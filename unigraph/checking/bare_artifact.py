"""`unigraph check` on a saved artifact without provenance: load it, run it, say what it is.

`unigraph export` writes `ARTIFACT.unigraph.json` beside what it saves, naming the script
and CHECKS entry the artifact came from; `unigraph check ARTIFACT` then verifies it against
that function (`unigraph.export.verify.check_artifact`). An artifact from elsewhere (a
`.tflite` file, a `.pt2` program, a SavedModel folder, a Paddle inference model) has no
such record, so there is no reference to compare with. What can still be checked: it loads
with its own framework alone (in a fresh process that never imports unigraph), it runs on
seeded random inputs of the shapes and dtypes its signature declares (or on `--inputs
FILE.npz`), and its outputs have the shapes and dtypes reported here, all finite or not.

>>> probe = probe_artifact("model.tflite")
>>> print(probe.summary())
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

# format -> (code defining load(path) -> (inputs {name: (shape, dtype)}, run(feeds) -> {name:
# array})); a dim unknown in the signature is None.
_LOADERS = {
    "tflite": """
import tensorflow as tf

def load(path):
    runner = tf.lite.Interpreter(model_path=path).get_signature_runner()
    inputs = {name: ([None if d < 0 else int(d) for d in info["shape_signature"]],
                     np.dtype(info["dtype"]).name)
              for name, info in runner.get_input_details().items()}
    return inputs, lambda feeds: runner(**feeds)
""",
    "savedmodel": """
import tensorflow as tf

def load(path):
    signature = tf.saved_model.load(path).signatures["serving_default"]
    specs = signature.structured_input_signature[1]
    inputs = {name: ([None if d is None else int(d) for d in spec.shape.as_list()],
                     spec.dtype.as_numpy_dtype().dtype.name) for name, spec in specs.items()}
    run = lambda feeds: {k: v.numpy() for k, v in
                         signature(**{k: tf.constant(x) for k, x in feeds.items()}).items()}
    return inputs, run
""",
    "torch": """
import torch

def load(path):
    program = torch.export.load(path)
    names = list(program.graph_signature.user_inputs)
    nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    inputs = {}
    for name in names:
        value = nodes[name].meta["val"]
        inputs[name] = ([int(d) if isinstance(d, int) else None for d in value.shape],
                        str(value.dtype).removeprefix("torch."))
    module = program.module()

    def run(feeds):
        with torch.no_grad():
            outs = module(*[torch.from_numpy(feeds[n]) for n in names])
        outs = outs if isinstance(outs, (tuple, list)) else [outs]
        return {f"output[{i}]": o.numpy() for i, o in enumerate(outs)}
    return inputs, run
""",
    "paddle": """
import paddle
paddle.enable_static()

def load(path):
    executor = paddle.static.Executor(paddle.CPUPlace())
    program, names, fetches = paddle.static.load_inference_model(path, executor)
    data = {op.attrs().get("name"): op.result(0) for op in program.global_block().ops
            if op.name() == "pd_op.data"}  # the feeds of a PIR program
    inputs = {n: ([None if d < 0 else int(d) for d in data[n].shape],
                  str(data[n].dtype).split(".")[-1].lower()) for n in names}

    def run(feeds):
        outs = executor.run(program, feed=feeds, fetch_list=fetches)
        return {f"output[{i}]": np.asarray(o) for i, o in enumerate(outs)}
    return inputs, run
""",
}
_FRAMEWORK = {"tflite": "tensorflow", "savedmodel": "tensorflow", "torch": "torch",
              "paddle": "paddle"}
_MAIN = """
import json, sys, traceback
import numpy as np
{loader}
def main(path, given, seed, answer):
    report = {{"inputs": [], "outputs": [], "error": ""}}
    try:
        inputs, run = load(path)
        rng = np.random.default_rng(seed)
        given = dict(np.load(given)) if given else None
        feeds = {{}}
        for name, (shape, dtype) in inputs.items():
            report["inputs"].append({{"name": name, "shape": shape, "dtype": dtype}})
            if given is not None:
                if name not in given:
                    raise KeyError(f"--inputs has no array {{name!r}}; the artifact takes "
                                   f"{{', '.join(map(repr, inputs))}}")
                feeds[name] = np.asarray(given[name]).astype(dtype, copy=False)
            elif None in shape:
                axis = shape.index(None)
                raise ValueError(f"input {{name!r}} has no fixed size on axis {{axis}} "
                                 f"({{shape}}): give the inputs with --inputs FILE.npz")
            elif np.dtype(dtype).kind == "f":
                feeds[name] = rng.standard_normal(shape).astype(dtype)
            elif np.dtype(dtype).kind == "b":
                feeds[name] = rng.random(shape) < 0.5
            else:
                feeds[name] = rng.integers(0, 4, shape).astype(dtype)
        for name, out in run(feeds).items():
            out = np.asarray(out)
            finite = bool(np.isfinite(out).all()) if out.dtype.kind == "f" else True
            report["outputs"].append({{"name": name, "shape": list(out.shape),
                                      "dtype": out.dtype.name, "finite": finite}})
    except Exception as error:
        report["error"] = f"{{type(error).__name__}}: {{error}}"
        report["log"] = traceback.format_exc()[-3000:]
    leaked = sorted(m for m in sys.modules if m.split(".")[0].startswith("unigraph"))
    assert not leaked, f"the probe imported {{leaked}}"
    json.dump(report, open(answer, "w"))

main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
"""


def artifact_format(path: str) -> str | None:
    """The saved format at `path` (tflite, torch, savedmodel, paddle), or None."""
    path = os.fspath(path)
    if path.endswith(".tflite") and os.path.isfile(path):
        return "tflite"
    if path.endswith(".pt2") and os.path.isfile(path):
        return "torch"
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        return "savedmodel"
    if not os.path.exists(path) and any(os.path.isfile(path + suffix) for suffix in
                                        (".pdmodel", ".json", ".pdiparams")):
        return "paddle"  # the prefix of a Paddle inference model's files
    if path.endswith(".pdmodel") and os.path.isfile(path):
        return "paddle"
    return None


@dataclass
class Probe:
    """What loading and running a bare artifact showed."""

    path: str
    format: str
    inputs: list = field(default_factory=list)  # [{"name", "shape", "dtype"}]
    outputs: list = field(default_factory=list)  # [{"name", "shape", "dtype", "finite"}]
    error: str = ""
    log: str = ""

    @property
    def ran(self) -> bool:
        return not self.error

    def to_dict(self) -> dict:
        return {"artifact": self.path, "format": self.format, "ran": self.ran,
                "checked": False, "inputs": self.inputs, "outputs": self.outputs,
                "error": self.error, "note": NO_REFERENCE}

    def summary(self) -> str:
        def rows(items):
            return [f"  {i['name']}: {i['dtype']}{i['shape']}"
                    + ("" if i.get("finite", True) else "  (NOT all finite)") for i in items]

        head = f"unigraph check {self.path} ({self.format}, {_FRAMEWORK[self.format]} alone):"
        if self.error:
            return "\n".join([head, f"FAILED to load or run: {self.error}", *rows(self.inputs)])
        return "\n".join([head, "inputs (seeded random draws):", *rows(self.inputs),
                          "outputs:", *rows(self.outputs), f"NOT CHECKED: {NO_REFERENCE}"])


NO_REFERENCE = ("it loads and runs, but it has no provenance file (.unigraph.json), so "
                "there is no reference to compare its numbers with; export it with "
                "`unigraph export FILE:NAME --format F -o OUT` (which writes one), then "
                "`unigraph check OUT` verifies it against its function")


def probe_artifact(path: str, inputs: str | None = None, seed: int = 0,
                   timeout: float = 600.0) -> Probe:
    """Load and run the artifact at `path` in a fresh process of its framework (never
    importing unigraph), on seeded random inputs from its signature or the arrays of the
    .npz `inputs`; returns what it declared and produced."""
    format = artifact_format(path)
    if format is None:
        raise ValueError(f"{path} is not a saved artifact unigraph knows (.tflite, .pt2, a "
                         "SavedModel folder, a Paddle inference model)")
    target = path.removesuffix(".pdmodel") if format == "paddle" else path
    with tempfile.TemporaryDirectory(prefix="unigraph_probe_") as folder:
        script = os.path.join(folder, "probe.py")
        answer = os.path.join(folder, "answer.json")
        with open(script, "w", encoding="utf-8") as handle:
            handle.write(_MAIN.format(loader=_LOADERS[format]))
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        done = subprocess.run(
            [sys.executable, script, os.path.abspath(target),
             os.path.abspath(inputs) if inputs else "", str(seed), answer],
            cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)
        if not os.path.exists(answer):
            return Probe(path, format, error=f"the {_FRAMEWORK[format]} process exited with "
                         f"status {done.returncode}", log=done.stderr[-3000:])
        with open(answer, encoding="utf-8") as handle:
            data = json.load(handle)
    return Probe(path, format, data["inputs"], data["outputs"], data["error"],
                 data.get("log", ""))
