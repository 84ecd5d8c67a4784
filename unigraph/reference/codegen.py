"""A static plan's forward (no recording) as one generated Python function.

Every value of the plan is a local variable, and `cond` and `while_loop` nodes become
Python `if` / `while` statements around their subplans' code, inlined (at any depth), so a
loop iteration costs its ops' NumPy calls and nothing else: no step objects, no env lists,
no subplan calls. A `grad` node stays one call (it records a tape).

Scalar arithmetic: the binary ops whose fast kernel is a Python operator
(`fast_kernels.OPERATORS`) are written as that operator (`a + b`, `a < b`): on 0-d operands
NumPy answers with its scalar math, ~0.1 us where a ufunc call costs ~1 us. `x + y` on
NumPy operands *is* `np.add(x, y)` (ndarray and NumPy scalars defer to the ufunc), so the
numbers and dtypes are those of the kernel; the result of a 0-d operation is a NumPy scalar
instead of a 0-d array, so such values are turned back into arrays (`np.asarray`, no copy
for an array) before they reach any other op, and before they leave the plan.
Two differences are handled:

- integer overflow: NumPy's scalar math warns ("overflow encountered in scalar add") where
  the array ufunc wraps silently, so an integer `+ - *` runs with NumPy's `over` error
  state set to "ignore" for that one operation (a context variable set and reset, ~0.1 us);
  where NumPy's private error-state variable is not found, integer arithmetic calls the
  ufunc instead;
- `logical_and`/`logical_or` (bool operands only, by their records) are `&` / `|`.

Written into a dead operand (`generate(plan, keep)`, when the caller reads only the outputs
and `keep`): a top-level elementwise binary op whose operand is an intermediate array of
the result's shape and dtype, made by a top-level elementwise op or matmul (a fresh array)
and read by nothing else, writes its result into that operand (`ufunc(x, y, out=x)`: the
same numbers), as hand-written NumPy's `w -= lr * g` does: an SGD update then allocates one
array per parameter instead of two. Such an operand's slot is None in the returned list, as
is every slot the caller does not read.

>>> run = generate(plan)        # None if Python cannot compile it (too deeply nested loops)
>>> env = run(plan.template.copy() with the inputs in place)
"""

from __future__ import annotations

import functools
import keyword

import numpy as np

from unigraph.loop_guard import find_loop_guard
from unigraph.ops import OPS
from unigraph.reference.error_state import STATE, ignoring, last_ignoring
from unigraph.reference.fast_kernels import ARITHMETIC_UFUNCS, OPERATORS, UNARY_UFUNCS, kernel

__all__ = ["generate", "keyword_call"]

_MAY_OVERFLOW = {"add", "sub", "mul"}


