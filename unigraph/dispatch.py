"""Applying one op: recorded into the graph being traced, or run now on a backend.

Every public op function (unigraph.api) ends here, after normalising attrs and inserting
casts, so an op record always sees inputs it can take.
"""

from __future__ import annotations

import contextvars
import math

import numpy as np

from unigraph import config, plugins
from unigraph.backend import Backend
from unigraph.config import _context_target, current_target
from unigraph.errors import ShapeError
from unigraph.ops import OPS, TensorSpec
from unigraph.plugins import _checked, get_backend
from unigraph.tensor import Parameter, Tensor, dtype_name, eager_tensor
from unigraph.tensor import symbolic_tensor as symbolic
from unigraph.tracing import _builder, open_builders, user_source

# `_context_target.get`, bound once: calling it is ~0.5 k instructions less than
# `_context_target.get()`, whose method is looked up on the ContextVar at each call (every
# eager op and eager function call asks).
context_target = _context_target.get
# id(Parameter) -> native leaf, while `eager_grad` differentiates with respect to them.
_param_leaves: contextvars.ContextVar = contextvars.ContextVar("unigraph_leaves", default=None)


def current_backend():
    """The backend of the current target (a static target's eager ops run on its backend).
    An eager op asks once and passes the backend down (`eager_simple` has these lines
    inline, for the ops that need the backend nowhere else)."""
    # current_target()'s precedence, inline, and `backend_of`'s cache, inline: every eager
    # op asks.
    target = context_target() or config._global_target or current_target()
    last = _last
    if last[0] is target and last[2] == plugins.generation:
        return last[1]
    return backend_of(target)


# (target, its backend, plugins.generation) of the last lookup: calls in a row ask for the
# same Target object (the one `use_backend`/`set_backend` made), so an identity test finds
# it, without building and hashing a (backend, mode) key. Replaced whole (one assignment,
# so a thread never reads half of one); a plugin registered or unregistered since (the
# generation) makes it stale.
_last: tuple = (None, None, -1)


def backend_of(target):
    """The backend of `target` (a `config.Target`), checked to run it (`get_backend`).

    >>> backend_of(Target("numpy", "eager")).name
    'numpy'
    """
    global _last
    last = _last
    generation = plugins.generation
    if last[0] is target and last[2] == generation:
        return last[1]
    backend = _checked.get((target.backend, target.mode)) or get_backend(target.backend,
                                                                         target.mode)
    _last = (target, backend, generation)
    return backend


# (op, input types, attrs) -> output spec: eager mode asks the same question every step.
_inferred: dict = {}


def infer(op: str, inputs: list, attrs: dict):
    try:
        # Tensors, Values and arrays all have .shape and .dtype (np.dtype hashes too). One
        # or two inputs without attrs (most traced ops) make the same key without the list
        # and the unpacking (~0.3-0.6 us an op).
        if len(inputs) == 2 and not attrs:
            a, b = inputs
            key = (op, (a.shape, a.dtype), (b.shape, b.dtype))
        elif len(inputs) == 1 and not attrs:
            key = (op, (inputs[0].shape, inputs[0].dtype))
        else:
            key = (op, *[(x.shape, x.dtype) for x in inputs], *attrs.items())
        spec = _inferred.get(key)
    except TypeError:  # an unhashable attr (a constant's array): do not cache
        key, spec = None, None
    if spec is not None:
        return spec
    specs = [TensorSpec(x.shape, dtype_name(x.dtype)) if isinstance(x, np.ndarray) else x
             for x in inputs]
    try:
        spec = OPS[op].infer(*specs, **attrs)
    except ShapeError as error:
        raise ShapeError(f"{error} (at {user_source()})") from None
    if key is not None:
        if len(_inferred) > 10000:
            _inferred.clear()
        _inferred[key] = spec
    return spec


# (op, backend, input shapes and dtypes, attrs) -> _Plan: what an eager op needs beyond its
# inputs, found once per signature (an eager loop asks the same question every step).
_plans: dict = {}


class _Plan:
    """The output spec of one eager op signature (its shape inference ran once, so an
    impossible shape is still our ShapeError, raised before the framework sees it), and
    whether the backend's lowering table may be called directly (its `eager_op` is the plain
    table lookup). The lowering itself is looked up at each call, so a table entry replaced
    later (a plugin, a test's monkeypatch) is the one that runs. `kernel`: for an op without
    attrs, the backend's own callable of the inputs doing what its `eager_op` does, where
    it offers one (`eager_kernel(op, arity, inputs)`: NumPy's, which reads its tables at each
    call; `inputs`, whose shapes and dtypes the plan is for). `scalar`: in a plan of an
    op with a Python number (`_number_plans`), that number's native operand."""

    __slots__ = ("shape", "dtype", "direct", "kernel", "scalar")

    def __init__(self, spec, direct, kernel=None, scalar=None):
        self.shape = tuple(spec.shape)
        self.dtype = spec.dtype
        self.direct = direct
        self.kernel = kernel
        self.scalar = scalar


