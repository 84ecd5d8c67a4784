"""Autograph: plain Python control flow in @ug.function, converted to cond/while_loop.

Every program below is an ordinary Python function. The reference is that function run
undecorated on NumPy values (Python's own control flow); each target must agree with it.
On eager targets the converted code keeps Python control flow; on static targets
tensor-dependent `if`/`while`/`for ... in ug.range(n)` become `cond`/`while_loop` nodes.
"""

from __future__ import annotations

import inspect
import os
import re
import traceback

import numpy as np
import pytest
from conftest import TARGETS  # noqa: E402  (every registered target)
from corpus.autograph import (  # the same programs, also run as corpus entries
    bool_ops,
    closure_in_tensor_while,
    comprehension_in_tensor_if,
    cond_inside_loop,
    elif_chain,
    for_else_break,
    ifexp_in_loop,
    nested_ifs,
    nested_loops,
    sign,
    weak_counter,
    while_true_break,
)

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ControlFlowError, ShapeError, TracingError

STATIC_TARGETS = [t for t in TARGETS if Target.parse(t).mode != "eager"]

f32, i64 = np.float32, np.int64
FILE = os.path.basename(__file__)


def run_on(target: str, fn, *args, **kwargs):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        return fn(*args, **kwargs)


def to_numpy(tree):
    if isinstance(tree, ug.Tensor):
        return tree.numpy()
    if isinstance(tree, tuple | list):
        return type(tree)(to_numpy(x) for x in tree)
    if isinstance(tree, dict):
        return {k: to_numpy(v) for k, v in tree.items()}
    return np.asarray(tree)


def assert_same(got, want):
    got, want = to_numpy(got), to_numpy(want)
    if isinstance(want, tuple | list):
        assert isinstance(got, tuple | list) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            assert_same(g, w)
        return
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=1e-6, atol=1e-6)


def ops_in(graph) -> list:
    ops = []
    for node in graph.nodes:
        ops.append(node.op)
        for sub in node.subgraphs.values():
            ops.extend(ops_in(sub))
    return ops


# -- the programs ---------------------------------------------------------------------------
def counter(a, b):
    while a < b:
        a = a + 2
        b = b + 1
    return a, b


def branch(x, y):
    return x + y if x > y else x - y


def loop_inside_cond(x):
    if x > 0.0:
        while x < 100.0:
            x = x * 2.0
    else:
        x = -x
    return x


def fibonacci_pair(limit):
    pair = (0, 1)
    count = 0
    while pair[1] < limit:
        pair = (pair[1], pair[0] + pair[1])
        count = count + 1
    return pair, count


def doubling_trip_count(x, limit):
    trips = 0
    while x < limit:
        x = x * 2.0
        trips = trips + 1
    return trips


def range_break(n, limit):
    total = 0
    for i in ug.range(n):
        if total > limit:
            break
        total = total + i
    return total


def range_continue(n):
    total = 0
    for i in ug.range(n):
        if i < 3:
            continue
        total = total + i
    return total


def defined_before(x):
    y = x
    if x > 0.0:
        y = x * 2.0
    return y


def branch_temporary(x):
    if x > 0.0:
        t = x * 3.0
        y = t + 1.0
    else:
        y = x - 1.0
    return y


def range_tensor_bound(n):
    total = 0
    for i in ug.range(n):
        total = total + i * i
    return total


def range_start_stop_step(start, stop, step):
    total = 0
    count = 0
    for i in ug.range(start, stop, step):
        total = total + i
        count = count + 1
    return total, count


def python_list_loop(x):
    for w in [1.0, 2.0, 3.0]:
        x = x * w if x < 10.0 else x - w
    return x


def early_return(x):
    if x > 0.0:
        return x * 2.0
    return -x


def nested_function(x, n):
    def step(v):
        return v * 2.0 if v < 5.0 else v + 1.0

    i = 0
    while i < n:
        x = step(x)
        i = i + 1
    return x


