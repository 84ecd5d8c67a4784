"""Applying one op: recorded into the graph being traced, or run now on a backend.

Every public op function (unigraph.api) ends here, after normalising attrs and inserting
casts, so an op record always sees inputs it can take.
"""

from __future__ import annotations

import contextvars

import numpy as np

from unigraph.config import current_target
from unigraph.errors import ShapeError
from unigraph.ops import OPS, TensorSpec
from unigraph.plugins import _checked, get_backend
from unigraph.tensor import Parameter, Tensor, dtype_name
from unigraph.tracing import _builder, user_source

# id(Parameter) -> native leaf, while `eager_grad` differentiates with respect to them.
_param_leaves: contextvars.ContextVar = contextvars.ContextVar("unigraph_leaves", default=None)


def current_backend():
    """The backend of the current target (a static target's eager ops run on its backend)."""
    target = current_target()
    # The lookups `get_backend` already checked, without its call (every eager op asks).
    return _checked.get((target.backend, target.mode)) or get_backend(target.backend,
                                                                      target.mode)


# (op, input types, attrs) -> output spec: eager mode asks the same question every step.
_inferred: dict = {}


def infer(op: str, inputs: list, attrs: dict):
    try:
        # Tensors, Values and arrays all have .shape and .dtype (np.dtype hashes too).
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


def apply(op: str, inputs: list, attrs: dict) -> Tensor:
    """Apply op `op` to `inputs` (Tensors, Parameters or NumPy arrays) with `attrs`."""
    builder = _builder.get()
    if builder is not None:
        return apply_symbolic(builder, op, inputs, attrs)
    spec = infer(op, inputs, attrs)
    backend = current_backend()
    natives = [x._native if type(x) is Tensor and x._backend is backend and x._native is not None
               else native(x, backend) for x in inputs]
    out = backend.eager_op(op, natives, attrs)
    return Tensor(spec.shape, spec.dtype, backend=backend, native=out)


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
    if isinstance(x, Parameter):
        return builder.value_of_param(x)
    if isinstance(x, Tensor):
        if x._value is not None:
            return builder.value_of_symbolic(x)
        return builder.value_of_eager(x)
    return builder.constant(np.asarray(x))


def symbolic(builder, value) -> Tensor:
    return Tensor(value.shape, value.dtype, value=value, builder=builder)


def apply_symbolic(builder, op: str, inputs: list, attrs: dict) -> Tensor:
    values = [value_of(builder, x) for x in inputs]
    spec = infer(op, values, attrs)
    (out,) = builder.add_node(op, values, [spec], attrs)
    return symbolic(builder, out)
