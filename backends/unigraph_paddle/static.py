"""paddle:static, building: an IR graph becomes one PIR `paddle.static.Program`.

`build_program` lowers the graph once: `paddle.static.data` for each input, a parameter (a
persistable variable, set from NumPy, never initialised by Paddle: the startup Program is
never run) for each graph param, one Paddle op per node from the shared lowering table,
`paddle.static.nn.cond` / `paddle.static.nn.while_loop` for control flow,
`paddle.static.gradients` for `grad` nodes, and the updates last (`unigraph_paddle.updates`).
Scalar constants and arithmetic with a 0-d operand take the builder's own forms
(`unigraph_paddle.program_scalars`: each constant made once). `unigraph_paddle.executable`
runs the result.

What Paddle 3.3.1 needs worked around (each has a test in tests/test_backend_paddle.py or
tests/test_fidelity_control_flow.py; each Paddle fault is a `unigraph_paddle.quirks` record):
* `paddle.static.gradients` gives total derivatives; a `grad` node wants the partial one
  through its function: an operand that also reaches the function another way is copied
  first (`ProgramBuilder.only_path`).
* a cond branch that returns an operand unchanged makes the backward of the other outputs
  with respect to it 0: such outputs are copied.
* a zero-size result of an `if` op has no memory (fetched as None): made outside the `if`;
  a result or operand that a dim left open may make empty crosses it flat, one element more.
* an `if` result is differentiable only if its then-branch result is: set from both.
* a loop body that yields one loop variable as another's next value, while passing the
  first through, segfaults the build (`optimize_update`): such results are copied.
* a while op's results count as differentiable only if the loop variables it starts from
  do (a captured value that needs a gradient does not count), else the backward is pruned:
  inside a `grad` function, floating carried values start from differentiable copies.
* the backward of an `if` nested in a `while` body or another `if` branch reads the wrong
  cotangent and yields zeros, and the backward of a loop body whose gradient ops read no
  forward value aborts the process: `unigraph_paddle.backward.fixed_backward` corrects both.
* a while op takes over the buffers of the values it starts from (a later read fails with
  "Tensor holds no memory"): every loop starts from copies.
* when two differentiated loops capture one value, the gradient of its other uses is
  counted twice: each loop captures its own copy.
* the backward of a while_loop nested in a cond branch or another while_loop fails at run
  time (the garbage collector frees the loop's inputs before the enclosing block's
  backward reads them; with the collector off, the backward reads later steps' values):
  such a loop is built inside an always-taken `if` of its own (`in_own_block`), and a
  loop variable its body passes through, captured values included, is yielded as a copy.
* nested in another loop's body, that backward is still wrong where the inner loop reads
  the outer loop's variable, or starts from a value that the outer loop captures or that
  also reaches the result another way: refused at build time, with the user's source line
  (`check_loop_in_loop`).

Static mode is Paddle process state (`paddle.enable_static()`); this backend never flips
it for good. `StaticMode` puts the calling thread in static mode only while it builds a
Program (or makes the first run of one) and then restores the mode it found, so
`paddle:eager` and `paddle:static` interleave freely, in either order.

Threads (checked on paddlepaddle 3.3.1, CPU):
* safe: dygraph ops on one thread while another builds or runs Programs; several threads
  running different Executables at once; several threads running one Executable (its runs
  are serialised by a per-Executable lock: they share feed variables and a Scope);
* serialised: Program builds and first runs, under `_BUILD_LOCK` (one thread in static
  mode at a time);
* not safe: Paddle's own `paddle.enable_static()` / `disable_static()` called by user code
  on another thread meanwhile (they change the process-wide default mode); and running one
  Executable while another thread calls its `set_param`/`get_param` is ordered only by
  that lock, not by any step boundary the caller means.
"""

from __future__ import annotations

import gc
import threading
import warnings

from unigraph.backend import lower_nodes
from unigraph.errors import BackendError
from unigraph.ir import Graph
from unigraph_paddle.adam import program_handlers as adam_handlers
from unigraph_paddle.backend import ignore_paddle_warnings
from unigraph_paddle.backward import fixed_backward
from unigraph_paddle.program_scalars import ScalarForms
from unigraph_paddle.updates import (
    emit_in_place,
    plan_fused,
    plan_in_place,
    plan_writes,
    uncopied_fused,
)

