"""`ug.grad` and `ug.value_and_grad`, computed by each backend's own autodiff.

Eager targets call `backend.eager_grad` (torch.autograd, tf.GradientTape, paddle.grad, the
NumPy engine's VJP tape). When tracing, the differentiated function becomes a `grad` node
holding its subgraph; static backends lower it with tf.gradients, paddle's
append_backward, torch.autograd inside the compiled callable, or the NumPy VJP rules.
"""

from __future__ import annotations

import sys

from unigraph import config, pytree
from unigraph.dispatch import _param_leaves, current_backend, native, symbolic, value_of
from unigraph.dtypes import is_float
from unigraph.errors import UnigraphError
from unigraph.function import Function, as_input_tensor, is_array_leaf
from unigraph.ops.base import TensorSpec
from unigraph.tensor import (
    Parameter,
    Tensor,
    _holds_tensor,
    as_array,
    dtype_name,
    eager_tensor,
    tensor,
)
from unigraph.tracing import GraphBuilder, _builder, _in_function, _region, region, user_source


def _positions(argnums, count: int) -> tuple:
    positions = (argnums,) if isinstance(argnums, int) else tuple(argnums or ())
    for p in positions:
        if not 0 <= p < count:
            raise ValueError(f"argnums {argnums!r} is out of range for {count} arguments")
    return positions


def _scalar_of(result, fn, leaves=None) -> Tensor:
    """The floating scalar `fn` returned (`leaves`: `result` flattened, if done already)."""
    if leaves is None:
        leaves, _ = pytree.flatten(result, is_array_leaf)
    first = leaves[0] if leaves else None
    if not isinstance(first, Tensor) or first.shape not in ((), (1,)) or not is_float(first.dtype):
        got = f"{first.dtype}{list(first.shape)}" if isinstance(first, Tensor) else repr(first)
        raise UnigraphError(
            f"grad of {getattr(fn, '__name__', fn)!r}: the function must return a floating "
            f"scalar (or a tuple whose first item is one), got {got}; reduce it with ug.sum "
            "or ug.mean"
        )
    return first


def value_and_grad(fn, argnums=0, wrt=None):
    """Return a function giving `(fn(*args), gradients)`.

    Gradients are taken of `fn`'s output (a floating scalar, or the first item of a tuple)
    with respect to the arguments `argnums` (an int gives one gradient, a tuple a tuple),
    or, when `wrt` is a list of Parameters, with respect to those (a list).

    >>> loss, g = ug.value_and_grad(lambda x: ug.sum(x * x))(ug.tensor([1.0, 2.0]))
    """
    wrt = list(wrt) if wrt is not None else None
    for p in wrt or ():  # (a loop, not all(): an eager step makes one of these every step)
        if not isinstance(p, Parameter):
            raise TypeError("wrt must be a list of ug.nn.Parameter objects")

    def differentiated(*args):
        positions = () if wrt is not None and argnums == 0 else _positions(argnums, len(args))
        if positions:  # (else nothing to convert: an eager training step's closure)
            args = [as_input_tensor(a) if i in positions else a for i, a in enumerate(args)]
            for p in positions:
                if not is_float(args[p].dtype):
                    raise UnigraphError(
                        f"grad with respect to argument {p} at {user_source()}, which is "
                        f"{args[p].dtype}: only floating tensors have gradients; pass it as "
                        "a float (ug.cast(x, \"float32\")) or leave its position out of "
                        "argnums"
                    )
        builder = _builder.get()
        if builder is not None:
            # Traced, `fn`'s Python control flow is converted, as a traced Module's forward
            # is: `if` on a tensor in a loss means in a static trace what it means eagerly.
            # (unigraph's own functions, the checker's, are not the user's: left as written)
            traced = fn
            if not getattr(fn, "__module__", "").startswith("unigraph."):
                from unigraph import autograph

                traced = autograph.convert(fn).function
            value, grads = _traced(builder, traced, args, positions, wrt or [])
        else:
            value, grads = _eager(fn, args, positions, wrt or [])
        if wrt is not None:
            return value, grads
        return value, grads[0] if isinstance(argnums, int) else tuple(grads)

    differentiated.__name__ = f"value_and_grad({getattr(fn, '__name__', 'fn')})"
    return _Transformed(differentiated, () if wrt is not None and argnums == 0 else argnums)