def _direct(backend, op: str) -> bool:
    """Whether calling `backend.lowerings[op]` is all `backend.eager_op` would do (the base
    class's method, not overridden by the backend's class or patched on the object); else
    every call goes through `eager_op` (Paddle's lock, NumPy's tape)."""
    if type(backend).eager_op is not Backend.eager_op or "eager_op" in vars(backend):
        return False
    if backend.lowerings is None:
        backend.load()
    return op in (backend.lowerings or {})  # a missing op: eager_op raises BackendError


def _plan(op: str, backend, inputs: list, attrs: dict, key, scalar=None) -> _Plan:
    spec = infer(op, inputs, attrs)
    # A backend's own per-op callable for the ops without attrs, where it has one (NumPy's
    # `eager_kernel`: its fast kernel without `eager_op`'s list, dict and lookups).
    eager_kernel = getattr(backend, "eager_kernel", None) if not attrs else None
    kernel = eager_kernel(op, len(inputs), inputs) if eager_kernel is not None else None
    plan = _Plan(spec, kernel is None and _direct(backend, op), kernel, scalar)
    if key is not None:
        if len(_plans) > 10000:
            _plans.clear()
        _plans[key] = plan
    return plan


def apply(op: str, inputs: list, attrs: dict) -> Tensor:
    """Apply op `op` to `inputs` (Tensors, Parameters or NumPy arrays) with `attrs`."""
    builder = _builder.get() if open_builders else None  # (no trace open: no read)
    if builder is not None:
        return apply_symbolic(builder, op, inputs, attrs)
    if not attrs and 0 < len(inputs) < 3:
        return apply_simple(op, *inputs)
    backend = current_backend()
    try:
        # Tensors and arrays both have .shape and .dtype (np.dtype hashes too).
        key = (op, backend, *[(x.shape, x.dtype) for x in inputs], *attrs.items())
        plan = _plans.get(key)
    except TypeError:  # an unhashable attr (a constant's array): no plan is kept
        key = plan = None
    if plan is None:
        plan = _plan(op, backend, inputs, attrs, key)
    natives = [x._native if type(x) is Tensor and x._backend is backend and x._native is not None
               else native(x, backend) for x in inputs]
    out = (backend.lowerings[op](*natives, **attrs) if plan.direct
           else backend.eager_op(op, natives, attrs))
    return Tensor(plan.shape, plan.dtype, backend, out)


def apply_simple(op: str, a, b=None) -> Tensor:
    """`apply(op, [a] or [a, b], {})`: one- or two-input ops without attrs (the arithmetic
    operators, the elementwise functions), the same steps without the lists, as most of what
    an eager program runs is these."""
    builder = _builder.get() if open_builders else None  # (no trace open: no read)
    if builder is not None:
        # `apply_symbolic(builder, op, [a, b], {})` inline, each operand that is a tensor of
        # this graph (most are) read without value_of's call (~0.3 us of a traced op)
        value_a = a._value if type(a) is Tensor and a._builder is builder else \
            value_of(builder, a)
        if b is None:
            values = [value_a]
        else:
            values = [value_a, b._value if type(b) is Tensor and b._builder is builder else
                      value_of(builder, b)]
        # (two frames of unigraph's own: this one and its caller, always an op wrapper of
        # unigraph's (ug.matmul, ug.add, ...): the user's line is beyond both, and the walk
        # for it makes one Python frame object less a traced op)
        (out,) = builder.add_node(op, values, [infer(op, values, {})], None,
                                  own_frames=2)
        return symbolic(builder, out)
    return eager_simple(op, a, b)


