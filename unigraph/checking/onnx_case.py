"""`.onnx` files as check cases: `unigraph check model.onnx`.

An ONNX file is imported with `ug.onnx.load` and checked like a script's CHECKS entry (one
entry, named after the file): every target against the float64 reference. Its inputs are
drawn at random (seeded) with the shapes and dtypes the graph declares, or read from an
`.npz` file (`--inputs`, one array per graph input, by name); a symbolic dimension such as
`batch` takes its size from `--dim batch=4`. Gradients (with respect to the float
initializers, which the importer makes Parameters, and the float inputs) only with
`--grads`: an imported inference model need not be differentiable.

The float64 reference runs unigraph's reading of the file, so an importer that misread an
op would make every target agree with a wrong reference. The row `onnxruntime:file` closes
that gap: ONNX Runtime runs the original file (not unigraph's re-export of it) on the same
inputs, compared with the same reference and budgets.

>>> entries = load_onnx_checks("mlp.onnx", dims={"batch": 4})
>>> entries["mlp"].inputs[0].shape
(4, 784)
"""

from __future__ import annotations

import os

import numpy as np

from unigraph.checking.scripts import CheckEntry, ScriptError

ORT_FILE_TARGET = "onnxruntime:file"  # ONNX Runtime running the original file


def is_onnx_path(path) -> bool:
    """True for a path naming an ONNX model file (by its suffix)."""
    return os.fspath(path).lower().endswith(".onnx")


def parse_dims(items) -> dict:
    """`["batch=4", "seq=16"]` (or one `"batch=4,seq=16"`) -> {"batch": 4, "seq": 16}."""
    dims: dict = {}
    for item in items or []:
        for part in str(item).split(","):
            name, sep, size = part.strip().partition("=")
            try:
                if not sep or not name.strip():
                    raise ValueError
                dims[name.strip()] = int(size)
            except ValueError:
                raise ScriptError(f"--dim: expected NAME=SIZE (batch=4), got {part!r}") \
                    from None
            if dims[name.strip()] < 0:
                raise ScriptError(f"--dim: {name.strip()} must be >= 0, got {size}")
    return dims


def _declared(value) -> tuple:
    """(numpy dtype, [int | str | None per axis]) of a graph input's ValueInfo."""
    from onnx import helper

    tensor = value.type.tensor_type
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in tensor.shape.dim]
    return dtype, dims


def _spelled(dims: list) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in dims) + ")"


def _shape(path: str, name: str, dims: list, sizes: dict) -> tuple:
    shape = []
    for axis, dim in enumerate(dims):
        if isinstance(dim, int):
            shape.append(dim)
        elif dim in sizes:
            shape.append(sizes[dim])
        elif dim is None:
            raise ScriptError(
                f"{path}: input {name!r} {_spelled(dims)} has no size on axis {axis}: give the "
                "inputs with --inputs FILE.npz")
        else:
            raise ScriptError(
                f"{path}: input {name!r} {_spelled(dims)} has the symbolic dimension {dim!r}: "
                f"give its size with --dim {dim}=N, or the inputs with --inputs FILE.npz")
    return tuple(shape)


def random_input(dtype: np.dtype, shape: tuple, rng: np.random.Generator) -> np.ndarray:
    """A seeded draw: floats ~ N(0, 1), integers in [0, 4) (small enough to index), bools."""
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, 4, shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    raise ScriptError(f"cannot draw random inputs of dtype {dtype}: give --inputs FILE.npz")