class _Transformed(Function):
    """The Function `ug.grad` / `ug.value_and_grad` return. An eager training step makes a
    new one every step (`ug.value_and_grad(lambda: loss(model(x), y), wrt=...)()`), so the
    eager call with tensors only goes straight to the function: what `Function.__call__`
    does there (convert arguments, make Python numbers in the result tensors) has nothing
    to do for tensors in and tensors out. Every other call takes `Function.__call__`."""

    def __init__(self, fn, argnums):
        # Function.__init__ (~3 us: functools.update_wrapper, the signature's names, the
        # caches) runs when something first asks for what it makes (`__getattr__`): the
        # eager call below needs only `fn`.
        self.fn = fn
        self.argnums = argnums  # the differentiated arguments: () for wrt= alone

    def __getattr__(self, name):
        # Only for attributes not set yet (Python looks here last).
        fn = self.__dict__.get("fn")
        if fn is None or "_cache" in self.__dict__:  # unpickling, or a missing attribute
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        Function.__init__(self, fn, autograph=False)
        return getattr(self, name)

    def __call__(self, *args, **kwargs):
        if self.argnums != () and any(type(a) is list or type(a) is tuple for a in args):
            args = _differentiated_as_tensors(args, self.argnums, self.name)
        # current_target()'s precedence inline (as dispatch.current_backend): every eager
        # training step calls this.
        if (kwargs or _builder.get() is not None
                or (config._context_target.get() or config._global_target
                    or config.current_target()).mode != "eager"):
            return Function.__call__(self, *args, **kwargs)
        for a in args:  # (a loop, not all(): no generator made on every step)
            if type(a) is not Tensor:
                return Function.__call__(self, *args, **kwargs)
        token = _in_function.set(True)  # as inside any @ug.function body run eagerly
        try:
            return self.fn(*args)
        finally:
            _in_function.reset(token)


def _differentiated_as_tensors(args, argnums, name: str) -> tuple:
    """`args` with each (nested) list or tuple at a differentiated position made one tensor,
    as a NumPy array there is. Done before `Function.__call__` sees the arguments: it would
    flatten the list into scalar inputs, which a static target traces into symbolic scalars
    that no list-to-tensor conversion can read (eager ones could, so the meaning differed)."""
    positions = _positions(argnums, len(args))
    backend = current_backend()

    def one_tensor(index, data):
        if _holds_tensor(data):
            return tensor(data)  # tensors among the items: stacked, as `ug.tensor` does
        array = as_array(data, what=f"{name} argument {index}")
        return Tensor(array.shape, dtype_name(array.dtype), backend=backend, array=array)

    return tuple(one_tensor(i, a) if i in positions and type(a) in (list, tuple) else a
                 for i, a in enumerate(args))


def grad(fn, argnums=0, wrt=None):
    """Return a function giving the gradients of `fn` (see `value_and_grad`).

    >>> ug.grad(lambda x: ug.sum(x * x))(ug.tensor([1.0, 2.0]))   # [2., 4.]
    """
    both = value_and_grad(fn, argnums, wrt)

    def gradient(*args):
        return both(*args)[1]

    gradient.__name__ = f"grad({getattr(fn, '__name__', 'fn')})"
    return _Transformed(gradient, both.argnums)