def eager_binary(op: str, general):
    """The function of binary op `op`: `general(x, y, plans)` (the op wrapper: operands
    promoted, then the op) with the eager op's fast path in front, one Python call in all
    (issue 19 item 3: `x + y`, `a + 2` in an eager loop). `plans`, this op's own: (backend,
    x's shape and dtype, y's shape and dtype) or (backend, x's shape and dtype, a Python
    number's type and value) -> the `_Plan` that `eager_simple` found for operands that the
    wrapper's fast branches took as they are (it stores them, `_keep`); so an entry found
    here is one for such operands, without asking for their dtypes again. Taken for an
    eager Tensor on the left, with no trace open anywhere, the target's backend the last
    one resolved (`_last`) and each operand's native on it (not a Parameter, not a static
    run's array): else `general`, which makes the plan. A zero (its sign) or a NaN is never
    kept, as in `_number_plans`.

    >>> ug.add(x, y)  # (an eager x and y: their plan, from the second call on)
    """
    plans: dict = {}

    def function(x, y):
        if type(x) is Tensor and not open_builders:
            target = context_target() or config._global_target or current_target()
            last = _last
            if last[0] is target and last[2] == plugins.generation:
                backend = last[1]
                if type(y) is Tensor:
                    plan = plans.get((backend, x.shape, x.dtype, y.shape, y.dtype))
                    native_b = y._native if y._backend is backend else None
                elif (type(y) is int or type(y) is float) and y:
                    plan = plans.get((backend, x.shape, x.dtype, type(y), y))
                    native_b = None if plan is None else plan.scalar
                else:
                    plan = native_b = None
                native_a = x._native
                if plan is not None and native_b is not None and native_a is not None and \
                        x._backend is backend:
                    # (as in `eager_simple`: `direct` first, False where a kernel is)
                    if plan.direct:
                        out = backend.lowerings[op](native_a, native_b)
                    elif plan.kernel is not None:
                        out = plan.kernel(native_a, native_b)
                    else:
                        out = backend.eager_op(op, [native_a, native_b], {})
                    return eager_tensor(plan.shape, plan.dtype, backend, out)
        return general(x, y, plans)

    return function


def _keep(plans: dict, key: tuple, plan: _Plan) -> None:
    """`plans[key] = plan` for `eager_binary`, bounded as `_plans` is."""
    if len(plans) > 10000:
        plans.clear()
    plans[key] = plan


def eager_simple(op: str, a, b=None, number=False, keep=None) -> Tensor:
    """`apply_simple` outside a trace, on the current backend (resolved here, inline: a
    Python call less in every eager op). With `number`, one of `a` and `b` is a Python int
    or float that keeps the other's dtype (the caller checked): its plan holds that dtype's
    scalar on the backend (`scalar_on`'s), so that `x + 1` resolves the backend and finds
    its plan and its scalar by one lookup (`_number_plans`). `keep`: the op's plans in
    `eager_binary`, given by a wrapper's fast branch (operands it takes as they are), where
    a two-operand plan is also stored."""
    target = context_target() or config._global_target or current_target()
    last = _last
    backend = last[1] if last[0] is target and last[2] == plugins.generation else \
        backend_of(target)
    if number:
        # The type and the number stand where a shape and a dtype stand in `_plans`' keys
        # (a type never equals a shape); a zero's key adds its sign, as in `scalar_on`.
        if type(b) is int or type(b) is float:
            key = (op, backend, a.shape, a.dtype, type(b), b) if b else \
                (op, backend, a.shape, a.dtype, type(b), b, math.copysign(1.0, b))
            plan = _number_plans.get(key)
            if plan is None:
                plan = _number_plan(op, backend, a, b, key, True)
            if keep is not None and b and b == b:  # (not a zero, not a NaN)
                _keep(keep, (backend, a.shape, a.dtype, type(b), b), plan)
            native_b = plan.scalar
            native_a = a._native if type(a) is Tensor and a._backend is backend else None
            if native_a is None:
                native_a = native(a, backend)
        else:
            key = (op, backend, type(a), a, b.shape, b.dtype) if a else \
                (op, backend, type(a), a, b.shape, b.dtype, math.copysign(1.0, a))
            plan = _number_plans.get(key)
            if plan is None:
                plan = _number_plan(op, backend, a, b, key, False)
            native_a = plan.scalar
            native_b = b._native if type(b) is Tensor and b._backend is backend else None
            if native_b is None:
                native_b = native(b, backend)
    elif b is None:
        key = (op, backend, a.shape, a.dtype)
        plan = _plans.get(key)
        if plan is None:
            plan = _plan(op, backend, [a], {}, key)
        native_a = a._native if type(a) is Tensor and a._backend is backend else None
        if native_a is None:
            native_a = native(a, backend)
        if plan.direct:
            out = backend.lowerings[op](native_a)
        elif plan.kernel is not None:
            out = plan.kernel(native_a)
        else:
            out = backend.eager_op(op, [native_a], {})
        return eager_tensor(plan.shape, plan.dtype, backend, out)
    else:
        key = (op, backend, a.shape, a.dtype, b.shape, b.dtype)
        plan = _plans.get(key)
        if plan is None:
            plan = _plan(op, backend, [a, b], {}, key)
        if keep is not None:
            _keep(keep, key[1:], plan)
        native_a = a._native if type(a) is Tensor and a._backend is backend else None
        if native_a is None:
            native_a = native(a, backend)
        native_b = b._native if type(b) is Tensor and b._backend is backend else None
        if native_b is None:
            native_b = native(b, backend)
    # (`direct` first: it is False where a kernel is)
    if plan.direct:
        out = backend.lowerings[op](native_a, native_b)
    elif plan.kernel is not None:
        out = plan.kernel(native_a, native_b)
    else:
        out = backend.eager_op(op, [native_a, native_b], {})
    return eager_tensor(plan.shape, plan.dtype, backend, out)


