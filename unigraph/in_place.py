"""The optimizers' eager writes in place: a parameter's or slot's own tensor updated
(`write_steps`, behind `Optimizer.write` / `Optimizer.subtract`), and Adam's temporaries
reused (`scratch`), through the backend's in-place lowerings (`sub_`, `add_`, `mul_`,
`div_`, `sqrt_`: numpy, torch and paddle have them). The numbers are always those of the
allocating op (the same kernel); only whether a new tensor is made differs. While tracing,
and inside control flow, every step is the plain op. Also the optimizers' fused updates
(`fused_update`, `unigraph.ops.updates`) where a backend lowers them (`lowers`).

>>> velocity = write_steps(velocity, ("mul", 0.9), ("add", grad))
>>> delta = scratch(scratch(m_hat, "mul", lr), "div", denominator)
"""

from __future__ import annotations

import sys

from unigraph import api
from unigraph.api.operands import _KEEPS_DTYPE
from unigraph.config import current_target
from unigraph.dispatch import current_backend, native, scalar_on, value_of
from unigraph.function import assign
from unigraph.ops.updates import FUSED_UPDATES
from unigraph.tensor import Parameter, Tensor, _EagerStore, eager_tensor, symbolic_tensor
from unigraph.tracing import _builder, current_region

# The in-place lowering of each update op (not op records: backends' extra entries).
LOWERED = {"sub": "sub_", "add": "add_", "mul": "mul_", "div": "div_", "sqrt": "sqrt_"}
BINARY = {"sub": api.sub, "add": api.add, "mul": api.mul, "div": api.div}


def write_steps(holder: Parameter, *steps) -> Tensor:
    """`holder <- holder op1 operand1 op2 operand2 ...` (see `Optimizer.write`): the holder
    eagerly, each step in place where `written_in_place` allows; while tracing, the new
    tensor (one graph update)."""
    if _builder.get() is None:
        if current_region() is None:
            for op, operand in steps:
                if not written_in_place(holder, LOWERED[op], operand):
                    assign(holder, BINARY[op](holder, operand))
            return holder
    new = holder
    for op, operand in steps:
        new = BINARY[op](new, operand)
    assign(holder, new)
    return new


def written_in_place(holder: Parameter, lowered: str, operand) -> bool:
    """Eagerly: `holder <- lowered(holder, operand)` through the backend's in-place
    lowering `lowered` where `Optimizer.write` says it is safe (True), else nothing done
    (False)."""
    backend = current_backend()
    if lowered not in (backend.lowerings or ()):
        return False
    native = sole_native(holder, backend)
    if native is None:
        return False
    other = operand_native(operand, holder, backend)
    if other is None:
        return False
    holder._written_eager(backend, backend.eager_op(lowered, [native, other], {}))
    return True


def update_natives(param: Parameter, grad, lowered: tuple, slots: tuple = (),
                   operands: tuple = (), constants: tuple = (), backend=None):
    """Eagerly, for an optimizer's update written as lowering calls on the native tensors
    (`SGD`, `Momentum`, `Adam`: `_update_in_place`): `(backend, natives)` where the current
    backend has every in-place lowering in `lowered`, `param` and each holder in `slots` is
    held by nothing else (`sole_native`), `grad` and each of `operands` (tensors) is a native
    `operand_native` gives beside `param`, and so is each of `constants` (Python numbers:
    the optimizer's hyperparameters, see `constant_natives`); natives in the order (param,
    slots..., grad, constants..., operands...). Else None: the caller takes the op-by-op
    path. backend: the current backend where the caller has it (`Optimizer.apply` finds it
    once a step), else None.

    >>> backend, (p, g, lr) = update_natives(param, grad, ("sub_",), (), (lr,))
    """
    if backend is None:
        backend = current_backend()
    table = backend.lowerings
    if table is None or grad.shape != param.shape:
        return None
    for name in lowered:  # (loops, not all()/any(): every eager step of every parameter)
        if name not in table:
            return None
    native = sole_native(param, backend)
    if native is None:
        return None
    natives = [native]
    for holder in slots:
        native = sole_native(holder, backend)
        if native is None:
            return None
        natives.append(native)
    native = operand_native(grad, param, backend)
    if native is None:
        return None
    natives.append(native)
    if constants:
        numbers = constant_natives(constants, param, backend)
        if numbers is None:
            return None
        natives += numbers
    for operand in operands:
        native = operand_native(operand, param, backend)
        if native is None:
            return None
        natives.append(native)
    return backend, natives


def written_into(holder: Parameter, backend, native, held) -> None:
    """`holder._written_eager(backend, native)` after an in-place lowering ran on `held`,
    the native `sole_native` gave for `holder`: where it wrote in place (`native is held`)
    the holder's store already holds that very native, so only the version and the native
    entry advance (no new store, no layout check: an eager optimizer's every write).

    >>> written_into(param, backend, backend.eager_op("sub_", [held, delta], {}), held)
    """
    if native is held:
        holder.version += 1
        holder._natives = {backend.name: (holder.version, native)}
    else:
        holder._written_eager(backend, native)