# Serialises Program builds (and first runs): one thread at a time in static mode.
_BUILD_LOCK = threading.RLock()


class StaticMode:
    """Inside `with StaticMode(paddle):` the current thread is in Paddle's static (PIR)
    mode; on exit the mode it found comes back. Holds `_BUILD_LOCK`.

    Paddle's mode is its dygraph tracer: None means static. `paddle.enable_static()` and
    `disable_static()` cost ~40 us, make a fresh tracer (losing its state) and change the
    process-wide default that new threads copy. This swaps only the calling thread's tracer
    (Paddle's thread-local `global_var` slot and the C++ current tracer), ~1 us, so a
    thread that first touches Paddle while another one is building still starts in
    dygraph mode.
    """

    __slots__ = ("_local", "_switch", "_saved", "_collecting")

    def __init__(self, paddle):
        self._local = paddle.base.framework.global_var.__dict__
        self._switch = paddle.base.core._switch_tracer

    def __enter__(self):
        _BUILD_LOCK.acquire()
        # No automatic garbage collection meanwhile: collecting an earlier function's
        # Program (kept in a reference cycle) while Paddle builds another one segfaults
        # Paddle 3.3.1 (seen in MultiplyOp::Vjp, after some dozens of nested-loop gradient
        # Programs built in one process). Collection resumes on exit.
        self._collecting = gc.isenabled()
        gc.disable()
        self._saved = self._local["_dygraph_tracer_"]
        self._local["_dygraph_tracer_"] = None
        self._switch(None)
        return self

    def __exit__(self, *exc):
        self._local["_dygraph_tracer_"] = self._saved
        self._switch(self._saved)
        if self._collecting:
            gc.enable()
        _BUILD_LOCK.release()
        return False


