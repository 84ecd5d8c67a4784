"""Proving an exported artifact computes what its function computes, without unigraph.

`reload_outputs` runs saved artifacts in a fresh Python process per framework that imports
only that framework and NumPy (never unigraph: the script checks `sys.modules` before it
exits), feeds each one its example inputs, and brings the outputs back. `verify` exports a
function, reloads it that way and compares the outputs with the float64 reference (the
reference interpreter over the traced graph, inputs and weights widened to float64).

    >>> result = verify(model.eval(), x, path="model.pt2", format="torch")
    >>> result.ok, result.max_abs_error
    (True, 2.3e-07)

`unigraph export FILE:NAME` also writes `ARTIFACT.unigraph.json` beside the artifact (its
provenance: the format, the script and the CHECKS entry it came from); `check_artifact`
reads it, traces that entry again and verifies the artifact against it, which is what
`unigraph check ARTIFACT` runs: a stale or swapped artifact disagrees.

Paddle and TensorFlow never share a process (tensorflow imported before paddle crashes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

import numpy as np

# Each script reads a manifest of artifacts, runs each on its saved inputs and saves the
# outputs (or the error); the last lines prove unigraph was never imported.
_PRELUDE = """
import json, sys, traceback
import numpy as np
"""
_EPILOGUE = """
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
# format -> (framework, the code that runs one artifact: run_<format>(case, feeds)).
RELOADERS = {
    "savedmodel": ("tensorflow", """
import tensorflow as tf

def run_savedmodel(case, feeds):
    signature = tf.saved_model.load(case["artifact"]).signatures["serving_default"]
    outs = signature(**{n: tf.constant(x) for n, x in zip(case["input_names"], feeds)})
    return [outs[n].numpy() for n in case["output_names"]]
"""),
    "tflite": ("tensorflow", """
import tensorflow as tf

def run_tflite(case, feeds):
    runner = tf.lite.Interpreter(model_path=case["artifact"]).get_signature_runner()
    outs = runner(**dict(zip(case["input_names"], feeds)))
    return [outs[n] for n in case["output_names"]]
"""),
    "torch": ("torch", """
import torch

def run_torch(case, feeds):
    module = torch.export.load(case["artifact"]).module()
    with torch.no_grad():
        return [o.numpy() for o in module(*[torch.from_numpy(x) for x in feeds])]
"""),
    "paddle": ("paddle", """
import paddle
paddle.enable_static()
executor = paddle.static.Executor(paddle.CPUPlace())

def run_paddle(case, feeds):
    program, names, fetches = paddle.static.load_inference_model(case["artifact"], executor)
    return executor.run(program, feed=dict(zip(names, feeds)), fetch_list=fetches)
"""),
    "onnx": ("onnxruntime", """
import onnxruntime

def run_onnx(case, feeds):
    session = onnxruntime.InferenceSession(case["artifact"])
    return session.run(case["output_names"], dict(zip(case["input_names"], feeds)))
"""),
}


@dataclass
class Artifact:
    """One saved artifact to reload: its format and path, the names of its inputs and
    outputs, and the example inputs to feed it."""

    format: str
    path: str
    input_names: list
    output_names: list
    inputs: list


def reload_outputs(artifacts: list, folder: str | None = None, timeout: float = 600) -> list:
    """Run every artifact in a fresh process per framework; returns, per artifact, its
    outputs (a list of NumPy arrays) or the traceback (a str) of what failed in it."""
    with tempfile.TemporaryDirectory(prefix="unigraph_reload_") as scratch:
        folder = folder or scratch
        cases = []
        for index, artifact in enumerate(artifacts):
            stem = os.path.join(folder, f"case{index}")
            np.savez(stem + ".inputs.npz", *artifact.inputs)
            cases.append({"format": artifact.format, "artifact": os.path.abspath(artifact.path),
                          "inputs": stem + ".inputs.npz", "result": stem + ".out.npz",
                          "input_names": artifact.input_names,
                          "output_names": artifact.output_names})
        for framework in dict.fromkeys(RELOADERS[a.format][0] for a in artifacts):
            mine = [c for c in cases if RELOADERS[c["format"]][0] == framework]
            _run_process(framework, mine, folder, timeout)
        return [_result(case) for case in cases]


