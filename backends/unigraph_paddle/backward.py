"""paddle:static gradients through nested control flow: a fix for Paddle's PIR backward.

`paddle.static.gradients` builds the backward of an `if` op by calling
`paddle.autograd.ir_backward.append_backward_ops` once per branch. In paddlepaddle 3.3.1
that call has two faults when the `if` sits inside another control-flow block (a `while`
body, or another `if` branch), and together they make the gradient silently 0 or wrong:

* it is not given the enclosing block's `bwd_value_to_block_argument_map`, so inside a
  `while` backward the branch's gradient ops read the cotangent of the *first* iteration
  (a value outside the loop) instead of the loop's block argument;
* the branch's closing `yield` looks the gradients of the values the branches capture up
  under their stack copies (the values a `while`/`if` backward pops, from
  `control_flow_value_to_copyvalue_map`), while the gradients were recorded under the
  original values: no gradient is found and the branch yields zeros.

A third fault is a crash, not a wrong number: when no gradient op of a `while` body reads
a forward value (a body of `assign`, `transpose` or constants), the backward prunes the
body's value stack (`while_prune_check`) while the backward loop's `cf.has_elements`
still reads it, and the process aborts ("Destroyed a op_result that is still in use by
cf.has_elements").

A fourth is a raw TypeError from `call_vjp`: a value of `stop_gradient` (a cast from an
int) that a `while` body reads and a broadcasting add uses outside (`r + y`, `r` of fewer
dims) gets from that add's vjp a None gradient, which the `while`'s vjp is handed where it
takes a tensor. Zeros are that gradient (Paddle builds them where a value has no gradient
recorded at all).

`fixed_backward()` swaps in a wrapper around `append_backward_ops` for the duration of
one `paddle.static.gradients` call (Program builds hold `_BUILD_LOCK`, so no other build
sees it) that passes the enclosing map down and hands the yield the original values,
a `while_prune_check` that keeps a stack something else still reads, and a `call_vjp`
that gives a `while` zeros for a None gradient. It changes nothing
for an `if` at the top level of a Program (the copy map is empty there, the enclosing map
too), which is Paddle's own tested path. `quirks.py` pins the faults.
"""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def fixed_backward(paddle):
    """Inside the block, Paddle's PIR backward handles an `if` nested in control flow.

    >>> with fixed_backward(paddle):
    ...     grads = paddle.static.gradients([loss], [x])
    """
    from paddle.autograd import ir_backward
    from paddle.autograd.backward_utils import ValueDict

    native = ir_backward.append_backward_ops
    enclosing = []  # the block-argument map of each append_backward_ops call, outermost first

    def append_backward_ops(base_op, base_inputs, base_input_grads, fwd_block, bwd_block,
                            effective_forward_ops, no_grad_set, backward_ops, state,
                            bwd_value_to_block_argument_map=None,
                            control_flow_value_to_copyvalue_map=None):
        if bwd_value_to_block_argument_map is None:
            bwd_value_to_block_argument_map = ValueDict()
        if control_flow_value_to_copyvalue_map is None:
            control_flow_value_to_copyvalue_map = ValueDict()
        nested = base_op is not None and fwd_block != bwd_block
        if nested and base_op.name() == "pd_op.if":
            if enclosing and not bwd_value_to_block_argument_map:
                bwd_value_to_block_argument_map = enclosing[-1].copy()
        if nested and base_op.name() in ("pd_op.if", "pd_op.while"):
            originals = ValueDict()
            for original, copy in control_flow_value_to_copyvalue_map.items():
                originals[copy] = original
            base_inputs = [originals.get(v, v) for v in base_inputs]
        enclosing.append(bwd_value_to_block_argument_map)
        try:
            return native(base_op, base_inputs, base_input_grads, fwd_block, bwd_block,
                          effective_forward_ops, no_grad_set, backward_ops, state,
                          bwd_value_to_block_argument_map, control_flow_value_to_copyvalue_map)
        finally:
            enclosing.pop()

    native_prune_check = ir_backward.while_prune_check

    def while_prune_check(while_tuple_ops):
        # (pop, push, stack_create): prune only a stack that the pop and the push alone use.
        if not native_prune_check(while_tuple_ops):
            return False
        pop, push, stack = while_tuple_ops
        return all(user.id() in (pop.id(), push.id())
                   for result in stack.results() for user in result.all_used_ops())

    core = paddle.framework.core
    native_call_vjp = core.call_vjp

    def call_vjp(op, inputs, outputs, output_grads, stop_gradients):
        if op.name() == "pd_op.while":
            # inputs: [cond] + carried + captured; output_grads: carried's + captured's.
            output_grads = [[paddle.full_like(inputs[i + 1][0], 0.0)] if grad == [None]
                            else grad for i, grad in enumerate(output_grads)]
        return native_call_vjp(op, inputs, outputs, output_grads, stop_gradients)

    ir_backward.append_backward_ops = append_backward_ops
    ir_backward.while_prune_check = while_prune_check
    core.call_vjp = call_vjp
    try:
        yield
    finally:
        ir_backward.append_backward_ops = native
        ir_backward.while_prune_check = native_prune_check
        core.call_vjp = native_call_vjp