class ProgramBuilder:
    """Lowers one IR graph into the current Program (call inside `StaticMode` and a
    `program_guard`). The control-flow builders recurse through `lower`."""

    def __init__(self, paddle, lowerings: dict, *, stored_constants: bool = False):
        self.paddle = paddle
        self.grad_depth = 0  # how many `grad` functions are being lowered around us
        self.block_depth = 0  # how many cond branches and loop bodies are around us
        # Shared scalar constants and the 0-d operand forms (unigraph_paddle.program_scalars).
        self.scalars = ScalarForms(paddle, self, stored=stored_constants)
        self.lowerings = {**lowerings, **self.scalars.table(lowerings)}
        # In a cond branch or loop body, einsum is a product of broadcast operands summed
        # over the contracted letters: Paddle's einsum there fails at run time under a
        # gradient (3.3.1: "DenseTensor shouldn't be null"; random tester, seed 11008).
        self.block_lowerings = {**self.lowerings, "einsum": self._einsum_in_block}
        self.control_flow = {
            "cond": self.lower_cond,
            "while_loop": self.lower_while_loop,
            "grad": self.lower_grad,
            # Nodes of several outputs: the optimizers' fused updates (unigraph_paddle.adam).
            **adam_handlers(self, self.lowerings),
        }
        self._graphs = []  # the graphs being lowered, outermost first
        self._owners = []  # the node each of those graphs belongs to (None: the top level)
        # How many cond branches and loop bodies are around us, inside the innermost `grad`.
        self._control_depth = 0
        self._producers = None  # value id -> node, for the top-level graph

    def lower(self, graph, env: dict, owner=None) -> list:
        self._graphs.append(graph)
        self._owners.append(owner)
        try:
            table = self.block_lowerings if self.block_depth else self.lowerings
            return lower_nodes(graph, env, table, self.control_flow)
        finally:
            self._graphs.pop()
            self._owners.pop()

    def lower_subgraph(self, graph, args, owner) -> list:
        """A closed subgraph of node `owner`: its inputs are bound to `args`, in order."""
        return self.lower(graph, {v.id: a for v, a in zip(graph.inputs, args)}, owner)

    def _einsum_in_block(self, *xs, equation):
        """einsum as the product of its operands, each transposed to the order of the
        output's letters then the contracted ones and broadcast along the letters it
        lacks, summed over the contracted letters (float operands, no letter twice in one
        operand); else the table's."""
        paddle = self.paddle
        inputs, out = equation.split("->")
        terms = inputs.split(",")
        if "." in equation or any(len(set(t)) != len(t) for t in terms) or len(set(out)) != \
                len(out) or not all(x.dtype in (paddle.float32, paddle.float64) for x in xs):
            return self.lowerings["einsum"](*xs, equation=equation)
        letters = list(out) + sorted(set("".join(terms)) - set(out))
        product = None
        for term, x in zip(terms, xs):
            order = sorted(range(len(term)), key=lambda i: letters.index(term[i]))
            if order != list(range(len(term))):
                x = paddle.transpose(x, order)
            missing = [a for a, c in enumerate(letters) if c not in term]
            if missing:  # a size-1 axis for each letter the operand lacks
                x = paddle.unsqueeze(x, missing)
            product = x if product is None else product * x
        summed = list(range(len(out), len(letters)))
        return paddle.sum(product, axis=summed) if summed else product

    def lower_block(self, graph, args, owner) -> list:
        """A cond branch or a loop's cond or body: a subgraph inside a Paddle block."""
        self._control_depth += 1
        self.block_depth += 1
        try:
            return self.lower_subgraph(graph, args, owner)
        finally:
            self._control_depth -= 1
            self.block_depth -= 1

    def lower_cond(self, node, args) -> list:
        paddle = self.paddle
        pred, operands = args[0], args[1:]
        # A zero-size result of Paddle's `if` op comes out with no memory (3.3.1: fetched
        # as None, read later as shape (0,)). Its value is its shape and dtype alone, and
        # its gradient is empty, so it is made outside the `if` as zeros; where other dims
        # are unknown until the run, the `if` yields its shape (never empty) instead.
        # A result whose size is unknown until the run (a dim left open by input_spec) may
        # be empty then: the `if` yields it flat with one element more, and its shape.
        empty = [i for i, v in enumerate(node.outputs) if 0 in v.shape]
        sized = [i for i in empty if None in node.outputs[i].shape]
        kept = [i for i in range(len(node.outputs)) if i not in empty]
        padded = [j for j, i in enumerate(kept) if None in node.outputs[i].shape]
        live = [False] * len(kept)  # whether either branch's result needs a gradient
        # So may an operand: its gradient from the `if` would have no memory. It enters
        # flat with one element more, and is taken back to its shape inside the branch.
        # (An int8, uint8 or int16 one crosses as int32: see `_widened`.)
        flat = {k: (_flat_with_one_more(paddle, _widened(paddle, x)),
                    paddle.shape(_widened(paddle, x)), v.dtype)
                for k, (x, v) in enumerate(zip(operands, node.inputs[1:]))
                if None in v.shape and 0 not in v.shape}
        # An operand that is empty (a dim 0) would get a gradient with no memory from the
        # `if` too (a later read of it fails: 'Tensor holds no memory'; random tester, a
        # value made before a cond and read in a branch). Its value is its shape and dtype
        # and its gradient is empty: the branches read zeros of its shape, made outside.
        zeros = {k: _zeros_like_empty(paddle, x)
                 for k, (x, v) in enumerate(zip(operands, node.inputs[1:])) if 0 in v.shape}

        def branch(name):
            graph = node.subgraphs[name]

            def build():
                inner = list(operands)
                for k, (values, shape, dtype) in flat.items():
                    inner[k] = _unflattened(paddle, values, shape, dtype)
                for k, empty in zeros.items():
                    inner[k] = empty
                results = self.lower_block(graph, inner, node)
                outs = [results[i] for i in kept]
                # Paddle's backward through `cond` (3.3.1) loses cotangents where a result
                # is not a value of its own: one of the branch's operands handed back
                # unchanged (the other outputs' gradient with respect to it comes out 0),
                # or a value another op of the branch reads or that is two results (it
                # gets one result's cotangent only: (v, v * 2.0) or (v, v); random tester,
                # seed 11006). Such results are copied.
                outs = [paddle.assign(o) if _is_in(o, operands) or o.all_used_ops()
                        or sum(o is p for p in outs) > 1 else o for o in outs]
                for j, o in enumerate(outs):
                    live[j] = live[j] or not o.stop_gradient
                outs, shapes = _through_if(paddle, outs, padded)
                return outs + [paddle.shape(_widened(paddle, results[i])) for i in sized] + shapes

            return build

        # No results left: nothing to compute (subgraphs are pure).
        results = (list(paddle.static.nn.cond(pred, branch("then"), branch("else")))
                   if kept or sized else [])
        # Paddle takes an `if` result's stop_gradient from the then-branch alone (3.3.1: a
        # then-branch int cast makes the else-branch's gradient 0): differentiable if
        # either branch's result is.
        for result, needs_gradient in zip(results, live):
            if needs_gradient:
                result.stop_gradient = False
        results, made_shapes = results[:len(kept) + len(sized)], results[len(kept) + len(sized):]
        for j, shape in zip(padded, made_shapes):
            results[j] = _unflattened(paddle, results[j], shape, node.outputs[kept[j]].dtype)
        made, shapes = iter(results[:len(kept)]), dict(zip(sized, results[len(kept):]))
        return [paddle.zeros(shapes.get(i, list(v.shape)), v.dtype) if i in empty
                else next(made) for i, v in enumerate(node.outputs)]

    def lower_while_loop(self, node, args) -> list:
        paddle = self.paddle
        carried = node.attrs["num_carried"]
        cond_graph, body_graph = node.subgraphs["cond"], node.subgraphs["body"]
        args = list(args)
        nested = bool(self._control_depth and self.grad_depth
                      and any(not a.stop_gradient for a in args))
        if nested:
            self.check_loop_in_loop(node, args[carried:])
        # Paddle's while op takes over the buffers of the values it starts from (3.3.1: a
        # later read of one fails with "Tensor holds no memory"), so it starts from copies.
        args[:carried] = [paddle.assign(a) for a in args[:carried]]
        # A constant shared with other nodes is captured as a copy, as before they were
        # shared: the backward of two loops capturing one value fails (3.3.1: call_vjp is
        # handed None for its gradient), see also below.
        args[carried:] = [paddle.assign(a) if self.scalars.is_shared(a) else a
                          for a in args[carried:]]
        if self.grad_depth:
            # Paddle marks a while op's results differentiable only from the loop
            # variables it starts from (a captured value that requires a gradient does not
            # count), and prunes the backward of the rest: each floating carried value
            # starts differentiable when anything in the loop needs a gradient.
            if any(not a.stop_gradient for a in args):
                for a in args[:carried]:
                    if _is_float(paddle, a):
                        a.stop_gradient = False
                # The backward of a while op seeds the gradient of a value it captures with
                # that value's gradient so far; when two loops capture one value, another
                # use's share is counted twice (3.3.1). Each loop captures its own copy.
                args[carried:] = [paddle.assign(a) if not a.stop_gradient else a
                                  for a in args[carried:]]

        def cond(*values):
            return self.lower_block(cond_graph, values, node)[0]

        def body(*values):
            # Captured operands are passed as loop variables the body returns unchanged,
            # so the body sees them as its inputs. (Paddle's `optimize_update` turns such
            # pass-through variables back into captured values; its backward handles
            # those, given the results are marked as above.) A body result that is
            # another slot's loop variable is copied: `optimize_update` drops a
            # pass-through variable while another slot still yields it, and the process
            # segfaults (3.3.1: `body(k, v): return k + 1, captured`).
            outs = list(self.lower_block(body_graph, values, node)) + list(values[carried:])
            # A differentiated loop nested in a branch or loop yields a copy of each loop
            # variable its body passes through unchanged, captured values included: each
            # stays a real loop variable, whose gradient Paddle gets right (a pass-through
            # failed in the enclosing backward, "should be in name map", 3.3.1).
            # A result the body computes that another op of the body reads, or that is
            # two results, is copied: it got one result's cotangent only (3.3.1, as in
            # lower_cond: `body(k, a, b): v = a * 1.1; return k + 1, v, v * 0.5 + b`).
            return [paddle.assign(o) if _is_in(o, values[:i] + values[i + 1:])
                    or (nested and o is values[i]) or (not _is_in(o, values) and (
                        o.all_used_ops() or sum(o is p for p in outs) > 1)) else o
                    for i, o in enumerate(outs)]

        if not nested:
            return list(paddle.static.nn.while_loop(cond, body, args)[:carried])
        return self.in_own_block(args[:carried],
                                 lambda: paddle.static.nn.while_loop(cond, body, args)[:carried])

    def in_own_block(self, starts, loop) -> list:
        """`loop()` (a differentiated while op nested in a branch or loop body) built inside
        an `if` of its own that is always taken, whose operands are its `starts` and
        captured values, made in the enclosing block.

        Paddle 3.3.1's garbage collector frees a nested while op's inputs while the
        enclosing block's backward still reads them ("DenseTensor shouldn't be null"):
        here they belong to the enclosing block, which the `if` does not collect from.
        (Running with the collector off instead computes wrong gradients: a while body's
        results then reuse their buffers from one iteration to the next, and the values
        the backward stacks for an iteration are overwritten by the next.)"""
        paddle = self.paddle
        # A zero-size result of an `if` comes out with no memory (as in lower_cond): a
        # loop variable whose size is 0 keeps its shape, so its result is made outside;
        # one with a dim left open may be empty at the run, so it crosses the `if` flat
        # with one element more, with its shape.
        kept = [i for i, s in enumerate(starts) if 0 not in s.shape]
        padded = [j for j, i in enumerate(kept) if -1 in starts[i].shape]

        def branch(values):
            values, shapes = _through_if(paddle, values, padded)
            return values + shapes

        def taken():
            made = list(loop())  # (built once: the loop's ops are the branch's)
            return branch([made[i] for i in kept])

        always = paddle.full([], True, "bool")
        results = (paddle.static.nn.cond(
            always, taken, lambda: branch([paddle.assign(starts[i]) for i in kept]))
            if kept else [])  # no results left: nothing to compute (pure)
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        results, shapes = results[:len(kept)], results[len(kept):]
        for result, i in zip(results, kept):
            if not starts[i].stop_gradient:  # as lower_cond: not from the then-branch alone
                result.stop_gradient = False
        for j, shape in zip(padded, shapes):
            results[j] = _unflattened(paddle, results[j], shape, starts[kept[j]].dtype)
        made = iter(results)
        return [next(made) if i in kept else _zeros_like_empty(paddle, s)
                for i, s in enumerate(starts)]

    def check_loop_in_loop(self, node, captured) -> None:
        """A differentiated while_loop nested (through branches, maybe) in another loop's
        body: Paddle 3.3.1's backward gets the gradient wrong where the loop captures a
        value that needs one and changes from one outer step to the next, or where a
        value it starts from (or one that value is made from, in the enclosing body or
        branch) is one the outer loop captures or also reaches the result another way.
        Refused at build time, with the user's source line; paddle:eager runs it."""
        for owner in reversed(self._owners):
            if owner is None or owner.op == "grad":
                return  # nested in branches only: computes (in_own_block)
            if owner.op == "while_loop":
                break
        carried = node.attrs["num_carried"]
        if any(not c.stop_gradient and not self.loop_invariant(v)
               for c, v in zip(captured, node.inputs[carried:])):
            why = ("its body reads a value from outside the loop that needs a gradient and "
                   "changes from one step of the loop around it to the next")
        elif self.starts_from_captured(node):
            why = ("a value it starts from is (or is made from) a value the loop around it "
                   "captures")
        elif self.shares_a_path(node):
            why = ("a value it starts from (or one that value is made from) also reaches "
                   "the result another way")
        else:
            return
        where = f" ({node.source})" if node.source else ""
        raise BackendError(
            f"paddle:static cannot differentiate through a while_loop nested in another "
            f"while_loop{where}: {why}, and Paddle 3.3.1's backward gets that gradient wrong "
            f"there. Use paddle:eager, or move the loop out of the loop around it.")

    def loop_invariant(self, value) -> bool:
        """Whether `value`, read in the graph being lowered, is (through the operands of
        the branches around it) a value the innermost enclosing loop captures: the same
        in every step of that loop."""
        for graph, owner in zip(reversed(self._graphs), reversed(self._owners)):
            index = next((i for i, v in enumerate(graph.inputs) if v.id == value.id), None)
            if index is None or owner is None:
                return False
            if owner.op == "while_loop":
                return index >= owner.attrs["num_carried"]
            if owner.op != "cond":
                return False
            value = owner.inputs[1 + index]  # the branch's operand (after the predicate)
        return False

    def starts_from_captured(self, node) -> bool:
        """Whether a floating value `node` starts a loop variable from is, or is made from
        (in the graph around it), a value the enclosing loop captures: Paddle 3.3.1's
        backward of the inner loop gets that gradient wrong too."""
        graph = self._graphs[-1]
        producers = {v.id: n for n in graph.nodes for v in n.outputs}
        starts = [v.id for v in node.inputs[:node.attrs["num_carried"]] if _floating(v)]
        cone = _floating_cone(producers, starts)
        return any(v.id in cone and self.loop_invariant(v) for v in graph.inputs)

    def shares_a_path(self, node) -> bool:
        """Whether, in the graph around `node` or any graph around that up to the innermost
        enclosing loop body, a floating value that `node` reads (or one it is made from
        there) has another use: another node, a second operand slot, or a graph output."""
        consumer = node
        for graph, owner in zip(reversed(self._graphs), reversed(self._owners)):
            if _other_uses(graph, consumer):
                return True
            if owner is None or owner.op != "cond":
                return False  # the loop body around us (or the grad function) is checked
            consumer = owner
        return False

    def only_path(self, node, index, args) -> bool:
        """True when operand `index` of a top-level `grad` node reaches `fn` only as that
        operand: it is no other operand's native and no ancestor of another operand. Inside
        a subgraph the answer is always False, as ancestry across its boundary is unknown."""
        if len(self._graphs) != 1 or sum(a is args[index] for a in args) > 1:
            return False
        if self._producers is None:
            self._producers = {
                v.id: n for n in self._graphs[0].nodes for v in n.outputs
            }
        target, seen = node.inputs[index].id, set()
        stack = [v.id for j, v in enumerate(node.inputs) if j != index]
        while stack:
            value_id = stack.pop()
            if value_id == target:
                return False
            if value_id not in seen:
                seen.add(value_id)
                producer = self._producers.get(value_id)
                if producer is not None:
                    stack.extend(v.id for v in producer.inputs)
        return True

    def lower_grad(self, node, args) -> list:
        paddle = self.paddle
        wrt, output = node.attrs["wrt"], node.attrs["output"]
        leaves = list(args)
        for i in wrt:
            # `paddle.static.gradients` gives total derivatives through the whole Program;
            # the node wants the partial derivative through `fn` alone. A fresh copy of
            # the operand cuts every other path; it is skipped where there is none.
            # A constant shared with other nodes (`ScalarForms.is_shared`) has other paths.
            if (not self.only_path(node, i, args) or _made_by_assign_value(args[i])
                    or self.scalars.is_shared(args[i])):
                leaves[i] = paddle.assign(args[i])
            leaves[i].stop_gradient = not _is_float(paddle, args[i])
        self.grad_depth += 1
        control_depth, self._control_depth = self._control_depth, 0
        try:
            outs = self.lower_subgraph(node.subgraphs["fn"], leaves, node)
        finally:
            self.grad_depth -= 1
            self._control_depth = control_depth
        xs = [leaves[i] for i in wrt]
        differentiable = [i for i, x in enumerate(xs) if not x.stop_gradient]
        grads = [None] * len(xs)
        target = outs[output]
        if differentiable and not target.stop_gradient:
            with fixed_backward(paddle):
                try:
                    found = paddle.static.gradients([target], [xs[i] for i in differentiable])
                except ValueError as error:
                    raise _no_second_order(error, node) from None
            for i, g in zip(differentiable, found):
                grads[i] = g
        grads = [paddle.zeros_like(x) if g is None else g for g, x in zip(grads, xs)]
        return list(outs) + grads


