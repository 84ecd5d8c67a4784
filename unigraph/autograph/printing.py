"""`print(...)` in converted code: a tensor among its arguments prints when it runs.

Python's `print` of a tensor inside a `@ug.function` printed every iteration on the eager
targets and once per trace (a symbolic tensor's repr) on the static ones. Autograph
rewrites a call of the builtin `print` into `ag__.print_`: where an argument is a tensor
(directly, or as a plain `{x}` field of an f-string argument), the line becomes one `print`
op (`ug.print`'s), so it prints each time it runs, on every target, with the same text:

    @ug.function
    def f(x):
        while ug.sum(x) < 10.0:
            print("x is", x, f"(sum {ug.sum(x)})")   # x is [1. 2.] (sum 3.0), every step
            x = x * 2.0
        return x

The line is Python's: the arguments' texts joined by `sep`, then `end`; a tensor's text is
its value as NumPy prints it (`ug.print`'s), any other argument's is `str(value)` (an
f-string field's `format(value, spec)`), taken when the line is traced. A `print` of Python
values only stays Python's print. Refused with a TypeError in every mode: a tensor inside a
list, tuple or dict argument, a tensor field with a format spec or `!r`/`!s`/`!a`, and
`file=` other than stdout.
"""

from __future__ import annotations

import builtins
import sys

from unigraph.printing import print_values
from unigraph.tensor import Tensor
from unigraph.tracing import user_source


class Field:
    """An f-string's `{value}` field (no conversion, no format spec): printed when it runs
    if `value` is a tensor. `formatted` formats a field with a spec or conversion (a tensor
    there is refused)."""

    __slots__ = ("value", "formatted")

    def __init__(self, value, formatted=None):
        self.value = value
        self.formatted = formatted


class FString:
    """An f-string argument of `print`: its pieces (strings and `Field`s), in order."""

    __slots__ = ("pieces",)

    def __init__(self, *pieces):
        self.pieces = pieces

    def __str__(self):  # (what Python's print would have printed)
        return "".join(_piece_text(piece) for piece in self.pieces)


def _piece_text(piece) -> str:
    if type(piece) is not Field:
        return piece
    return piece.formatted(piece.value) if piece.formatted else format(piece.value)


def print_(*args, sep=" ", end="\n", file=None, flush=False):
    """`print(*args, sep=..., end=..., file=..., flush=...)` in converted code: with a
    tensor among the arguments, one `print` op that writes the line when it runs; else
    Python's print."""
    tensors = [arg for arg in args if isinstance(arg, Tensor) or (
        type(arg) is FString and any(type(p) is Field and isinstance(p.value, Tensor)
                                     for p in arg.pieces))]
    if not tensors:
        _refuse_nested([*args, *(p.value for a in args if type(a) is FString
                                 for p in a.pieces if type(p) is Field)])
        return builtins.print(*[str(a) if type(a) is FString else a for a in args],
                              sep=sep, end=end, file=file, flush=flush)
    if sep is not None and not isinstance(sep, str):
        raise TypeError(f"sep must be None or a string, not {type(sep).__name__}")
    if end is not None and not isinstance(end, str):
        raise TypeError(f"end must be None or a string, not {type(end).__name__}")
    if file is not None and file is not sys.stdout:
        raise TypeError(
            f"print(..., file=...) of a tensor at {user_source()}: a print of a tensor in "
            "converted code writes to stdout when it runs (as ug.print does); drop file=, or "
            "return the tensor and print it outside the function")
    texts, values = [""], []
    for index, arg in enumerate(args):
        if index:
            texts[-1] += " " if sep is None else sep
        for piece in arg.pieces if type(arg) is FString else (arg,):
            _add_piece(piece, texts, values)
    texts[-1] += "\n" if end is None else end
    print_values(values, {"message": "", "texts": tuple(texts)})
    return None


def _add_piece(piece, texts: list, values: list) -> None:
    value = piece.value if type(piece) is Field else piece
    if isinstance(value, Tensor):
        if type(piece) is Field and piece.formatted is not None:
            raise TypeError(
                f"an f-string field with a format spec or !r/!s/!a on a tensor in print at "
                f"{user_source()}: a tensor prints when the graph runs, as NumPy prints it; "
                "write the field as {x} (or round it first: ug.round)")
        values.append(value)
        texts.append("")
        return
    _refuse_nested((value,))
    texts[-1] += _piece_text(piece) if type(piece) is Field else str(piece)


def _refuse_nested(args) -> None:
    """A tensor inside a list, tuple or dict argument would print as its repr, a symbolic
    one on a static target: refused in every mode."""
    stack = [a for a in args if type(a) in (list, tuple, dict)]
    while stack:
        item = stack.pop()
        for value in item.values() if type(item) is dict else item:
            if isinstance(value, Tensor):
                raise TypeError(
                    f"print of a {type(item).__name__} holding a tensor at {user_source()}: "
                    "it would print the tensor's repr (a symbolic one on a static target); "
                    "pass the tensors as print's own arguments (print(*values)), which print "
                    "their values when they run, on every target")
            if type(value) in (list, tuple, dict):
                stack.append(value)
