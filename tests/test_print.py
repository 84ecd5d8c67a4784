"""ug.print on every target: it prints when the compiled graph runs (each run, each loop
iteration), in unigraph's text, returns its value unchanged and lets gradients through."""

import re

import numpy as np
import pytest

import unigraph as ug
from tests.conftest import TARGETS
from unigraph.config import Target


def _printed(capfd, target: str) -> list:
    """The printed lines, as (message, values) pairs; paddle:static prints with Paddle's
    own Print op (quirk "print"): its "- message:" / "- data:" lines are read back."""
    out, err = capfd.readouterr()
    if target != "paddle:static":
        return [line for line in out.splitlines() if line.strip()]
    text = out + err
    messages = re.findall(r"- message: (.*)", text)
    datas = re.findall(r"- data: \[(.*)\]", text)
    return [f"{m} [{' '.join(str(float(v)).rstrip('0') for v in d.split())}]"
            for m, d in zip(messages, datas)]


def _program(x, n):
    y = ug.print(x * 2.0, message="y")          # the returned value, used below
    ug.print(y + 1.0, message="statement")      # a statement: the value is not used again

    def body(i, acc):
        return i + 1, ug.print(acc + 1.0, message="loop")

    _, acc = ug.while_loop(lambda i, acc: i < n, body, (0, y))
    return acc


@pytest.mark.parametrize("target", TARGETS)
def test_print_in_a_compiled_graph_every_run_and_iteration(target, capfd):
    t = Target.parse(target)
    fn = ug.function(_program)
    x = np.array([1.0, 2.0], np.float32)
    capfd.readouterr()
    with ug.use_backend(t.backend, t.mode):
        for _ in range(2):  # a compiled graph prints on every run, not once when built
            out = fn(x, 2)
            np.testing.assert_array_equal(out.numpy(), [4.0, 6.0])
    lines = _printed(capfd, target)
    one_run = ["y [2. 4.]", "statement [3. 5.]", "loop [3. 5.]", "loop [4. 6.]"]
    # Within a run the statement print may run before or after the loop's (no data order).
    assert sorted(lines) == sorted(one_run * 2), lines


@pytest.mark.parametrize("target", TARGETS)
def test_print_returns_its_values_and_gradients_flow(target, capfd):
    t = Target.parse(target)

    def loss(w):
        printed, other = ug.print(w * w, ug.tensor([7]), message="w*w")
        return ug.sum(printed) + ug.sum(ug.cast(other, w.dtype))

    with ug.use_backend(t.backend, t.mode):
        value, grad = ug.value_and_grad(ug.function(loss))(np.array([1.0, 3.0], np.float32))
    assert value.item() == 17.0
    np.testing.assert_array_equal(grad.numpy(), [2.0, 6.0])
    lines = _printed(capfd, target)
    if target == "paddle:static":
        assert "w*w [1. 9.]" in lines, lines
    else:
        assert lines == ["w*w [1. 9.] [7]"], lines


def test_print_text_and_errors(capsys):
    x = ug.tensor(np.array([[1, 2], [3, 4]], np.int32))
    assert ug.print(x, message="m") is not None
    assert capsys.readouterr().out == "m [[1 2]\n [3 4]]\n"
    ug.print(ug.tensor([0.5]))
    assert capsys.readouterr().out == "[0.5]\n"
    with pytest.raises(TypeError, match="needs at least one value"):
        ug.print(message="nothing")
    with pytest.raises(TypeError, match="message must be a str"):
        ug.print(x, message=3)