def _eager(fn, args, positions, params):
    backend = current_backend()
    watched = [p.native_for(backend) for p in params]
    if positions:
        watched[:0] = [native(args[p], backend) for p in positions]
    count = len(positions)
    out_holder = []  # [treedef (None: one tensor), the output leaves]

    def run(*leaves):
        call_args = args
        if count:
            call_args = list(args)
            for p, leaf in zip(positions, leaves):
                call_args[p] = Tensor(args[p].shape, args[p].dtype, backend=backend,
                                      native=leaf)
        outer = _param_leaves.get()
        overrides = dict(outer) if outer else {}
        for p, leaf in zip(params, leaves[count:] if count else leaves):
            overrides[id(p)] = leaf
        token = _param_leaves.set(overrides)
        # tracing.region("grad")'s mark, set directly (every eager training step enters
        # it): ug.assign is refused here, as in a static graph
        inside = _region.set(("grad", sys._getframe()))
        try:
            result = fn(*call_args)
        finally:
            _region.reset(inside)
            _param_leaves.reset(token)
        if type(result) is Tensor:  # the usual loss: one leaf, nothing to walk
            if result.shape not in ((), (1,)) or not is_float(result.dtype):
                _scalar_of(result, fn, [result])  # raises, naming the function
            out_holder[:] = (None, [result])
            loss = result._native if result._backend is backend else None
            if loss is None:
                loss = native(result, backend)
            return [loss, loss]
        out_leaves, treedef = pytree.flatten(result, is_array_leaf)
        scalar = _scalar_of(result, fn, out_leaves)
        # A Python number or array returned beside the loss: the tensor a plain
        # @ug.function makes of it (a Python float is float32, an int int64, an array
        # keeps its dtype), as the static grad node does.
        out_leaves = [as_input_tensor(x) for x in out_leaves]
        out_holder[:] = (treedef, out_leaves)
        return [native(scalar, backend)] + [native(x, backend) for x in out_leaves]

    outputs, grads = backend.eager_grad(run, watched)
    treedef, out_leaves = out_holder
    # (eager_tensor: every shape here is a tensor's, a tuple already)
    if treedef is None:
        loss = out_leaves[0]
        value = eager_tensor(loss.shape, loss.dtype, backend, outputs[1])
    else:
        value = pytree.unflatten(treedef, [eager_tensor(x.shape, x.dtype, backend, o)
                                           for x, o in zip(out_leaves, outputs[1:])])
    targets = [args[p] for p in positions] + params if count else params
    return value, [eager_tensor(t.shape, t.dtype, backend, g) for t, g in zip(targets, grads)]


def _traced(builder, fn, args, positions, params):
    """Trace `fn` into a subgraph and emit one `grad` node."""
    leaves, treedef = pytree.flatten(args, is_array_leaf)
    leaves = [as_input_tensor(x) for x in leaves]
    index_of_arg = {}
    for i, a in enumerate(args):
        for j, leaf in enumerate(leaves):
            if leaf is a:
                index_of_arg[i] = j
    sub = GraphBuilder("fn", parent=builder)
    with sub, region("grad"):
        inner = [symbolic(sub, sub.add_input(x.shape, x.dtype)) for x in leaves]
        result = fn(*pytree.unflatten(treedef, inner))
        _scalar_of(result, fn)
        out_leaves, out_treedef = pytree.flatten(result, is_array_leaf)
        # Python numbers beside the loss: typed as a plain @ug.function types them
        sub.graph.outputs = [value_of(sub, as_input_tensor(x)) for x in out_leaves]
        flagged = bool(sub.loop_flags)
        if flagged:
            # A loop inside reports running past the iteration limit through one more
            # (int64, never differentiated) output; see control_flow._traced_while.
            from unigraph.control_flow import _loop_flag

            sub.graph.outputs.append(value_of(sub, _loop_flag(sub)))
        for param in params:  # make sure every parameter is an operand, used or not
            sub.value_of_param(param)
    captured = sub.share_captures([])
    operands = [value_of(builder, x) for x in [*leaves, *captured]]
    wrt = [index_of_arg[p] for p in positions]
    for param in params:
        wrt.append(len(leaves) + next(i for i, c in enumerate(captured) if c is param))
    out_specs = [TensorSpec(v.shape, v.dtype) for v in sub.graph.outputs]
    grad_specs = [TensorSpec(operands[i].shape, operands[i].dtype) for i in wrt]
    outs = builder.add_node("grad", operands, out_specs + grad_specs,
                            {"wrt": tuple(wrt), "output": 0}, {"fn": sub.graph})
    tensors = [symbolic(builder, v) for v in outs]
    values, grads = tensors[:len(out_specs)], tensors[len(out_specs):]
    if flagged:
        builder.loop_flags.append(values.pop())
    return pytree.unflatten(out_treedef, values), grads
