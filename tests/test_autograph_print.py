"""Python's `print` in converted code: with a tensor among its arguments (or a `{x}` field
of an f-string argument) it printed every iteration on the eager targets and once per trace,
a symbolic tensor's repr, on the static ones. Autograph now makes it one `print` op
(`ug.print`'s): the same line, each time it runs, on every target. The line is Python's
(`sep`, `end`), a tensor's text NumPy's; paddle:static prints with Paddle's own Print op
(quirk "print"): there each tensor's message is the text before it. Expected lines are
worked out with NumPy in the test."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug


def text(value) -> str:
    return np.array2string(np.asarray(value), separator=" ")


def loop_prints(x):
    print("start", x)                          # its value is used below
    i = 0
    while ug.sum(x) < 10.0:
        print("x is", x, "at", i, end=";\n")   # a carried Python int: a weak int tensor
        print(f"triple {x * 3.0} done")        # a value used nowhere else
        x = x * 2.0
        i = i + 1
    print("end", x, sep=": ")
    return x


def loop_prints_reference(x):
    """[(pieces, end)] per line: pieces alternate text and value, as `texts` does."""
    lines = [(["start ", x, ""], "\n")]
    i = 0
    while x.sum() < 10.0:
        lines.append((["x is ", x, " at ", np.int64(i), ""], ";\n"))
        lines.append((["triple ", x * 3.0, " done"], "\n"))
        x = x * 2.0
        i = i + 1
    lines.append((["end: ", x, ""], "\n"))
    return lines


def branch_prints(x):
    if ug.sum(x) > 0.0:                        # branches that only print
        print("positive", x)
    else:
        print("negative", -x)
    while ug.sum(x) < 10.0:
        if ug.sum(x) > 4.0:
            print("big", x * 1.0)
        x = x * 2.0
    return x


def branch_prints_reference(x):
    lines = [(["positive ", x, ""], "\n")] if x.sum() > 0 else [(["negative ", -x, ""], "\n")]
    while x.sum() < 10.0:
        if x.sum() > 4.0:
            lines.append((["big ", x, ""], "\n"))
        x = x * 2.0
    return lines


PROGRAMS = {"loop": (loop_prints, loop_prints_reference),
            "branches": (branch_prints, branch_prints_reference)}


def _expected(target: str, lines: list) -> list:
    if target != "paddle:static":
        return ["".join(p if isinstance(p, str) else text(p) for p in pieces) + end
                for pieces, end in lines]
    # Paddle's Print: one (message, data) per tensor, the message the text before it.
    return sorted((pieces[k].strip(), [float(v) for v in np.ravel(pieces[k + 1])])
                  for pieces, _ in lines for k in range(0, len(pieces) - 1, 2))


def _printed(target: str, capfd) -> list:
    out, err = capfd.readouterr()
    if target != "paddle:static":
        return [line + "\n" for line in out.split("\n")[:-1]]
    text_ = out + err
    messages = re.findall(r"- message: (.*)", text_)
    datas = re.findall(r"- data: \[(.*)\]", text_)
    return sorted((m.strip(), [float(v) for v in d.split()]) for m, d in zip(messages, datas))


@pytest.mark.parametrize("program", sorted(PROGRAMS))
@pytest.mark.parametrize("target", TARGETS)
def test_a_print_of_a_tensor_prints_each_time_it_runs(target, program, capfd):
    program, reference = PROGRAMS[program]
    fn = ug.function(program)
    x = np.array([1.0, 2.0], np.float32)
    capfd.readouterr()
    for _ in range(2):  # a compiled graph prints on every run, not once when traced
        np.testing.assert_array_equal(run_on(target, fn, x), [4.0, 8.0])
    assert _printed(target, capfd) == _expected(target, reference(x) * 2)


def python_values_only(x):
    n = 3
    print("n is", n, [n, "a"], f"{n:>3}", sep="|")   # no tensor: Python's print, when traced
    return x + n


@pytest.mark.parametrize("target", TARGETS)
def test_a_print_of_python_values_only_stays_pythons(target, capfd):
    capfd.readouterr()
    got = run_on(target, ug.function(python_values_only), np.array([1.0], np.float32))
    np.testing.assert_array_equal(got, [4.0])
    out, _ = capfd.readouterr()
    assert out.splitlines() == [f"n is|3|[3, 'a']|{3:>3}"]   # (called once: traced once too)


def to_a_file(x):
    print("x", x, file=sys.stderr)
    return x


def in_a_list(x):
    print("values", [x, 1])
    return x


def with_a_format_spec(x):
    print(f"x = {ug.sum(x):.3f}")
    return x


@pytest.mark.parametrize("program, words", [
    (to_a_file, "file="), (in_a_list, "list holding a tensor"),
    (with_a_format_spec, "format spec")], ids=["file", "list", "spec"])
@pytest.mark.parametrize("target", TARGETS)
def test_a_print_a_graph_cannot_make_is_refused_alike(target, program, words):
    with pytest.raises(TypeError) as caught:
        run_on(target, ug.function(program), np.array([1.0, 2.0], np.float32))
    message = str(caught.value)
    assert words in message
    assert "test_autograph_print.py" in message