def _run_process(framework: str, cases: list, folder: str, timeout: float) -> None:
    formats = dict.fromkeys(c["format"] for c in cases)
    script = os.path.join(folder, f"reload_{framework}.py")
    with open(script, "w") as file:
        file.write(_PRELUDE + "".join(RELOADERS[f][1] for f in formats) + _EPILOGUE)
    manifest = os.path.join(folder, f"reload_{framework}.json")
    with open(manifest, "w") as file:
        json.dump(cases, file)
    # From the artifacts' folder, with no PYTHONPATH: nothing of unigraph is on the way.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    done = subprocess.run([sys.executable, script, manifest], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        for case in cases:
            if not os.path.exists(case["result"]):
                with open(case["result"] + ".error", "w") as file:
                    file.write(f"the {framework} process exited with status "
                               f"{done.returncode}:\n{done.stderr[-3000:]}")


def _result(case: dict):
    error = case["result"] + ".error"
    if os.path.exists(error):
        with open(error) as file:
            return file.read()
    with np.load(case["result"]) as outputs:
        return [outputs[key] for key in outputs.files]


@dataclass
class Verification:
    """What `verify` found: per output, the reloaded value and the float64 reference."""

    path: str
    format: str
    outputs: list = field(default_factory=list)
    reference: list = field(default_factory=list)
    error: str = ""  # the reload's traceback, when it failed
    rtol: float = 1e-4
    atol: float = 1e-5

    @property
    def max_abs_error(self) -> float:
        errors = [np.max(np.abs(np.asarray(g, np.float64) - r), initial=0.0)
                  for g, r in zip(self.outputs, self.reference)]
        return float(max(errors, default=0.0))

    @property
    def ok(self) -> bool:
        if self.error or len(self.outputs) != len(self.reference):
            return False
        return all(np.shape(g) == np.shape(r) and np.allclose(
            np.asarray(g, np.float64), r, rtol=self.rtol, atol=self.atol, equal_nan=True)
            for g, r in zip(self.outputs, self.reference))

    def summary(self) -> str:
        if self.error:
            last = self.error.strip().splitlines()[-1]
            return f"{self.path} ({self.format}): the reload failed: {last}"
        verdict = "agrees with" if self.ok else "DISAGREES with"
        return (f"{self.path} ({self.format}), reloaded without unigraph, {verdict} the "
                f"float64 reference: max abs error {self.max_abs_error:.3g} "
                f"(rtol {self.rtol:g}, atol {self.atol:g})")


def verify(fn_or_module, *example_inputs, path: str, format: str, rtol: float = 1e-4,
           atol: float = 1e-5, input_spec=None, dynamic_batch: bool = False,
           more_inputs: tuple = ()) -> Verification:
    """Export `fn_or_module` at `path` in `format`, reload it in a fresh process without
    unigraph, run it on `example_inputs` and compare with the float64 reference.

    `input_spec` / `dynamic_batch` are `ug.export`'s; `more_inputs` lists further argument
    tuples (other batch sizes) that the same reloaded artifact runs too: the result's
    outputs and reference are those of every run, in order.

    >>> verify(branch, x, y, path="branch.pt2", format="torch").ok
    True
    >>> verify(net.eval(), x8, path="net.pt2", format="torch", dynamic_batch=True,
    ...        more_inputs=[(x1,), (x3,)]).ok
    True
    """
    from unigraph.export import write
    from unigraph.export.prepare import prepare

    prepared = prepare(fn_or_module, example_inputs, input_spec=input_spec,
                       dynamic_batch=dynamic_batch)
    written = write(prepared, os.fspath(path), format)
    return _reload_and_compare(prepared, written, format, more_inputs, rtol, atol)


