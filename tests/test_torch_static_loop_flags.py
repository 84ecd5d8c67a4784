"""The loop guard's flag (`control_flow._traced_while`): after a top-level loop, torch:static
keeps the counter and the flag made from it as Python ints and returns the flag as a NumPy
scalar (`_SourceWriter.host`).

On all 9 targets: two loops in a row, and a loop whose counter's flag passes through a cond,
count right and name the loop that ran past the limit. On torch:static: the generated run
makes no tensor of the counter."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.control_flow import loop_limit
from unigraph.errors import ControlFlowError


def _two_loops():
    @ug.function
    def two_loops(a, n):
        a = ug.while_loop(lambda a: a < n, lambda a: a + 1, a)  # first: n trips
        b = ug.while_loop(lambda b: b < 2 * n, lambda b: b + 1, a)  # second: n trips
        return a, b

    return two_loops


def _loop_in_cond():
    @ug.function
    def loop_in_cond(a, n):
        def counting():
            return ug.while_loop(lambda a: a < n, lambda a: a + 2, a)

        return ug.cond(a < n, counting, lambda: a)

    return loop_in_cond


@pytest.mark.parametrize("target", TARGETS)
def test_two_loops_count_and_name_the_loop_past_the_limit(target):
    two_loops = _two_loops()
    zero = np.asarray(0, np.int64)
    a, b = run_on(target, two_loops, zero, np.asarray(3, np.int64))
    assert (int(a), int(b)) == (3, 6)
    with loop_limit(4):
        a, b = run_on(target, two_loops, zero, np.asarray(4, np.int64))  # 4 and 4: within
        assert (int(a), int(b)) == (4, 8)
        with pytest.raises(ControlFlowError, match=r"ran more than 4 iterations") as error:
            run_on(target, two_loops, np.asarray(2, np.int64), np.asarray(5, np.int64))
    # a = 2..5 is 3 trips; the second loop, 5..10, is 5 trips: it is the one named.
    second = next(number for number, line in enumerate(open(__file__), 1)
                  if "# second: n trips" in line)
    assert f"test_torch_static_loop_flags.py:{second} " in str(error.value)


@pytest.mark.parametrize("target", TARGETS)
def test_a_loop_in_a_cond_counts_and_stops_at_the_limit(target):
    loop_in_cond = _loop_in_cond()
    got = run_on(target, loop_in_cond, np.asarray(1, np.int64), np.asarray(8, np.int64))
    assert int(got) == 9  # 1, 3, 5, 7, 9
    assert int(run_on(target, loop_in_cond, np.asarray(9, np.int64),
                      np.asarray(8, np.int64))) == 9  # the untaken branch
    with loop_limit(3), pytest.raises(ControlFlowError, match=r"ran more than 3 iterations"):
        run_on(target, loop_in_cond, np.asarray(1, np.int64), np.asarray(8, np.int64))


def test_torch_static_makes_no_tensor_of_a_top_level_counter():
    if "torch:static" not in TARGETS:
        pytest.skip("torch:static is not loaded")
    two_loops = _two_loops()
    run_on("torch:static", two_loops, np.asarray(0, np.int64), np.asarray(3, np.int64))
    (compiled,) = two_loops._cache.values()
    run_source, every_source = compiled.executable.source.split("\n\n\n")
    assert "counter_tensor(" not in run_source and "np.asarray(" in run_source
    assert every_source.count("counter_tensor(") == 2  # every_value's values are tensors
    (values,) = [compiled.executable.run_all([np.asarray(0, np.int64),
                                              np.asarray(3, np.int64)])]
    assert all(isinstance(v, np.ndarray) for v in values.values())
