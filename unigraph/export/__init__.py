"""`ug.export`: one model, written in each framework's own saved format.

    ug.export(model.eval(), x, path="model_savedmodel", format="savedmodel")
    ug.export(counter, 0, 10, path="counter.pt2", format="torch")

The function (or Module) is traced once on the example inputs (`prepare`), then lowered by
the backend of the format's framework into that framework's own artifact, which the
framework alone reloads, without unigraph:

| format       | artifact at `path`                     | reload with                          |
| ------------ | -------------------------------------- | ------------------------------------ |
| `savedmodel` | a SavedModel directory, signature      | `tf.saved_model.load(path)`          |
|              | `serving_default`                      |                                      |
| `tflite`     | a TensorFlow Lite flatbuffer           | `tf.lite.Interpreter(model_path=..)` |
| `torch`      | a `torch.export` program (`.pt2`)      | `torch.export.load(path).module()`   |
| `paddle`     | a Paddle inference model, `path` is    | `paddle.jit.load(path)` or           |
|              | the prefix of `.json` + `.pdiparams`   | `paddle.static.load_inference_model` |
| `onnx`       | an ONNX model (`unigraph.onnx.export`) | `onnxruntime.InferenceSession(path)` |

Control flow stays the format's own: `cond` is `tf.cond` / TFLite `IF` / `torch.cond` /
Paddle's `if` op / ONNX `If`; `while_loop` is `tf.while_loop` / TFLite `WHILE` /
`torch._higher_order_ops.while_loop` / Paddle's `while` op / ONNX `Loop`. See each
backend's `export` module for what its format cannot hold.

Inference only: a function that updates parameters, takes a gradient or draws random
numbers is refused (`ExportError`), naming the line; for a Module call `model.eval()`.
Shapes are those of the example inputs, except the dims an `input_spec` (or
`dynamic_batch=True`) leaves unknown; a Python `while`
traced by autograph is exported without unigraph's iteration guard (the artifact loops
until its condition is false, as the framework's own loop would).

`unigraph.export.verify` proves an artifact right: `verify(fn, *inputs, path=..,
format=..)` exports, reloads the artifact in a fresh process that imports only its
framework (never unigraph), runs it and compares with the float64 reference;
`check_artifact(path)` does the same for an artifact `unigraph export` wrote, against the
script entry it came from (`unigraph check ARTIFACT`).
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from dataclasses import dataclass

from unigraph.export.prepare import Exportable, ExportError, prepare


@dataclass(frozen=True)
class Format:
    """One saved format: the backend that writes it and where its writer lives."""

    name: str
    backend: str  # whose framework writes it (loaded first, in the safe import order)
    module: str  # the writer's module, imported after the backend has loaded
    writer: str  # the function in `module`: writer(prepared, path) -> path written
    suffix: str  # what a default file name ends with ("" for a directory or prefix)
    description: str


FORMATS = {
    f.name: f
    for f in (
        Format("savedmodel", "tensorflow", "unigraph_tensorflow.export", "save_savedmodel", "",
               "TensorFlow SavedModel directory (serving_default signature)"),
        Format("tflite", "tensorflow", "unigraph_tensorflow.export", "save_tflite", ".tflite",
               "TensorFlow Lite flatbuffer"),
        Format("torch", "torch", "unigraph_torch.export", "save_torch", ".pt2",
               "torch.export program"),
        Format("paddle", "paddle", "unigraph_paddle.export", "save_paddle", "",
               "Paddle inference model (PATH.json + PATH.pdiparams)"),
        Format("onnx", "", "unigraph.onnx", "export", ".onnx", "ONNX model (unigraph.onnx.export)"),
    )
}


def export(fn_or_module, *example_inputs, path: str, format: str, name: str | None = None,
           input_spec=None, dynamic_batch: bool = False):
    """Trace `fn_or_module` on `example_inputs` and write it at `path` in `format` (one
    of `FORMATS`: savedmodel, tflite, torch, paddle, onnx). Returns the path written (for
    `paddle`, the prefix of its two files).

    `input_spec` (a `ug.Spec` or None per positional argument; default: the function's
    own) or `dynamic_batch=True` (dim 0 of every array argument) leave dims unknown in the
    artifact, so that it runs on other batch sizes than the example's: a `None` dim in the
    SavedModel signature, -1 in TFLite's shape signature (resize the input before
    running), a `torch.export.Dim` in the `.pt2` program, -1 in the Paddle feed, a
    symbolic dim (`batch`) in ONNX.

    >>> @ug.function
    ... def branch(x, y):
    ...     return ug.cond(ug.sum(x) > ug.sum(y), lambda: x + y, lambda: x - y)
    >>> ug.export(branch, x, y, path="branch.pt2", format="torch")
    'branch.pt2'
    >>> program = torch.export.load("branch.pt2")          # later, without unigraph
    >>> program.module()(torch.from_numpy(x), torch.from_numpy(y))
    >>> ug.export(net.eval(), x, path="net.onnx", format="onnx", dynamic_batch=True)
    """
    chosen = _format(format)
    if chosen.name == "onnx" and input_spec is None and not dynamic_batch \
            and getattr(fn_or_module, "input_spec", None) is None:
        return _export_onnx(fn_or_module, example_inputs, os.fspath(path))
    prepared = prepare(fn_or_module, example_inputs, name, input_spec, dynamic_batch)
    return write(prepared, os.fspath(path), chosen.name)


def write(prepared: Exportable, path: str, format: str) -> str:
    """Write an already prepared graph in `format` at `path`; returns the path written."""
    chosen = _format(format)
    if chosen.name == "onnx":
        return _write_onnx(prepared, path)
    from unigraph.plugins import get_backend

    get_backend(chosen.backend).load()  # the framework, imported in the safe order
    writer = getattr(importlib.import_module(chosen.module), chosen.writer)
    return writer(prepared, path)


def _format(format: str) -> Format:
    if format not in FORMATS:
        raise ExportError(f"unknown export format {format!r}; the formats are: "
                          f"{', '.join(FORMATS)}")
    return FORMATS[format]


def _write_onnx(prepared: Exportable, path: str) -> str:
    """A prepared graph through `unigraph.onnx`'s writer, checked as `ug.onnx.export`
    checks it (onnx.checker, full check)."""
    try:
        import onnx

        from unigraph.onnx.export import graph_to_model
    except ImportError as error:
        raise ExportError(f"format 'onnx' needs the onnx package ({error}): "
                          "pip install 'unigraph[onnx]'") from None
    model = graph_to_model(prepared.graph, prepared.params, prepared.input_names,
                           prepared.output_names)
    model.graph.name = prepared.name
    onnx.checker.check_model(model, full_check=True)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    onnx.save_model(model, path)
    return path


def _export_onnx(fn_or_module, example_inputs: tuple, path: str) -> str:
    """ONNX is written by `unigraph.onnx.export` (the ONNX exchange package), when there."""
    try:
        onnx_export = importlib.import_module("unigraph.onnx").export
    except (ImportError, AttributeError) as error:
        raise ExportError(f"format 'onnx' needs unigraph.onnx and the onnx package ({error}): "
                          "pip install 'unigraph[onnx]'") from None
    onnx_export(fn_or_module, *example_inputs, path=path)
    return path


class _CallableModule(types.ModuleType):
    """`ug.export(...)` is this package called: `import unigraph.export` (which anything
    reaching `unigraph.export.prepare` does) binds the attribute `unigraph.export` to the
    package, so the package itself must be the function too."""

    def __call__(self, fn_or_module, *example_inputs, path: str, format: str,
                 name: str | None = None, input_spec=None, dynamic_batch: bool = False):
        return export(fn_or_module, *example_inputs, path=path, format=format, name=name,
                      input_spec=input_spec, dynamic_batch=dynamic_batch)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["FORMATS", "ExportError", "Exportable", "Format", "export", "prepare", "write"]