def _made_by_assign_value(value) -> bool:
    """True for the result of `paddle.assign(array)` (a constant of more than one element):
    Paddle 3.3.1's Program backward gives a gradient with respect to it that counts only one
    of its uses (quirk "grad (of a constant array)"); a copy of it gets them all."""
    op = value.get_defining_op()
    return op is not None and op.name() == "pd_op.assign_value_"


# What Paddle 3.3.1's Program backward raises for the gradient of a while loop's gradient
# (quirk "while_loop (second order)").
LOOP_GRADIENT_ERROR = "we can only get phi::DataType from DenseTensorType"


def _no_second_order(error: ValueError, node) -> Exception:
    """Paddle 3.3.1's Program backward refuses to differentiate a gradient op that has no
    gradient of its own (exp_grad, take_along_axis_grad, ...: "op 'pd_op.exp_grad' has no
    grad op"), and the gradient of a while loop (quirk "while_loop (second order)"):
    unigraph's error, with the grad's line, the loop's and the way out. Other errors as
    they are."""
    text = str(error)
    where = f" ({node.source})" if node.source else ""
    if LOOP_GRADIENT_ERROR in text:
        loops = [loop for inner in node.subgraphs["fn"].nodes_of("grad")
                 for loop in inner.subgraphs["fn"].nodes_of("while_loop")]
        if not loops:
            return error
        at = f" at {loops[0].source}" if loops[0].source else ""
        return BackendError(
            f"paddle:static cannot take this gradient of a gradient (second order){where} "
            f"through the while_loop{at}: Paddle 3.3.1's Program backward cannot "
            "differentiate a while loop's gradient. Use paddle:eager, torch or tensorflow "
            "for higher-order derivatives through a loop.")
    if "has no grad op" not in text:
        return error
    op = text.split("'")[1] if text.count("'") >= 2 else "an op"
    return BackendError(
        f"paddle:static cannot take this gradient of a gradient (second order){where}: "
        f"Paddle 3.3.1's Program backward has no gradient for {op}. Use paddle:eager, "
        "torch or tensorflow for higher-order derivatives through it.")