def other_batches(example_inputs: tuple) -> list:
    """Argument tuples with other batch sizes than the example's, made from it: the first
    row alone, and the rows twice over (dim 0 of every array argument of rank >= 1), for
    proving that a `dynamic_batch` artifact takes them.

    >>> [x.shape for (x,) in other_batches((np.ones((3, 4)),))]
    [(1, 4), (6, 4)]
    """
    from unigraph.export.prepare import as_array
    from unigraph.function import is_array_leaf

    def resized(make):
        return tuple(make(as_array(x)) if is_array_leaf(x) and np.ndim(as_array(x)) else x
                     for x in example_inputs)

    return [resized(lambda a: a[:1]), resized(lambda a: np.concatenate([a, a]))]


# -- provenance: which script entry an artifact came from -------------------------------------
PROVENANCE_SUFFIX = ".unigraph.json"


def provenance_path(artifact: str) -> str:
    """Where the provenance of `artifact` lives: beside it (a SavedModel directory, a file,
    or a Paddle prefix), `ARTIFACT.unigraph.json`."""
    return os.path.normpath(os.fspath(artifact)) + PROVENANCE_SUFFIX


def write_provenance(artifact: str, format: str, script: str, entry: str,
                     dynamic_batch: bool = False) -> str:
    """Record that `artifact` (in `format`) was exported from `script`'s CHECKS[`entry`]
    (with `--dynamic-batch`: then it is checked on other batch sizes too)."""
    record = {"format": format, "script": os.path.abspath(script), "entry": entry,
              "dynamic_batch": dynamic_batch}
    path = provenance_path(artifact)
    with open(path, "w") as file:
        json.dump(record, file, indent=2)
    return path


def is_exported_artifact(path: str) -> bool:
    """True when `path` is an artifact `unigraph export` wrote (its provenance is there)."""
    return os.path.isfile(provenance_path(path))


def check_artifact(path: str, rtol: float = 1e-4, atol: float = 1e-5) -> Verification:
    """Verify the artifact at `path` against the function it came from: the CHECKS entry
    named in its provenance, traced again now, run in float64 on the entry's example inputs.

    >>> check_artifact("branch.pt2").ok
    True
    """
    from unigraph.checking.scripts import ScriptError, load_checks
    from unigraph.cli_export import exportable_entry
    from unigraph.export.prepare import ExportError, prepare

    try:
        with open(provenance_path(path)) as file:
            record = json.load(file)
    except (OSError, ValueError) as error:
        raise ExportError(f"{path}: no readable provenance at {provenance_path(path)} "
                          f"({error}); export it with `unigraph export FILE:NAME`") from None
    script, entry_name, format = record["script"], record["entry"], record["format"]
    try:
        entries = load_checks(script)
    except ScriptError as error:
        raise ExportError(f"{path} was exported from {script}: {error}") from None
    if entry_name not in entries:
        raise ExportError(f"{path} was exported from {script}:{entry_name}, which is no longer "
                          f"there; its CHECKS are: {', '.join(entries)}")
    fn, inputs = exportable_entry(entries[entry_name])
    dynamic = bool(record.get("dynamic_batch"))
    prepared = prepare(fn, inputs, entry_name, dynamic_batch=dynamic)
    return _reload_and_compare(prepared, path, format, other_batches(inputs) if dynamic else (),
                               rtol, atol)


def _reload_and_compare(prepared, path: str, format: str, more_inputs, rtol: float,
                        atol: float) -> Verification:
    """Run the artifact at `path` on the prepared example inputs and on each of
    `more_inputs`, in one fresh process, against the float64 reference."""
    from unigraph import pytree
    from unigraph.export.prepare import as_array
    from unigraph.function import is_array_leaf
    from unigraph.reference import float64

    runs = [prepared.example_inputs] + [
        [as_array(x) for x in pytree.flatten(tuple(inputs), is_array_leaf)[0]]
        for inputs in more_inputs]
    reference, artifacts = [], []
    for feeds in runs:
        reference += float64.outputs(prepared.graph, feeds, prepared.params)
        artifacts.append(Artifact(format, path, prepared.input_names,
                                  prepared.output_names, feeds))
    result = Verification(path, format, reference=list(reference), rtol=rtol, atol=atol)
    for got in reload_outputs(artifacts):
        if isinstance(got, str):
            result.error = got
            break
        result.outputs += got
    return result
