"""A squeeze of a dim left open by `input_spec`: one error on every target.

`ug.squeeze(x, axis=k)` where dim k's size is known only when the program runs (None in
the trace) is checked then: eagerly a dim that is not 1 is a `ShapeError`; a static run
fails with its framework's error (NumPy's, TensorFlow's and ONNX Runtime's squeeze refuse
the dim; torch:static's lowering raises; paddle:static's squeeze of such a dim is a
reshape to the other dims, which Paddle refuses), and `translate_squeeze_error` turns that
error into the `ShapeError` eager raises, with the target and the op's line
(`Executable._translated` calls it).

>>> f = ug.function(lambda x: ug.squeeze(x, axis=0), input_spec=[ug.Spec((None, 2))])
>>> f(np.ones((3, 2), np.float32))           # on numpy:static
ShapeError: squeeze on numpy:static at model.py:3: axis 0 is not 1 when the program ran ...
"""

from __future__ import annotations

import re

from unigraph.errors import ShapeError

# What each framework says when a squeezed dim is not 1 (torch:static: the lowering's own
# ShapeError; paddle:static: its reshape's refusal, read only where no reshape of an open
# dim could have failed instead).
_SQUEEZE_TEXTS = re.compile(
    r"cannot select an axis to squeeze out"  # NumPy
    r"|Can not squeeze dim\["  # TensorFlow
    r"|SqueezeBase"  # ONNX Runtime
    r"|squeeze: axis \d+ of a tensor of shape .* is not 1")  # torch:static's lowering
_RESHAPE_TEXT = "capacity of 'shape'"  # Paddle's reshape


def translate_squeeze_error(error: BaseException, executable) -> ShapeError | None:
    """The `ShapeError` a failed run of `executable` means when a squeeze of an open dim
    failed, or None."""
    graph = executable.graph
    squeezes = [node for node in graph.nodes_of("squeeze") if _open_axes(node)]
    if not squeezes:
        return None
    text = str(error)
    if not _SQUEEZE_TEXTS.search(text):
        reshapes = [node for node in graph.nodes_of("reshape")
                    if None in tuple(node.inputs[0].shape)]
        if _RESHAPE_TEXT not in text or reshapes:
            return None
    lines = []
    for node in squeezes:
        if node.source and node.source not in lines:
            lines.append(node.source)
    axes = sorted({a for node in squeezes for a in _open_axes(node)})
    target = getattr(executable, "target", "")
    return ShapeError(
        f"squeeze on {target} at {' or '.join(lines) or '?'}: axis "
        f"{', '.join(map(str, axes))} is not 1 when the program ran (its size was left open "
        f"by input_spec; only size-1 axes can be squeezed, as eagerly). {_said(text)}")


def _said(text: str) -> str:
    """The framework's own line about it (its messages run to pages)."""
    for line in text.splitlines():
        if _SQUEEZE_TEXTS.search(line) or _RESHAPE_TEXT in line:
            return f"The framework said: {line.strip()[:300]}"
    return ""


def _open_axes(node) -> list:
    shape = node.inputs[0].shape
    return [a for a in node.attrs.get("axis", ()) if shape[a] is None]