class BuiltProgram:
    """A Program and what running it needs: feed names, fetch values, parameter names, and
    the stored constants ({name: array}) to set in its Scope before the first run."""

    def __init__(self, program, feed_names, fetch, param_names, constants=None):
        self.program = program
        self.feed_names = feed_names
        self.fetch = fetch
        self.param_names = param_names
        self.constants = constants or {}


def build_program(paddle, graph, lowerings: dict, *, fetch_all: bool = False,
                  stored_constants: bool = False) -> BuiltProgram:
    """Lower `graph` into a new Program. fetch_all: fetch every top-level value (keys of the
    fetch list are value ids) and leave out the updates; else fetch `graph.outputs`.
    stored_constants: full-size constants are persistable variables (`BuiltProgram.constants`
    lists their values), not `full` ops run every time (`program_scalars.ScalarForms`)."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    placeholder = paddle.nn.initializer.Constant(0.0)  # lands in `startup`, never run
    with (
        warnings.catch_warnings(),  # filters set at load time may have been reset since
        StaticMode(paddle),
        paddle.static.program_guard(main, startup),
        paddle.utils.unique_name.guard(),
    ):
        ignore_paddle_warnings()
        env = {}
        feed_names = []
        for i, value in enumerate(graph.inputs):
            name = f"input_{i}"
            shape = [-1 if d is None else d for d in value.shape]
            env[value.id] = paddle.static.data(name, shape, value.dtype)
            feed_names.append(name)
        param_names = []
        for i, value in enumerate(graph.params):
            name = f"param_{i}"
            param = paddle.static.create_parameter(
                list(value.shape), value.dtype, name=name, default_initializer=placeholder
            )
            # Differentiable only where a `grad` node asks for it (`lower_grad`).
            param.stop_gradient = True
            env[value.id] = param
            param_names.append(name)
        builder = ProgramBuilder(paddle, lowerings, stored_constants=stored_constants)
        if fetch_all:
            builder.lower(graph, env)
            ids = list(dict.fromkeys(_top_level_ids(graph)))
            return BuiltProgram(main, feed_names, {i: env[i] for i in ids}, param_names,
                                builder.scalars.stored_constants())
        in_place = plan_in_place(graph)
        fused = plan_fused(graph)
        written = {**plan_writes(graph, in_place), **fused}
        uncopied = uncopied_fused(graph, fused)
        producers = {v.id: node for node in graph.nodes for v in node.outputs}
        absorbed = {id(node) for update in in_place.values() for node in update.nodes}
        kept = [written.get(id(node), node) for node in graph.nodes if id(node) not in absorbed]
        outputs = builder.lower(Graph(graph.name, graph.inputs, graph.params, kept,
                                      graph.outputs), env)
        params = [env[p.id] for p in graph.params]
        # An output that is a parameter must be read before the updates overwrite it.
        outputs = [paddle.assign(o) if _is_in(o, params) else o for o in outputs]
        # Every source is read (a parameter copied: p <- q, q <- p) before any is written.
        writes, in_own_buffer = [], []
        for param, new in graph.updates:
            if id(new) in in_place or new.id in uncopied:  # written in place, read no more
                continue
            source = env[new.id]
            if _is_in(source, params):
                source = paddle.assign(source)
            target = env[param.id]
            # Made in the parameter's buffer (`plan_writes`): a copy onto itself, which
            # Paddle skips, at the very end (see updates.py).
            made_there = id(producers[new.id]) in written if new.id in producers else False
            (in_own_buffer if made_there else writes).append((source, target))
        for source, target in writes:
            paddle.assign(source, output=target)
        for update in in_place.values():  # last: every other read of the params is done
            emit_in_place(paddle, update, env)
        for source, target in in_own_buffer:
            paddle.assign(source, output=target)
    return BuiltProgram(main, feed_names, outputs, param_names,
                        builder.scalars.stored_constants())


def _top_level_ids(graph):
    yield from (v.id for v in graph.inputs)
    yield from (v.id for v in graph.params)
    for node in graph.nodes:
        yield from (v.id for v in node.outputs)


def _other_uses(graph, consumer) -> bool:
    """Whether a floating value `consumer` reads in `graph` (or one it is made from there)
    is read twice by it, or reaches the graph's outputs without going through it."""
    producers = {v.id: n for n in graph.nodes for v in n.outputs}
    reads = [v for v in consumer.inputs if _floating(v)]
    if len({v.id for v in reads}) < len(reads):
        return True
    ancestors = _floating_cone(producers, [v.id for v in reads])
    # The values on a floating path to the outputs: a use that reaches none (a branch
    # predicate, say) carries no gradient.
    live = _floating_cone(producers, [v.id for v in graph.outputs if _floating(v)])
    makers = {id(producers[i]) for i in ancestors if i in producers}
    for other in graph.nodes:
        if other is consumer or id(other) in makers:
            continue
        if (any(v.id in ancestors for v in other.inputs)
                and any(v.id in live for v in other.outputs)):
            return True
    return any(v.id in ancestors for v in graph.outputs)