class _Writer:
    """Writes one plan's code; nested plans are written inline with their own prefix."""

    def __init__(self, reusable=frozenset()):
        self.reusable = reusable  # top-level slots an op may write its result into
        self.clobbered: set = set()  # those written into: None in the returned list
        self.root = None  # the plan being generated (its top level may reuse)
        # Per top-level step of `root`, the slots dead after it (`Plan._dead_after`), when
        # the caller reads only the outputs and `keep`: their locals are deleted there
        self.dead: list | None = None
        self.arrays_made: set = set()  # `root`'s slots of values of one dim or more
        self.scope: dict = {"A": np.asarray}
        self.lines: list = []
        self.count = 0
        self.overflow_guard = False
        self.ignoring = False  # inside a loop run whole with integer overflow ignored
        self.arrays: dict = {}  # a 0-d value's scalar name -> the name of its array form
        # Names whose value is a NumPy scalar or an array that no feed, parameter or
        # constant shares: operator results, the scalar forms of 0-d inputs and constants
        # (`A()` of a NumPy scalar is a new array), and values carried or chosen only from
        # such names (see `unshared_array`).
        self.unshared: set = set()

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def bind(self, value, stem: str) -> str:
        """A global name for `value` (a function, a constant) in the generated code."""
        name = self.fresh(stem)
        self.scope[name] = value
        return name

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def plan(self, plan, names: dict, scalars: set, depth: int, skip=()) -> list:
        """Write `plan`'s steps, but not those of the nodes in `skip` (a loop guard's, see
        `_loop_guard`); `names` maps its input slots to expressions (and receives every
        slot it defines); returns the expressions of its outputs."""
        from unigraph.reference.plan import CondStep, GradStep, OpStep, WhileStep

        prefix = self.fresh("p") + "_"
        dead = self.dead if plan is self.root and depth == 1 else None
        for index, (node, step) in enumerate(zip(plan.graph.nodes, plan.steps)):
            if dead is not None and index:
                self.release(dead[index - 1], names, prefix, depth)
            if node in skip:
                names.update(dict.fromkeys(step.outs))  # (read by no step that is written)
                continue
            if type(step) is OpStep:
                self.op(plan, node, step, names, scalars, depth, prefix)
            elif type(step) is CondStep:
                self.cond(step, names, scalars, depth, prefix)
            elif type(step) is WhileStep:
                self.while_loop(step, names, scalars, depth, prefix)
            elif type(step) is GradStep:
                fn = self.bind(step.runner(), "g")
                outs = [f"{prefix}v{slot}" for slot in step.outs]
                args = ", ".join(self.array(names[s], scalars) for s in step.operands)
                self.emit(depth, f"{', '.join(outs)}, = {fn}([{args}])" if outs
                          else f"{fn}([{args}])")
                names.update(zip(step.outs, outs))
            else:
                raise TypeError(f"no code for step {type(step).__name__}")
        return [names[slot] for slot in plan.output_slots]

    def release(self, slots, names: dict, prefix: str, depth: int) -> None:
        """`del` the locals of `slots` (dead: read by no later step, not returned), so that
        their arrays are freed where the step walk drops them and not when the function
        returns: the allocator hands a freed buffer to the next array of its size, where
        arrays all freed at once at the end would be given back to the system and every
        large array of the next call would fault its pages in again. (0-d values, which
        hold no large buffer, are left to the return.)"""
        local = [names[slot] for slot in slots
                 if names.get(slot) == f"{prefix}v{slot}" and slot in self.arrays_made]
        if local:
            self.emit(depth, f"del {', '.join(local)}")

    def array(self, expr: str, scalars: set) -> str:
        """`expr` as an array: what every op but the operators is given."""
        if expr in self.arrays:
            return self.arrays[expr]
        return f"A({expr})" if expr in scalars else expr

    def unshared_array(self, expr: str) -> bool:
        """Whether `array(expr)` is an array that no feed, parameter or constant shares."""
        return expr not in self.arrays and expr in self.unshared

    def scalar_form(self, array_expr: str, scalar_expr: str, scalars: set) -> str:
        """Register `scalar_expr` as the scalar form of the 0-d `array_expr`."""
        self.arrays[scalar_expr] = array_expr
        scalars.add(scalar_expr)
        self.unshared.add(scalar_expr)  # a NumPy scalar
        return scalar_expr

    def op(self, plan, node, step, names, scalars, depth, prefix):
        if step.op.name == "constant":
            value = plan.template[step.out]
            names[step.out] = self.bind(value, "c")
            if type(value) is np.ndarray and value.ndim == 0:
                # operators take NumPy scalars fastest (0-d array + scalar is a ufunc call)
                names[step.out] = self.scalar_form(
                    names[step.out], self.bind(value[()], "k"), scalars)
            return
        out = f"{prefix}v{step.out}"
        names[step.out] = out
        if (step.op.name == "cast" and plan.fast and step.op is OPS["cast"]
                and names[step.ins[0]] in scalars and node.inputs[0].shape == ()
                and _scalar_cast(node.inputs[0].dtype, step.attrs["dtype"])):
            # The record's `x.astype(dtype)` on the NumPy scalar itself (NumPy's scalars
            # have it too: the same cast, without making an array first): a loop's flag,
            # Adam's bias corrections (float64 -> the parameter's float)
            kind = np.dtype(node.inputs[0].dtype).kind
            if kind == "f":
                # a float's conversion by the scalar type, ~0.6 us (astype: ~1.3 us)
                convert = self.bind(np.dtype(step.attrs["dtype"]).type, "d")
                self.emit(depth, f"{out} = {convert}({names[step.ins[0]]})")
            elif kind == "b":
                # a bool has two casts, made once: the loop guard's flag (astype: ~6k
                # instructions, a choice ~0.3k; NumPy scalars are immutable, so shared)
                scalar = np.dtype(step.attrs["dtype"]).type
                one, zero = (self.bind(scalar(number), "k") for number in (1, 0))
                self.emit(depth, f"{out} = {one} if {names[step.ins[0]]} else {zero}")
            else:
                dtype = self.bind(np.dtype(step.attrs["dtype"]), "d")
                self.emit(depth, f"{out} = {names[step.ins[0]]}.astype({dtype})")
            scalars.add(out)
            self.unshared.add(out)
            return
        fast = kernel(step.op.name, step.op) if plan.fast else None
        operator = getattr(fast, "operator", None)
        if operator is not None and self.reused_operand(plan, node, step, depth) is not None:
            operator = None  # written into its dead operand below
        if operator is not None:
            kind = np.dtype(node.inputs[0].dtype).kind
            x, y = (names[s] for s in step.ins)
            if kind in "iu" and step.op.name in _MAY_OVERFLOW and self.ignoring:
                self.emit(depth, f"{out} = {x} {operator} {y}")  # (the loop ignores it)
            elif kind in "iu" and step.op.name in _MAY_OVERFLOW:
                if STATE is None:
                    operator = None
                else:
                    self.overflow_guard = True
                    if self.lines and self.lines[-1] == "    " * depth + "RESET(t)":
                        self.lines.pop()  # the previous line was one too: one guard for both
                    else:
                        self.emit(depth, "t = SET(IGNORE)")
                    self.emit(depth, f"{out} = {x} {operator} {y}")
                    self.emit(depth, "RESET(t)")
            elif kind != "b" or step.op.name not in _MAY_OVERFLOW:
                self.emit(depth, f"{out} = {x} {operator} {y}")
            else:
                operator = None  # bool + bool: keep the ufunc's exact rule
            if operator is not None:
                scalars.add(out)
                self.unshared.add(out)
                return
        target = self.reused_operand(plan, node, step, depth)
        if target is not None:
            ufunc = self.bind(_inplace_ufunc(plan, step), "u")
            operands = "".join(f"{names[s]}, " for s in step.ins)
            self.emit(depth, f"{out} = {ufunc}({operands}out={names[target]})")
            self.clobbered.add(target)
            scalars.discard(out)
            # the operand's array: a fresh result of an elementwise op or matmul (`_reusable`)
            self.unshared.add(out)
            return
        args = ", ".join(self.array(names[s], scalars) for s in step.ins)
        self.emit(depth, f"{out} = {keyword_call(step.fn, args, self.bind)}")

    def reused_operand(self, plan, node, step, depth):
        """The operand slot this top-level elementwise op may write its result into, or
        None (see the module docstring)."""
        if plan is not self.root or depth != 1 or _inplace_ufunc(plan, step) is None:
            return None
        result = node.outputs[0]
        if any(value.dtype != result.dtype for value in node.inputs):
            return None
        for slot, value in zip(step.ins, node.inputs):
            if (slot in self.reusable and slot not in self.clobbered
                    and tuple(value.shape) == tuple(result.shape)):
                return slot
        return None

    def cond(self, step, names, scalars, depth, prefix):
        outs = [f"{prefix}v{slot}" for slot in step.outs]
        sources: list = []  # each branch's result names
        self.emit(depth, f"if {names[step.pred]}:")
        for index, branch in enumerate(step.branches):
            if index == 1:
                self.emit(depth, "else:")
            start = len(self.lines)
            inner = dict(zip(branch.input_slots, (names[s] for s in step.operands)))
            results = self.plan(branch, inner, scalars, depth + 1)
            for out, result in zip(outs, results):
                self.emit(depth + 1, f"{out} = {result}")
            if len(self.lines) == start:
                self.emit(depth + 1, "pass")
            sources.append(results)
        names.update(zip(step.outs, outs))
        scalars.update(outs)
        self.unshared.update(out for out, *chosen in zip(outs, *sources)
                             if all(name in self.unshared for name in chosen))

    def while_loop(self, step, names, scalars, depth, prefix):
        """A Python `while`. The iteration guard of a traced loop (see `_loop_guard`) is a
        Python int, made the graph's int64 scalar after the loop; a loop of integer and
        bool operators only runs whole with integer overflow ignored (one error-state
        switch, not one per iteration: nothing in it can overflow but those operators)."""
        guard = _loop_guard(step, [names[s] for s in step.ins], self.scope)
        carried = [self.fresh(f"{prefix}c") for _ in step.carried]
        captured = [names[s] for s in step.captured]
        state = carried[:-1] if guard else carried
        for name, slot in zip(state, step.carried):
            self.emit(depth, f"{name} = {names[slot]}")
        scalars.update(carried)
        # A carried value is unshared when its start and every new value are (see below)
        starts = [names[slot] in self.unshared for slot in step.carried]
        ignore = (STATE is not None and not self.ignoring
                  and _only_integer_operators(step))
        if ignore:
            self.overflow_guard = self.ignoring = True
            token = self.fresh("t")
            self.emit(depth, f"{token} = SET(IGNORE)")
            self.emit(depth, "try:")
            depth += 1
        if guard:
            # The counter is the for loop's: an iteration past the limit ends it (the
            # condition not asked again: the call raises the limit's error)
            self.emit(depth, f"for {carried[-1]} in range({guard.limit + 1}):")
        else:
            self.emit(depth, "while True:")
        inner = dict(zip(step.cond.input_slots, carried + captured))
        if guard:
            self.plan(step.cond, inner, scalars, depth + 1, guard.cond_nodes)
            keep_going = inner[guard.cond_slot]
        else:
            (keep_going,) = self.plan(step.cond, inner, scalars, depth + 1)
        self.emit(depth + 1, f"if not {keep_going}:")
        self.emit(depth + 2, "break")
        inner = dict(zip(step.body.input_slots, carried + captured))
        results = self.plan(step.body, inner, scalars, depth + 1,
                            guard.body_nodes if guard else ())
        if guard:
            results = results[:-1]
        if state:
            self.emit(depth + 1, f"{', '.join(state)}, = {', '.join(results)},")
        if guard:
            self.emit(depth, "else:")  # (no break: every iteration ran, one past the limit)
            self.emit(depth + 1, f"{carried[-1]} = {guard.limit + 1}")
            # the int64 scalar the graph's counter was (int64 0 plus the Python int: the
            # same scalar, ~0.6k instructions where np.int64() takes ~2.6k)
            zero = self.bind(np.int64(0), "i")
            self.emit(depth, f"{carried[-1]} = {zero} + {carried[-1]}")
        if ignore:
            self.emit(depth - 1, "finally:")
            self.emit(depth, f"RESET({token})")
            self.ignoring = False
            depth -= 1
        outs = [f"{prefix}v{slot}" for slot in step.outs]
        for out, name in zip(outs, carried):
            self.emit(depth, f"{out} = {name}")
        names.update(zip(step.outs, outs))
        scalars.update(outs)
        # (the guard's counter ends as a new NumPy scalar)
        self.unshared.update(out for out, start, new in zip(outs, starts, results)
                             if start and new in self.unshared)
        if guard:
            self.unshared.add(outs[-1])