def vector_state(x):
    while x.sum() < 100.0:
        x = x * 2.0
    return x


def return_in_python_loop(x):
    for w in (1.0, 2.0, 3.0):
        if x < w:
            return x * w
    return x


def tuple_return_branches(x, y):
    if x > y:
        a, b = x, y
    else:
        a, b = y, x
    return a, b


def collatz_like(x):
    steps = 0
    while x != 1:
        x = x / 2 if x > 8 else x - 1
        steps = steps + 1
    return steps


def python_loop_tensor_break(x):
    total = 0.0
    for w in range(6):  # unrolled; from the first tensor `break` on, iterations are conds
        if x < w:
            break
        total = total + w
    return total


def python_loop_tensor_continue(x):
    total = 0.0
    for w in [1.0, 2.0, 3.0, 4.0]:
        if x > w:
            continue
        total = total + w
    return total


def while_else(x, limit):
    while x < limit:
        x = x + 1.0
        if x > 5.0:
            break
    else:
        x = x * 10.0
    return x


def nonlocal_in_nested_function(x):
    total = x

    def add(v):
        nonlocal total
        if v > 0.0:
            total = total + v

    add(x)
    add(x * 2.0)
    return total


PROGRAMS = [
    (counter, (i64(0), i64(10))),
    (counter, (i64(5), i64(3))),
    (branch, (f32(3.0), f32(1.0))),
    (branch, (f32(1.0), f32(3.0))),
    *[(elif_chain, (f32(v),)) for v in (-3.0, -0.5, 0.5, 2.0)],
    (nested_loops, (i64(6),)),
    (loop_inside_cond, (f32(3.0),)),
    (loop_inside_cond, (f32(-3.0),)),
    (cond_inside_loop, (f32(30.0),)),
    (fibonacci_pair, (i64(50),)),
    (doubling_trip_count, (f32(1.5), f32(100.0))),
    (while_true_break, (f32(0.0), f32(10.0))),
    (range_break, (i64(10), i64(12))),
    (range_continue, (i64(7),)),
    (defined_before, (f32(2.0),)),
    (defined_before, (f32(-2.0),)),
    (branch_temporary, (f32(2.0),)),
    (branch_temporary, (f32(-2.0),)),
    (range_tensor_bound, (i64(5),)),
    (range_tensor_bound, (i64(0),)),
    (range_start_stop_step, (i64(2), i64(11), i64(3))),
    (range_start_stop_step, (i64(10), i64(0), i64(-2))),
    (python_list_loop, (f32(2.0),)),
    (python_list_loop, (f32(20.0),)),
    (early_return, (f32(2.0),)),
    (early_return, (f32(-2.0),)),
    *[(sign, (f32(v),)) for v in (3.0, -3.0, 0.0)],
    *[(bool_ops, (f32(a), f32(b))) for a, b in ((1, 2), (1, -2), (-1, 2), (-1, -2))],
    (nested_function, (f32(1.0), i64(5))),
    (for_else_break, (i64(10), i64(20))),
    (for_else_break, (i64(3), i64(20))),
    (vector_state, (np.array([1.0, 2.0, 3.0], np.float32),)),
    (return_in_python_loop, (f32(1.5),)),
    (return_in_python_loop, (f32(5.0),)),
    *[(nested_ifs, (f32(a), f32(b))) for a, b in ((2, 3), (2, -3), (-2, 3))],
    (tuple_return_branches, (f32(1.0), f32(2.0))),
    (ifexp_in_loop, (f32(0.5), i64(5))),
    (collatz_like, (f32(40.0),)),
    *[(python_loop_tensor_break, (f32(v),)) for v in (2.5, 10.0)],
    *[(python_loop_tensor_continue, (f32(v),)) for v in (0.0, 2.5)],
    *[(while_else, (f32(a), f32(b))) for a, b in ((0.0, 3.0), (0.0, 10.0))],
    *[(nonlocal_in_nested_function, (f32(v),)) for v in (1.0, -1.0)],
]