def _floating_cone(producers, ids) -> set:
    """The value ids in `ids` and every floating value they are made from."""
    cone, stack = set(), list(ids)
    while stack:
        value_id = stack.pop()
        if value_id not in cone:
            cone.add(value_id)
            producer = producers.get(value_id)
            if producer is not None:
                stack.extend(v.id for v in producer.inputs if _floating(v))
    return cone


def _floating(value) -> bool:
    return value.dtype in ("float16", "bfloat16", "float32", "float64")


def _is_in(value, values) -> bool:
    # Identity, not ==: `==` on a pir.Value builds an `equal` op.
    return any(value is v for v in values)


def _is_float(paddle, value) -> bool:
    return value.dtype in (paddle.float16, paddle.float32, paddle.float64)


def _flat_with_one_more(paddle, x):
    """`x` flattened with one zero appended: never empty, so it has memory when it crosses
    an `if` op (a value that a dim left open may make empty); `_unflattened` undoes it."""
    return paddle.concat([paddle.reshape(x, [-1]), paddle.zeros([1], x.dtype)])


def _widened(paddle, x):
    """`x`, or as int32 where it is int8, uint8 or int16: a Program's paddle.concat refuses
    uint8 and paddle.shape int16 (quirks "concat (stack)", "small ints"), so a small int
    crosses an `if` flat as int32 and `_unflattened` casts it back (random tester, seed
    10002)."""
    if x.dtype in (paddle.int8, paddle.uint8, paddle.int16):
        return paddle.cast(x, paddle.int32)
    return x


