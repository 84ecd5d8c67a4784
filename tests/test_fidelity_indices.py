"""Out-of-range indices (issue 12 item 11): one IndexOutOfRangeError on every target.

A `take` index (ug.take, x[i] with an integer array, a traced one too) outside [-n, n) and a
cross-entropy label outside [0, C) raise `IndexOutOfRangeError` (an `IndexError`) naming
the op, the index as the user wrote it, the size, the target and the line of the op, on
every target, eager or static, forward or under ug.grad, inside cond/while_loop bodies
too. The valid extremes (-n and n - 1) still give NumPy's values.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import IndexOutOfRangeError, UnigraphError

X = np.array([1.0, 2.0, 4.0], np.float32)
LOGITS = np.zeros((2, 3), np.float32)


def line_of(fn, text: str) -> str:
    """'test_fidelity_indices.py:N', N the line in `fn`'s source that holds `text`."""
    lines, first = inspect.getsourcelines(fn)
    (offset,) = [i for i, line in enumerate(lines) if text in line]
    return f"test_fidelity_indices.py:{first + offset}"


def take_of(x, i):
    return ug.take(x, i)


def indexed(x, i):
    return x[i] * 2.0


def cross_entropy(logits, labels):
    return ug.sparse_softmax_cross_entropy(logits, labels)


def take_in_while(x, i):
    def body(k, total):
        return k + 1, total + ug.sum(ug.take(x, i))

    return ug.while_loop(lambda k, total: k < 2, body, (ug.tensor(0), ug.tensor(0.0)))[1]


def take_in_cond(x, i):
    return ug.cond(ug.sum(x) > 0, lambda: ug.take(x, i) * 3.0, lambda: x[:1])


def grad_of_take(x, i):
    return ug.grad(lambda v: ug.sum(ug.take(v, i) ** 2))(x)


def grad_of_cross_entropy(logits, labels):
    return ug.grad(lambda v: ug.sum(ug.sparse_softmax_cross_entropy(v, labels)))(logits)


def grad_in_while(x, i):
    def loss(v):
        def body(k, total):
            return k + 1, total + ug.sum(ug.take(v, i) * v[:1])

        return ug.while_loop(lambda k, total: k < 2, body, (ug.tensor(0), ug.tensor(0.0)))[1]

    return ug.grad(loss)(x)


def run(target: str, fn, *args):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        return np.asarray(ug.function(fn)(*args).numpy())


# (function, its inputs, the text of the failing op's line, the error text after "on T at L: ")
FORWARD = {
    "take-too-large": (take_of, (X, np.array([0, 5])), "ug.take(",
                       "index 5 is out of range for size 3"),
    "take-too-negative": (take_of, (X, np.array([-4])), "ug.take(",
                          "index -4 is out of range for size 3"),
    "indexing": (indexed, (X, np.array([[1, 3]], np.int32)), "x[i]",
                 "index 3 is out of range for size 3"),
    "label-too-large": (cross_entropy, (LOGITS, np.array([1, 3])), "sparse_softmax",
                        "label 3 is out of range for 3 classes"),
    "label-negative": (cross_entropy, (LOGITS, np.array([0, -1], np.int32)), "sparse_softmax",
                       "label -1 is out of range for 3 classes"),
    "take-in-while": (take_in_while, (X, np.array([1, 9])), "ug.take(",
                      "index 9 is out of range for size 3"),
    "take-in-cond": (take_in_cond, (X, np.array([-7])), "ug.take(",
                     "index -7 is out of range for size 3"),
}
GRADIENT = {
    "grad-take": (grad_of_take, (X, np.array([2, 3])), "ug.take(",
                  "index 3 is out of range for size 3"),
    "grad-label": (grad_of_cross_entropy, (LOGITS, np.array([4, 0])), "sparse_softmax",
                   "label 4 is out of range for 3 classes"),
    "grad-in-while": (grad_in_while, (X, np.array([-5])), "ug.take(",
                      "index -5 is out of range for size 3"),
}


def run_outside_a_function(target: str, fn, *args):
    """`fn` called on tensors of the current target, as plain ops (no @ug.function)."""
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        return np.asarray(fn(*[ug.tensor(a) for a in args]).numpy())


def check_refused(target, case, runner=run):
    fn, args, op_text, message = case
    with pytest.raises(IndexOutOfRangeError) as caught:
        runner(target, fn, *args)
    error = caught.value
    assert isinstance(error, IndexError) and isinstance(error, UnigraphError)
    op = "sparse_softmax_cross_entropy" if "label" in message else "take"
    assert str(error).startswith(f"{op} on {target} at "), str(error)
    assert line_of(fn, op_text) in str(error), str(error)
    assert message in str(error), str(error)


@pytest.mark.parametrize("case", FORWARD)
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_out_of_range_forward(target, case):
    check_refused(target, FORWARD[case])


@pytest.mark.parametrize("case", ["take-too-large", "take-too-negative", "indexing",
                                  "label-too-large", "label-negative"])
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_out_of_range_outside_a_function(target, case):
    # Plain ops on a static target run there too (onnxruntime: a one-node model each), and
    # refuse alike: at the call, naming its line.
    check_refused(target, FORWARD[case], runner=run_outside_a_function)


@pytest.mark.parametrize("case", GRADIENT)
@pytest.mark.parametrize("target", TARGETS)
def test_out_of_range_gradient(target, case):
    check_refused(target, GRADIENT[case])


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_the_extremes_are_valid(target):
    # -n and n - 1 are the first and last entries, as NumPy; the labels 0 and C - 1 too.
    got = run(target, take_of, X, np.array([-3, 2, -1, 0]))
    np.testing.assert_array_equal(got, [1.0, 4.0, 4.0, 1.0])
    logits = np.array([[0.0, 0.0, np.log(2.0)], [np.log(3.0), 0.0, 0.0]], np.float32)
    got = run(target, cross_entropy, logits, np.array([2, 0]))
    np.testing.assert_allclose(got, [np.log(4.0 / 2.0), np.log(5.0 / 3.0)], rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_the_extremes_differentiate(target):
    # d/dx sum(take(x, [-3, 2, 2])**2) = 2 x at index 0 once and at index 2 twice.
    got = run(target, grad_of_take, X, np.array([-3, 2, 2]))
    np.testing.assert_allclose(got, [2.0, 0.0, 16.0], rtol=1e-6)


def test_the_error_survives_pickling():
    # The checker's isolated workers send errors between processes.
    import pickle

    error = IndexOutOfRangeError("take", -5, 3, axis=0, target="torch:static", where="a.py:3")
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.index, copy.size) == (
        IndexOutOfRangeError, str(error), -5, 3)