def _id(case) -> str:
    program, args = case
    return f"{program.__name__}{tuple(np.asarray(a).tolist() for a in args)}"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("program, args", PROGRAMS, ids=[_id(c) for c in PROGRAMS])
def test_agrees_with_python(target, program, args):
    want = program(*args)
    got = run_on(target, ug.function(program), *args)
    assert_same(got, want)


# -- the issue's own examples -----------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
def test_seed_counter_and_branch(target):
    a, b = run_on(target, ug.function(counter), 0, 10)
    assert (int(a.numpy()), int(b.numpy())) == (20, 20)
    fn = ug.function(branch)
    assert float(run_on(target, fn, 3.0, 1.0).numpy()) == 4.0
    assert float(run_on(target, fn, 1.0, 3.0).numpy()) == -2.0


def test_traced_graphs_hold_control_flow_nodes():
    assert "while_loop" in ops_in(ug.function(counter).trace(0, 10))
    assert "cond" in ops_in(ug.function(branch).trace(3.0, 1.0))
    assert "while_loop" in ops_in(ug.function(range_tensor_bound).trace(5))
    loop = [n for n in ug.function(counter).trace(0, 10).nodes if n.op == "while_loop"]
    # a and b (the loop-limit guard, if any, carries its own counter after them)
    assert len(loop) == 1 and loop[0].attrs["num_carried"] in (2, 3)


def test_python_conditions_stay_python():
    def scaled(x, mode):
        if mode == "double":
            x = x * 2.0
        for w in range(3):
            x = x + w
        return x

    graph = ug.function(scaled).trace(1.0, "double")
    assert "cond" not in ops_in(graph) and "while_loop" not in ops_in(graph)
    with ug.use_backend("numpy", mode="static"):
        assert float(ug.function(scaled)(1.0, "double").numpy()) == 5.0
        assert float(ug.function(scaled)(1.0, "triple").numpy()) == 4.0


def test_python_range_with_python_int_unrolls():
    graph = ug.function(range_tensor_bound).trace(ug.tensor(3))
    assert "while_loop" in ops_in(graph)  # a tensor bound: a loop
    assert list(ug.range(3)) == [0, 1, 2] and list(ug.range(1, 7, 2)) == [1, 3, 5]


# -- methods ------------------------------------------------------------------------------
class Base(ug.nn.Module):
    def shrink(self, y):
        return y - 50.0


class Gate(Base):
    def __init__(self, threshold):
        super().__init__()
        self.threshold = threshold
        self.__scale = 3.0  # private: the converted method must still mangle it

    @ug.function
    def forward(self, x):
        y = x
        while y < self.threshold:
            y = y * self.__scale
        if y > 100.0:
            y = super().shrink(y)
        return y


class Plain:
    def __init__(self, offset):
        self.offset = offset

    @ug.function
    def apply(self, x):
        return x + self.offset if x > 0.0 else x - self.offset


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("x", [1.0, 20.0, 150.0])
def test_methods(target, x):
    gate = Gate(50.0)
    want = Gate.forward.fn(gate, f32(x))
    assert_same(run_on(target, gate, f32(x)), want)
    plain = Plain(2.0)
    assert_same(run_on(target, plain.apply, f32(x - 100.0)),
                Plain.apply.fn(plain, f32(x - 100.0)))


# -- errors -------------------------------------------------------------------------------
def _line_of(fn, marker: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if marker in line)


def one_branch_only(x):
    if x > 0.0:  # <- here
        y = x * 2.0
    return y


def return_in_loop(x):
    while x < 10.0:  # <- here
        x = x + 1.0
        if x > 5.0:
            return x
    return x


def loop_only_variable(x):
    while x < 10.0:  # <- here
        y = x * 2.0
        x = x + 1.0
    return y