def constant_natives(numbers: tuple, target: Tensor, backend):
    """`operand_native` of each Python number in `numbers` beside `target`, as a tuple, or
    None where one has none. The same answer for the same backend, dtype and numbers (an
    optimizer's hyperparameters, asked each eager step of each parameter): kept for floats
    (an int equals the float of its value as a key, and takes an integer dtype, a float
    does not), except zeros (0.0 and -0.0 are equal as keys, not as operands).

    >>> mu, = constant_natives((0.9,), param, current_backend())
    """
    key = (backend, target.dtype, numbers)
    found = _CONSTANTS.get(key)
    if found is None:
        found = []
        for number in numbers:
            native = operand_native(number, target, backend)
            if native is None:
                return None
            found.append(native)
        found = tuple(found)
        if 0 not in numbers and all(type(number) is float for number in numbers):
            if len(_CONSTANTS) >= 64:  # other optimizers' numbers, other backends
                _CONSTANTS.clear()
            _CONSTANTS[key] = found
    return found


# (backend, dtype, numbers) -> their natives (`constant_natives`)
_CONSTANTS: dict = {}


def sole_native(holder: Parameter, backend):
    """The native tensor of `holder` on `backend` that an in-place lowering may write (the
    holder's current value, held by nothing else on our side: see `Optimizer.write`), or
    None.

    >>> sole_native(velocity, current_backend()) is None     # before the first step
    True
    """
    home = holder._home
    if home is None:
        return None
    store = home[0]
    own = holder._natives.get(backend.name)  # (version, native): `is`, never `==`
    if (type(store) is _EagerStore and store.backend is backend and own is not None
            and own[0] == holder.version and own[1] is store.native
            # 3: the (version, native) entry, the eager store, getrefcount's argument
            and sys.getrefcount(own[1]) == 3):
        return own[1]
    return None


def scratch(temporary: Tensor, op: str, operand=None) -> Tensor:
    """`op(temporary, operand)` ("mul", "add", "div"; "sqrt" without operand) where
    `temporary` is a tensor the optimizer has just made and alone holds (Adam's m_hat,
    `g * g`): eagerly written into it where the backend has `<op>_` and nothing else holds
    its native tensor (not even a NumPy copy of it), saving a full-size temporary per op;
    else the op, a new tensor (tracing: a graph node). The numbers are the op's."""
    if _builder.get() is None and current_region() is None:
        backend = current_backend()
        lowered = LOWERED[op]
        native = temporary._native
        if (type(temporary) is Tensor and temporary._backend is backend
                and native is not None and temporary._array is None
                and lowered in (backend.lowerings or ())
                # 3: the tensor's own reference, `native` and getrefcount's argument
                and sys.getrefcount(native) == 3):
            natives = [native]
            if operand is not None:
                other = operand_native(operand, temporary, backend)
                if other is None:
                    return BINARY[op](temporary, operand)
                natives.append(other)
            temporary._native = backend.eager_op(lowered, natives, {})
            return temporary
    return api.sqrt(temporary) if op == "sqrt" else BINARY[op](temporary, operand)


def operand_native(operand, target: Tensor, backend):
    """`operand` (a tensor, or a Python number taken as `target op number` takes it) as a
    native of `backend` an in-place lowering may read beside `target`: its dtype, and its
    shape or 0-d; else None."""
    if type(operand) is not Tensor:
        if type(operand) is not float and type(operand) is not int:
            return None
        # `weak_scalar(target, operand)` with the backend the caller resolved (always the
        # current one: this runs only eagerly), without its lookup (Adam: 5 numbers a step)
        if (target.dtype, type(operand)) not in _KEEPS_DTYPE:
            return None
        operand = scalar_on(backend, operand, target.dtype)
    if not (operand._backend is backend and operand.dtype == target.dtype
            and (operand.shape == target.shape or operand.shape == ())):
        return None
    native = operand._native  # (`native_for`'s answer where it holds one: a gradient, lr)
    return native if native is not None else operand.native_for(backend)  # (a fed array)


def lowers(backend, name: str, mode: str | None = None) -> bool:
    """Whether `backend` lowers the fused update `name` (`unigraph.ops.updates`) in `mode`
    (`Backend.lowering_table`): only then may an optimizer call `fused_update(name, ...)` on
    it, eagerly or while tracing for it. `mode` None: the current target's mode while
    tracing, else "eager" (a static target runs its eager ops on the eager table).

    >>> lowers(current_backend(), "adam_update")        # numpy: no, the formula's ops run
    False
    """
    if backend.lowerings is None:
        backend.load()
    if mode is None:
        mode = current_target().mode if _builder.get() is not None else "eager"
    return name in (backend.lowering_table(mode) or ())


def fused_update(name: str, inputs: list, attrs: dict) -> tuple:
    """The fused update `name` (`unigraph.ops.updates`) of `inputs` (tensors, parameters) on
    the current backend, which lowers it (`lowers`): its outputs, new tensors. Eagerly the
    backend's lowering runs now; while tracing, one node with an output per result.

    >>> new_p, new_m, new_v = fused_update("adam_update", [p, g, m, v, lr, t], attrs)
    """
    record = FUSED_UPDATES[name]
    builder = _builder.get()
    if builder is not None:
        values = [value_of(builder, x) for x in inputs]
        specs = record.infer(*values, **attrs)
        outs = builder.add_node(name, values, list(specs), attrs, own_frames=2)
        return tuple(symbolic_tensor(builder, out) for out in outs)
    backend = current_backend()
    specs = record.infer(*inputs, **attrs)
    outs = backend.eager_op(name, [native(x, backend) for x in inputs], attrs)
    return tuple(eager_tensor(tuple(spec.shape), spec.dtype, backend, out)
                 for spec, out in zip(specs, outs))

