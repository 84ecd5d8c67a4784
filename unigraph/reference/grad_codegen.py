"""A `grad` node's work (forward with its values kept, then reverse mode) as one generated
Python function, for a differentiated function made of plain ops (no cond, while_loop or
nested grad): a training step's gradient.

`GradStep.run` walks the subplan's steps forward, keeping an env list, then backward,
building for each step its `needs` list, its input list and its keyword arguments, and
accumulating into a dict: ~3 us per op and direction, which on a softmax-regression step
is a fifth of the step. What the plan computes at run time but never changes (which inputs
need a gradient: `requires`; whether a step has a VJP; its attrs) is decided here once;
values and gradients are locals. The code makes the same calls in the same order with the
same arguments as the step walk (but for the fused pairs below), so the numbers are the
same bit for bit:

- forward: `v{out} = f{i}(v{in}, ...)` for every non-constant step (constants: the plan's
  template values);
- backward, steps in reverse: where the step's output has a gradient, its VJP rule is
  called with the inputs, the output, `needs` (rules that take it) and the attrs; each
  gradient of an input that needs one, is not None and belongs to a floating input is
  added to that input's gradient (`a + b`, the first one kept as it is), as `plan._add`;
  an input that can get one gradient only takes it as it is;
- two consecutive steps with one rule for both (`fast_kernels.FUSED_VJPS`: the mean of a
  cross-entropy, whose loss vector nothing else reads) make one call of it, which gives
  the numbers of the two rules (the mean's share multiplies as one number instead of as
  an array of it).

>>> run = generate(grad_step)      # None: the step keeps its walk
>>> outputs_and_grads = run(operands)
"""

from __future__ import annotations

import functools

import numpy as np


def _release(lines: list, done, returned: set) -> None:
    """`del` the value and the gradient of OpStep `done`'s output once its rule has run (or
    was skipped): the steps that read it come after it, so their rules ran before; freed
    then, their arrays are there for the next gradients of their size, rather than all
    freed when the function returns (see `codegen._Writer.release`)."""
    names = [f"g{done.out}"] if done.out in returned else [f"v{done.out}", f"g{done.out}"]
    lines.append(f"    del {', '.join(names)}")


def _fused_pairs(plan, ops: list, requires) -> dict:
    """{index of the second step: the fused VJP rule (with its attrs)} for each pair of
    consecutive op steps whose VJP kernels `fast_kernels.FUSED_VJPS` makes one call of (a
    mean of a cross-entropy): the first step's output is read by the second only and is not
    a plan output, its first input needs a gradient, and both run their fast VJP kernels.
    Consecutive, so no other step's gradient is added between the two."""
    from unigraph.reference.fast_kernels import FUSED_VJPS, vjp_kernel

    reads: dict = {}
    for s in plan.steps:
        for slot in s.ins:
            reads[slot] = reads.get(slot, 0) + 1
    pairs = {}
    for index in range(1, len(ops)):
        first, second = ops[index - 1], ops[index]
        rule = FUSED_VJPS.get((first.op.name, second.op.name))
        if (rule is None or second.ins != [first.out] or reads.get(first.out) != 1
                or first.out in plan.output_slots or first.ins[0] not in requires
                or first.vjp is not vjp_kernel(first.op.name, first.op)
                or second.vjp is not vjp_kernel(second.op.name, second.op)):
            continue
        pairs[index] = functools.partial(rule, **second.attrs)
    return pairs


