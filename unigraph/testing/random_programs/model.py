"""A random program as data: statements over named tensors, rendered as Python source.

A `Program` is a list of statements (`Assign`, `Branch`, `Loop`, `Call`; the last three
hold nested `Block`s) over float inputs. `render(program)` writes it as a standalone
script that uses only `import numpy as np` and `import unigraph as ug`: the `@ug.function
program`, the `grad_program` that differentiates a weighted sum of its float outputs, the
input arrays, and a `__main__` that prints every target's answer next to the float64 reference. The
tester runs exactly that source, so a printed reproducer is what failed.

Statements the outputs do not need are left out when rendering (hypothesis shrinks the
choices that built the program; dead code removal makes the printed program minimal too).
"""

from __future__ import annotations

import dataclasses
import hashlib
import linecache
from dataclasses import dataclass

import numpy as np

INDENT = "    "


@dataclass(frozen=True)
class Var:
    """A named tensor of the program. dtype "float" is the program's float dtype."""

    name: str
    shape: tuple
    dtype: str = "float"

    @property
    def is_float(self) -> bool:
        return self.dtype == "float"


@dataclass
class Assign:
    """`out = expr`, one line; `uses` names every variable the expression reads."""

    out: Var
    expr: str
    uses: tuple


@dataclass
class Block:
    """Statements, then a result expression (a branch's return value, a loop body's)."""

    stmts: list
    result: str
    result_uses: tuple


@dataclass
class Branch:
    """`out = ug.cond(pred, then, else)` (style "cond", nested defs) or a Python `if`
    converted by autograph (style "if")."""

    out: Var
    pred: str
    pred_uses: tuple
    then: Block
    orelse: Block
    style: str
    tag: int
    # "tuple" or "dict" (style "cond" only): each branch returns two values, its block's
    # result `(a, b)` or `{"a": a, "b": b}`, and `out` is `a + 0.5 * b`
    pack: str = ""


@dataclass
class Loop:
    """`out` starts as `init`, and `body` runs `trips` times on it (while `extra`, a
    predicate on the carried value, also holds): `ug.while_loop` (style "while_loop") or a
    Python `while` converted by autograph (style "while"). The body's carried value is
    `param` (style "while_loop") or `out` itself (style "while")."""

    out: Var
    init: str
    param: Var
    trips: int
    body: Block
    style: str
    tag: int
    extra: str = ""  # e.g. "ug.sum({v}) < 40.0": {v} is the carried value
    # "dict" (style "while_loop" only): the loop carries {"v": value, "acc": sum}, where
    # "acc" starts as init * 0.5 and adds `param` each trip; `out` is their sum
    carry: str = ""
    # A converted `for` (styles "for_range": `range(trips)`, "for_ug_range":
    # `ug.range(ug.tensor(trips))`, "for_rows": the rows of `over`, each bound to `row`):
    # the body's carried value is `out`; `exit` ("break" or "continue") runs at the top of
    # the body where `exit_test` ({v}: the carried value) holds; with `indexed`, the body's
    # result adds 0.25 times the loop index (a Python int, or a weak int tensor).
    over: str = ""
    row: Var | None = None
    exit: str = ""
    exit_test: str = ""
    indexed: bool = False


@dataclass
class Call:
    """`out = fn_{tag}(*args)`: the program calls a helper `@ug.function` (or, `plain`, a
    plain function `helper_{tag}`), defined at module level, whose parameters are `params`
    (one per name of `args`, in order) and whose body reads nothing else."""

    out: Var
    args: tuple
    params: tuple
    body: Block
    tag: int
    # A plain Python function (not `@ug.function`), named `helper_{tag}`: autograph
    # converts it where converted code calls it (`autograph.calls`), so a tensor `if` or
    # `while` in its body is graph control flow on static targets.
    plain: bool = False

    @property
    def function(self) -> str:
        return f"helper_{self.tag}" if self.plain else f"fn_{self.tag}"


