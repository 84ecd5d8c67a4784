"""`torch:static`: an IR graph compiled once into a Python function over torch ops.

`compile_graph` writes the source of one function, a line per node calling the lowering
table (bound as globals `op_<name>`), and `exec`s it. Nothing walks the IR per call.
Control flow becomes Python's own: `cond` an `if`, `while_loop` a `while`, both inlined
(subgraphs are closed, so their inputs are just the node's operands renamed). A `grad` node
runs its function under `torch.enable_grad()` on leaves made from the operands and calls
`torch.autograd.grad`; everything else then runs under `torch.no_grad()`. Where torch's own
modules make one call for two records (Linear's addmm, an SGD update in place), `run` makes
it too (`unigraph_torch.fusions`); a top-level loop's counter stays a Python int
(`loop_guard`). `every_value`, the checker's view, runs every record as it is.

    def run(P, a0, a1):
        i0 = a0 if type(a0) is Tensor else feed(a0)
        i1 = a1 if type(a1) is Tensor else feed(a1)
        p0 = P[0]
        t0, = i0,                 # while_loop(i0; captured i1): the state starts as i0
        while True:
            t1 = op_less(t0, i1)
            if not t1:
                break
            t2 = op_add(t0, k3)   # k3: a constant, converted at compile time
            t0, = t2,
        t4 = op_mul(t0, p0)
        P[0] = t4                 # graph.updates (the run variant only)
        return (t0, )

The source is kept on the executable (`executable.source`) and registered with `linecache`,
so a traceback through it shows the generated lines.
"""

from __future__ import annotations

import itertools
import linecache
import re

import numpy as np
import torch

from unigraph.backend import Executable, lower_nodes
from unigraph.errors import BackendError
from unigraph.ir import Graph
from unigraph_torch import fusions
from unigraph_torch.gradients import gradients, leaf
from unigraph_torch.layout import column_major, matmul_weights, update_slots
from unigraph_torch.loop_guard import (
    HOST_CASTS,
    HOST_EXPRESSIONS,
    counter_tensor,
    find_guard,
    host_dtype,
    scalar_tensor,
)
from unigraph_torch.lowerings import LOWERINGS, TORCH_DTYPES

# torch dtype -> NumPy dtype, to check native feeds against the graph's inputs.
NUMPY_DTYPES = {torch_dtype: np.dtype(name) for name, torch_dtype in TORCH_DTYPES.items()}

_compiled_ids = itertools.count()


def feed(x):
    """A run input as a torch tensor: natives pass through, NumPy arrays share memory where
    torch allows (read-only or negatively strided arrays are copied)."""
    if isinstance(x, torch.Tensor):
        return x
    x = np.asarray(x)
    if not x.flags.writeable or (x.ndim and min(x.strides) < 0):
        x = x.copy()
    return torch.from_numpy(x)


def _is_literal(value) -> bool:
    """True when repr(value) is Python source that evaluates back to an equal value."""
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return np.isfinite(value)
    if isinstance(value, tuple):
        return all(_is_literal(v) for v in value)
    return False



def _shares(tensor, arrays: list) -> bool:
    """True when CPU `tensor`'s memory overlaps one of the NumPy `arrays`."""
    if not tensor.numel() or tensor.device.type != "cpu":
        return False
    start = tensor.data_ptr()
    elements = 1 + sum((n - 1) * step for n, step in zip(tensor.shape, tensor.stride()))
    end = start + elements * tensor.element_size()
    for array in arrays:
        low = array.__array_interface__["data"][0]
        if start < low + array.nbytes and low < end:
            return True
    return False

class _OpTable:
    """Looks like a lowering table to `lower_nodes`; each "lowering" emits a line of source
    instead of computing, and returns the name of the variable it assigned."""

    def __init__(self, writer: _SourceWriter):
        self.writer = writer

    def __getitem__(self, op):
        if op not in LOWERINGS:
            raise KeyError(op)
        return lambda *args, **attrs: self.writer.call(op, args, attrs)