def _zeros_like_empty(paddle, value):
    """Zeros of the shape of `value`, which is empty (a dim 0): read when the Program runs
    where another dim is open (paddle.zeros refuses a -1 in a list; random tester, seed
    10002)."""
    if -1 in value.shape:
        return paddle.zeros(paddle.shape(_widened(paddle, value)), value.dtype)
    return paddle.zeros(list(value.shape), value.dtype)


def _through_if(paddle, values, padded) -> tuple[list, list]:
    """A branch's results `values` with those at indices `padded` flat with one more
    element (`_flat_with_one_more`; a small int as int32, `_widened`), and those values'
    run-time shapes, for `_unflattened` after the `if`."""
    values = list(values)
    for j in padded:
        values[j] = _widened(paddle, values[j])
    shapes = [paddle.shape(values[j]) for j in padded]
    for j in padded:
        values[j] = _flat_with_one_more(paddle, values[j])
    return values, shapes


def _unflattened(paddle, flat, shape, dtype):
    """The value `_flat_with_one_more` made `flat` of, back in its run-time `shape` and its
    `dtype` (a name or a Paddle dtype: a small int crossed as int32, `_widened`)."""
    value = paddle.reshape(flat[:-1], shape)
    dtype = getattr(paddle, dtype) if isinstance(dtype, str) else dtype
    return paddle.cast(value, dtype) if dtype in (paddle.int8, paddle.uint8, paddle.int16) \
        else value