def _given(path: str, declared: dict, inputs_path: str, sizes: dict) -> list:
    """The arrays of `inputs_path` (.npz) for the graph inputs `declared`, checked."""
    try:
        with np.load(inputs_path, allow_pickle=False) as archive:
            given = {name: archive[name] for name in archive.files}
    except (OSError, ValueError) as error:
        raise ScriptError(f"--inputs {inputs_path}: cannot read it as an .npz file "
                          f"({error})") from None
    missing = [name for name in declared if name not in given]
    extra = [name for name in given if name not in declared]
    if missing or extra:
        parts = [f"missing {', '.join(map(repr, missing))}" if missing else "",
                 f"not inputs of the model: {', '.join(map(repr, extra))}" if extra else ""]
        raise ScriptError(
            f"--inputs {inputs_path}: {'; '.join(p for p in parts if p)}. {path} takes "
            f"{', '.join(repr(n) for n in declared)} (save them with "
            f"np.savez(FILE, **{{name: array}}))")
    arrays = []
    for name, (dtype, dims) in declared.items():
        array = given[name]
        fits = len(array.shape) == len(dims) and all(
            d is None or (isinstance(d, int) and d == s) or
            (isinstance(d, str) and sizes.get(d, s) == s) for d, s in zip(dims, array.shape))
        if not fits:
            raise ScriptError(f"--inputs {inputs_path}: {name!r} has shape {array.shape}; "
                              f"{path} declares {_spelled(dims)}")
        if array.dtype != dtype and array.dtype.kind != dtype.kind:
            raise ScriptError(f"--inputs {inputs_path}: {name!r} is {array.dtype}; {path} "
                              f"declares {dtype}")
        arrays.append(array.astype(dtype, copy=False))
    return arrays


def load_onnx_checks(path: str, dims: dict | None = None, inputs: str | None = None,
                     seed: int = 0) -> dict:
    """{name: CheckEntry}: the one entry of the ONNX file at `path` (named after the file),
    its inputs from `inputs` (an .npz path) or drawn with `seed` in the declared shapes
    (symbolic dimensions sized by `dims`). Raises `ScriptError` in the user's terms."""
    import unigraph as ug
    from unigraph.onnx.load import OnnxImportError

    if not os.path.isfile(path):
        raise ScriptError(f"no such file: {path}")
    try:
        model = ug.onnx.load(path)
    except OnnxImportError as error:
        raise ScriptError(f"{path}: {error}") from None
    except Exception as error:  # not an ONNX file at all: onnx's own decoding error
        raise ScriptError(f"{path}: cannot read it as an ONNX model "
                          f"({type(error).__name__}: {error})") from None
    sizes = dict(dims or {})
    by_name = {value.name: value for value in model.proto.graph.input}
    declared = {name: _declared(by_name[name]) for name in model.input_names}
    if inputs:
        arrays = _given(path, declared, inputs, sizes)
    else:
        rng = np.random.default_rng(seed)
        arrays = [random_input(dtype, _shape(path, name, shape, sizes), rng)
                  for name, (dtype, shape) in declared.items()]
    name = os.path.splitext(os.path.basename(path))[0]
    return {name: CheckEntry(name, model, tuple(arrays), {"grads": False})}


def run_file_on_onnxruntime(entry: CheckEntry, path: str, dtype: str, seed: int):
    """The Report of ONNX Runtime running the original file at `path` on the entry's inputs,
    compared with the float64 reference (the row `onnxruntime:file`)."""
    from unigraph.checking.checker import evaluate, finish
    from unigraph.checking.run import TargetRun, error_text, prepare
    from unigraph.config import Target

    case = prepare(entry.target, entry.inputs, dtype, False, None, None, seed, entry.name)
    target = Target("onnxruntime", "file")
    declared = {np.asarray(x).dtype.name for x in entry.inputs if np.asarray(x).dtype.kind == "f"}
    declared |= {p.dtype for p in case.params if p.dtype.startswith("float")}
    if declared - {dtype}:
        run = TargetRun(unsupported=(
            f"ONNX Runtime runs the file in its own dtype ({', '.join(sorted(declared))}), "
            f"not {dtype}: compared only when the check's dtype is that one"))
    else:
        try:
            import onnxruntime

            session = onnxruntime.InferenceSession(
                path, providers=["CPUExecutionProvider"])
            feeds = dict(zip(entry.target.input_names, map(np.asarray, entry.inputs)))
            run = TargetRun(outputs=[np.asarray(x) for x in session.run(None, feeds)])
        except ImportError:
            run = TargetRun(unsupported="onnxruntime is not installed: pip install "
                                        "'unigraph[onnxruntime]'")
        except Exception as error:  # ORT refused the file: that is this row's result
            run = TargetRun(error=f"ONNX Runtime: {error_text(error)}", error_stage="forward")
    report = evaluate(case, target, run, localize_divergence=False)
    return finish(case, [report], {str(target): run}, {})