class _SourceWriter:
    def __init__(self, fused: dict | None = None):
        self.lines: list = []  # run's
        self.all_lines: list = []  # every_value's: the same, with no fused calls
        self.fused = fused or {}  # id(node) -> role (see `fusions.plan`)
        self.deferred: dict = {}  # a deferred producer's output id -> its operands' names
        # a fused update's value id -> (its source, the names it reads, the line making the
        # call it reads or None): written at run's end (see `compile_graph`)
        self.fused_updates: dict = {}
        self.host: dict = {}  # name -> dtype of the run's Python scalars (see loop_guard)
        self.level = 0  # how many subgraphs enclose the current line
        self.depth = 1  # indentation level
        self.grad_depth = 0  # how many `grad` regions enclose the current line
        self.names = itertools.count()
        self.scope = {
            "torch": torch,
            "feed": feed,
            "Tensor": torch.Tensor,
            "column_major": column_major,
            "leaf": leaf,
            "gradients": gradients,
            "no_grad": torch.no_grad,
            "enable_grad": torch.enable_grad,
            "counter_tensor": counter_tensor,
            "scalar_tensor": scalar_tensor,
            "np": np,
            "op_addmm": fusions.addmm,
            "op_cross_entropy_mean": fusions.cross_entropy_mean,
            "op_sgd_update": fusions.sgd_update,
            "op_sub_update": fusions.sub_update,
            "op_slot_mul": fusions.slot_mul,
            "op_adam_in_place": fusions.adam_in_place,
            **fusions.IN_PLACE_CALLS,
        }
        self.table = _OpTable(self)
        self.control_flow = {"cond": self.cond, "while_loop": self.while_loop, "grad": self.grad,
                             "adam_update": self.several_outputs}
        for op in ("matmul", "add", "sparse_softmax_cross_entropy", "mean", "mul", "sub", "div",
                   "sqrt", "pow", "cast"):
            self.control_flow[op] = self.fusable

    # -- helpers --------------------------------------------------------------------------
    def emit(self, line: str, run: bool = True, every: bool = True) -> None:
        """Add `line` to run's source and/or every_value's."""
        line = "    " * self.depth + line
        if run:
            self.lines.append(line)
        if every:
            self.all_lines.append(line)

    def fresh(self, prefix: str = "t") -> str:
        return f"{prefix}{next(self.names)}"

    def bind(self, value, prefix: str = "k") -> str:
        """A global of the generated module holding `value`."""
        name = self.fresh(prefix)
        self.scope[name] = value
        return name

    def attr(self, value) -> str:
        if isinstance(value, np.integer | np.bool_):
            value = value.item()
        return repr(value) if _is_literal(value) else self.bind(value)

    def tensors(self, names: list) -> list:
        """`names`, each Python scalar of run's (see `self.host`) replaced by a new name
        holding it as a tensor (in every_value it is one already)."""
        if not self.host or not any(name in self.host for name in names):
            return list(names)
        out = []
        for name in names:
            if name in self.host:
                tensor = self.fresh()
                dtype = self.bind(TORCH_DTYPES[self.host[name]], "dtype")
                self.emit(f"{tensor} = scalar_tensor({name}, {dtype})", every=False)
                self.emit(f"{tensor} = {name}", run=False)
                name = tensor
            out.append(name)
        return out

    def host_call(self, op: str, args: list, attrs: dict):
        """(Python expression, dtype) of `op` on run's Python scalars and int constants, or
        None."""
        values, dtypes = [], []
        for name in args:
            constant = self.scope.get(name)
            if name in self.host:
                values.append(name)
                dtypes.append(self.host[name])
            elif isinstance(constant, torch.Tensor) and constant.dim() == 0 and \
                    constant.dtype == torch.int64:
                values.append(repr(int(constant)))
                dtypes.append("int64")
            else:
                return None
        dtype = host_dtype(op, attrs, dtypes)
        if dtype is None:
            return None
        template = HOST_CASTS[dtype] if op == "cast" else HOST_EXPRESSIONS[op]
        return template.format(*values), dtype

    def assign(self, targets: list, sources: list) -> None:
        """targets = sources, all at once (a loop state may swap its own variables)."""
        sources = self.tensors(sources)
        if targets:
            self.emit(f"{', '.join(targets)}, = {', '.join(sources)},")
        else:
            self.emit("pass")

    def inline(self, graph: Graph, operands: list) -> list:
        """Emit `graph`'s nodes with its inputs standing for `operands`; return the names of
        its outputs."""
        if graph.params:
            raise BackendError(f"subgraph {graph.name!r} has parameters; subgraphs must be closed")
        env = {value.id: name for value, name in zip(graph.inputs, operands)}
        self.level += 1
        try:
            return lower_nodes(graph, env, self.table, self.control_flow)
        finally:
            self.level -= 1

    # -- ordinary ops ---------------------------------------------------------------------
    def call(self, op: str, args: tuple, attrs: dict, run: bool = True) -> str:
        """Emit one op record's lowering; `run=False`: in every_value's source only."""
        if op == "constant":
            # Converted once, here: the value is a global that the run only reads.
            return self.bind(LOWERINGS["constant"](**attrs))
        if run and self.host and any(name in self.host for name in args):
            host = self.host_call(op, args, attrs)
            if host is None:
                args = self.tensors(args)
            else:
                out = self.call(op, args, attrs, run=False)
                self.emit(f"{out} = {host[0]}", every=False)
                self.host[out] = host[1]
                return out
        out = self.fresh()
        function = f"op_{op}"
        self.scope[function] = LOWERINGS[op]
        if op == "cast":  # look the torch dtype up now rather than on every run
            dtype = self.bind(TORCH_DTYPES[attrs["dtype"]], "dtype")
            self.emit(f"{out} = {args[0]}.to({dtype})", run)
            return out
        arguments = list(args) + [f"{key}={self.attr(v)}" for key, v in attrs.items()]
        self.emit(f"{out} = {function}({', '.join(arguments)})", run)
        return out

    def several_outputs(self, node, args: list) -> list:
        """A node with an output per result (an optimizer's fused update, `adam_update`):
        its lowering returns a tuple, unpacked into a name per output."""
        outs = [self.fresh() for _ in node.outputs]
        function = f"op_{node.op}"
        self.scope[function] = LOWERINGS[node.op]
        args = self.tensors(args)
        attrs = [f"{key}={self.attr(value)}" for key, value in node.attrs.items()]
        in_place = self.fused.get(id(node)) == ("adam_in_place",)
        # run: written into the parameters at its end (the role's), else here
        self.emit(f"{', '.join(outs)}, = {function}({', '.join(args + attrs)})",
                  run=not in_place)
        if in_place:
            result = self.fresh("u")
            call = f"{result} = op_adam_in_place({', '.join(args + attrs)})"
            for position, out in enumerate(node.outputs):
                self.fused_updates[out.id] = (f"{result}[{position}]", args, call)
        return outs

    def fusable(self, node, args: list) -> list:
        """A node that `fusions.plan` may have given a role: a deferred producer is emitted
        in every_value only, its consumer makes the fused call in run."""
        role = self.fused.get(id(node))
        if role is None:
            return [self.call(node.op, args, node.attrs)]
        if role[0] == "in_place":  # written into its first operand, a temporary (run only)
            out = self.call(node.op, args, node.attrs, run=False)
            self.emit(f"{out} = op_in_place_{node.op}({', '.join(self.tensors(args))})",
                      every=False)
            return [out]
        if role[0] == "write_slot":  # made in the slot's own tensor (run only)
            out = self.call(node.op, args, node.attrs, run=False)
            operands = self.tensors(args)
            if node.inputs[0].id != role[1]:
                operands = operands[::-1]  # (slot, factor): c * s is s * c, bit for bit
            self.emit(f"{out} = op_slot_mul({', '.join(operands)})", every=False)
            return [out]
        if role[0] == "correction_part":  # made by the correction's call (run: none)
            # pow(beta, t): (beta, t); c - pow(...): (c, beta, t)
            self.deferred[node.outputs[0].id] = tuple(args) if node.op == "pow" else \
                (args[0], *self.deferred[node.inputs[1].id])
            return [self.call(node.op, args, node.attrs, run=False)]
        if role[0] == "correction":  # cast(c - pow(beta, t)): once per value of t in run
            out = self.call(node.op, args, node.attrs, run=False)
            one, beta, t = self.deferred[node.inputs[0].id]
            if "op_bias_correction" not in self.scope:
                self.scope["op_bias_correction"] = fusions.BiasCorrections()
            dtype = self.bind(TORCH_DTYPES[node.attrs["dtype"]], "dtype")
            operands = ", ".join(self.tensors([t, one, beta]))
            self.emit(f"{out} = op_bias_correction({operands}, {dtype}, {role[1]!r}, "
                      f"{role[2]!r})", every=False)
            return [out]
        if role[0] == "update_sub":  # the update p - d, written at run's end
            out = self.call(node.op, args, node.attrs, run=False)
            names = tuple(self.tensors(args))
            self.fused_updates[node.outputs[0].id] = (
                f"op_sub_update({', '.join(names)})", names, None)
            return [out]
        if role[0] in ("defer", "update"):
            out = self.call(node.op, args, node.attrs, run=False)
            if node.op == "mul":  # the update's product: (scale, grad), as `plan` chose
                self.deferred[node.outputs[0].id] = \
                    args if node.inputs[0].shape == () else args[::-1]
            elif node.op == "sub":  # the update: (param, scale, grad), for run's end
                scale, grad = self.deferred[node.inputs[1].id]
                names = (args[0], scale, grad)
                self.fused_updates[node.outputs[0].id] = (
                    f"op_sgd_update({', '.join(names)})", names, None)
            else:
                self.deferred[node.outputs[0].id] = args
            return [out]
        out = self.call(node.op, args, node.attrs, run=False)
        operands = self.deferred[role[1]]
        if role[0] == "addmm":
            fused = f"op_addmm({args[role[2]]}, {operands[0]}, {operands[1]})"
        else:
            fused = f"op_cross_entropy_mean({operands[0]}, {operands[1]})"
        self.emit(f"{out} = {fused}", every=False)
        return [out]

    # -- control flow ---------------------------------------------------------------------
    def cond(self, node, args: list) -> list:
        pred, operands = args[0], self.tensors(args[1:])
        outs = [self.fresh() for _ in node.outputs]
        for keyword, branch in (("if", "then"), ("else", "else")):
            self.emit(f"if {pred}:" if keyword == "if" else "else:")
            self.depth += 1
            self.assign(outs, self.inline(node.subgraphs[branch], operands))
            self.depth -= 1
        return outs

    def while_loop(self, node, args: list) -> list:
        """A Python `while`; a loop whose iteration guard `loop_guard.find_guard` recognises
        is a `for` over a range instead, its counter a Python int (after a top-level loop,
        too: see `self.host`)."""
        args = self.tensors(args)
        guard = find_guard(node, [self.scope.get(name) for name in args])
        count = node.attrs["num_carried"]
        captured = args[count:]
        state = [self.fresh() for _ in range(count)]
        carried = state[:-1] if guard else state
        cond, body = (guard.cond, guard.body) if guard else \
            (node.subgraphs["cond"], node.subgraphs["body"])
        self.assign(carried, args[:len(carried)])
        # A guarded loop's counter is a for loop's: an iteration past the limit ends it (the
        # condition not asked again: the call raises the limit's error)
        self.emit(f"for {state[-1]} in range({guard.limit + 1}):" if guard else "while True:")
        self.depth += 1
        (keep_going,) = self.inline(cond, state + captured)[:1]
        self.emit(f"if not {keep_going}:")
        self.emit("    break")
        self.assign(carried, self.inline(body, state + captured))
        self.depth -= 1
        if guard:  # (no break: every iteration ran, one past the limit)
            self.emit("else:")
            self.emit(f"    {state[-1]} = {guard.limit + 1}")
        if guard and self.level == 0:
            self.emit(f"{state[-1]} = counter_tensor({state[-1]})", run=False)
            self.host[state[-1]] = "int64"
        elif guard:
            self.emit(f"{state[-1]} = counter_tensor({state[-1]})")
        return state

    def grad(self, node, args: list) -> list:
        wrt, output = node.attrs["wrt"], node.attrs["output"]
        nested = self.grad_depth > 0
        args = self.tensors(args)
        self.emit("with enable_grad():")
        self.depth += 1
        operands = list(args)
        leaves = []
        for index in wrt:
            name = self.fresh("w")
            self.emit(f"{name} = leaf({args[index]}, {nested})")
            operands[index] = name
            leaves.append(name)
        self.grad_depth += 1
        fn_outs = self.inline(node.subgraphs["fn"], operands)
        self.grad_depth -= 1
        grads = [self.fresh("g") for _ in wrt]
        call = f"gradients({fn_outs[output]}, ({''.join(x + ', ' for x in leaves)}), {nested})"
        self.assign(grads, [f"*{call}"] if grads else [])
        self.depth -= 1
        if nested:
            return fn_outs + grads
        # Outside every grad region nothing needs the autograd graph: drop it.
        detached = [self.fresh() for _ in fn_outs]
        for name, source in zip(detached, fn_outs):
            self.emit(f"{name} = {source}.detach()")
        return detached + grads