def keyword_call(fn, args: str, bind) -> str:
    """The code of the call `fn(args)` (`args`: the positional arguments' code), `fn` bound
    by `bind(value, stem) -> name`. A `functools.partial` holding only keywords (an op
    step's attrs, `OpStep.fn`; a VJP rule's) is written as its function called with them
    as keyword arguments, each value bound as it is: the same function, arguments and
    objects, where the partial's merge of its keywords into a new dict costs ~150 ns a
    call more."""
    if (type(fn) is functools.partial and not fn.args and fn.keywords
            and all(name.isidentifier() and not keyword.iskeyword(name)
                    for name in fn.keywords)):
        parts = [args] if args else []
        parts += [f"{name}={bind(value, 'a')}" for name, value in fn.keywords.items()]
        return f"{bind(fn.func, 'f')}({', '.join(parts)})"
    return f"{bind(fn, 'f')}({args})"


def _scalar_cast(source, dtype) -> bool:
    """Whether a NumPy scalar's `astype(dtype)` (from an integer or bool, to any dtype) or
    float type (`np.float32(x)`, from a float to a float: rounding to the nearest, overflow
    to inf with the same warning) is the cast the record makes of a 0-d array."""
    kind = np.dtype(source).kind
    return kind in "biu" or (kind == "f" and np.dtype(dtype).kind == "f")


