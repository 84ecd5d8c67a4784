"""The static reference engine: a graph compiled once into a `Plan`, and reverse-mode
autodiff over plans with the op records' VJP rules.

A `Plan` numbers every value of a graph (a slot in a flat list) and turns every node into a
step with its attrs bound, so a run is one loop over prepared steps. The steps are built by
the same `lower_nodes` walk every backend uses to build its native graph: here a "native
value" is a slot number, and lowering an op appends a step.

`forward(record=True)` also keeps what the backward pass needs: all slot values, the branch
a `cond` took, and the per-iteration values of a `while_loop` (the trip count is the length
of that list). `backward` walks the steps in reverse applying the VJP rules.

Speed (a static plan is also a target users run): `constant` steps are run once when the
plan is built (their values read-only, since every run shares them), and the forward
without recording is one generated Python function (`codegen`): values are locals, `cond`
and `while_loop` are Python `if` and `while` over their subplans' inlined code, and scalar
arithmetic is NumPy's scalar math: a scalar op in a loop body costs a few hundred ns.
"""

from __future__ import annotations

import functools

import numpy as np

from unigraph.backend import lower_nodes
from unigraph.errors import UnigraphError
from unigraph.ir import Graph
from unigraph.ops import OPS
from unigraph.reference.codegen import generate
from unigraph.reference.fast_kernels import kernel, vjp_kernel
from unigraph.reference.grad_codegen import generate as generate_grad


class SecondOrderUnsupported(UnigraphError):
    """The reference engine cannot differentiate a gradient: its VJP rules are NumPy code,
    not ops that could be differentiated again. `ug.check` then compares the targets with
    each other; any backend may raise it to say a target cannot run a case."""


SECOND_ORDER = ("numpy: gradients of gradients (second order) are not supported: the NumPy "
                "engine's VJP rules are NumPy code, not differentiable ops; use the torch, "
                "tensorflow or paddle backend for higher-order derivatives")


def _add(grads: dict, slot: int, g) -> None:
    if g is None:
        return
    grads[slot] = grads[slot] + g if slot in grads else g


def _gather(slots: list, gradients: list) -> dict:
    """{slot: gradient}, summing where one slot appears twice among a plan's outputs."""
    grads: dict = {}
    for slot, g in zip(slots, gradients):
        _add(grads, slot, g)
    return grads


class OpStep:
    __slots__ = ("op", "fn", "vjp", "attrs", "ins", "out", "outs")

    def __init__(self, record, attrs: dict, ins: list, out: int, fast: bool = False,
                 rules=None):
        self.op = record
        self.attrs = attrs
        compute, self.vjp = rules or OpStep.rules(record, fast)
        self.fn = functools.partial(compute, **attrs) if attrs else compute
        self.ins = ins
        self.out = out
        self.outs = [out]

    @staticmethod
    def rules(record, fast: bool) -> tuple:
        """(compute, vjp) of `record`: its fast kernels where `fast` and they exist."""
        return ((fast and kernel(record.name, record)) or record.reference,
                (fast and vjp_kernel(record.name, record)) or record.vjp)

    def forward(self, env, record):
        env[self.out] = self.fn(*[env[i] for i in self.ins])
        return None

    def backward(self, env, residual, grads, requires):
        g = grads.get(self.out)
        if g is None or self.vjp is None:
            return
        needs = [requires is None or slot in requires for slot in self.ins]
        if not any(needs):
            return  # nothing upstream of this op is differentiated
        inputs = [env[i] for i in self.ins]
        extra = {"needs": needs} if self.op.partial_vjp else {}
        for slot, x, gx, need in zip(self.ins, inputs, self.vjp(g, inputs, env[self.out],
                                                                **extra, **self.attrs),
                                     needs):
            if need and gx is not None and x.dtype.kind == "f":
                _add(grads, slot, gx)


class CondStep:
    __slots__ = ("pred", "operands", "branches", "ins", "outs")

    def __init__(self, node, ins: list, outs: list, ops, fast):
        self.pred = ins[0]
        self.operands = ins[1:]
        self.branches = (Plan(node.subgraphs["then"], ops, fast),
                         Plan(node.subgraphs["else"], ops, fast))
        self.ins = ins
        self.outs = outs

    def forward(self, env, record):
        index = 0 if bool(env[self.pred]) else 1
        plan = self.branches[index]
        sub_env, sub_res = plan.forward([env[i] for i in self.operands], record)
        for slot, value in zip(self.outs, plan.outputs_of(sub_env)):
            env[slot] = value
        return (index, sub_env, sub_res) if record else None

    def backward(self, env, residual, grads, requires):
        index, sub_env, sub_res = residual
        plan = self.branches[index]
        out_grads = _gather(plan.output_slots, [grads.get(o) for o in self.outs])
        if not out_grads:
            return
        for slot, g in zip(self.operands, plan.backward(sub_env, sub_res, out_grads)):
            _add(grads, slot, g)