_NAME = re.compile(r"\b[tgw]\d+\b")


def _free_temporaries(lines: list, keep: set) -> list:
    """Drop each temporary after the statement that last reads it, as torch.fx does:
    a big intermediate (a conv output) is then freed early and its memory reused, instead
    of every temporary living until the function returns. Works on the statements at the
    outermost level of `lines`; a whole `if`/`while`/`with` block counts as one statement."""
    if not lines:
        return lines
    indent = len(lines[0]) - len(lines[0].lstrip())
    statements: list = []
    for line in lines:
        starts_statement = len(line) - len(line.lstrip()) == indent \
            and not line.lstrip().startswith("else:")
        if starts_statement or not statements:
            statements.append([line])
        else:
            statements[-1].append(line)
    last_use: dict = {}
    for index, statement in enumerate(statements):
        for name in _NAME.findall("\n".join(statement)):
            last_use[name] = index
    freed: dict = {}
    for name, index in last_use.items():
        if name not in keep:
            freed.setdefault(index, []).append(name)
    out = []
    for index, statement in enumerate(statements):
        out.extend(statement)
        if index in freed:
            # `= None` rather than `del`: a name bound only inside a loop may be unbound.
            out.append(" " * indent + " = ".join(sorted(freed[index])) + " = None")
    return out