class _Guard:
    """A traced loop's iteration guard (see `_loop_guard`): the nodes that make it in the
    condition and the body, the condition's slot of the user's own predicate, the limit."""

    __slots__ = ("cond_nodes", "body_nodes", "cond_slot", "limit")

    def __init__(self, cond_nodes, body_nodes, cond_slot, limit):
        self.cond_nodes, self.body_nodes = cond_nodes, body_nodes
        self.cond_slot, self.limit = cond_slot, limit


def _registered(plan, node, name: str) -> bool:
    """Whether `node` is op `name` run by its registered record's fast kernel."""
    step = plan.steps[plan.graph.nodes.index(node)]
    return node.op == name and plan.fast and kernel(name, step.op) is not None


def _loop_guard(step, operands: list, scope: dict):
    """The iteration counter `control_flow._traced_while` adds to a loop, when WhileStep
    `step` has exactly its shape (`unigraph.loop_guard.find_loop_guard`) and its ops run
    by their registered records' kernels, else None. `operands`: the expressions of the
    step's inputs; `scope`: the generated code's globals, where constants are bound (0,
    the limit and 1 are int64 constants there). Torch's generated loop keeps the same
    counter as a Python int (`unigraph_torch.loop_guard`)."""

    def constant_at(position):
        number = scope.get(operands[position])
        return int(number) if type(number) is np.int64 else None

    found = find_loop_guard(step.cond.graph, step.body.graph, len(step.carried), constant_at)
    if found is None or not (_registered(step.cond, found.compare, "less_equal")
                             and _registered(step.cond, found.join, "logical_and")
                             and _registered(step.body, found.step, "add")):
        return None
    return _Guard({found.compare, found.join}, {found.step},
                  step.cond.slots[found.join.inputs[0].id], found.limit)


