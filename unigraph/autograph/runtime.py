"""What converted code calls (as `ag__.<name>`): control flow decided at run time.

A condition that is a Python value, or an eager tensor, runs as plain Python: eager
targets keep Python's control flow, and loops over Python values unroll when traced. A
condition that is a *symbolic* tensor (a static target, while tracing) becomes one `cond`
or `while_loop` node over the variables the statement changes.

State protocol: `get_state()` returns the values of the statement's state variables (a
tuple, names in `names`); `set_state(values)` assigns them in the user's function.
"""

from __future__ import annotations

import functools
import operator
import re

import numpy as np

from unigraph import api, pytree
from unigraph.autograph.calls import converted  # noqa: F401 (ag__.converted)
from unigraph.autograph.printing import Field, FString, print_  # noqa: F401 (ag__.print_)
from unigraph.autograph.ranges import TensorRange, range, range_call  # noqa: A004, F401
from unigraph.autograph.weak import is_weak, strong, weak
from unigraph.control_flow import (
    checked_shape,
    emit_cond,
    fits_open,
    known_shape,
    loop_error,
    max_loop_iterations,
    trace_subgraph,
    while_loop,
)
from unigraph.dtypes import python_scalar_dtype
from unigraph.errors import ControlFlowError, ControlFlowShapeError
from unigraph.function import is_array_leaf
from unigraph.tensor import Tensor, tensor
from unigraph.tracing import (
    TRACES_BODY,
    TRACES_BRANCHES,
    GraphBuilder,
    current_builder,
    region,
    user_source,
)

_SCALARS = (bool, int, float)


