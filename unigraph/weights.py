"""Weight files that are safe to load: the safetensors format (no pickle, so nothing in a
weight file can run code).

    ug.save({"w": w, "b": b}, "weights.safetensors")     # dict of arrays or tensors
    arrays = ug.load("weights.safetensors")               # {name: np.ndarray}
    model.save("model.safetensors"); model.load("model.safetensors")

A file that is missing, truncated or not a safetensors file is a `WeightFileError` naming the
path; loading into a model first checks every name, shape and dtype and reports all the
differences at once, so nothing is half-loaded.
"""

from __future__ import annotations

import os

import numpy as np

from unigraph.errors import UnigraphError


class WeightFileError(UnigraphError, ValueError):
    """A weight file that cannot be read, or that does not fit what it is loaded into."""


def save(arrays: dict, path, metadata: dict | None = None) -> None:
    """Write `{name: array or tensor}` to `path` in the safetensors format.

    >>> ug.save({"w": np.ones((2, 3), np.float32)}, "w.safetensors")
    """
    from safetensors.numpy import save_file

    plain = {}
    for name, value in arrays.items():
        if not isinstance(name, str):
            raise TypeError(f"weight names must be strings, got {name!r}")
        array = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
        plain[name] = np.array(array, order="C")  # (ascontiguousarray makes 0-d 1-d)
    text = {str(k): str(v) for k, v in (metadata or {}).items()}
    tmp = f"{os.fspath(path)}.tmp-{os.getpid()}"
    save_file(plain, tmp, metadata={"format": "unigraph", **text})
    os.replace(tmp, path)  # never leaves a half-written file under the real name


def load(path) -> dict:
    """`{name: np.ndarray}` from a safetensors file (each array a fresh, writable copy).

    >>> arrays = ug.load("w.safetensors")
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise WeightFileError(f"no weight file at {path!r}")
    try:
        return {name: np.array(array) for name, array in load_file(path).items()}
    except (SafetensorError, OSError, ValueError) as error:
        raise WeightFileError(
            f"{path!r} is not a readable safetensors weight file ({error}); it may be "
            "truncated or corrupted: save it again") from None


def metadata(path) -> dict:
    """The text metadata stored in a safetensors file's header."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(os.fspath(path), "np") as handle:
            return dict(handle.metadata() or {})
    except (SafetensorError, OSError) as error:
        raise WeightFileError(f"cannot read the header of {os.fspath(path)!r}: {error}") from None


def check_fits(expected: dict, arrays: dict, where: str) -> None:
    """Raise WeightFileError listing every difference between `expected` ({name: (shape,
    dtype)}) and `arrays` ({name: array}): missing and unexpected names, shapes, dtypes."""
    problems = []
    missing = [name for name in expected if name not in arrays]
    unexpected = [name for name in arrays if name not in expected]
    if missing:
        problems.append(f"missing: {', '.join(missing)}")
    if unexpected:
        problems.append(f"not in the model: {', '.join(unexpected)}")
    for name, (shape, dtype) in expected.items():
        if name not in arrays:
            continue
        array = arrays[name]
        if tuple(array.shape) != tuple(shape):
            problems.append(f"{name}: shape {list(array.shape)} in the file, "
                            f"{list(shape)} in the model")
        elif array.dtype.name != str(dtype):
            problems.append(f"{name}: dtype {array.dtype.name} in the file, {dtype} in the model")
    if problems:
        raise WeightFileError(f"{where} does not fit: " + "; ".join(problems)
                              + " (nothing was loaded)")