def _contains_grad(graph: Graph) -> bool:
    return any(node.op == "grad" for node in graph.walk())


def compile_graph(graph: Graph, column_major_params=frozenset()) -> tuple:
    """Build the two functions of `graph`: run(P, *inputs) -> outputs, applying the
    updates to the parameter list P, and every_value(P, *inputs) -> {value id: tensor}.
    The updates of the params at `column_major_params` keep that layout.
    Returns (run, every_value, source)."""
    writer = _SourceWriter(fusions.plan(graph))
    arguments = [f"a{i}" for i in range(len(graph.inputs))]
    env = {}
    for value, argument in zip(graph.inputs, arguments):
        env[value.id] = f"i{argument[1:]}"
        # (a torch tensor, the usual feed, without the call)
        writer.emit(f"{env[value.id]} = {argument} if type({argument}) is Tensor "
                    f"else feed({argument})")
    for index, value in enumerate(graph.params):
        env[value.id] = f"p{index}"
        writer.emit(f"p{index} = P[{index}]")
    guarded = _contains_grad(graph)
    if guarded:
        writer.emit("with no_grad():")
        writer.depth += 1
    outputs = lower_nodes(graph, env, writer.table, writer.control_flow)
    writer.depth = 1
    # A Python scalar of run's (see `_SourceWriter.host`) is returned as a NumPy scalar
    # (the run's fetch), and written to a parameter as a tensor.
    news = dict(zip([new.id for _, new in graph.updates],
                    writer.tensors([env[new.id] for _, new in graph.updates])))
    returned = "".join(
        (f"np.asarray({name}, {writer.bind(np.dtype(writer.host[name]), 'dtype')})"
         if name in writer.host else name) + ", " for name in outputs)

    input_ids = {value.id for value in graph.inputs}
    updates, fused_updates, calls = [], [], set()
    kept = set(outputs)
    for param, new in graph.updates:
        index = next(i for i, p in enumerate(graph.params) if p is param)
        if new.id in writer.fused_updates:  # after the plain writes: see `fusions`
            source, names, call = writer.fused_updates[new.id]
            kept.update(names)
            if call is not None and call not in calls:  # one call writing several params
                calls.add(call)
                fused_updates.append(f"    {call}")
        else:
            kept.add(news[new.id])
            # Fed inputs may share memory with the caller's arrays: a parameter must not.
            source = news[new.id] + (".clone()" if new.id in input_ids else "")
        if index in column_major_params:  # an assigned value may come in another layout
            source = f"column_major({source})"
        written = fused_updates if new.id in writer.fused_updates else updates
        written.append(f"    P[{index}] = {source}")
    updates += fused_updates
    body = writer.lines
    if guarded:  # the statements inside `with no_grad():`, after the feeds and params
        start = len(graph.inputs) + len(graph.params) + 1
        body = body[:start] + _free_temporaries(body[start:], kept)
    else:
        body = _free_temporaries(body, kept)
    header = f"({', '.join(['P'] + arguments)}):"
    run_source = "\n".join(
        [f"def run{header}", *body, *updates, f"    return ({returned})"]
    )
    everything = ", ".join(f"{value_id}: {name}" for value_id, name in env.items())
    all_source = "\n".join([f"def every_value{header}", *writer.all_lines,
                            f"    return {{{everything}}}"])
    source = run_source + "\n\n\n" + all_source + "\n"

    filename = f"<unigraph_torch {graph.name} #{next(_compiled_ids)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = dict(writer.scope)
    exec(compile(source, filename, "exec"), scope)
    return scope["run"], scope["every_value"], source