class WhileStep:
    __slots__ = ("carried", "captured", "cond", "body", "ins", "outs")

    def __init__(self, node, ins: list, outs: list, ops, fast):
        count = node.attrs["num_carried"]
        self.carried, self.captured = ins[:count], ins[count:]
        self.ins = ins
        self.cond = Plan(node.subgraphs["cond"], ops, fast)
        self.body = Plan(node.subgraphs["body"], ops, fast)
        self.outs = outs

    def forward(self, env, record):
        values = [env[i] for i in self.carried]
        captured = [env[i] for i in self.captured]
        iterations = []
        while True:
            cond_env, _ = self.cond.forward(values + captured, False)
            if not bool(self.cond.outputs_of(cond_env)[0]):
                break
            body_env, body_res = self.body.forward(values + captured, record)
            if record:
                iterations.append((body_env, body_res))
            values = self.body.outputs_of(body_env)
        for slot, value in zip(self.outs, values):
            env[slot] = value
        return iterations if record else None

    def backward(self, env, iterations, grads, requires):
        carried_grads = [grads.get(o) for o in self.outs]
        captured_grads: list = [None] * len(self.captured)
        count = len(self.carried)
        for body_env, body_res in reversed(iterations):
            out_grads = _gather(self.body.output_slots, carried_grads)
            if not out_grads:
                break
            input_grads = self.body.backward(body_env, body_res, out_grads)
            carried_grads = input_grads[:count]
            for i, g in enumerate(input_grads[count:]):
                if g is not None:
                    captured_grads[i] = g if captured_grads[i] is None else captured_grads[i] + g
        for slot, g in zip(self.carried + self.captured, carried_grads + captured_grads):
            _add(grads, slot, g)


class GradStep:
    __slots__ = ("fn", "operands", "ins", "wrt", "output", "outs", "requires", "generated",
                 "runs")

    def __init__(self, node, ins: list, outs: list, ops, fast):
        self.fn = Plan(node.subgraphs["fn"], ops, fast)
        self.operands = self.ins = ins
        self.wrt = node.attrs["wrt"]
        self.output = node.attrs["output"]
        self.outs = outs
        self.requires = self.fn.requires_from(self.wrt)
        # From the second run on, the run as one generated function (`grad_codegen`, the
        # same calls without the step walk), where it can make one.
        self.generated = None
        self.runs = 0

    def forward(self, env, record):
        for slot, value in zip(self.outs, self.run([env[i] for i in self.operands])):
            env[slot] = value
        return None

    def run(self, operands: list) -> list:
        """The function's outputs, then the gradients of its `wrt` operands."""
        if self.generated is not None:
            return self.generated(operands)
        self.runs += 1
        if self.runs == 2 and self.fn.fast:
            self.generated = generate_grad(self)
            if self.generated is not None:
                return self.generated(operands)
        sub_env, sub_res = self.fn.forward(operands, True)
        outputs = self.fn.outputs_of(sub_env)
        seed = np.ones_like(outputs[self.output])
        grads = self.fn.backward(sub_env, sub_res, {self.fn.output_slots[self.output]: seed},
                                 self.requires)
        grads = [grads[i] if grads[i] is not None else np.zeros_like(operands[i])
                 for i in self.wrt]
        return outputs + grads

    def runner(self):
        """What a generated plan (`codegen`) calls for this step: its generated function
        (made now where `run` would make it on its next run: a plan generates its code
        on its second run, when this step has run once), else `run`."""
        if self.generated is None and self.runs == 1 and self.fn.fast:
            self.runs = 2
            self.generated = generate_grad(self)
        return self.run if self.generated is None else self.generated

    def backward(self, env, residual, grads, requires):
        if any(o in grads for o in self.outs):
            raise SecondOrderUnsupported(SECOND_ORDER)


CONTROL_FLOW_STEPS = {"cond": CondStep, "while_loop": WhileStep, "grad": GradStep}


