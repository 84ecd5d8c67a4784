"""The eager cond and while_loop with their steps inline (issue 19 item 3): `ug.cond` on an
eager bool scalar runs the branch taken inside the `cond` region in its own body (no
`_eager_cond` call); `ug.while_loop` over a tuple of eager tensors marks the `while_loop`
region itself and checks each iteration's shapes and dtypes one by one. On all 9 targets
(on static ones the same programs trace and must agree): which branch runs for each kind
of predicate, the region the branches and bodies see, a body changing a dtype or a shape
refused in our words, and eager ops' result tensors whole. Expected values by hand or
float64 NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph import control_flow
from unigraph.errors import ControlFlowError
from unigraph.tracing import current_region


@pytest.mark.parametrize("target", TARGETS)
def test_cond_picks_the_branch_of_each_predicate_value_and_shape(target):
    @ug.function
    def pick(x, y):
        outs = []
        for pred in (x > y, x < y, ug.reshape(x > y, (1,)), ug.reshape(x < y, (1,))):
            for _ in range(2):  # the second time from the checked key
                outs.append(ug.cond(pred, lambda: x + y, lambda: x - y))
        outs.append(ug.cond(True, lambda: x * y, lambda: x - y))  # a Python bool
        outs.append(ug.cond(np.bool_(False), lambda: x * y, lambda: x - y))
        return tuple(outs)

    for x, y in ((3.0, 1.0), (1.0, 3.0), (2.0, 2.0)):
        got = run_on(target, pick, np.float32(x), np.float32(y))
        gt, lt = x > y, x < y
        want = [x + y if gt else x - y] * 2 + [x + y if lt else x - y] * 2
        want = want + want + [x * y, x - y]
        assert [g.dtype for g in got] == [np.float32] * 10
        assert [float(g) for g in got] == want, (x, y)


@pytest.mark.parametrize("target", TARGETS)
def test_cond_with_operands_and_a_fresh_tensor_predicate(target):
    @ug.function
    def branch(x, flag):
        return ug.cond(flag, lambda a: a * 2.0, lambda a: a - 1.0, x)

    x = np.array([1.5, -2.0], np.float32)
    for flag in (True, False, True):
        got = run_on(target, branch, x, np.bool_(flag))
        np.testing.assert_array_equal(got, x * 2.0 if flag else x - 1.0)


@pytest.mark.parametrize("target", TARGETS)
def test_branches_and_bodies_run_inside_their_region(target, monkeypatch):
    # The untaken branch is checked once per code and closure types, whatever the target
    # (autograph now converts a code once, so these lambdas keep their code from one target
    # to the next): an empty record of checked branches makes every target check it here.
    monkeypatch.setattr(control_flow, "_checked_branches", {})
    seen = []

    def note(kind_of):
        region = current_region()
        seen.append(None if region is None else region[0])
        return kind_of

    @ug.function
    def f(x, n):
        y = ug.cond(x > 0.0, lambda: note(x + 1.0), lambda: note(x - 1.0))
        i, z = ug.while_loop(lambda i, z: i < n, lambda i, z: note((i + 1, z * 2.0)),
                             (ug.zeros((), "int64"), y))
        outside = current_region()
        return i, z, ug.cast(outside is None, "bool")

    got = run_on(target, f, np.float32(1.5), np.int64(3))
    assert [int(got[0]), float(got[1]), bool(got[2])] == [3, 20.0, True]
    # both branches once (eagerly the one taken, then the other traced to check it)
    assert seen[:2] == ["cond", "cond"] and set(seen[2:]) == {"while_loop"}, seen


@pytest.mark.parametrize("target", TARGETS)
def test_while_body_changing_a_dtype_or_a_shape_is_refused(target):
    @ug.function
    def widens(a):
        return ug.while_loop(lambda a, b: a < 3, lambda a, b: (a + 1, ug.cast(b, "float64")),
                             (a, ug.zeros((), "float32")))

    @ug.function
    def grows(a):
        return ug.while_loop(lambda a, b: a < 3, lambda a, b: (a + 1, ug.concat([b, b], 0)),
                             (a, ug.zeros((1,), "float32")))

    @ug.function
    def fine(a):  # a list from the body, and a count bounded by maximum_iterations
        return ug.while_loop(lambda a, b: a < 100, lambda a, b: [a + 1, b * 3.0],
                             (a, ug.ones((2,), "float32")), maximum_iterations=4)

    for _ in range(2):
        with pytest.raises(ControlFlowError, match=r"while_loop at .*test_eager_control_flow"
                                                   r"_inline\.py:\d+: value 1 is float32\[\]"):
            run_on(target, widens, np.int64(0))
        with pytest.raises(ControlFlowError, match=r"value 1 is float32\[1\] in loop_vars but "
                                                   r"float32\[2\] in the body"):
            run_on(target, grows, np.int64(0))
        got = run_on(target, fine, np.int64(0))
        assert int(got[0]) == 4 and got[1].tolist() == [81.0, 81.0]


@pytest.mark.parametrize("target", TARGETS)
def test_eager_op_results_are_whole_tensors(target):
    @ug.function
    def ops(x, n):
        y = x + x
        z = ug.exp(y) - 2.0
        k = n * 3
        return y, z, k, y > z, -k

    x = np.array([0.25, -1.0], np.float32)
    got = run_on(target, ops, x, np.int64(5))
    want = [(x + x, np.float32), (np.exp(x + x) - np.float32(2.0), np.float32),
            (np.int64(15), np.int64), (x + x > np.exp(x + x) - 2.0, np.bool_),
            (np.int64(-15), np.int64)]
    for g, (w, dtype) in zip(got, want, strict=True):
        assert g.dtype == dtype and g.shape == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-6)
    with ug.use_backend(*target.split(":")):
        out = ops(ug.tensor(x), ug.tensor(np.int64(5)))
        for t in out:  # every slot set: repr and the host copy read them all
            assert repr(t).startswith("Tensor(") and t.numpy().shape == t.shape