def _only_integer_operators(step) -> bool:
    """Whether every op of WhileStep `step` (its condition and body, nested ones included)
    is a constant or an operator (`OPERATORS`, not `/`) on integer or bool operands, run by
    its registered record's kernel: then integer overflow is the only overflow it can have."""
    from unigraph.reference.plan import CondStep, OpStep, WhileStep

    def fits(plan) -> bool:
        for node, inner in zip(plan.graph.nodes, plan.steps):
            if type(inner) is OpStep:
                name = node.op
                if name == "constant":
                    continue
                if name not in OPERATORS or name == "div" or not plan.fast or \
                        kernel(name, inner.op) is None or \
                        any(np.dtype(v.dtype).kind not in "biu" for v in node.inputs):
                    return False
            elif type(inner) is CondStep:
                if not all(fits(branch) for branch in inner.branches):
                    return False
            elif type(inner) is not WhileStep or not (fits(inner.cond) and fits(inner.body)):
                return False
        return True

    return fits(step.cond) and fits(step.body)


def _inplace_ufunc(plan, step):
    """The ufunc that computes OpStep `step`'s record exactly and may write its result into
    an operand of the result's dtype (`ufunc(x, y, out=x)`, `ufunc(x, out=x)`: the same
    numbers), or None: an elementwise binary op run by its fast kernel, or an elementwise
    unary op of `UNARY_UFUNCS` whose record is the registered one."""
    name = getattr(getattr(step, "op", None), "name", None)
    if not plan.fast:
        return None
    if name in ARITHMETIC_UFUNCS:
        return ARITHMETIC_UFUNCS[name] if kernel(name, step.op) is not None else None
    if name in UNARY_UFUNCS and OPS.get(name) is step.op:
        return UNARY_UFUNCS[name]
    return None


# The top-level ops whose results are fresh arrays an elementwise op may write into: those
# elementwise ops themselves and matmul.
_FRESH = {*ARITHMETIC_UFUNCS, *UNARY_UFUNCS, "matmul"}