@dataclass
class Input:
    """A float input: values drawn by NumPy from `seed`, rounded to 3 decimals (short
    reproducers), kept 0.01 apart and away from 0 by construction where `kind` says so.
    `open` names the axes the program's input_spec leaves open (None): static targets
    trace with those sizes unknown until the run."""

    var: Var
    seed: int
    kind: str = "normal"  # normal | positive
    open: tuple = ()

    @property
    def spec_shape(self) -> tuple:
        return tuple(None if axis in self.open else d for axis, d in enumerate(self.var.shape))

    def values(self) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        size = int(np.prod(self.var.shape, dtype=np.int64))
        if self.kind == "positive":
            flat = rng.uniform(0.5, 2.0, size)
        else:
            # Distinct magnitudes in [0.05, 2], random signs: no ties, no zeros.
            grid = rng.permutation(np.arange(5, 201))[:size] if size <= 196 else \
                rng.integers(5, 201, size)
            flat = grid / 100.0 * rng.choice([-1.0, 1.0], size) + rng.uniform(-4e-3, 4e-3, size)
        return np.round(flat, 3).reshape(self.var.shape)


@dataclass
class Program:
    """A random program: float inputs, statements, the names it returns, and the seed of
    the `ug.random.seeded` block each call runs in (None: `ug.manual_seed` before it)."""

    dtype: str
    inputs: list
    stmts: list
    outputs: list
    grad_form: str = "grad"  # grad_program's: "grad", or "value_and_grad" (the loss first)
    seeded: int | None = None
    result: str = "tuple"  # what `program` returns: "tuple", or "dict" (name -> value)

    def needed(self) -> tuple[list, list]:
        """(statements, inputs) the outputs depend on, in order."""
        stmts, used = prune(self.stmts, set(self.outputs))
        return stmts, [i for i in self.inputs if i.var.name in used]

    def arrays(self, dtype: str | None = None) -> list:
        """The input arrays the program is called with, in `dtype` (default: its own)."""
        dtype = dtype or self.dtype
        return [i.values().astype(self.dtype).astype(dtype) for i in self.needed()[1]]

    @property
    def float_outputs(self) -> list:
        return [name for name in self.outputs if name in self.float_names()]

    def float_names(self) -> set:
        names = {i.var.name for i in self.inputs}
        for stmt in walk(self.stmts):
            if stmt.out.is_float:
                names.add(stmt.out.name)
        return names

    def size(self) -> int:
        """Statements the rendered program holds (nested ones included)."""
        return sum(1 for _ in walk(self.needed()[0]))

    @property
    def is_open(self) -> bool:
        """Whether its input_spec leaves a dim of an input it uses open."""
        return any(i.open for i in self.needed()[1])

    def closed(self) -> Program:
        """The same program traced with every dim known (no input_spec)."""
        inputs = [dataclasses.replace(i, open=()) for i in self.inputs]
        return dataclasses.replace(self, inputs=inputs)

    def shapes(self) -> dict:
        """name -> shape of every value (as run, every dim known)."""
        found = {i.var.name: i.var.shape for i in self.inputs}
        found.update((stmt.out.name, stmt.out.shape) for stmt in walk(self.stmts))
        return found


RANDOM_SEED = 0  # every call of a program starts unigraph's generator here


def call_seeded(function, inputs: list, seeded: int | None = None):
    """`function(*inputs)` with unigraph's generator restarted from `RANDOM_SEED`, so a
    program's `ug.random` draws are the same numbers on every target and in the reference
    (a traced function may not seed: the caller does); with `seeded`, inside
    `ug.random.seeded(seeded)` after that, so every draw must come from the block's
    generator, not the one the process seed starts (a rendered program names its block's
    seed `SEEDED`)."""
    from unigraph.random import manual_seed
    from unigraph.random import seeded as seeded_block

    manual_seed(RANDOM_SEED)
    if seeded is None:
        return function(*inputs)
    with seeded_block(seeded):
        return function(*inputs)


def walk(stmts):
    """Every statement, nested blocks included."""
    for stmt in stmts:
        yield stmt
        if isinstance(stmt, Branch):
            yield from walk(stmt.then.stmts)
            yield from walk(stmt.orelse.stmts)
        elif isinstance(stmt, (Loop, Call)):
            yield from walk(stmt.body.stmts)


