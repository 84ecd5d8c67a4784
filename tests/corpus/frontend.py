"""Corpus programs for the frontend: control flow, assign, Module state, static arguments,
recursion, loop limits, predicates, dtype mixes (see tests/corpus/__init__.py).

Expected errors name the user's line: `_at("tag")` is a regex for the line of this file
that carries the comment `# @tag`. Loop-limit programs run under
`unigraph.control_flow.loop_limit(LIMIT)`, so a runaway loop stops after LIMIT iterations.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import unigraph as ug
from corpus import Program
from unigraph.control_flow import loop_limit
from unigraph.errors import ControlFlowError, TracingError

_SOURCE = Path(__file__).read_text().splitlines()
LIMIT = 50
X3 = np.array([0.5, -1.0, 2.0], dtype=np.float32)


def _at(tag: str) -> str:
    """A regex for `frontend.py:<line>`, the line marked `# @tag`."""
    lines = [i + 1 for i, text in enumerate(_SOURCE) if text.rstrip().endswith(f"# @{tag}")]
    assert len(lines) == 1, f"marker @{tag} found {len(lines)} times"
    return rf"\S*corpus/frontend\.py:{lines[0]}\b"


def _limited(fn):
    """`fn` called under loop_limit(LIMIT)."""
    def run(*args, **kwargs):
        with loop_limit(LIMIT):
            return fn(*args, **kwargs)
    return run


# -- control flow ---------------------------------------------------------------------------
def _counter():
    @ug.function
    def counter(a, b):
        return ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))
    return counter


def _cond_add_sub():
    return ug.function(lambda x, y: ug.cond(x > y, lambda: x + y, lambda: x - y))


def _cond_operands():
    return ug.function(lambda x: ug.cond(ug.sum(x) > 0, lambda a: a * 2.0, lambda a: a - 1.0, x))


def _nested_cond():
    @ug.function
    def f(x):
        return ug.cond(x > 0,
                       lambda: ug.cond(x > 10, lambda: x * 100.0, lambda: x * 10.0),
                       lambda: -x)
    return f


def _while_in_cond():
    @ug.function
    def f(n):
        def count_up():
            return ug.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s + i),
                                 (ug.tensor(0), ug.tensor(0)))[1]
        return ug.cond(n > 0, count_up, lambda: n * 0 - 1)
    return f


def _cond_in_while():
    @ug.function
    def steps_down(n):
        def body(n, steps):
            n = ug.cond(n > 10, lambda: n - 7, lambda: n - 1)
            return n, steps + 1
        return ug.while_loop(lambda n, steps: n > 1, body, (n, ug.tensor(0)))[1]
    return steps_down


def _nested_while():
    @ug.function
    def f(n):
        def outer(i, total):
            inner = ug.while_loop(lambda j, s: j < i, lambda j, s: (j + 1, s + j),
                                  (ug.tensor(0), ug.tensor(0)))[1]
            return i + 1, total + inner
        return ug.while_loop(lambda i, t: i < n, outer, (ug.tensor(0), ug.tensor(0)))[1]
    return f


def _while_dict_vars():
    @ug.function
    def f(x):
        state = {"i": ug.tensor(0), "x": x}
        out = ug.while_loop(lambda s: s["i"] < 3,
                            lambda s: {"i": s["i"] + 1, "x": s["x"] * 2.0}, state)
        return out["x"]
    return f


def _triple_nesting():
    @ug.function
    def f(x):
        def body(i, y):
            y = ug.cond(ug.sum(y) > 4.0,
                        lambda: ug.while_loop(lambda z: ug.sum(z) > 1.0, lambda z: z * 0.5, y),
                        lambda: y + 1.0)
            return i + 1, y
        return ug.while_loop(lambda i, y: i < 4, body, (ug.tensor(0), x))[1]
    return f


def _cond_branch_dtypes_differ():
    return ug.function(lambda x: ug.cond(x > 0, lambda: x, lambda: ug.cast(x, "float64")))  # @dt


def _while_body_changes_shape():
    return ug.function(lambda x: ug.while_loop(  # @shape
        lambda x: ug.sum(x) < 10.0, lambda x: ug.concat([x, x]), x))


def _grad_through_bounded_loop():
    def f(x):
        return ug.sum(ug.while_loop(lambda y: ug.sum(y) < 1e9, lambda y: y * 1.5, x,
                                    maximum_iterations=3))
    return ug.function(ug.grad(f))


# -- maximum_iterations and the loop limit --------------------------------------------------
def _maximum_iterations(maximum):
    def make():
        return ug.function(lambda i: ug.while_loop(lambda i: i < 100, lambda i: i + 1, i,
                                                   maximum_iterations=maximum))
    return make


def _python_true_condition():
    return ug.function(lambda i: ug.while_loop(lambda i: True, lambda i: i + 2, i,
                                               maximum_iterations=3))


def _runaway():
    f = ug.function(lambda i: ug.while_loop(lambda i: i >= 0, lambda i: i + 1, i))  # @runaway
    return _limited(f)


def _exactly_at_limit():
    f = ug.function(lambda i: ug.while_loop(lambda i: i < LIMIT, lambda i: i + 1, i))
    return _limited(f)


def _runaway_bounded_by_maximum():
    f = ug.function(lambda i: ug.while_loop(lambda i: i >= 0, lambda i: i + 1, i,
                                            maximum_iterations=LIMIT - 1))
    return _limited(f)


def _runaway_nested():
    @ug.function
    def f(n):
        def outer(i, total):
            inner = ug.while_loop(lambda j: j >= 0, lambda j: j + 1, ug.tensor(0))  # @nested
            return i + 1, total + inner
        return ug.while_loop(lambda i, t: i < n, outer, (ug.tensor(0), ug.tensor(0)))[1]
    return _limited(f)


def _runaway_in_cond_branch():
    @ug.function
    def f(x):
        return ug.cond(x > 0,
                       lambda: ug.while_loop(lambda y: y > 0, lambda y: y + 1.0, x),  # @branch
                       lambda: x)
    return _limited(f)


def _runaway_in_grad():
    def loss(x):
        _, y = ug.while_loop(lambda i, y: i >= 0, lambda i, y: (i + 1, y * 1.0),  # @ingrad
                             (ug.tensor(0), x))
        return ug.sum(y)
    return _limited(ug.function(ug.grad(loss)))


def _runaway_python_range_is_not_a_loop():
    # A Python loop around a traced one: each while_loop stays well under the limit.
    @ug.function
    def f(x):
        for _ in range(3):
            x = ug.while_loop(lambda y: y < LIMIT - 1.0, lambda y: y + 1.0, x * 0.0)
        return x
    return _limited(f)


# -- predicates ------------------------------------------------------------------------------
def _cond_float_pred():
    return ug.function(lambda x: ug.cond(ug.sum(x), lambda: x, lambda: -x))  # @floatpred


def _cond_int_tensor_pred():
    return ug.function(lambda n: ug.cond(n, lambda: n + 1, lambda: n - 1))  # @intpred


def _cond_python_int_pred():
    return ug.function(lambda x: ug.cond(1, lambda: x, lambda: -x))  # @pyintpred


def _cond_vector_pred():
    return ug.function(lambda x: ug.cond(x > 0, lambda: x, lambda: -x))  # @vecpred


def _cond_pred_not_equal_zero():
    return ug.function(lambda n: ug.cond(n != 0, lambda: n + 1, lambda: n - 1))


def _cond_python_bool_runs_one_branch():
    # A Python predicate is Python's `if`: the other branch (a dtype mismatch) never runs.
    return ug.function(lambda x: ug.cond(True, lambda: x * 2.0, lambda: ug.cast(x, "int32")))


def _while_cond_returns_int():
    return ug.function(lambda i: ug.while_loop(lambda i: 5 - i, lambda i: i + 1, i))  # @intcond


def _while_cond_returns_float():
    return ug.function(lambda x: ug.while_loop(lambda x: x * 1.0, lambda x: x - 1.0, x))  # @fc


# -- assign ----------------------------------------------------------------------------------
def _assign_in(where: str):
    def make():
        w = ug.Parameter(np.array([1.0, 2.0], np.float32), name="w")

        @ug.function
        def in_cond(x):
            return ug.cond(x > 0, lambda: (ug.assign(w, w * 2.0), x)[1], lambda: x)  # @acond

        @ug.function
        def in_while(i):
            def body(i):
                ug.assign(w, w + 1.0)  # @awhile
                return i + 1
            return ug.while_loop(lambda i: i < 3, body, i)

        @ug.function
        def in_grad(x):
            def loss(x):
                ug.assign(w, w * x)  # @agrad
                return ug.sum(w * x)
            return ug.grad(loss)(x)

        @ug.function
        def top_level(x):
            ug.cond(True, lambda: ug.assign(w, w * x), lambda: None)  # Python pred: plain `if`
            return w * 1.0

        return {"cond": in_cond, "while": in_while, "grad": in_grad, "top": top_level}[where]
    return make


# -- Module state: train() / eval() after compiling -------------------------------------------
def _dropout_then_eval():
    layer = ug.nn.Dropout(0.5)
    f = ug.function(lambda x: layer(x))

    def run(x):
        dropped = f(x)
        layer.eval()
        kept = f(x)  # must not reuse the training graph
        layer.train()
        dropped_again = f(x)
        return dropped, kept, dropped_again
    return run


def _dropout_expected():
    rng = np.random.default_rng(0)  # the runner seeds with ug.manual_seed(0)
    first, second = rng.random((2, 8)), rng.random((2, 8))
    return (np.where(first >= 0.5, 2.0, 0.0), np.ones((2, 8)), np.where(second >= 0.5, 2.0, 0.0))


def _batchnorm_eval_then_train():
    layer = ug.nn.BatchNorm2D(2)
    f = ug.function(lambda x: layer(x))

    def run(x):
        layer.eval()
        f(x)  # running statistics unchanged
        before = layer.running_mean.numpy().copy()
        layer.train()
        f(x)  # must update them
        return before, layer.running_mean.numpy().copy()
    return run


def _batchnorm_update_inside_grad():
    layer = ug.nn.BatchNorm2D(2)  # training mode: the forward pass updates its statistics

    @ug.function
    def step(x):
        return ug.grad(lambda x: ug.sum(layer(x)))(x)  # @bngrad
    return step


class _Stack(ug.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [ug.nn.Linear(3, 3), ug.nn.Linear(3, 2)]  # a plain list
        self.heads = ug.nn.ModuleDict({"a": ug.nn.Linear(2, 1), "b": ug.nn.Linear(2, 1)})
        self.scales = ug.nn.ModuleList([ug.nn.Linear(1, 1, bias=False)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        a = self.heads["a"](x) + self.heads["b"](x)
        return self.scales[0](a)


def _containers_train():
    def run(x):
        model = _Stack()
        before = {k: v.copy() for k, v in model.state_dict().items()}
        loss_fn = ug.function(lambda x: ug.sum(model(x) ** 2))
        grads = ug.function(ug.grad(lambda x: ug.sum(model(x) ** 2),
                                    wrt=model.parameters()))
        for param, g in zip(model.parameters(), grads(x)):
            ug.assign(param, param - 0.1 * g)
        changed = sorted(k for k, v in model.state_dict().items()
                         if not np.array_equal(v, before[k]))
        return loss_fn(x), len(changed), len(before)
    return run


# -- static arguments and recursion ----------------------------------------------------------
def _power():
    @ug.function(static_argnums=1)
    def power(x, n):
        return ug.cond(n == 0, lambda: x * 0.0 + 1.0, lambda: x * power(x, n - 1))
    return power


def _static_argnames():
    @ug.function(static_argnames="mode")
    def f(x, mode="double"):
        return x * 2.0 if mode == "double" else x * 3.0
    return lambda x: (f(x, mode="double"), f(x, mode="triple"), f(x))


def _fact_static():
    @ug.function(static_argnums=0)
    def fact(n):
        return ug.cond(n > 1, lambda: n * fact(n - 1), lambda: n)
    return fact


def _fact_traced():
    @ug.function
    def fact(n):
        return ug.cond(n > 1, lambda: n * fact(n - 1), lambda: n)  # @fact
    return fact


def _fact_undecorated():
    def fact(n):
        return ug.cond(n > 1, lambda: n * fact(n - 1), lambda: n)  # @plainfact
    return ug.function(fact)


def _static_unhashable():
    @ug.function(static_argnums=1)
    def f(x, sizes):
        return x * len(sizes)
    return f


def _static_value_changes():
    @ug.function(static_argnums=1)
    def scale(x, k):
        return x * k
    return lambda x: (scale(x, 2), scale(x, 3), scale(x, 2.5))


# -- Python values and dtype mixes -----------------------------------------------------------
def _python_outputs():
    return ug.function(lambda x: (1.5, 3, True, x))


def _int_counter_times_float():
    @ug.function
    def f(x):
        def body(i, total):
            return i + 1, total + x * ug.cast(i, "float32")
        return ug.while_loop(lambda i, t: i < 4, body, (ug.tensor(0), x * 0.0))[1]
    return f


def _cond_mixed_python_number():
    return ug.function(lambda x: ug.cond(x > 0, lambda: x * 2, lambda: x + 0.5))


PROGRAMS = [
    # control flow
    Program("counter", _counter, (0, 10), expect=(20, 20)),
    Program("cond_add_sub", _cond_add_sub, (3.0, 2.0), expect=5.0),
    Program("cond_add_sub_false", _cond_add_sub, (1.0, 2.0), expect=-1.0),
    Program("cond_operands", _cond_operands, (X3,), expect=X3 * 2.0),
    Program("nested_cond", _nested_cond, (12.0,), expect=1200.0),
    Program("nested_cond_middle", _nested_cond, (3.0,), expect=30.0),
    Program("while_in_cond", _while_in_cond, (5,), expect=0 + 1 + 2 + 3 + 4),
    Program("while_in_cond_untaken", _while_in_cond, (-2,), expect=-1),
    Program("cond_in_while", _cond_in_while, (20,), expect=7),  # 20 13 6 5 4 3 2 1
    Program("nested_while", _nested_while, (5,), expect=0 + 0 + 1 + 3 + 6),
    Program("while_dict_vars", _while_dict_vars, (X3,), expect=X3 * 8.0),
    Program("triple_nesting", _triple_nesting, (np.array([1.0, 2.0], np.float32),),
            # [2, 3] (sum 5 > 4) -> halved to [0.25, 0.375] -> +1 -> +1
            expect=np.array([2.25, 2.375])),
    Program("cond_branch_dtypes_differ", _cond_branch_dtypes_differ, (np.float32(1.0),),
            raises=ControlFlowError, match=_at("dt") + ".*float64"),
    Program("while_body_changes_shape", _while_body_changes_shape,
            (np.ones(1, np.float32),), raises=ControlFlowError, match=_at("shape")),
    Program("grad_through_bounded_loop", _grad_through_bounded_loop, (X3,),
            expect=np.full(3, 1.5 ** 3, np.float32)),
    # maximum_iterations and the loop limit
    Program("maximum_iterations", _maximum_iterations(7), (0,), expect=7),
    Program("maximum_iterations_zero", _maximum_iterations(0), (5,), expect=5),
    Program("maximum_iterations_above_cond", _maximum_iterations(1000), (95,), expect=100),
    Program("python_true_condition", _python_true_condition, (1,), expect=7),
    Program("runaway_loop", _runaway, (0,), raises=ControlFlowError,
            match=_at("runaway") + rf" ran more than {LIMIT} iterations"),
    Program("loop_exactly_at_limit", _exactly_at_limit, (0,), expect=LIMIT),
    Program("runaway_bounded_by_maximum", _runaway_bounded_by_maximum, (0,), expect=LIMIT - 1),
    Program("runaway_nested", _runaway_nested, (3,), raises=ControlFlowError,
            match=_at("nested") + " ran more than"),
    Program("runaway_in_cond_branch", _runaway_in_cond_branch, (1.0,),
            raises=ControlFlowError, match=_at("branch") + " ran more than"),
    Program("runaway_branch_not_taken", _runaway_in_cond_branch, (-1.0,), expect=-1.0),
    Program("runaway_in_grad", _runaway_in_grad, (X3,), raises=ControlFlowError,
            match=_at("ingrad") + " ran more than"),
    Program("loops_in_python_loop_each_counted", _runaway_python_range_is_not_a_loop, (1.0,),
            expect=LIMIT - 1.0),
    # predicates
    Program("cond_float_pred", _cond_float_pred, (X3,), raises=ControlFlowError,
            match=_at("floatpred") + r".*float32\[\].*pred != 0"),
    Program("cond_int_tensor_pred", _cond_int_tensor_pred, (3,), raises=ControlFlowError,
            match=_at("intpred") + r".*int64\[\]"),
    Program("cond_python_int_pred", _cond_python_int_pred, (1.0,), raises=ControlFlowError,
            match=_at("pyintpred") + ".*Python int"),
    Program("cond_vector_pred", _cond_vector_pred, (X3,), raises=ControlFlowError,
            match=_at("vecpred") + ".*scalar"),
    Program("cond_pred_not_equal_zero", _cond_pred_not_equal_zero, (3,), expect=4),
    Program("cond_python_bool_runs_one_branch", _cond_python_bool_runs_one_branch, (X3,),
            expect=X3 * 2.0),
    Program("while_cond_returns_int", _while_cond_returns_int, (0,), raises=ControlFlowError,
            match=_at("intcond") + r".*int64\[\]"),
    Program("while_cond_returns_float", _while_cond_returns_float, (3.0,),
            raises=ControlFlowError, match=_at("fc") + r".*float32\[\]"),
    # assign
    Program("assign_in_cond", _assign_in("cond"), (1.0,), raises=TracingError,
            match=_at("acond") + ".*inside the cond at " + _at("acond")),
    Program("assign_in_while", _assign_in("while"), (0,), raises=TracingError,
            match=_at("awhile") + ".*inside the while_loop"),
    Program("assign_in_grad", _assign_in("grad"), (X3[:2],), raises=TracingError,
            match=_at("agrad") + ".*differentiated function"),
    Program("assign_under_python_if", _assign_in("top"), (3.0,), expect=np.array([3.0, 6.0])),
    # Module state
    Program("dropout_then_eval", _dropout_then_eval, (np.ones((2, 8), np.float32),),
            expect=_dropout_expected()),
    Program("batchnorm_eval_then_train", _batchnorm_eval_then_train,
            (np.arange(16, dtype=np.float32).reshape(2, 2, 2, 2),),
            expect=(np.zeros(2), np.array([0.1 * 5.5, 0.1 * 9.5]))),
    Program("batchnorm_update_inside_grad", _batchnorm_update_inside_grad,
            (np.ones((2, 2, 2, 2), np.float32),), raises=RuntimeError,
            match="branch at " + _at("bngrad") + ".*collect_updates"),
    Program("containers_register_and_train", _containers_train, (X3[None, :],), rtol=1e-4),
    # static arguments and recursion
    Program("power_static_recursion", _power, (X3, 3), expect=X3 ** 3),
    Program("static_argnames", _static_argnames, (X3,), expect=(X3 * 2, X3 * 3, X3 * 2)),
    Program("fact_static_int", _fact_static, (5,), expect=120),
    Program("fact_traced_tensor", _fact_traced, (3,), raises=TracingError,
            match="fact calls itself at " + _at("fact") + ".*static_argnums"),
    Program("fact_undecorated", _fact_undecorated, (3,), raises=TracingError,
            match="nested more than .* at " + _at("plainfact") + ".*static_argnums"),
    Program("static_unhashable", _static_unhashable, (X3, [1, 2]), raises=TypeError,
            match="static argument sizes .* not hashable"),
    Program("static_value_changes", _static_value_changes, (X3,),
            expect=(X3 * 2, X3 * 3, X3 * 2.5)),
    # Python values and dtype mixes
    Program("python_outputs", _python_outputs, (X3,),
            expect=(np.float32(1.5), np.int64(3), True, X3)),
    Program("int_counter_times_float", _int_counter_times_float, (X3,), expect=X3 * 6.0),
    Program("cond_mixed_python_number", _cond_mixed_python_number, (np.float32(2.0),),
            expect=4.0),
]