def generate(step):
    """`step.run`'s work as one function `run(operands) -> outputs + gradients`, or None
    when the subplan holds anything but op steps (or Python cannot compile the code)."""
    from unigraph.reference.codegen import keyword_call
    from unigraph.reference.plan import OpStep

    plan = step.fn
    if any(type(s) is not OpStep for s in plan.steps):
        return None
    scope = {"ones": np.ones, "array": np.array, "zeros_like": np.zeros_like}

    def bind(value, stem: str) -> str:  # (`keyword_call`'s globals: no other name has a _)
        name = f"{stem}_{len(scope)}"
        scope[name] = value
        return name

    lines = ["def run(operands):"]
    lines += [f"    v{slot} = operands[{i}]" for i, slot in enumerate(plan.input_slots)]
    ops = [s for s in plan.steps if s.op.name != "constant"]
    for s in plan.steps:
        if s.op.name == "constant":
            scope[f"c{s.out}"] = plan.template[s.out]
            lines.append(f"    v{s.out} = c{s.out}")
    for s in ops:
        operator = _array_operator(plan, s)
        if operator is not None:
            x, y = (f"v{i}" for i in s.ins)
            lines.append(f"    v{s.out} = {x} {operator} {y}")
            continue
        call = keyword_call(s.fn, ", ".join(f"v{i}" for i in s.ins), bind)
        lines.append(f"    v{s.out} = {call}")
    every = sorted({*plan.input_slots, *(s.out for s in plan.steps)})
    lines += [f"    g{slot} = None" for slot in every]
    seed_slot = plan.output_slots[step.output]
    if _rank(plan, seed_slot) == 0:
        # np.ones_like's 1 for a 0-d output (a loss) in one C call (np.ones: ~0.5 us more)
        lines.append(f"    g{seed_slot} = array(1, v{seed_slot}.dtype)")
    else:
        # np.ones_like's own steps (empty_like, copyto) in one C call: the same 1
        lines.append(f"    g{seed_slot} = ones(v{seed_slot}.shape, v{seed_slot}.dtype)")
    returned = set(plan.output_slots)
    fused = _fused_pairs(plan, ops, step.requires)
    # Per slot, how many rule results may be added to its gradient: a slot with one (and no
    # seed) takes that result as it is, without the tests of `_accumulate`
    sites: dict = {seed_slot: 1}
    for index, s in enumerate(ops):
        if index in fused:  # one result, for the first input of the pair's first step
            added = ops[index - 1].ins[:1]
        elif index + 1 in fused or s.vjp is None:
            added = ()
        else:
            added = s.ins
        for slot in added:
            sites[slot] = sites.get(slot, 0) + 1
    for index in reversed(range(len(ops))):
        s = ops[index]
        if index + 1 < len(ops):
            _release(lines, ops[index + 1], returned)
        if index + 1 in fused:
            continue  # its rule ran in the next step's fused call
        needs = [slot in step.requires for slot in s.ins]
        if s.vjp is None or not any(needs):
            continue  # OpStep.backward returns before calling the rule
        if index in fused:
            # the two rules in one call: the gradient of the first step's first input, as
            # its rule would have given it (with the second's gradient)
            first = ops[index - 1]
            operands = "".join(f", v{i}" for i in (first.out, s.out, *first.ins))
            lines.append(f"    if g{s.out} is not None:")
            lines.append(f"        x = {keyword_call(fused[index], f'g{s.out}{operands}', bind)}")
            lines += _accumulate(first.ins[0], sites)
            continue
        extra = {"needs": needs} if s.op.partial_vjp else {}
        rule = functools.partial(s.vjp, **extra, **s.attrs) if (extra or s.attrs) else s.vjp
        args = "".join(f"v{i}, " for i in s.ins)
        lines.append(f"    if g{s.out} is not None:")
        lines.append(f"        r = {keyword_call(rule, f'g{s.out}, [{args}], v{s.out}', bind)}")
        # zip in OpStep.backward stops at the shorter of inputs and the rule's results:
        # the first len(s.ins) results, padded with None (one tuple, ~0.3 us less than a
        # list sliced and extended)
        lines.append(f"        r = (*r, {'None, ' * len(s.ins)})[:{len(s.ins)}]")
        for k, (slot, need) in enumerate(zip(s.ins, needs)):
            if not need:
                continue
            lines.append(f"        x = r[{k}]")
            lines += _accumulate(slot, sites)
    outputs = "".join(f"v{slot}, " for slot in plan.output_slots)
    grads = "".join(
        f"g{plan.input_slots[i]} if g{plan.input_slots[i]} is not None "
        f"else zeros_like(operands[{i}]), " for i in step.wrt)
    lines.append(f"    return [{outputs}{grads}]")
    try:
        code = compile("\n".join(lines), f"<unigraph gradient of {plan.graph.name}>", "exec")
    except (SyntaxError, RecursionError, MemoryError):
        return None
    exec(code, scope)
    return scope["run"]


def _accumulate(slot, sites: dict) -> list:
    """The lines that add gradient `x` to slot's (as `plan._add`: a floating input's, when
    there is one; the first kept as it is). Where `x` is the only one that slot can get,
    its gradient is None until then: x itself (None or not) when the input is floating."""
    if sites.get(slot) == 1:
        return [f"        if v{slot}.dtype.kind == 'f':",
                f"            g{slot} = x"]
    return [f"        if x is not None and v{slot}.dtype.kind == 'f':",
            f"            g{slot} = x if g{slot} is None else g{slot} + x"]


def _array_operator(plan, s):
    """The Python operator of op step `s`'s fast kernel (`fast_kernels.OPERATORS`) where
    its result has a dim: on ndarray operands (every value here is one) `x + y` is the
    kernel's `np.add(x, y)`, an ndarray for such a result, without the kernel's call
    (a bias's add: ~1k instructions a step). None otherwise (a 0-d result is the
    kernel's: the operator would give a NumPy scalar)."""
    from unigraph.reference.fast_kernels import kernel

    fast = kernel(s.op.name, s.op)
    operator = getattr(fast, "operator", None)
    if operator is None or s.fn is not fast or not _rank(plan, s.out):
        return None
    return operator


def _rank(plan, slot):
    """The rank of the plan's value in `slot` (None if no node or input defines it)."""
    for value in (*plan.graph.inputs, *plan.graph.params):
        if plan.slots.get(value.id) == slot:
            return len(value.shape)
    for node in plan.graph.nodes:
        for value in node.outputs:
            if plan.slots.get(value.id) == slot:
                return len(value.shape)
    return None