def dtype_change(x):
    s = 0  # an int64 ...
    while x < 10.0:  # <- here
        s = s + x  # ... that becomes float
        x = x + 1.0
    return s


def branch_mismatch(x):
    if x > 0.0:  # <- here
        y = x
    else:
        y = ug.cast(x, "int64")
    return y


def bad_shapes(x):
    if x.sum() > 0.0:
        y = x + np.ones(3, np.float32)  # <- the error
    else:
        y = x
    return y


def one_branch_python_condition(x):
    if len(x.shape) > 3:  # a Python condition: Python's own rule, on the path taken
        y = x * 2.0
    return y  # <- here


# The autograph restrictions hold in every mode: eager targets raise what static ones do.
RESTRICTIONS = [
    (one_branch_only, "variable 'y' is assigned in the if branch but not in the else"),
    (return_in_loop, "`return` inside the `while` loop"),
    (loop_only_variable, "variable 'y' is first assigned inside the loop"),
    (dtype_change, "variable 's' is int64[] before the loop but float32[]"),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("program, fragment", RESTRICTIONS,
                         ids=[program.__name__ for program, _ in RESTRICTIONS])
def test_restrictions_raise_the_same_error_on_every_target(target, program, fragment):
    line = _line_of(program, "<- here")
    with pytest.raises(ControlFlowError) as error:
        run_on(target, ug.function(program), f32(1.0))
    message = str(error.value)
    assert fragment in message
    assert re.search(rf"{FILE}:{line}\b", message), message


def test_restriction_messages_are_identical_across_targets():
    for program, _ in RESTRICTIONS:
        messages = set()
        for target in TARGETS:
            with pytest.raises(ControlFlowError) as error:
                run_on(target, ug.function(program), f32(1.0))
            messages.add(str(error.value))
        assert len(messages) == 1, (program.__name__, messages)


def test_branch_types_must_agree_when_traced():
    # Eager targets run only the branch taken: the other branch's types are seen when traced.
    line = _line_of(branch_mismatch, "<- here")
    with ug.use_backend("numpy", mode="static"), pytest.raises(ControlFlowError) as error:
        ug.function(branch_mismatch)(f32(1.0))
    assert "variable 'y' is float32[] in the if branch but int64[]" in str(error.value)
    assert f"{FILE}:{line}" in str(error.value)


WEIGHT = ug.Parameter(np.zeros(2, f32), name="w")


def assign_in_tensor_if(x):
    if ug.sum(x) > 0.0:  # <- cond
        ug.assign(WEIGHT, x)  # <- here
    return x * 2.0


def assign_in_tensor_for(x, n):
    for _ in ug.range(n):  # <- cond
        x = x * 2.0
        ug.assign(WEIGHT, x)  # <- here
    return x


@pytest.mark.parametrize("target", TARGETS)
def test_assign_inside_a_tensor_branch_or_loop_raises_in_every_mode(target):
    for program, kind, args in [(assign_in_tensor_if, "cond", ()),
                                (assign_in_tensor_for, "while_loop", (i64(2),))]:
        line, inside = _line_of(program, "<- here"), _line_of(program, "<- cond")
        with pytest.raises(TracingError) as error:
            run_on(target, ug.function(program), np.ones(2, f32), *args)
        assert re.search(rf"{FILE}:{line} is inside the {kind} at \S*{FILE}:{inside}\b",
                         str(error.value)), str(error.value)
    np.testing.assert_array_equal(WEIGHT.numpy(), [0.0, 0.0])


@pytest.mark.parametrize("target", TARGETS)
def test_undefined_variable_on_python_path_raises(target):
    line = _line_of(one_branch_python_condition, "<- here")
    with pytest.raises(UnboundLocalError, match=rf"'y' is used at \S*{FILE}:{line}"):
        run_on(target, ug.function(one_branch_python_condition), f32(1.0))


@pytest.mark.parametrize("target", TARGETS)
def test_tensor_if_on_the_assigning_path_still_raises(target):
    # Eager mode takes the branch that assigns `y`; the program is rejected all the same.
    with pytest.raises(ControlFlowError, match="variable 'y' is assigned in the if branch"):
        run_on(target, ug.function(one_branch_only), f32(5.0))
    with pytest.raises(ControlFlowError, match="variable 'y' is assigned in the if branch"):
        run_on(target, ug.function(one_branch_only), f32(-5.0))


@pytest.mark.parametrize("target", TARGETS)
def test_errors_and_tracebacks_point_at_user_lines(target):
    line = _line_of(bad_shapes, "<- the error")
    with pytest.raises(ShapeError) as error:
        run_on(target, ug.function(bad_shapes), np.ones(2, np.float32))
    assert f"{FILE}:{line}" in str(error.value)
    frames = [f for f in traceback.extract_tb(error.value.__traceback__)
              if f.filename == __file__]
    assert frames[-1].lineno == line
    assert "np.ones(3, np.float32)" in frames[-1].line


def test_autograph_off():
    fn = ug.function(counter, autograph=False)
    with ug.use_backend("numpy", mode="static"), pytest.raises(TracingError, match="while"):
        fn(0, 10)
    assert ug.function(autograph=False)(counter).source().startswith("# autograph=False")
    assert "while a < b" in fn.source()


def test_source_shows_converted_code():
    text = ug.function(counter).source()
    assert "ag__.while_stmt(" in text and "def loop_body" in text
    assert "ag__.if_exp(" in ug.function(branch).source()


def test_no_collision_with_user_names():
    def uses_alias_names(x):
        ag__ = 2.0
        if_body__1 = 3.0
        if x > 0.0:
            x = x * ag__
        return x + if_body__1

    fn = ug.function(uses_alias_names)
    assert "ag___.if_stmt(" in fn.source()
    for target in TARGETS:
        assert_same(run_on(target, fn, f32(2.0)), uses_alias_names(f32(2.0)))


def test_closures_and_globals_stay_live():
    scale = [2.0]

    def scaled(x):
        if x > 0.0:
            x = x * scale[0] * GLOBAL_FACTOR
        return x

    fn = ug.function(scaled)
    with ug.use_backend("numpy", mode="static"):
        assert float(fn(1.0).numpy()) == 2.0 * GLOBAL_FACTOR
    scale[0] = 5.0
    assert float(fn(1.0).numpy()) == 5.0 * GLOBAL_FACTOR  # eager: reads the new value


GLOBAL_FACTOR = 3.0


def test_lambdas_convert_as_the_def_they_mean():
    """(On every target: tests/test_autograph_callables.py.)"""
    fn = ug.function(lambda x: x * 2.0 if x > 0.0 else -x)
    assert float(fn(2.0).numpy()) == 4.0
    assert fn.source().startswith("def ") and "return ag__.result(ag__.if_exp(" in fn.source()


def test_symbolic_range_needs_conversion():
    def raw(n):
        total = 0
        for i in ug.range(n):
            total = total + i
        return total

    with ug.use_backend("numpy", mode="static"), pytest.raises(TracingError, match="ug.range"):
        ug.function(raw, autograph=False)(5)


@ug.function
def magnitude(v):
    if v < 0.0:
        v = -v
    return v


def calls_decorated_helper(x, n):
    total = 0.0
    for i in range(n):  # the builtin range: a tensor bound makes a loop too
        total = total + magnitude(x - ug.cast(i, "float32"))
    return total


@pytest.mark.parametrize("target", TARGETS)
def test_decorated_helpers_and_builtin_range(target):
    want = 0.0
    for i in range(4):
        want += abs(1.5 - i)
    assert_same(run_on(target, ug.function(calls_decorated_helper), f32(1.5), i64(4)), want)
    graph = ug.function(calls_decorated_helper).trace(1.5, 4)
    assert ops_in(graph).count("while_loop") == 1 and "cond" in ops_in(graph)


def test_conditional_expression_mismatch_is_clear():
    def mixed(x):
        return x if x > 0.0 else ug.cast(x, "int64")

    with ug.use_backend("numpy", mode="static"), pytest.raises(ControlFlowError) as error:
        ug.function(mixed)(1.0)
    assert "conditional expression at" in str(error.value)
    assert "its value is float32[] when true but int64[] when false" in str(error.value)


def test_source_unavailable_warns_and_runs_as_written():
    namespace = {}
    exec("def made(x):\n    return x * 2.0\n", namespace)
    fn = ug.function(namespace["made"])
    with pytest.warns(UserWarning, match="could not convert made"):
        assert float(fn(2.0).numpy()) == 4.0
    assert fn.source().startswith("# not converted")


def test_early_returns_of_different_types_are_clear():
    def mixed_returns(x):
        if x > 0.0:
            return x
        return ug.cast(x, "int64")  # <- here

    line = _line_of(mixed_returns, "<- here")
    with ug.use_backend("numpy", mode="static"), pytest.raises(ControlFlowError) as error:
        ug.function(mixed_returns)(1.0)
    assert str(error.value).startswith("`return` at ")
    assert f"{FILE}:{line}: the function returns int64[] on one path" in str(error.value)


class Shapes:
    @ug.function
    def method(self, x):
        note = """keeps
        its indentation"""
        if x.sum() > 0.0:
            x = x + np.ones(3, np.float32)  # <- here
        return x, note


def test_methods_keep_lines_and_string_text():
    line = _line_of(Shapes.method.fn, "<- here")
    with pytest.raises(ShapeError, match=f"{FILE}:{line}"):
        Shapes().method(np.ones(2, np.float32))
    _, note = Shapes().method(np.ones(3, np.float32))
    assert note == "keeps\n        its indentation"


@pytest.mark.parametrize("target", STATIC_TARGETS)
def test_undecorated_module_forward_is_converted_when_traced(target):
    class Clip(ug.nn.Module):
        def forward(self, x):
            if ug.sum(x) > 0:
                y = x * 2.0
            else:
                y = -x
            return y

    model = Clip()
    fn = ug.function(lambda x: model(x), autograph=False)
    for x in (np.array([1.0, 2.0], f32), np.array([-1.0, -2.0], f32)):
        np.testing.assert_allclose(run_on(target, fn, x), x * 2 if x.sum() > 0 else -x)


def _plain_counter(a, b):
    while a < b:
        a = a + 2
        b = b + 1
    return a, b


def _plain_branch(x, y):
    return x + y if x > y else x - y


def _executable(fn, target, *args):
    run_on(target, fn, *args)
    (compiled,) = fn._cache.values()
    return compiled.executable


def _tensorflow_op_types(graph) -> set:
    graph_def = graph.as_graph_def()
    types = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        types |= {node.op for node in function.node_def}
    return types


def _paddle_op_names(program) -> set:
    names = set()
    for op in program.global_block().ops:
        names.add(op.name())
        for block in op.blocks():
            names.update(inner.name() for inner in block.ops)
    return names


def test_plain_python_becomes_tf_while_and_cond_in_a_session_graph():
    counter = ug.function(_plain_counter)
    executable = _executable(counter, "tensorflow:static", 0, 10)
    assert _tensorflow_op_types(executable.native_graph) & {"While", "StatelessWhile"}
    branch = ug.function(_plain_branch)
    executable = _executable(branch, "tensorflow:static", f32(3.0), f32(2.0))
    assert _tensorflow_op_types(executable.native_graph) & {"If", "StatelessIf"}
    assert [x.item() for x in run_on("tensorflow:static", counter, 0, 10)] == [20, 20]


def test_plain_python_becomes_paddle_while_and_if_in_a_program():
    counter = ug.function(_plain_counter)
    executable = _executable(counter, "paddle:static", 0, 10)
    assert "pd_op.while" in _paddle_op_names(executable.program)
    branch = ug.function(_plain_branch)
    executable = _executable(branch, "paddle:static", f32(3.0), f32(2.0))
    assert "pd_op.if" in _paddle_op_names(executable.program)
    assert [x.item() for x in run_on("paddle:static", counter, 0, 10)] == [20, 20]


# -- the loop index and carried Python numbers: one type in every mode ---------------------
def index_times_float(x, n):
    total = x * 0.0
    for i in ug.range(n):
        total = total + x * i
    return total


def builtin_range_index(x, n):
    total = x * 0.0
    for i in range(n):  # a tensor bound: the builtin range is ug.range
        total = total + x * i + i / 2
    return total


def index_after_loop(x, n):
    last = 0
    for i in ug.range(n):
        last = i
    return last, x * last, x * -last


@pytest.mark.parametrize("target", TARGETS)
def test_loop_index_is_weak_in_every_mode(target):
    x = np.array([1.5, -2.0], f32)
    x64 = x.astype(np.float64)
    got = to_numpy(run_on(target, ug.function(index_times_float), x, i64(4)))
    assert got.dtype == np.float32  # float32 x times an int index: float32, as x * 3
    assert_same(got, 6.0 * x64)  # 0 + 1 + 2 + 3
    got = to_numpy(run_on(target, ug.function(builtin_range_index), x, i64(4)))
    assert got.dtype == np.float32
    assert_same(got, 6.0 * x64 + 3.0)  # (0 + 1 + 2 + 3) / 2
    last, scaled, negated = to_numpy(run_on(target, ug.function(index_after_loop), x, i64(5)))
    assert (last.dtype, scaled.dtype, negated.dtype) == (np.int64, np.float32, np.float32)
    assert int(last) == 4
    assert_same((scaled, negated), (4.0 * x64, -4.0 * x64))


@pytest.mark.parametrize("target", TARGETS)
def test_python_counter_carried_through_a_tensor_loop_stays_weak(target):
    x, k, scaled = to_numpy(run_on(target, ug.function(weak_counter), np.ones(2, f32)))
    # x: 1 -> 1 (*1) -> 2 (*2) -> 6 (*3) -> 24 (*4) -> 120 (*5), then k = 6
    assert (x.dtype, k.dtype, scaled.dtype) == (np.float32, np.int64, np.float32)
    assert_same((x, k, scaled), (np.full(2, 120.0), 6, np.full(2, 720.0)))


def test_weak_tensor_promotion():
    from unigraph.autograph.weak import WeakTensor, weak

    i = weak(ug.tensor(np.int64(3)))
    x = ug.tensor(np.array([1.0, 2.0], f32))
    assert (x * i).dtype == "float32" and type(x * i) is ug.Tensor
    assert (i * x).dtype == "float32" and (x - i).dtype == "float32"
    assert isinstance(i + 1, WeakTensor) and (i + 1).dtype == "int64"
    assert isinstance(i / 2, WeakTensor) and (x * (i / 2)).dtype == "float32"
    assert isinstance(-i, WeakTensor) and (x * -i).dtype == "float32"
    assert (ug.tensor(np.array([1, 2], np.int32)) * i).dtype == "int32"
    np.testing.assert_allclose((x * (i / 2)).numpy(), [1.5, 3.0])
    np.testing.assert_array_equal((i < 4).numpy(), True)


# -- closures inside tensor branches and loops read their variables where defined ----------
def closure_in_tensor_if(x):
    if ug.sum(x) > 0.0:
        y = x * 3.0
        x = ug.cond(ug.max(y) > 5.0, lambda: y - 5.0, lambda: y)
    else:
        x = -x
    return x


def nested_def_in_tensor_while(x):
    n = 0
    while ug.sum(x) < 50.0:
        scale = n + 2.0

        def grow(v):
            return v * scale  # noqa: B023 (called in the same iteration)

        x = grow(x)
        n = n + 1
    return x, n


def closure_sees_later_assignment(x):
    scale = 2.0

    def times(v):
        return v * scale  # reads `scale` when called: after the `if`

    if ug.sum(x) > 0.0:
        scale = 3.0
    return times(x)


def closure_called_in_later_loop(x):
    scale = 1.0

    def times(v):
        return v * scale  # reads `scale` when called: the loop assigns it after the call

    k = 1.0
    while ug.sum(x) < 20.0:
        x = times(x) + 1.0
        k = k + 1.0
        scale = k
    return x


def closure_kept_across_iterations(x):
    f = None
    out = x
    for i in range(3):
        n = x * float(i)
        if f is not None:
            out = out + f()  # the closure of the previous iteration sees this iteration's n

        def f():
            return n  # noqa: B023 (the point: it reads the current n)
    return out


def closure_escapes_python_loop(x):
    for i in range(2):
        n = x * (i + 1.0)

        def f():
            return n  # noqa: B023 (the point: it reads n after the loop)
    n = x * 10.0
    return f()


CLOSURE_CASES = [
    # y = 2x each trip, negated when its sum is negative; three trips
    (closure_in_tensor_while, [1.0, 2.0], [8.0, 16.0]),
    (closure_in_tensor_while, [-1.0, 0.5], [8.0, -4.0]),
    (closure_in_tensor_if, [1.0, 2.0], [-2.0, 1.0]),
    (closure_in_tensor_if, [-1.0, -2.0], [1.0, 2.0]),
    (nested_def_in_tensor_while, [1.0, 1.0], ([120.0, 120.0], 4)),  # *2, *3, *4, *5
    (comprehension_in_tensor_if, [2.0, 4.0], [3.0, 6.0]),  # w = [1, 2]: w + 2w
    (comprehension_in_tensor_if, [-2.0, 1.0], [-2.0, 1.0]),
    (closure_sees_later_assignment, [1.0, 2.0], [3.0, 6.0]),
    (closure_sees_later_assignment, [-1.0, -2.0], [-2.0, -4.0]),
    (closure_called_in_later_loop, [1.0, 2.0], [16.0, 22.0]),  # x*1+1, x*2+1, x*3+1
    (closure_kept_across_iterations, [1.0, 2.0], [4.0, 8.0]),  # x + 1x + 2x
    (closure_escapes_python_loop, [1.0, 2.0], [10.0, 20.0]),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("program, x, want", CLOSURE_CASES,
                         ids=[f"{p.__name__}{x}" for p, x, _ in CLOSURE_CASES])
def test_closures_in_tensor_control_flow(target, program, x, want):
    want = tuple(map(np.array, want)) if isinstance(want, tuple) else np.array(want)
    assert_same(run_on(target, ug.function(program), np.array(x, f32)), want)



@pytest.mark.parametrize("target", TARGETS)
def test_a_converted_function_and_its_compiled_code_are_freed(target):
    """The conversion cache must not keep a dropped function alive (a WeakKeyDictionary
    did: the converted code's globals refer back to the function), or every compiled
    executable of it stays (on paddle:static, each with its interpreter's threads)."""
    import gc
    import weakref

    from conftest import run_on

    from unigraph.testing.random_programs.model import forget, load

    # A module-level function, as a script writes it: the converted code's globals are the
    # module's names, which hold the function.
    namespace = load("import unigraph as ug\n\n\n@ug.function\ndef program(x):\n"
                     "    if x > 0:\n        return x\n    return -x\n")
    assert float(np.asarray(run_on(target, namespace["program"], np.float32(-2.0)))) == 2.0
    alive = weakref.ref(namespace["program"])
    forget(namespace)
    del namespace
    gc.collect()
    assert alive() is None
