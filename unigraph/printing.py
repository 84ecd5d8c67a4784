"""`ug.print`: print values while a model runs, eagerly or inside a compiled graph.

    @ug.function
    def step(x):
        h = ug.print(ug.tanh(x), message="h")     # prints "h [0.76 0.96]" on every run
        return h * 2

The text is unigraph's on every target: the message, then each value as NumPy prints it
(`np.array2string`), one line per call, written to stdout when the value is computed. In a
`while_loop` body that is once per iteration. `ug.print` returns its values unchanged (the
first one through the `print` op record, so its gradient is the identity), and a tensor
printed inside a traced function is replaced by the printed one, so the print runs before
every later use of it. How each target prints: NumPy and torch (eager and generated code)
call `emit` below; TensorFlow eager too, in graph modes a `tf.numpy_function` the result
depends on; Paddle eager too, paddle:static a `paddle.static.Print` op (Paddle's own text:
Paddle 3.3.1 has no Python callback in a Program, see the quirk "print").
"""

from __future__ import annotations

import sys

import numpy as np


def format_line(message: str, arrays, texts=None) -> str:
    """The one text of a print: `message` then each value, space-separated; with `texts`
    (a Python `print` in converted code, see `autograph.printing`), the text before each
    value and after the last one instead, its `end` included.

    >>> format_line("x", [np.array([1.0, 2.0])])
    'x [1. 2.]'
    >>> format_line("", [np.array(3)], texts=("i = ", "!"))
    'i = 3!'
    """
    values = [np.array2string(np.asarray(a), separator=" ") for a in arrays]
    if texts is not None:
        return "".join(text + value for text, value in zip(texts, values)) + texts[-1]
    return " ".join([message, *values] if message else values)


def emit(message: str, *arrays, texts=None) -> None:
    """Write one print's line to stdout now (the lowerings call this with host values)."""
    sys.stdout.write(format_line(message, arrays, texts) + ("\n" if texts is None else ""))
    sys.stdout.flush()


def print(*values, message: str = ""):  # noqa: A001  (ug.print, as tf.print)
    """Print `values` (tensors, arrays or numbers) at run time, prefixed by `message`, on
    every target, eager or compiled; return them unchanged (one value: that value).

    >>> y = ug.print(x * 2, message="x * 2")      # x * 2 [2. 4.]
    """
    from unigraph.tensor import Tensor

    if not values:
        raise TypeError("ug.print needs at least one value to print (and message=...)")
    if not isinstance(message, str):
        raise TypeError(f"ug.print: message must be a str, got {type(message).__name__}")
    inputs = [v if isinstance(v, Tensor) else _as_tensor(v) for v in values]
    out = print_values(inputs, {"message": message})
    return out if len(values) == 1 else (out, *values[1:])


def print_values(inputs: list, attrs: dict):
    """Apply the `print` op to the tensors `inputs`; return the first, printed."""
    from unigraph.dispatch import apply
    from unigraph.tensor import Tensor
    from unigraph.tracing import _builder

    out = apply("print", inputs, attrs)
    builder = _builder.get()
    first = inputs[0]
    if builder is not None and isinstance(first, Tensor) and first._builder is builder:
        # Later uses of the printed tensor read the printed value (the same numbers), so
        # the print cannot be pruned away before them (TF Sessions fetch only what is used).
        first._value = out._value
    return out


def _as_tensor(value):
    from unigraph.tensor import tensor

    return tensor(value)

