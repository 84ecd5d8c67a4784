"""Corpus programs for autograph: plain Python control flow in `@ug.function` (see
tests/corpus/__init__.py). Each one runs on every target with the same values and dtypes, or
raises the same error, naming its line in this file, on every target (eager ones too).
"""

from __future__ import annotations

import inspect

import numpy as np

import unigraph as ug
from corpus import Program
from unigraph.errors import ControlFlowError, TracingError

f32 = np.float32


def _line(fn, marker: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if marker in line)


def _at(fn) -> str:
    """The regex of `fn`'s line marked `# <- error`, as error messages name it."""
    return rf"corpus/autograph\.py:{_line(fn, '# <- error')}\b"


def _fn(program):
    return lambda: ug.function(program)


# -- if / elif / else, conditional expressions, and / or / not ------------------------------
def elif_chain(x):
    if x < -1.0:
        y = -2.0 * x
    elif x < 0.0:
        y = x * x
    elif x < 1.0:
        y = x
    else:
        y = x + 10.0
    return y


def bool_ops(x, y):
    if x > 0.0 and y > 0.0:
        z = x + y
    elif x > 0.0 or not y > 0.0:
        z = x - y
    else:
        z = y
    return z


def nested_ifs(x, y):
    z = x
    if x > 0.0:
        if y > 0.0:
            z = x * y
        else:
            z = x - y
    return z


def ifexp_in_loop(x, n):
    i = 0
    while i < n:
        x = x + 1.0 if x < 3.0 else x * 2.0
        i = i + 1
    return x


# -- while, break, continue -----------------------------------------------------------------
def while_true_break(x, limit):
    while True:
        x = x + 3.0
        if x > limit:
            break
    return x


def while_continue(n):
    i = 0
    total = 0
    while i < n:
        i = i + 1
        if i < 3:
            continue
        total = total + i
    return total


def nested_loops(n):
    total = 0
    i = 0
    while i < n:
        j = 0
        while j < i:
            total = total + j
            j = j + 1
        i = i + 1
    return total


def cond_inside_loop(x):
    steps = 0
    while x > 1.0:
        if x > 10.0:
            x = x - 7.0
        else:
            x = x - 1.0
        steps = steps + 1
    return x, steps


# -- for over ug.range and range: the index is a weak int in every mode ---------------------
def range_index_times_float(x, n):
    total = x * 0.0
    for i in ug.range(n):
        total = total + x * i
    return total


def builtin_range_tensor_bound(x, n):
    total = x * 0.0
    for i in range(n):
        total = total + x * i + i / 2
    return total


def python_range_unrolled(x):
    for w in range(3):  # a Python bound: unrolled, `w` a Python int
        x = x * 2.0 if x < 10.0 else x - w
    return x


def range_step_break(start, stop, step, limit):
    total = 0
    for i in ug.range(start, stop, step):
        if total > limit:
            break
        total = total + i
    return total


def index_after_loop(x, n):
    last = 0
    for i in ug.range(n):
        last = i
    return last, x * last


def weak_counter(x):
    k = 1
    while ug.sum(x) < 100.0:
        x = x * k
        k = k + 1
    return x, k, x * k


def for_else_break(n, limit):
    found = -1
    for i in ug.range(n):
        if i * i > limit:
            found = i
            break
    else:
        found = n
    return found


# -- early return ---------------------------------------------------------------------------
def sign(x):
    if x > 0.0:
        return 1.0
    elif x < 0.0:
        return -1.0
    return 0.0


def early_return(x):
    if ug.sum(x) > 0.0:
        return x * 2.0
    return -x


# -- closures in tensor branches and loops ----------------------------------------------------
def closure_in_tensor_while(x):
    i = 0
    while i < 3 and ug.sum(x) < 100.0:
        y = x * 2.0
        x = ug.cond(ug.sum(y) > 0, lambda: y, lambda: -y)  # noqa: B023 (called at once)
        i = i + 1
    return x


def nested_def_in_tensor_if(x):
    if ug.sum(x) > 0.0:
        y = x * 3.0

        def shift(v):
            return v - y

        x = shift(x * 4.0)
    return x


def comprehension_in_tensor_if(x):
    if ug.sum(x) > 0.0:
        w = x * 0.5
        parts = [ug.cond(ug.sum(w) > k, lambda: w * k, lambda: w)  # noqa: B023 (at once)
                 for k in (1.0, 2.0)]
        x = parts[0] + parts[1]
    return x


# A closure reading a variable that an inner loop or branch assigned earlier in the same
# iteration: the outer loop does not carry it (issue 11/12, found by the random tester).
def random_program_3398c6d853(x1, x2):  # the tester's program, as it printed it
    v1 = ug.matmul(x1, x2)
    v2 = v1
    k3 = ug.tensor(0)
    while k3 < 0:
        v3 = ug.take(v1, np.array([0]), axis=0)
        v4 = v3
        k1 = ug.tensor(0)
        while k1 < 0:
            v4 = v4
            k1 = k1 + 1

        def cond_2(k2, v6):
            return k2 < 0

        def body_2(k2, v6):
            return k2 + 1, v4  # noqa: B023 (called in the same iteration)

        _, v5 = ug.while_loop(cond_2, body_2, (ug.tensor(0), v4))
        v2 = v5
        k3 = k3 + 1
    return (v2,)


