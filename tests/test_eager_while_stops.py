"""Where a while_loop stops, on all 9 targets alike: its condition, `maximum_iterations`,
and the iteration limit (`loop_limit`), each first or at once (the eager loop tests its
count once an iteration, up to the fewer of the two bounds, then says which it was: at
`maximum_iterations` the loop ends; at the limit it raises only if the condition still
holds); and bodies returning a list, or a Python number of a loop variable's dtype."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug
from unigraph.control_flow import loop_limit
from unigraph.errors import ControlFlowError

# (the condition's bound n, maximum_iterations, the limit) -> the count, or None: refused
CASES = [
    (5, None, 5, 5),  # the condition ends it at the limit: no error
    (6, None, 5, None),
    (10, 5, 5, 5),  # maximum_iterations equal to the limit: it ends the loop
    (10, 6, 5, None),
    (10, 4, 5, 4),
    (10, 0, 5, 0),
    (3, 10, 5, 3),
    (3, 2, 5, 2),
    (30, None, None, 30),  # no limit
    (30, 12, None, 12),
]


def _counted(i, n, maximum):
    return ug.while_loop(lambda i, n: i < n, lambda i, n: (i + 1, n), (i, n),
                         maximum_iterations=maximum)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n, maximum, limit, want", CASES)
def test_the_condition_the_maximum_and_the_limit(target, n, maximum, limit, want):
    f = ug.function(lambda i, n: _counted(i, n, maximum))
    args = (np.int64(0), np.int64(n))
    with loop_limit(limit):
        for _ in range(2):  # the second call of a signature too
            if want is None:
                with pytest.raises(ControlFlowError,
                                   match=rf"test_eager_while_stops\.py:\d+ ran more than "
                                         rf"{limit} iterations"):
                    run_on(target, f, *args)
            else:
                i, last_n = run_on(target, f, *args)
                assert (i, last_n) == (want, n)
                assert i.dtype == np.int64


@pytest.mark.parametrize("target", TARGETS)
def test_a_list_body_and_a_number_body(target):
    @ug.function
    def f(x, k):
        as_list = ug.while_loop(lambda x, k: k < 4, lambda x, k: [x * 2.0, k + 1], (x, k))
        as_number = ug.while_loop(lambda x, k: k < 3, lambda x, k: (x + 1.0, 7), (x, k))
        return (*as_list, *as_number)

    got = run_on(target, f, np.float32(1.5), np.int64(0))
    want = [np.float32(24.0), np.int64(4), np.float32(2.5), np.int64(7)]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g == w, (g, w)


def _python_while(i, n):
    while i < n:  # LINE: python while
        i = i + 1
    return i


def _range_for(i, n):
    for _ in ug.range(n):  # LINE: range for
        i = i + 1
    return i


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("loop", [_python_while, _range_for], ids=["while", "for ug.range"])
def test_the_limit_stops_autograph_loops_in_every_mode(target, loop):
    # Autograph's `while` on a tensor test, and `for` over ug.range(tensor), are
    # while_loops: eager targets count their iterations as the graph loop does.
    import inspect

    lines, first = inspect.getsourcelines(loop)
    line = first + next(k for k, text in enumerate(lines) if "# LINE:" in text)
    f = ug.function(loop)
    with loop_limit(5):
        assert run_on(target, f, np.int64(0), np.int64(5)) == 5
        with pytest.raises(ControlFlowError, match=rf"test_eager_while_stops\.py:{line} ran "
                                                   r"more than 5 iterations"):
            run_on(target, f, np.int64(0), np.int64(6))
    assert run_on(target, f, np.int64(0), np.int64(6)) == 6