class _StepTable(dict):
    """The "lowering table" handed to `lower_nodes`: lowering op `name` appends an `OpStep`
    reading the input slots and returns its output slot. (A dict of the lowerings made so
    far, one per op name and plan: `lower_nodes` asks once per node, and a dict answers
    without a Python call; `__missing__` makes the others.)"""

    def __init__(self, plan: Plan):
        super().__init__()
        self.plan = plan

    def __missing__(self, name: str):
        record = self.plan.ops[name]  # KeyError: lower_nodes names the unknown op
        plan = self.plan
        rules = OpStep.rules(record, plan.fast)
        steps = plan.steps

        if record.name == "constant":  # (its value is computed once: Plan.template)
            def lower(*ins, **attrs):
                out = plan.size
                plan.size += 1
                step = OpStep(record, attrs, list(ins), out, plan.fast, rules)
                steps.append(step)
                plan.constants.append(step)
                return out
        else:
            def lower(*ins, **attrs):
                out = plan.size
                plan.size += 1
                steps.append(OpStep(record, attrs, list(ins), out, plan.fast, rules))
                return out

        self[name] = lower
        return lower


class Plan:
    """A graph compiled into slots and steps; `ops` is the op table (name -> `OpDef`) whose
    references and VJP rules it runs (default: every registered op). `fast`: the kernels
    of `fast_kernels` where they exist (the engine's targets), else the references alone
    (the float64 checker: the definitions).

    >>> plan = Plan(graph)
    >>> env, _ = plan.forward(inputs + params, record=False)
    >>> plan.outputs_of(env)
    """

    def __init__(self, graph: Graph, ops=None, fast: bool = True):
        self.graph = graph
        self.ops = OPS if ops is None else ops
        self.fast = fast
        self.size = 0
        self.steps: list = []
        self.constants: list = []  # the steps of op "constant", in order (see _StepTable)
        self.input_slots = self.new_slots(len(graph.inputs) + len(graph.params))
        env = {v.id: slot for v, slot in zip([*graph.inputs, *graph.params], self.input_slots)}
        control_flow = {op: functools.partial(self._control_flow, step_type)
                        for op, step_type in CONTROL_FLOW_STEPS.items()}
        self.output_slots = lower_nodes(graph, env, _StepTable(self), control_flow)
        self.slots = env  # value id -> slot, every value of the graph
        self.template = [None] * self.size  # a fresh env: the constants already in place
        for step in self.constants:
            value = step.fn()
            if type(value) is np.ndarray:
                value.flags.writeable = False  # shared by every run: never written
            self.template[step.out] = value
        self._runs: dict = {}  # keep -> the generated forward, made on the second run
        self._values: dict = {}  # (keep, values) -> a generated `values_function`
        self._ran = False
        self._dead: dict = {}  # keep -> per step, the slots dead after it (_walk_dropping)

    def _generated_forward(self):
        """`forward(inputs, record=False)` as one generated function calling each step in
        turn: the fallback where `codegen.generate` cannot compile a plan (see there)."""
        scope: dict = {}
        lines = ["def run(env):"]
        for index, step in enumerate(self.steps):
            if type(step) is OpStep:
                if step.op.name == "constant":
                    continue  # in the template
                scope[f"f{index}"] = step.fn
                args = ", ".join(f"env[{slot}]" for slot in step.ins)
                lines.append(f"    env[{step.out}] = f{index}({args})")
            else:
                scope[f"s{index}"] = step.forward
                lines.append(f"    s{index}(env, False)")
        lines.append("    return env")
        exec(compile("\n".join(lines), f"<unigraph plan of {self.graph.name}>", "exec"), scope)
        return scope["run"]

    def new_slots(self, count: int) -> list:
        first = self.size
        self.size += count
        return list(range(first, self.size))

    def _control_flow(self, step_type, node, ins: list) -> list:
        outs = self.new_slots(len(node.outputs))
        self.steps.append(step_type(node, ins, outs, self.ops, self.fast))
        return outs

    def forward(self, inputs: list, record: bool, keep=None):
        """Run; `inputs` are the graph's inputs followed by its params. Returns (env,
        residuals); residuals is None unless `record`. `keep` (a frozenset of slots): the
        caller reads only the outputs and these slots, so a value no later step reads may
        be dropped as soon as it is dead (None in `env`); None: `env` holds every value."""
        env = self.template.copy()
        if len(inputs) == len(self.input_slots):
            env[:len(inputs)] = inputs  # the input slots are the first ones, in order
        else:
            for slot, value in zip(self.input_slots, inputs):
                env[slot] = value
        if not record:
            run = self._runs.get(keep)
            if run is None:
                if not self._ran:
                    # A plan run once (a model built, loaded and run once) is not worth
                    # generating code for: the first run walks the steps.
                    self._ran = True
                    if keep is None:
                        for step in self.steps:
                            if type(step) is not OpStep or step.op.name != "constant":
                                step.forward(env, False)
                    else:
                        self._walk_dropping(env, keep)
                    return env, None
                run = self._runs[keep] = generate(self, keep) or self._generated_forward()
            return run(env), None
        residuals = [None if type(step) is OpStep and step.op.name == "constant"
                     else step.forward(env, True) for step in self.steps]
        return env, residuals

    def values_function(self, keep: frozenset, values: tuple):
        """`run(*inputs) -> [the value of each slot of values]`, the forward without
        recording of `forward(inputs, False, keep)` reading only `values` (outputs and
        slots of `keep`), as one generated function taking each input as a parameter; its
        `unshared` attribute says, per slot of `values`, whether that value is an array the
        run made (see `codegen.generate`). None until the plan has run once (a plan run
        once is not worth generating code for); where no code can be generated, the steps.

        >>> run = plan.values_function(frozenset(), tuple(plan.output_slots))
        >>> outputs = run(*inputs, *params)
        """
        run = self._values.get((keep, values))
        if run is not None or not self._ran:
            return run
        run = generate(self, keep, values)
        if run is None:
            def run(*inputs):
                env, _ = self.forward(list(inputs), False, keep)
                return [env[slot] for slot in values]

            run.unshared = (False,) * len(values)
        self._values[(keep, values)] = run
        return run

    def _walk_dropping(self, env, keep) -> None:
        """The steps in turn, each value dropped after the last step that reads it: a long
        chain of ops then reuses a few freed buffers that stay in cache, as NumPy code
        does, instead of holding every intermediate (a 300-op forward ran 2.4x slower so)."""
        dead = self._dead.get(keep)
        if dead is None:
            dead = self._dead[keep] = self._dead_after(keep)
        for step, slots in zip(self.steps, dead):
            if type(step) is not OpStep:
                step.forward(env, False)
            elif step.op.name != "constant":  # (OpStep.forward inline: ~0.1 us a step)
                ins = step.ins
                count = len(ins)  # (one or two operands without a list: ~0.4 us a step)
                if count == 2:
                    env[step.out] = step.fn(env[ins[0]], env[ins[1]])
                elif count == 1:
                    env[step.out] = step.fn(env[ins[0]])
                else:
                    env[step.out] = step.fn(*[env[i] for i in ins])
            for slot in slots:
                env[slot] = None

    def _dead_after(self, keep) -> list:
        """For each step, the slots that no later step reads and that are neither outputs
        nor in `keep`."""
        last = [-1] * self.size  # slot -> the last step that reads or defines it (-1: none)
        for index, step in enumerate(self.steps):
            for slot in step.ins:
                last[slot] = index
            for slot in step.outs:
                last[slot] = index  # SSA: an output is defined once, read later or never
        for slot in self.output_slots:
            last[slot] = -1
        for slot in keep:
            last[slot] = -1
        dead: list = [()] * len(self.steps)
        for slot, index in enumerate(last):
            if index >= 0:
                dead[index] += (slot,)  # (most steps free one slot or none)
        return dead

    def outputs_of(self, env) -> list:
        return [env[s] for s in self.output_slots]

    def requires_from(self, positions) -> frozenset:
        """The slots that depend on the inputs at `positions`: only those need gradients."""
        requires = {self.input_slots[p] for p in positions}
        for step in self.steps:
            if any(slot in requires for slot in step.ins):
                requires.update(step.outs)
        return frozenset(requires)

    def backward(self, env, residuals, out_grads: dict, requires=None) -> list:
        """Gradients of the inputs (then params) given gradients of output slots; with
        `requires` (see `requires_from`), only along paths from those inputs."""
        grads = dict(out_grads)
        for step, residual in zip(reversed(self.steps), reversed(residuals)):
            step.backward(env, residual, grads, requires)
        return [grads.get(s) for s in self.input_slots]