def while_def_reads_inner_loop_var(x):
    k = ug.tensor(0)
    total = x * 0.0
    while k < 2:
        v = x * 2.0
        j = ug.tensor(0)
        while j < 2:
            v = v + 1.0
            j = j + 1

        def body(i, acc):
            return i + 1, acc + v  # noqa: B023 (called in the same iteration)

        _, total = ug.while_loop(lambda i, acc: i < 1, body, (ug.tensor(0), total))
        k = k + 1
    return total


def while_if_lambda_reads_var(x):
    n = 0
    while ug.sum(x) < 20.0:
        v = x + 1.0
        if ug.sum(v) > 6.0:
            v = v * 2.0
        else:
            v = v + 0.5
        x = ug.cond(ug.max(v) > 0.0, lambda: v, lambda: -v)  # noqa: B023 (called at once)
        n = n + 1
    return x, n


def while_range_def_called(x, n):
    i = 0
    while i < n:
        s = x * 0.0
        for _ in ug.range(n):
            s = s + x

        def scaled(v):
            return v * 0.5 + s  # noqa: B023 (called in the same iteration)

        x = scaled(x)
        i = i + 1
    return x


def if_while_lambda_reads_var(x):
    if ug.sum(x) > 0.0:
        v = x
        while ug.sum(v) < 10.0:
            v = v * 2.0
        x = ug.cond(ug.max(v) > 5.0, lambda: v - 5.0, lambda: v)
    else:
        x = -x
    return x


# -- methods ----------------------------------------------------------------------------------
class Grow(ug.nn.Module):
    def __init__(self, limit):
        super().__init__()
        self.limit = limit

    @ug.function
    def forward(self, x):
        while ug.sum(x) < self.limit:
            x = x * 2.0
        if ug.max(x) > self.limit / 2:
            x = x - self.limit
        return x


class Offset:
    def __init__(self, offset):
        self.offset = offset

    @ug.function
    def apply(self, x):
        return x + self.offset if x > 0.0 else x - self.offset


# -- the restrictions: the same error, with the user's line, on every target ------------------
def return_in_tensor_loop(x):
    while x < 10.0:  # <- error
        x = x + 1.0
        if x > 5.0:
            return x
    return x


def one_branch_variable(x):
    if x > 0.0:  # <- error
        y = x * 2.0
    return y


def loop_first_variable(x):
    while x < 10.0:  # <- error
        y = x * 2.0
        x = x + 1.0
    return y


def loop_dtype_change(x):
    s = 0
    while x < 10.0:  # <- error
        s = s + x
        x = x + 1.0
    return s


def range_index_read_after(n):
    for i in ug.range(n):  # noqa: B007 (read after the loop: the error)  # <- error
        pass
    return i


def _assign_in_tensor_if():
    weight = ug.Parameter(np.zeros(2, f32), name="w")

    def assign_in_tensor_if(x):
        if ug.sum(x) > 0.0:  # <- cond
            ug.assign(weight, x)  # <- assign
        return x * 2.0

    return ug.function(assign_in_tensor_if)


def _assign_in_tensor_while():
    weight = ug.Parameter(np.zeros(2, f32), name="w")

    def assign_in_tensor_while(x):
        while ug.sum(x) < 10.0:  # <- cond
            x = x * 2.0
            ug.assign(weight, x)  # <- assign
        return x

    return ug.function(assign_in_tensor_while)


def _assign_match(factory, kind: str) -> str:
    line, inside = _line(factory, "# <- assign"), _line(factory, "# <- cond")
    return rf"autograph\.py:{line} is inside the {kind} at \S*corpus/autograph\.py:{inside}\b"


def _v(*values):
    return np.array(values, f32)


_vec = _v(1.0, 2.0)