# (op, backend, shape, dtype, type, number) for a number on the right, (op, backend, type,
# number, shape, dtype) on the left, a zero's key with its sign after -> the _Plan of that op
# with that number, holding its scalar's native (`eager_simple`). Bounded as `_plans` is.
_number_plans: dict = {}


def _number_plan(op: str, backend, a, b, key: tuple, right: bool) -> _Plan:
    """The plan of `eager_simple`'s `number` case: `a op b` where `b` (if `right`, else `a`)
    is a Python number made the other operand's dtype by `scalar_on` (its cache; our
    OverflowError for an int that does not fit), kept under `key` unless the number is a
    NaN (it equals no key)."""
    if right:
        scalar = scalar_on(backend, b, a.dtype)
        inputs, value = [a, scalar], b
    else:
        scalar = scalar_on(backend, a, b.dtype)
        inputs, value = [scalar, b], a
    plan = _plan(op, backend, inputs, {}, None, scalar.native_for(backend))
    if value == value:
        if len(_number_plans) > 10000:
            _number_plans.clear()
        _number_plans[key] = plan
    return plan


def scalar_on(backend, value, dtype: str) -> Tensor:
    """Python number `value` as an eager operand of `dtype` on `backend`, cached per backend
    object (`Backend.scalars`) under (type, value, dtype), a zero under (type, value, sign,
    dtype): the sign keeps 0.0 and -0.0 apart (equal as keys, not as operands); a NaN is
    never cached (it equals no key). Sharing one tensor is safe: an in-place lowering writes
    only its first operand, and a cached scalar never is one (`optim` writes in place only
    parameters and tensors it has just made).

    >>> scalar_on(current_backend(), 2, "float32").dtype
    'float32'
    """
    # A nonzero number is its own key; only a zero needs its sign (no copysign call on the
    # common path: `x + 1` in an eager loop asks every step). The lengths keep them apart.
    # (elementwise's wrappers look a nonzero number's key up inline, then call this.)
    key = (type(value), value, dtype) if value else \
        (type(value), value, math.copysign(1.0, value), dtype)
    scalars = backend.scalars
    scalar = scalars.get(key)
    if scalar is None:
        check_int_range(value, dtype)
        array = np.asarray(value, dtype=dtype)
        scalar = Tensor((), dtype, backend=backend, native=backend.to_native(array), array=array)
        if len(scalars) < 4096 and value == value:
            scalars[key] = scalar
    return scalar


def check_int_range(value, dtype: str) -> None:
    """`int64 tensor + 2**70` must say so, not fail deep inside NumPy's conversion."""
    if type(value) is int and dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise OverflowError(
                f"the integer {value} at {user_source()} does not fit in {dtype} (the dtype "
                f"of the tensor it meets: {info.min} .. {info.max}); cast the tensor to a "
                "wider or float dtype first (ug.cast(x, 'float64')), or use a float"
            )


def native(x, backend):
    """`x` as `backend`'s native tensor."""
    if isinstance(x, Parameter):
        leaves = _param_leaves.get()
        if leaves is not None and id(x) in leaves:
            return leaves[id(x)]
    if isinstance(x, Tensor):
        return x.native_for(backend)
    # A private copy: a later write to the caller's array must not reach the result (a
    # reshape or slice on numpy and torch would otherwise be a view of it).
    return backend.to_native(np.array(x))


def value_of(builder, x):
    """The IR value standing for `x` in the graph `builder` records."""
    if type(x) is Tensor and x._builder is builder:  # (a value of this graph: most operands)
        return x._value
    if isinstance(x, Parameter):
        return builder.value_of_param(x)
    if isinstance(x, Tensor):
        if x._value is not None:
            return builder.value_of_symbolic(x)
        return builder.value_of_eager(x)
    return builder.constant(np.asarray(x))


def apply_symbolic(builder, op: str, inputs: list, attrs: dict) -> Tensor:
    values = [value_of(builder, x) for x in inputs]
    spec = infer(op, values, attrs)
    # (two frames of unigraph's own: this one and its caller, `apply` or `apply_simple`)
    (out,) = builder.add_node(op, values, [spec], attrs, own_frames=2)
    return symbolic(builder, out)