def _reusable(plan, keep) -> frozenset:
    """Top-level slots made by an op of `_FRESH` with a fast kernel, of a known non-0-d
    shape (so an ndarray, never a NumPy scalar), read by exactly one top-level step and
    neither an output nor in `keep`."""
    reads: dict = {}
    for step in plan.steps:
        for slot in step.ins:
            reads[slot] = reads.get(slot, 0) + 1
    kept = {*plan.output_slots, *keep}
    found = set()
    for node, step in zip(plan.graph.nodes, plan.steps):
        name = getattr(getattr(step, "op", None), "name", None)
        if name not in _FRESH or (_inplace_ufunc(plan, step) is None
                                  and (not plan.fast or kernel(name, step.op) is None)):
            continue
        shape = tuple(node.outputs[0].shape)
        if (shape and None not in shape and reads.get(step.out) == 1
                and step.out not in kept):
            found.add(step.out)
    return frozenset(found)


def generate(plan, keep=None, values=None):
    """`plan.forward(inputs, record=False)`'s work as one function `run(env) -> env`: `env`
    is a fresh copy of the plan's template with the inputs in place; the returned list holds
    every slot's value (arrays, as the steps would have left them); with `keep` (a
    frozenset of slots) only the outputs and those are read, and an op may write into a
    dead operand (its slot None). None when Python cannot compile the code (more than 20
    nested loops): the caller keeps its step loop.

    With `values` (a tuple of slots, each an output or in `keep`), the function is
    `run(*inputs) -> [the value of each slot of values]`, `inputs` the plan's inputs then
    its params (no env); its `unshared` attribute holds, per slot of `values`, whether that
    array is one no input or constant shares (made by the run, so never a caller's)."""
    if len(plan.steps) != len(plan.graph.nodes):
        return None  # a step per node is what lets the writer read each node's dtypes
    writer = _Writer(_reusable(plan, keep) if keep is not None else frozenset())
    writer.root = plan
    if keep is not None:
        writer.dead = plan._dead_after(keep)
        writer.arrays_made = {plan.slots[value.id] for node in plan.graph.nodes
                              for value in node.outputs if len(value.shape)}
    names = {slot: f"v{slot}" for slot in plan.input_slots}
    scalars: set = set()
    if values is None:
        header = ["def run(env):"]
        header += [f"    v{slot} = env[{slot}]" for slot in plan.input_slots]
    else:
        # (the inputs as parameters: a caller's call builds no list, the function
        # unpacks none)
        header = [f"def run({', '.join(f'v{slot}' for slot in plan.input_slots)}):"]
    for slot, value in zip(plan.input_slots, [*plan.graph.inputs, *plan.graph.params]):
        if tuple(value.shape) == ():  # fed as a 0-d array: its scalar for the operators
            header.append(f"    v{slot}s = v{slot}[()]")
            names[slot] = writer.scalar_form(f"v{slot}", f"v{slot}s", scalars)
    writer.plan(plan, names, scalars, 1)
    body = writer.lines
    if writer.overflow_guard:
        writer.scope.update(SET=STATE.set, RESET=STATE.reset, IGNORING=ignoring,
                            GET=STATE.get, LAST=last_ignoring("over"))
        # `ignoring('over')`, read from its last answer while the state is the same
        header += ["    m = LAST[0]",
                   "    IGNORE = m[1] if GET() is m[0] else IGNORING('over')"]
    if values is not None:
        returned = ", ".join(writer.array(names[slot], scalars) for slot in values)
    else:
        # With `keep`, the caller reads only the outputs and those: the others are None
        # (no array made of a scalar nobody reads)
        read = None if keep is None else {*plan.output_slots, *keep}
        returned = ", ".join(
            "None" if slot in writer.clobbered or (read is not None and slot not in read)
            else writer.array(names[slot], scalars) for slot in range(plan.size))
    source = "\n".join([*header, *body, f"    return [{returned}]"])
    try:
        code = compile(source, f"<unigraph plan of {plan.graph.name}>", "exec")
    except (SyntaxError, RecursionError, MemoryError):
        return None
    exec(code, writer.scope)
    run = writer.scope["run"]
    if values is not None:
        run.unshared = tuple(writer.unshared_array(names[slot]) for slot in values)
    return run