def reads(stmt) -> set:
    """Names a statement reads from the scope around it (after pruning its blocks)."""
    if isinstance(stmt, Assign):
        return set(stmt.uses)
    if isinstance(stmt, Branch):
        return set(stmt.pred_uses) | _blockreads(stmt.then) | _blockreads(stmt.orelse)
    if isinstance(stmt, Call):  # every argument is passed, used or not
        return set(stmt.args)
    # The extra predicate and a `for`'s exit test read only the carried value.
    own = {stmt.param.name, stmt.out.name} | ({stmt.row.name} if stmt.row else set())
    return {stmt.init} | ({stmt.over} if stmt.over else set()) | (_blockreads(stmt.body) - own)


def _blockreads(block: Block) -> set:
    stmts, used = prune(block.stmts, set(block.result_uses))
    defined = {s.out.name for s in stmts}
    return used - defined


def prune(stmts: list, wanted: set) -> tuple[list, set]:
    """(the statements `wanted` depends on, every name read or wanted)."""
    kept = []
    needed = set(wanted)
    for stmt in reversed(stmts):
        if stmt.out.name in needed:
            kept.append(_pruned(stmt))
            needed |= reads(stmt)
    return kept[::-1], needed


def _pruned(stmt):
    if isinstance(stmt, Branch):
        return Branch(stmt.out, stmt.pred, stmt.pred_uses, _prune_block(stmt.then),
                      _prune_block(stmt.orelse), stmt.style, stmt.tag, stmt.pack)
    if isinstance(stmt, Loop):
        return dataclasses.replace(stmt, body=_prune_block(stmt.body))
    if isinstance(stmt, Call):
        return dataclasses.replace(stmt, body=_prune_block(stmt.body))
    return stmt


def _prune_block(block: Block) -> Block:
    stmts, _ = prune(block.stmts, set(block.result_uses))
    return Block(stmts, block.result, block.result_uses)


# -- rendering -------------------------------------------------------------------------------
def _lines(stmt, depth: int) -> list:
    pad = INDENT * depth
    if isinstance(stmt, Assign):
        return [f"{pad}{stmt.out.name} = {stmt.expr}"]
    if isinstance(stmt, Branch):
        return _branch_lines(stmt, depth)
    if isinstance(stmt, Call):
        return [f"{pad}{stmt.out.name} = {stmt.function}({', '.join(stmt.args)})"]
    return _loop_lines(stmt, depth)


def _helpers(stmts) -> list:
    """The module-level helpers the program's `Call`s name (`@ug.function`s, or plain
    functions), each followed by two blank lines."""
    lines = []
    for stmt in walk(stmts):
        if isinstance(stmt, Call):
            params = ", ".join(p.name for p in stmt.params)
            lines += ([] if stmt.plain else ["@ug.function"]) + [
                f"def {stmt.function}({params}):"]
            lines += _block_lines(stmt.body, 1, "return ") + ["", ""]
    return lines


def _block_lines(block: Block, depth: int, last: str) -> list:
    lines = []
    for stmt in block.stmts:
        lines += _lines(stmt, depth)
    return lines + [f"{INDENT * depth}{last}{block.result}"]


def _branch_lines(stmt: Branch, depth: int) -> list:
    pad = INDENT * depth
    if stmt.style == "if":
        return ([f"{pad}if {stmt.pred}:"]
                + _block_lines(stmt.then, depth + 1, f"{stmt.out.name} = ")
                + [f"{pad}else:"]
                + _block_lines(stmt.orelse, depth + 1, f"{stmt.out.name} = "))
    then, orelse = f"then_{stmt.tag}", f"else_{stmt.tag}"
    lines = ([f"{pad}def {then}():"] + _block_lines(stmt.then, depth + 1, "return ")
             + [f"{pad}def {orelse}():"] + _block_lines(stmt.orelse, depth + 1, "return "))
    if not stmt.pack:
        return lines + [f"{pad}{stmt.out.name} = ug.cond({stmt.pred}, {then}, {orelse})"]
    # Each block's result is a pair: (a, b) or {"a": a, "b": b} (see `Branch.pack`).
    pair = f"pair_{stmt.tag}"
    a, b = (f"{pair}[0]", f"{pair}[1]") if stmt.pack == "tuple" else (
        f'{pair}["a"]', f'{pair}["b"]')
    return lines + [f"{pad}{pair} = ug.cond({stmt.pred}, {then}, {orelse})",
                    f"{pad}{stmt.out.name} = {a} + 0.5 * {b}"]