def _quick_specs(graph: Graph) -> list:
    """(torch dtype, shape) of each input of `graph`, for TorchExecutable.check_inputs'
    quick pass; empty (no quick pass) when an input has an unknown dim or a dtype torch
    lacks, or when the graph has no inputs."""
    if not all(None not in v.shape and v.dtype in TORCH_DTYPES for v in graph.inputs):
        return []
    return [(TORCH_DTYPES[v.dtype], tuple(v.shape)) for v in graph.inputs]


class TorchExecutable(Executable):
    """A compiled graph; parameters live in `self.params` as torch tensors between runs.

    Updates rebind a parameter to its new tensor (no tensor is ever written in place), so an
    output that reads a parameter keeps the value it had during the run. The checks and
    copies in and out are the `Executable` base's.
    """

    target = "torch:static"

    def __init__(self, graph: Graph):
        super().__init__(graph)
        # Stored column-major: the weights of matmuls, as torch's Linear keeps its own, and
        # their optimizer slots.
        weights = matmul_weights(graph)
        self.column_major_params = weights | update_slots(graph, weights)
        self._compiled_run, self._every_value, self.source = compile_graph(
            graph, self.column_major_params)
        self.params: list = [None] * len(graph.params)
        # for check_inputs' quick pass (none where a run is checked first: `run`'s is the base's)
        self._torch_specs = [] if self.checked_before_run is not None else _quick_specs(graph)

    def run(self, inputs: list) -> list:
        # The common torch:static run, torch tensors of the graph's exact types and every
        # parameter set, straight to the compiled function: the base's checks would pass and
        # its copies apply to NumPy feeds only (~1.3 us of a 2 us cond). Anything else, and
        # every refusal, is the base's.
        specs = self._torch_specs
        if specs and not self.unset and len(inputs) == len(specs):
            for x, (dtype, shape) in zip(inputs, specs):
                if type(x) is not torch.Tensor or x.dtype is not dtype or x.shape != shape:
                    break
            else:
                return self.run_known(inputs)
        return super().run(inputs)

    def run_known(self, feeds: list) -> list:
        # Feeds of types a run already accepted (`Executable.run_known`): torch tensors go
        # straight to the compiled function, without `run`'s per-input dtype and shape
        # tests, a failure raised as `run` raises it (`_run_error`: unigraph's error where
        # the framework's has one); NumPy feeds (an argument of another backend's tensor)
        # through `run`. (A @ug.function's repeated call comes here directly: one call
        # fewer than through a helper both share.)
        if not self.unset:
            for x in feeds:
                if type(x) is not torch.Tensor:
                    break
            else:
                try:
                    return list(self._compiled_run(self.params, *feeds))
                except Exception as error:
                    raise self._run_error(error)  # noqa: B904 (as `from None`)
        return self.run(feeds)

    def direct_run(self):
        """For a @ug.function's prebuilt caller (`function._direct_lines`): `(the compiled
        function, self.params, False)` once every parameter is set (None before):
        `function(params, *feeds)` is `run_known(feeds)` for torch tensors of the types a run
        accepted (no NumPy array: those go through `run`, which copies), but for the
        translation of a failure, which the caller does (`_run_error`). `self.params` is
        only ever written in place, so the caller may hold it.

        >>> function, params, _ = executable.direct_run()
        >>> outputs = function(params, x, y)
        """
        return None if self.unset else (self._compiled_run, self.params, False)

    def check_inputs(self, inputs) -> list:
        # The common torch:static run, torch tensors of the graph's exact types, in one pass
        # (a @ug.function call feeds its tensors' natives); anything else, and every
        # refusal with its wording, is the base's.
        specs = self._torch_specs
        if specs and len(inputs) == len(specs):
            for x, (dtype, shape) in zip(inputs, specs):
                if type(x) is not torch.Tensor or x.dtype is not dtype or x.shape != shape:
                    break
            else:
                return inputs if type(inputs) is list else list(inputs)
        return super().check_inputs(inputs)

    def _native_spec(self, x):
        if isinstance(x, torch.Tensor):
            return tuple(x.shape), NUMPY_DTYPES.get(x.dtype)
        return None

    def _run(self, feeds: list) -> list:
        outs = list(self._compiled_run(self.params, *feeds))
        # torch.from_numpy shares the caller's array: an output that is a feed, or a view
        # of one, is cloned so that the caller's later writes to its array do not reach it.
        fed = [f for f in feeds if type(f) is np.ndarray and f.size]
        if fed:
            outs = [o.clone() if isinstance(o, torch.Tensor) and _shares(o, fed) else o
                    for o in outs]
        return outs

    def _run_all(self, feeds: list) -> dict:
        values = self._every_value(self.params, *feeds)
        # Copies: a value may be a stored parameter or share memory with an input.
        return {value_id: tensor.detach().numpy().copy() for value_id, tensor in values.items()}

    def _set_param(self, index: int, array: np.ndarray) -> None:
        self.params[index] = torch.from_numpy(array)  # the base's private copy
        if index in self.column_major_params:
            self.params[index] = column_major(self.params[index])

    def _get_param(self, index: int) -> np.ndarray:
        return self.params[index].detach().numpy()