# -- undefined variables ------------------------------------------------------------------
class Undefined:
    """The value of a variable not assigned yet. Using it raises, naming the variable."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def _fail(self, *args, **kwargs):
        raise UnboundLocalError(
            f"variable {self.name!r} is used at {user_source()} but was never assigned "
            "on the path the program took"
        )

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        self._fail()

    __bool__ = __iter__ = __len__ = __call__ = __getitem__ = __index__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _fail
    __truediv__ = __rtruediv__ = __matmul__ = __rmatmul__ = __neg__ = _fail
    __lt__ = __le__ = __gt__ = __ge__ = _fail

    def __repr__(self):
        return f"<undefined {self.name}>"


class UndefinedReturnValue(Undefined):
    """The return value before any `return` ran. Where a tensor condition decides whether
    a branch returns, the other branch fills it with zeros of the same type: the flag that
    says "returned" keeps those zeros from ever being seen."""

    __slots__ = ()

    def __init__(self):
        super().__init__("<return value>")


def ld(read, name: str):
    """`read()` (a variable's value), or an `Undefined` marker if it is not bound yet."""
    try:
        return read()
    except NameError:
        return Undefined(name)


def return_value(value):
    """What the function returns: None if no `return` ran; a variable never assigned on
    the path taken raises here, as Python would have at the `return`."""
    if isinstance(value, UndefinedReturnValue):
        return None
    for item in value if isinstance(value, tuple | list) else (value,):
        if isinstance(item, Undefined):
            item._fail()
    return value


def result(value):
    """What a converted function returns: `value` with weak tensors made ordinary ones."""
    if type(value) is Tensor:  # the common returns, ordinary tensors: as they are
        return value
    if type(value) is tuple:
        for item in value:  # (a loop, not all(): no generator made on every call)
            if type(item) is not Tensor:
                break
        else:
            return value
    if isinstance(value, tuple | list):
        items = [result(item) for item in value]
        return type(value)(items) if type(value) in (tuple, list) else value
    if isinstance(value, dict) and type(value) is dict:
        return {key: result(item) for key, item in value.items()}
    return strong(value)


# -- helpers ------------------------------------------------------------------------------
def is_symbolic(x) -> bool:
    return isinstance(x, Tensor) and x.is_symbolic


def _type_text(x) -> str:
    if isinstance(x, Tensor | np.ndarray | np.generic):
        return f"{np.dtype(x.dtype).name}{list(x.shape)}"
    return f"Python {type(x).__name__} {x!r}"


def _predicate(x, what: str) -> Tensor:
    """A symbolic condition as a bool scalar (`x != 0` for numbers, like Python's truth)."""
    if x.shape not in ((), (1,)):
        raise ControlFlowError(
            f"{what} at {user_source()}: the condition must be a scalar, got a tensor of shape "
            f"{list(x.shape)}; reduce it first (ug.max, ug.min, ug.sum)"
        )
    return x if x.dtype == "bool" else api.not_equal(x, 0)


def _as_tensor(x):
    """Python numbers and NumPy values carried through a graph become tensors (the dtypes a
    @ug.function argument would get: Python floats float32, ints int64)."""
    if isinstance(x, _SCALARS):
        return tensor(x, python_scalar_dtype(x))
    if isinstance(x, np.ndarray | np.generic):
        return tensor(np.asarray(x))
    return x


def _zeros_like(tree):
    leaves, treedef = pytree.flatten(tree, is_array_leaf)
    zeros = [np.zeros(x.shape, x.dtype) if isinstance(x, Tensor | np.ndarray | np.generic)
             else type(x)(0) for x in leaves]
    return pytree.unflatten(treedef, zeros)


def _spec_of(x) -> tuple:
    if isinstance(x, Tensor):
        return (tuple(x.shape), x.dtype)
    array = np.asarray(x)
    return (array.shape, array.dtype.name)


def _mismatch(name, what: str, a: str, b: str, labels: tuple, need: str,
              error=ControlFlowError):
    if name is not None and re.fullmatch(r"retval__\d+", name):
        # The value of an early `return` lives in a generated variable: say so plainly.
        return error(
            f"`return` at {user_source()}: the function returns {a} on one path but {b} on "
            f"another, and a tensor decides which; every `return` must give {need}"
        )
    subject = "its value" if name is None else f"variable {name!r}"
    return error(
        f"{what} at {user_source()}: {subject} is {a} {labels[0]} but {b} {labels[1]}; "
        f"both must have {need}"
    )


def _merge(name, values: list, labels: tuple, what: str, fits=None) -> list:
    """Give one variable's values from two code paths one type: Python numbers take the
    dtype of the tensor on the other path; shapes and dtypes must then agree, or `fits`
    them (the two branches of a traced `if`: a dim one leaves open may be any size on the
    other, `fits_open`; so may a traced loop's state before and after its body).
    `name` None: the value of a conditional expression."""
    flat = [pytree.flatten(v, is_array_leaf) for v in values]
    (leaves_a, tree_a), (leaves_b, tree_b) = flat
    if tree_a != tree_b:
        raise _mismatch(name, what, pytree.describe(tree_a), pytree.describe(tree_b), labels,
                        "the same structure")
    out_a, out_b = [], []
    for a, b in zip(leaves_a, leaves_b):
        a_weak, b_weak = isinstance(a, _SCALARS), isinstance(b, _SCALARS)
        if a_weak and b_weak:
            dtype = np.result_type(python_scalar_dtype(a), python_scalar_dtype(b)).name
            a, b = np.asarray(a, dtype), np.asarray(b, dtype)
        elif a_weak and _spec_of(b)[0] == ():
            a = np.asarray(a, _spec_of(b)[1])
        elif b_weak and _spec_of(a)[0] == ():
            b = np.asarray(b, _spec_of(a)[1])
        (shape_a, dtype_a), (shape_b, dtype_b) = _spec_of(a), _spec_of(b)
        if dtype_a != dtype_b or not (shape_a == shape_b or
                                      fits is not None and fits(shape_a, shape_b)):
            # (one dtype, two shapes: a shape error too, as when a static run finds it)
            error = ControlFlowShapeError if dtype_a == dtype_b else ControlFlowError
            raise _mismatch(name, what, _type_text(a), _type_text(b), labels,
                            "one shape and dtype in a static graph (cast, or initialise it "
                            "with a value of the right dtype)", error)
        out_a.append(a)
        out_b.append(b)
    return [pytree.unflatten(tree_a, out_a), pytree.unflatten(tree_b, out_b)]


# -- if / conditional expression ----------------------------------------------------------
def if_stmt(cond, body, orelse, get_state, set_state, names, one_branch=(), grown=()):
    """`if cond: body() else: orelse()`; a `cond` node when `cond` is a symbolic tensor.

    `one_branch`: (name, "if" or "else") for the state variables only one branch assigns.
    When `cond` is a tensor, eager or symbolic, such a variable must be bound before the
    `if`: the rule a static graph needs, checked in every mode so that they all agree.
    `grown`: (line, "kept.append(...)") for the Python objects made before the `if` that it
    changes (a list grown, an attribute or item set), refused under a tensor condition in
    every mode (`_check_grown`)."""
    if grown and isinstance(cond, Tensor):
        _check_grown(grown, "`if`", TRACES_BRANCHES)
    if one_branch and isinstance(cond, Tensor):
        _check_one_branch(dict(zip(names, get_state())), one_branch, "`if`")
    if not is_symbolic(cond):
        if not isinstance(cond, Tensor):
            (body if cond else orelse)()
            return
        # An eager tensor condition: the branch is what a `cond` branch is when traced (where,
        # e.g., ug.assign is refused in every mode).
        with region("cond"):
            (body if cond else orelse)()
        return
    entry = get_state()

    def branch(fn):
        def run():
            set_state(entry)
            fn()
            return list(get_state())
        return run

    results = _symbolic_cond(cond, branch(body), branch(orelse), names, "`if`")
    set_state(tuple(results))


def if_exp(cond, true_value, false_value):
    """`true_value() if cond else false_value()`; a `cond` node for a symbolic `cond`."""
    if not is_symbolic(cond):
        return true_value() if cond else false_value()
    return _symbolic_cond(cond, lambda: [true_value()], lambda: [false_value()], (None,),
                          "conditional expression")[0]


def _symbolic_cond(pred, true_run, false_run, names, what: str) -> list:
    """Trace both branches (each returns one value per name) into one `cond` node."""
    builder = current_builder()
    pred = _predicate(pred, what)
    then_builder, then_values = trace_subgraph(builder, "then", true_run, [])
    else_builder, else_values = trace_subgraph(builder, "else", false_run, [])
    results = list(then_values)
    kept, then_out, else_out = [], [], []
    for index, name in enumerate(names):
        a, b = then_values[index], else_values[index]
        if isinstance(a, Undefined) and isinstance(b, Undefined):
            continue
        if isinstance(a, UndefinedReturnValue):
            a = _zeros_like(b)
        elif isinstance(b, UndefinedReturnValue):
            b = _zeros_like(a)
        elif isinstance(a, Undefined) or isinstance(b, Undefined):
            raise _one_branch_error(what, name, "if" if isinstance(b, Undefined) else "else")
        labels = ("in the if branch", "in the else branch") if name else ("when true",
                                                                          "when false")
        a, b = _merge(name, [a, b], labels, what, fits=fits_open)
        kept.append(index)
        then_out.append(a)
        else_out.append(b)
    if not kept and any(node.op == "print" for b in (then_builder, else_builder)
                        for node in b.graph.walk()):
        # A branch that only prints (`if c: print(x)`) still has a result, the condition
        # passed through: a backend builds no `cond` without one (Paddle), or runs only
        # what a result needs (a TF Session).
        then_out.append(pred)
        else_out.append(pred)
    values = emit_cond(builder, pred, [], (then_builder, tuple(then_out)),
                       (else_builder, tuple(else_out)))
    for index, value in zip(kept, values):
        # A Python number on both paths stays weakly typed, as it is in eager mode.
        both_weak = is_weak(then_values[index]) and is_weak(else_values[index])
        results[index] = weak(value) if both_weak else value
    return results


def _check_one_branch(state: dict, one_branch, what: str) -> None:
    for name, branch in one_branch:
        value = state.get(name)
        # An early `return` in one branch is fine: the other fills the value with zeros.
        if isinstance(value, Undefined) and not isinstance(value, UndefinedReturnValue):
            raise _one_branch_error(what, name, branch)


def _check_grown(grown, what: str, why: str) -> None:
    """A Python object made before a tensor `if` or loop and changed inside it
    (`kept.append(v)`, `self.scale = v`): eager Python would change it once per iteration
    taken, a static trace once per branch or body whatever runs, so the program could not
    mean one thing on every target."""
    line, change, *fix = grown[0]
    where = user_source()
    if fix:  # a `raise`, or a `del` of a variable the statement carries
        raise ControlFlowError(
            f"{what} at {where} (its condition is a tensor) holds `{change}` at "
            f"{where.rpartition(':')[0]}:{line}. A static target {why}, so {fix[0]}")
    raise ControlFlowError(
        f"{what} at {where} (its condition is a tensor) changes a Python object made "
        f"before it: `{change}` at {where.rpartition(':')[0]}:{line}. A static target "
        f"{why}, so the object could not hold what running it in Python gives; carry the "
        "values in tensors instead (in a loop: `buf = buf.at[i].set(v)` with `buf` made "
        "before it; in an `if`: a variable assigned in both branches, set on the object "
        "after the `if`), or loop over range(n) with a Python int n, which runs as Python"
    )


def _one_branch_error(what: str, name: str, assigned: str) -> ControlFlowError:
    missing = "else" if assigned == "if" else "if"
    return ControlFlowError(
        f"{what} at {user_source()} (its condition is a tensor): variable {name!r} is "
        f"assigned in the {assigned} branch but not in the {missing} branch, and is "
        f"used after the `if`; assign it before the `if` or in both branches"
    )


# -- loops --------------------------------------------------------------------------------
def while_stmt(test, body, get_state, set_state, names, grown=()):
    """`while test(): body()`. Python iterations while the test is a Python value (or an
    eager tensor); from the first symbolic test on, one `while_loop` node. From the first
    tensor test on, eager or symbolic, the loop obeys a `while_loop`'s rules (see
    `_check_loop_entry`), so that every mode accepts and rejects the same programs."""
    entry, checked = None, False
    while True:
        cond = _probe(test)
        if grown and isinstance(cond, Tensor):
            _check_grown(grown, "`while` loop", TRACES_BODY)
        if is_symbolic(cond):
            break
        if entry is None and isinstance(cond, Tensor):
            entry = get_state()
            _check_loop_entry(entry, names, "`while` loop")
            limit, count = max_loop_iterations(), 0
        if not cond:
            return
        if entry is None:
            body()
            continue
        if limit is not None and count >= limit:  # as the graph loop: past the limit
            raise loop_error(user_source(), limit)
        count += 1
        with region("while_loop"):
            body()
        if not checked:
            _check_loop_types(names, entry, get_state(), "`while` loop")
            checked = True

    def loop_cond(*values):
        set_state(values)
        return _predicate(_as_tensor(test()), "`while`")

    def loop_body(*values):
        set_state(values)
        body()
        return get_state()

    _symbolic_loop(loop_cond, loop_body, get_state, set_state, names, "`while` loop")


def _probe(test):
    """`test()`, with any graph nodes it records thrown away: a symbolic test is traced
    again inside the `while_loop`, and must not leave a dead copy in the enclosing graph."""
    builder = current_builder()
    if builder is None:
        return test()
    with GraphBuilder("probe", parent=builder):
        return test()


def for_stmt(iterable, extra_test, body, get_state, set_state, names, grown=()):
    """`for item in iterable: body(item)`, stopping early once `extra_test()` is false
    (a lowered `break`/`return`). A `ug.range` with a symbolic bound is one `while_loop`;
    with eager tensor bounds, a Python loop under a `while_loop`'s rules (its index a weak
    tensor, as in the graph loop); anything else is iterated in Python (unrolled when
    traced), and iterations that a tensor `extra_test` may skip are `cond` branches."""
    tensor_loop = isinstance(iterable, TensorRange)
    if grown and tensor_loop:
        _check_grown(grown, "`for` loop", TRACES_BODY)
    if tensor_loop and iterable.is_symbolic:
        _symbolic_range_loop(iterable, extra_test, body, get_state, set_state, names)
        return
    if tensor_loop:
        entry = get_state()
        _check_loop_entry(entry, names, "`for` loop")
        limit, count = max_loop_iterations(), 0
    one_branch = tuple((name, "if") for name in names)
    checked = False
    for item in iterable:
        go = True if extra_test is None else extra_test()
        if is_symbolic(go):
            if_stmt(go, functools.partial(body, item), _nothing, get_state, set_state, names,
                    one_branch)
            continue
        if not tensor_loop and isinstance(go, Tensor):
            _check_one_branch(dict(zip(names, get_state())), one_branch, "`if`")
        if not go:
            return
        if tensor_loop:
            if limit is not None and count >= limit:  # as the graph loop: past the limit
                raise loop_error(user_source(), limit)
            count += 1
            with region("while_loop"):
                body(item)
            if not checked:
                _check_loop_types(names, entry, get_state(), "`for` loop", set_state)
                # Traced (unrolled), each iteration may leave other dims open: check each.
                checked = not any(is_symbolic(x) for x in entry)
        elif isinstance(go, Tensor):
            with region("cond"):
                body(item)
        else:
            body(item)


def _nothing():
    pass


def _symbolic_range_loop(iterable, extra_test, body, get_state, set_state, names):
    start, stop, step = iterable.start, iterable.stop, iterable.step
    # The counter is int64 whatever the bounds' dtype: `index + step` past a small int's
    # range (uint8 255 + 2) would wrap and the loop never end. The body sees the bounds' dtype.
    counter = api.cast(_as_tensor(start), "int64")

    def loop_cond(index, *values):
        set_state(values)
        if isinstance(step, Tensor):
            going = api.where(step > 0, index < stop, index > stop)
        else:
            going = index < stop if step > 0 else index > stop
        if extra_test is not None:
            going = api.logical_and(going, _predicate(_as_tensor(extra_test()), "`for`"))
        return going

    def loop_body(index, *values):
        set_state(values)
        body(weak(index if iterable.dtype == "int64" else api.cast(index, iterable.dtype)))
        return (index + step, *get_state())

    _symbolic_loop(loop_cond, loop_body, get_state, set_state, names, "`for` loop",
                   prefix=(counter,))


def _check_loop_entry(entry, names, what: str) -> None:
    """The rules of a loop whose condition is a tensor, on the state it starts from."""
    for name, value in zip(names, entry):
        if isinstance(value, UndefinedReturnValue):
            raise ControlFlowError(
                f"`return` inside the {what} at {user_source()}, whose condition is a tensor, "
                "is not supported: assign the result to a variable, `break`, and return it "
                "after the loop"
            )
        if isinstance(value, Undefined):
            raise ControlFlowError(
                f"{what} at {user_source()} (its condition is a tensor): variable {name!r} "
                "is first assigned inside the loop but read before it is assigned in an "
                "iteration or after the loop; assign it before the loop"
            )


_LOOP_LABELS = ("before the loop", "after the loop body")


def _check_loop_types(names, entry, after, what: str, set_state=None) -> None:
    """A loop run in Python with tensor bounds: the state after one iteration must have the
    types it had before, as the state of a `while_loop` must (Python numbers carried in are
    int64/float32 tensors). Traced (the loop unrolled), a dim left open on one side may be
    any size on the other, as in a traced `while_loop`: the value after the body is checked
    when the program runs to have the sizes either knows (`checked_shape`, given back
    through `set_state`), as eagerly it must."""
    checked = list(after)
    for index, (name, old, new) in enumerate(zip(names, entry, after)):
        if isinstance(old, _SCALARS):
            old = np.asarray(old, python_scalar_dtype(old))
        traced = is_symbolic(old) or is_symbolic(new)
        _merge(name, [old, new], _LOOP_LABELS, what, fits_open if traced else None)
        if traced and isinstance(new, Tensor) and isinstance(old, Tensor) \
                and new.shape != old.shape:
            message = (f"{what} at {user_source()}: variable {name!r} is "
                       f"{_type_text(old)} before the loop but {_type_text(new)} after the body")
            checked[index] = checked_shape(
                new, known_shape(tuple(old.shape), tuple(new.shape)), message, [old])
    if set_state is not None and any(a is not b for a, b in zip(checked, after)):
        set_state(tuple(checked))


def _symbolic_loop(loop_cond, loop_body, get_state, set_state, names, what, prefix=()):
    """One `while_loop` node carrying `prefix` and the state variables. State that enters
    as a Python number is weak in the body, and leaves weak if the body keeps it weak."""
    entry = list(get_state())
    _check_loop_entry(entry, names, what)
    initial = [_as_tensor(x) for x in entry]
    weak_in = [is_weak(x) for x in entry]
    weak_out = list(weak_in)

    def as_carried(values):
        return tuple(weak(v) if w else v for v, w in zip(values, weak_in))

    def cond(*values):
        return loop_cond(*values[:len(prefix)], *as_carried(values[len(prefix):]))

    def body(*values):
        new = list(loop_body(*values[:len(prefix)], *as_carried(values[len(prefix):])))
        head, new = new[:len(prefix)], new[len(prefix):]
        for index, value in enumerate(new):
            weak_out[index] = weak_in[index] and is_weak(value)
        # (a dim left open after the body that the state knew before it is checked when
        # the program runs: control_flow._checked_body)
        merged = [strong(_merge(name, [old, value], _LOOP_LABELS, what, fits_open)[1])
                  for name, old, value in zip(names, initial, new)]
        return (*head, *merged)

    final = while_loop(cond, body, (*prefix, *initial))
    set_state(tuple(weak(v) if w else v for v, w in zip(final[len(prefix):], weak_out)))


# -- and / or / not -----------------------------------------------------------------------
def _as_bool(x):
    x = _as_tensor(x)
    return x if x.dtype == "bool" else api.not_equal(x, 0)


def and_(first, *rest):
    """`first and rest[0]() and ...`: Python's, or elementwise `logical_and` once an
    operand is symbolic (both sides are then evaluated: a graph has no short circuit)."""
    value = first
    for index, operand in enumerate(rest):
        if is_symbolic(value):
            for remaining in rest[index:]:
                value = api.logical_and(_as_bool(value), _as_bool(remaining()))
            return value
        if not value:
            return value
        value = operand()
    return value


def or_(first, *rest):
    """`first or rest[0]() or ...`, like `and_`."""
    value = first
    for index, operand in enumerate(rest):
        if is_symbolic(value):
            for remaining in rest[index:]:
                value = api.logical_or(_as_bool(value), _as_bool(remaining()))
            return value
        if value:
            return value
        value = operand()
    return value


def not_(x):
    return api.logical_not(_as_bool(x)) if is_symbolic(x) else not x


# The comparison operators of a chained comparison, by the AST's class name.
COMPARISONS = {
    "Eq": operator.eq, "NotEq": operator.ne, "Lt": operator.lt, "LtE": operator.le,
    "Gt": operator.gt, "GtE": operator.ge, "Is": operator.is_, "IsNot": operator.is_not,
    "In": lambda a, b: a in b, "NotIn": lambda a, b: a not in b,
}


def compare_chain(first, *links):
    """`first < b() <= c() ...` (links are (operator name, operand thunk) pairs): Python's
    `first < b and b <= c ...` with each operand evaluated once, through `and_`, so a
    tensor comparison becomes an elementwise `logical_and` instead of a `bool()`."""
    left, comparisons = first, []
    for index, (name, operand) in enumerate(links):
        right = operand()
        comparisons.append(COMPARISONS[name](left, right))
        if index + 1 < len(links) and not is_symbolic(comparisons[-1]) \
                and not comparisons[-1]:
            return comparisons[-1]  # Python's short circuit, on a concrete value
        left = right
    return and_(comparisons[0], *[(lambda c=c: c) for c in comparisons[1:]])


def python_test(value, what: str, fix: str):
    """The value a Python form decides on that a graph cannot hold (an `assert`, a
    comprehension's `if`, a `while` test with `:=`, the condition or iterable of a
    generator's statement that holds a `yield`): a tensor is refused in every mode, eager
    too, so that every target agrees."""
    if isinstance(value, Tensor | TensorRange):
        raise ControlFlowError(f"{what} on a tensor at {user_source()}: {fix}")
    return value