def _loop_lines(stmt: Loop, depth: int) -> list:
    pad, inner = INDENT * depth, INDENT * (depth + 1)
    counter = f"k{stmt.tag}"
    if stmt.style.startswith("for_"):
        return _for_lines(stmt, depth)
    if stmt.style == "while":
        carried = stmt.out.name
        test = f"{counter} < {stmt.trips}"
        if stmt.extra:
            test += " and " + stmt.extra.format(v=carried)
        return ([f"{pad}{carried} = {stmt.init}", f"{pad}{counter} = ug.tensor(0)",
                 f"{pad}while {test}:"]
                + _block_lines(stmt.body, depth + 1, f"{carried} = ")
                + [f"{inner}{counter} = {counter} + 1"])
    if stmt.carry == "dict":
        return _dict_loop_lines(stmt, depth)
    carried = stmt.param.name
    test = f"{counter} < {stmt.trips}"
    if stmt.extra:
        test = f"ug.logical_and({test}, {stmt.extra.format(v=carried)})"
    return ([f"{pad}def cond_{stmt.tag}({counter}, {carried}):", f"{inner}return {test}",
             f"{pad}def body_{stmt.tag}({counter}, {carried}):"]
            + _block_lines(stmt.body, depth + 1, f"return {counter} + 1, ")
            + [f"{pad}_, {stmt.out.name} = ug.while_loop(cond_{stmt.tag}, body_{stmt.tag}, "
               f"(ug.tensor(0), {stmt.init}))"])


def _for_lines(stmt: Loop, depth: int) -> list:
    """A Python `for` that autograph converts (see `Loop.over`)."""
    pad, inner = INDENT * depth, INDENT * (depth + 1)
    carried, index = stmt.out.name, f"k{stmt.tag}"
    iterable = {"for_range": f"range({stmt.trips})",
                "for_ug_range": f"ug.range(ug.tensor({stmt.trips}))"}.get(stmt.style, stmt.over)
    if stmt.style == "for_rows":
        index = stmt.row.name
    lines = [f"{pad}{carried} = {stmt.init}", f"{pad}for {index} in {iterable}:"]
    if stmt.exit:
        lines += [f"{inner}if {stmt.exit_test.format(v=carried)}:", f"{inner}{INDENT}{stmt.exit}"]
    result = stmt.body.result + (f" + 0.25 * {index}" if stmt.indexed else "")
    return lines + _block_lines(Block(stmt.body.stmts, result, stmt.body.result_uses),
                                depth + 1, f"{carried} = ")


def _dict_loop_lines(stmt: Loop, depth: int) -> list:
    """A `ug.while_loop` carrying a dict (see `Loop.carry`)."""
    pad, inner = INDENT * depth, INDENT * (depth + 1)
    counter, state, param = f"k{stmt.tag}", f"s{stmt.tag}", stmt.param.name
    value, acc = f'{state}["v"]', f'{state}["acc"]'
    test = f"{counter} < {stmt.trips}"
    if stmt.extra:
        test = f"ug.logical_and({test}, {stmt.extra.format(v=value)})"
    body = [f"{inner}{param} = {value}"]
    for inner_stmt in stmt.body.stmts:
        body += _lines(inner_stmt, depth + 1)
    body.append(f'{inner}return {counter} + 1, {{"v": {stmt.body.result}, '
                f'"acc": {acc} + {param}}}')
    start = f'{{"v": {stmt.init}, "acc": {stmt.init} * 0.5}}'
    return ([f"{pad}def cond_{stmt.tag}({counter}, {state}):", f"{inner}return {test}",
             f"{pad}def body_{stmt.tag}({counter}, {state}):"] + body
            + [f"{pad}_, {state} = ug.while_loop(cond_{stmt.tag}, body_{stmt.tag}, "
               f"(ug.tensor(0), {start}))",
               f"{pad}{stmt.out.name} = {value} + {acc}"])


def _array_literal(array: np.ndarray, dtype: str) -> str:
    if array.size == 0:  # a list literal would lose the shape
        return f"np.zeros({array.shape!r}, dtype=np.{dtype})"
    return f"np.array({array.tolist()!r}, dtype=np.{dtype})"