PROGRAMS = [
    *[Program(f"elif_chain_{i}", _fn(elif_chain), (f32(x),), expect=want)
      for i, (x, want) in enumerate([(-3.0, 6.0), (-0.5, 0.25), (0.5, 0.5), (2.0, 12.0)])],
    *[Program(f"bool_ops_{i}", _fn(bool_ops), (f32(a), f32(b)), expect=want)
      for i, (a, b, want) in enumerate([(1, 2, 3), (1, -2, 3), (-1, 2, 2), (-1, -2, 1)])],
    Program("nested_ifs", _fn(nested_ifs), (f32(2.0), f32(-3.0)), expect=5.0),
    Program("ifexp_in_loop", _fn(ifexp_in_loop), (f32(0.5), 5), expect=14.0),  # 1.5 2.5 3.5 7 14
    Program("while_true_break", _fn(while_true_break), (f32(0.0), f32(10.0)), expect=12.0),
    Program("while_continue", _fn(while_continue), (6,), expect=18),  # 3 + 4 + 5 + 6
    Program("nested_loops", _fn(nested_loops), (5,), expect=10),  # 0 + 1 + 3 + 6
    # 30 23 16 9, then 8 steps of 1
    Program("cond_inside_loop", _fn(cond_inside_loop), (f32(30.0),), expect=(1.0, 11)),
    Program("range_index_times_float", _fn(range_index_times_float), (_vec, 4),
            expect=6.0 * _vec),
    Program("builtin_range_tensor_bound", _fn(builtin_range_tensor_bound), (_vec, 4),
            expect=6.0 * _vec + 3.0),
    Program("python_range_unrolled", _fn(python_range_unrolled), (f32(3.0),),
            expect=10.0),  # 6, 12, then 12 - 2
    Program("range_step_break", _fn(range_step_break), (10, 0, -2, 15),
            expect=18),  # 10 + 8, then 18 > 15 stops it
    Program("index_after_loop", _fn(index_after_loop), (_vec, 5), expect=(4, 4.0 * _vec)),
    Program("weak_counter", _fn(weak_counter), (np.ones(2, f32),),
            expect=(_v(120.0, 120.0), 6, _v(720.0, 720.0))),
    Program("for_else_break", _fn(for_else_break), (10, 20), expect=5),
    Program("for_else_no_break", _fn(for_else_break), (3, 20), expect=3),
    *[Program(f"sign_{i}", _fn(sign), (f32(x),), expect=want)
      for i, (x, want) in enumerate([(3.0, 1.0), (-3.0, -1.0), (0.0, 0.0)])],
    Program("early_return", _fn(early_return), (-_vec,), expect=_vec),
    Program("closure_in_tensor_while", _fn(closure_in_tensor_while),
            (np.array([-1.0, 0.5], f32),), expect=_v(8.0, -4.0)),
    Program("nested_def_in_tensor_if", _fn(nested_def_in_tensor_if), (_vec,),
            expect=_vec),  # 4x - 3x
    Program("comprehension_in_tensor_if", _fn(comprehension_in_tensor_if),
            (np.array([2.0, 4.0], f32),), expect=_v(3.0, 6.0)),
    Program("random_program_3398c6d853", _fn(random_program_3398c6d853),
            (np.array([[1.676]], f32), np.array([[1.676]], f32)),
            expect=(np.array([[1.676 * 1.676]]),)),  # neither loop runs: x1 @ x2
    Program("while_def_reads_inner_loop_var", _fn(while_def_reads_inner_loop_var), (_vec,),
            expect=_v(8.0, 12.0)),  # v = 2x + 2 = [4, 6], added twice
    Program("while_if_lambda_reads_var", _fn(while_if_lambda_reads_var), (_vec,),
            expect=(_v(16.0, 20.0), 3)),  # [2.5, 3.5], [7, 9], [16, 20]
    Program("while_range_def_called", _fn(while_range_def_called), (_vec, 2),
            expect=_v(6.25, 12.5)),  # x / 2 + 2x, twice
    Program("if_while_lambda_reads_var", _fn(if_while_lambda_reads_var), (_vec,),
            expect=_v(-1.0, 3.0)),  # v = [4, 8], minus 5
    Program("if_while_lambda_reads_var_else", _fn(if_while_lambda_reads_var), (-_vec,),
            expect=_vec),
    Program("module_forward", lambda: Grow(20.0), (_vec,), expect=_v(-12.0, -4.0)),  # x8, -20
    Program("method", lambda: Offset(2.0).apply, (f32(-1.0),), expect=-3.0),
    Program("return_in_tensor_loop", _fn(return_in_tensor_loop), (f32(1.0),),
            raises=ControlFlowError, match=_at(return_in_tensor_loop)),
    Program("one_branch_variable_taken", _fn(one_branch_variable), (f32(1.0),),
            raises=ControlFlowError, match=_at(one_branch_variable)),
    Program("one_branch_variable_not_taken", _fn(one_branch_variable), (f32(-1.0),),
            raises=ControlFlowError, match=_at(one_branch_variable)),
    Program("loop_first_variable", _fn(loop_first_variable), (f32(1.0),),
            raises=ControlFlowError, match=_at(loop_first_variable)),
    Program("loop_dtype_change", _fn(loop_dtype_change), (f32(1.0),),
            raises=ControlFlowError,
            match=_at(loop_dtype_change) + r".*'s' is int64\[\] before the loop but float32"),
    Program("assign_in_tensor_if", _assign_in_tensor_if, (_vec,), raises=TracingError,
            match=_assign_match(_assign_in_tensor_if, "cond")),
    Program("assign_in_tensor_while", _assign_in_tensor_while, (_vec,), raises=TracingError,
            match=_assign_match(_assign_in_tensor_while, "while_loop")),
    Program("range_index_read_after", _fn(range_index_read_after), (3,),
            raises=ControlFlowError, match=_at(range_index_read_after)),
]