HEADER = '''"""{title}"""
import numpy as np
import unigraph as ug

'''

LOSS = '''

def weights(t):
    """Fixed weights for the loss: a plain sum would hide errors (sum(softmax(x)) is 1)."""
    n = int(np.prod(t.shape))
    return np.cos(np.arange(n) + 0.5).reshape(t.shape).astype(t.dtype)


def loss({args}):
    outputs = program({args})
    return {loss}


@ug.function
def grad_program({args}):
{grad_body}
'''

MAIN = '''

if __name__ == "__main__":
    reference = [x.astype(np.float64) for x in inputs]  # numpy:eager in float64{build}
    with ug.use_backend("numpy", "eager"):
        ug.manual_seed({seed})  # each call draws the same ug.random numbers
        {within}print("reference", [o.numpy() for o in {reference_program}(*reference){values}])
        {ref_grad}
    for target in {targets!r}:
        backend, mode = target.split(":")
        with ug.use_backend(backend, mode):
            ug.manual_seed({seed})
            {within}print(target, [o.numpy() for o in program(*inputs){values}])
            {target_grad}
'''


OPEN_LOSS = '''

def weights(shape, dtype):
    """Fixed weights for the loss, of an output's shape as it runs (the trace may not know
    it): a plain sum would hide errors (sum(softmax(x)) is 1)."""
    n = int(np.prod(shape))
    return np.cos(np.arange(n) + 0.5).reshape(shape).astype(dtype)


def build(dtype):
    """(program, grad_program) in `dtype`. input_spec leaves the None dims open: static
    targets trace with those sizes unknown until the run; eager ones check the call."""
'''

def _grad_body(program: Program, args: str, argnums: str, pad: str) -> str:
    """grad_program's body: the gradients of `loss` with respect to every input, after the
    loss itself where the program's `grad_form` is "value_and_grad"."""
    if program.grad_form == "value_and_grad":
        return (f"{pad}value, grads = ug.value_and_grad(loss, argnums={argnums})({args})\n"
                f"{pad}return (value, *grads)")
    return f"{pad}return ug.grad(loss, argnums={argnums})({args})"


def _returned(program: Program) -> str:
    """What `program` returns: a tuple of its outputs, or a dict of them by name."""
    if program.result == "dict":
        return "{" + ", ".join(f'"{name}": {name}' for name in program.outputs) + "}"
    return f"({', '.join(program.outputs)},)"


def results(value) -> list:
    """The tensors a program returned: a tuple's, or a dict's values in its order."""
    return list(value.values()) if isinstance(value, dict) else list(value)


def _output(program: Program, k: int) -> str:
    """The loss's expression for the program's `k`th output."""
    if program.result == "dict":
        return f'outputs["{program.outputs[k]}"]'
    return f"outputs[{k}]"


def _loss_terms(program: Program, float_outputs: list, weight) -> str:
    return " + ".join(f"ug.sum({_output(program, k)} * {weight(k)})" for k in float_outputs)


def _open_source(program: Program, title: str, stmts, inputs, float_outputs,
                 grads: bool) -> str:
    """The program inside `build(dtype)`, traced with its input_spec (see `render`)."""
    args = ", ".join(i.var.name for i in inputs)
    pad = INDENT
    specs = [f"ug.Spec({i.spec_shape!r}, dtype)" for i in inputs]
    spec = f"{pad}spec = [{', '.join(specs)}]"
    if len(spec) > 96:  # one per line
        spec = f"{pad}spec = [\n" + "".join(f"{pad * 2}{s},\n" for s in specs) + f"{pad}]"
    head = HEADER.format(title=title).rstrip("\n")
    helpers = _helpers(stmts)
    if helpers:
        head += "\n\n\n" + "\n".join(helpers).rstrip("\n")
    lines = [head + "\n" + OPEN_LOSS.rstrip("\n"),
             spec, "", f"{pad}@ug.function(input_spec=spec)",
             f"{pad}def program({args}):"]
    for stmt in stmts:
        lines += _lines(stmt, 2)
    lines.append(f"{pad * 2}return {_returned(program)}")
    grad = "None"
    if grads and float_outputs:
        shapes = program.shapes()
        terms = _loss_terms(program, float_outputs, lambda k: f"weights("
                            f"{shapes[program.outputs[k]]!r}, dtype)")
        argnums = "(" + "".join(f"{k}, " for k in range(len(inputs))) + ")"
        lines += ["", f"{pad}def loss({args}):", f"{pad * 2}outputs = program({args})",
                  f"{pad * 2}return {terms}", "", f"{pad}@ug.function(input_spec=spec)",
                  f"{pad}def grad_program({args}):",
                  _grad_body(program, args, argnums, pad * 2)]
        grad = "grad_program"
    lines += ["", f"{pad}return program, {grad}", "", "",
              f'program, grad_program = build("{program.dtype}")']
    return "\n".join(lines) + "\n"


def render(program: Program, title: str = "A random unigraph program.", targets=(),
           grads: bool = True) -> str:
    """The program as a standalone Python script (see the module docstring). A program
    whose input_spec leaves dims open (`Program.is_open`) is written inside
    `build(dtype)`, so that the float64 reference traces the same spec in float64. A
    training draw (`training.Training`) renders itself."""
    if not isinstance(program, Program):
        return program.render(title, targets, grads)
    stmts, inputs = program.needed()
    args = ", ".join(i.var.name for i in inputs)
    float_outputs = [k for k, name in enumerate(program.outputs)
                     if name in program.float_names()]
    is_open = program.is_open
    if is_open:
        source = _open_source(program, title, stmts, inputs, float_outputs, grads)
    else:
        lines = [HEADER.format(title=title).rstrip("\n"), "", ""] + _helpers(stmts)
        lines += ["@ug.function", f"def program({args}):"]
        for stmt in stmts:
            lines += _lines(stmt, 1)
        lines.append(f"{INDENT}return {_returned(program)}")
        source = "\n".join(lines) + "\n"
        if grads and inputs and float_outputs:
            terms = _loss_terms(program, float_outputs,
                                lambda k: f"weights({_output(program, k)})")
            argnums = "(" + "".join(f"{k}, " for k in range(len(inputs))) + ")"
            source += LOSS.format(args=args, loss=terms,
                                  grad_body=_grad_body(program, args, argnums, INDENT))
    # The 3-decimal values: np.array(0.123, np.float32) is the float32 the tester feeds.
    source += "\n\n" + "\n".join(f"{i.var.name} = {_array_literal(i.values(), program.dtype)}"
                                 for i in inputs)
    source += f"\ninputs = [{args}]\n" if inputs else "\ninputs = []\n"
    if program.seeded is not None:
        source += f"SEEDED = {program.seeded}  # each call runs in ug.random.seeded(SEEDED)\n"
    if targets:
        has_grad = grads and bool(inputs) and bool(float_outputs)  # (either form writes one)
        # An open program's float64 reference is build("float64")'s (the same spec)
        prefix = "reference_" if is_open else ""
        build = '\n    reference_program, reference_grad_program = build("float64")' \
            if is_open else ""
        seed = f"ug.manual_seed({RANDOM_SEED})\n        "
        within = "with ug.random.seeded(SEEDED): " if program.seeded is not None else ""
        ref_grad = (f'{seed}{within}print("reference grad", [g.numpy() for g in {prefix}'
                    'grad_program(*reference)])' if has_grad else "")
        target_grad = (f'{seed}    {within}print(target, "grad", [g.numpy() for g in '
                       'grad_program(*inputs)])' if has_grad else "")
        source += MAIN.format(targets=list(targets), seed=RANDOM_SEED, ref_grad=ref_grad,
                              target_grad=target_grad, build=build,
                              reference_program=f"{prefix}program", within=within,
                              values=".values()" if program.result == "dict" else "")
    return source


def load(source: str) -> dict:
    """Execute rendered source as a module whose lines `inspect` (autograph) and
    tracebacks can read; return its namespace. The file name is `random_program_<hash>.py`,
    which is what errors name as the user's file."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:10]
    filename = f"random_program_{digest}.py"
    # mtime None: linecache.checkcache keeps the entry though no such file exists.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": f"random_program_{digest}", "__file__": filename}
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def forget(namespace: dict) -> None:
    """Drop a loaded program's source from linecache (a long run loads thousands)."""
    linecache.cache.pop(namespace.get("__file__", ""), None)
