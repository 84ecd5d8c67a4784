"""Optimizers: SGD, Momentum (optionally Nesterov) and Adam, each one documented formula.

The updates are written with unigraph ops and `ug.assign`, so one implementation runs
eagerly on every backend and is traced into a static training step, where every assignment
becomes a graph update. Optimizer state (velocities, Adam's moments and step counts, the
learning rate itself) lives in non-trainable `ug.Parameter`s owned by the optimizer, so a
compiled step keeps it inside the graph between runs, and changing `optimizer.lr` needs no
recompilation.

Common to all, for each parameter p with gradient g (parameters with `trainable=False`, and
gradients given as None, are skipped):

    g  <- g + weight_decay * p          (L2 regularisation added to the gradient, as in
                                         torch.optim and Paddle's L2Decay; not AdamW)
    lr_p = lr * p.lr_scale              (per-parameter multiplier, Paddle's
                                         ParamAttr(learning_rate=...))

then the optimizer's own update with lr_p.

>>> opt = ug.optim.SGD(net.parameters(), lr=0.5)
>>> loss, grads = ug.value_and_grad(closure, wrt=opt.params)()
>>> opt.step(grads)                     # or opt.apply(grads): the same

`opt.state_dict()` holds every piece of state as arrays keyed by parameter name, and
`opt.save(path)` / `opt.load(path)` write and read it as a safetensors file, so training
can stop on one target and resume on another (`model.save`/`model.load` for the weights).
"""

from __future__ import annotations

import json
import math
import numbers
import os
import sys

import numpy as np

from unigraph import api
from unigraph.dispatch import current_backend
from unigraph.function import assign
from unigraph.in_place import (
    fused_update,
    lowers,
    scratch,
    update_natives,
    write_steps,
    written_into,
)
from unigraph.tensor import Parameter, Tensor
from unigraph.tracing import _builder, current_region, note_state

__all__ = ["Adam", "Momentum", "Optimizer", "SGD"]


def checked_number(owner: str, name: str, value, low=0.0, high=math.inf, low_open=False,
                   high_open=False) -> float:
    """`value` as a float, or an error naming the argument, the value and the valid range:
    a string, NaN or infinity must fail here, not turn every weight into NaN later.

    >>> checked_number("SGD", "lr", 0.1)
    0.1
    """
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        hint = ""
        if isinstance(value, str):
            try:
                hint = f"; write {name}={float(value)!r} (a number, not a string)"
            except ValueError:
                pass
        raise TypeError(f"{owner}: {name} must be a number, got {value!r} "
                        f"({type(value).__name__}){hint}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{owner}: {name}={number} is not a finite number; every weight "
                         f"would become NaN. Pass a finite {name}")
    too_low = number <= low if low_open else number < low
    too_high = number >= high if high_open else number > high
    if too_low or too_high:
        if high == math.inf:
            rule = f"{name} must be {'>' if low_open else '>='} {low:g}"
        else:
            left, right = "(" if low_open else "[", ")" if high_open else "]"
            rule = f"{name} must lie in {left}{low:g}, {high:g}{right}"
        raise ValueError(f"{owner}: {name}={number:g} is out of range: {rule}")
    return number


def no_trainable_parameters(owner: str, source) -> ValueError:
    """The error for training with nothing to train, with the usual causes."""
    what = type(source).__name__ if source is not None else "the parameters given"
    return ValueError(
        f"{owner}: {what} has no trainable parameters, so training would change nothing. "
        "Likely causes: layers kept in a plain list, tuple or dict attribute are not "
        "registered (use ug.nn.ModuleList / ug.nn.ModuleDict, or ug.nn.Sequential); every "
        "parameter was frozen (trainable=False); or the parameters were given as an "
        "iterator that was already used up"
    )


def _into(op, name: str, temporary, operand=None):
    """`name(temporary, operand)` through op(`<name>_`) (written into `temporary`, a native
    tensor the caller has just made and passes straight in) when nothing else holds it, else
    through op(`name`) (a new tensor: the same numbers)."""
    lowered = name + "_" if sys.getrefcount(temporary) <= _FREE else name
    return op(lowered, [temporary] if operand is None else [temporary, operand], {})


def _references_when_free() -> int:
    """sys.getrefcount of `_into`'s `temporary` when only the call holds it, measured on a
    probe called the same way (the count depends on how the interpreter passes arguments)."""
    seen = []

    def probe(op, name, temporary, operand=None):
        seen.append(sys.getrefcount(temporary))

    probe(None, "", object(), None)
    return seen[0]


_FREE = _references_when_free()


class Optimizer:
    """Base class. Subclasses implement `update(param, grad, lr, state)`.

    params: Parameters (or a Module, meaning its `parameters()`); duplicates are dropped.
    """

    slots: tuple = ()  # names of the per-parameter state tensors, created at first update

    def __init__(self, params, lr, weight_decay=0.0):
        from unigraph.nn.module import Module

        owner = type(self).__name__
        lr = checked_number(owner, "lr", lr)
        weight_decay = checked_number(owner, "weight_decay", weight_decay)
        source = params if isinstance(params, Module) else None
        if isinstance(params, Module):
            params = params.parameters()
        if isinstance(params, Parameter):
            params = [params]
        unique, seen = [], set()
        for param in params:
            if not isinstance(param, Parameter):
                raise TypeError(f"{type(self).__name__}: expected ug.Parameter objects, got "
                                f"{type(param).__name__}")
            if id(param) not in seen:
                seen.add(id(param))
                unique.append(param)
        if not any(param.trainable for param in unique):
            raise no_trainable_parameters(owner, source)
        self.params = unique
        self.weight_decay = weight_decay
        # float64, cast to each parameter's dtype in the update: float32(lr * lr_scale).
        self._lr = Parameter(np.float64(lr), name=f"{type(self).__name__.lower()}.lr",
                             trainable=False)
        self._state: dict = {}  # (id(param), slot) -> Parameter
        self._rates: dict = {}  # eager lr_p tensors, see `_rate`
        # During an eager `apply` outside control flow: the current backend, found once a
        # step (not per parameter) for the updates on native tensors (`_update_in_place`).
        self._eager_on = None

    # -- learning rate ----------------------------------------------------------------------
    @property
    def lr(self) -> float:
        """The base learning rate; setting it takes effect at the next step, also in a
        compiled static step (it is a parameter of the graph, not a constant)."""
        return float(self._lr.numpy())

    @lr.setter
    def lr(self, value: float) -> None:
        self._lr.set_value(np.float64(checked_number(type(self).__name__, "lr", value)))

    def trainable(self) -> list:
        """The parameters that the next `apply` will update."""
        return [param for param in self.params if param.trainable]

    # -- state ----------------------------------------------------------------------------
    def _initial(self, param: Parameter, slot: str) -> np.ndarray:
        """The value a state slot starts with (zeros shaped like the parameter)."""
        return np.zeros(param.shape, dtype=param.dtype)

    def state(self, param: Parameter, slot: str) -> Parameter:
        """The state tensor `slot` of `param` (created on first use)."""
        key = (id(param), slot)
        holder = self._state.get(key)  # (one lookup: every step asks for every slot)
        if holder is None:
            index = self._index(param)
            name = f"{type(self).__name__.lower()}.{param.name or index}.{slot}"
            initial = self._initial(param, slot)
            # A slot shaped like its parameter is stored like it (an update reads both).
            order = param.order if initial.shape == tuple(param.shape) else "C"
            holder = self._state[key] = Parameter(initial, name=name, trainable=False,
                                                  order=order)
        return holder

    def _index(self, param) -> int:
        for index, own in enumerate(self.params):
            if own is param:
                return index
        raise ValueError(f"parameter {param.name!r} is not one of this optimizer's parameters")

    def _keys(self) -> list:
        """(key prefix, parameter) for every parameter: its name, or its position in
        `params` where the name is missing or shared by another parameter."""
        names = [param.name for param in self.params]
        prefixes = [name if name and names.count(name) == 1 else str(index)
                    for index, name in enumerate(names)]
        if len(set(prefixes)) != len(prefixes):  # a parameter named like another's position
            prefixes = [str(index) for index in range(len(self.params))]
        return list(zip(prefixes, self.params))

    def _has_state(self, param) -> bool:
        return param.trainable or any((id(param), slot) in self._state for slot in self.slots)

    def _slot_value(self, param, slot) -> np.ndarray:
        holder = self._state.get((id(param), slot))
        return holder.numpy().copy() if holder is not None else self._initial(param, slot)

    def state_dict(self) -> dict:
        """Every piece of state as NumPy copies: {"lr": array, "<parameter name>.<slot>":
        array} (slots: Momentum's "velocity", Adam's "m", "v" and "step"), for every
        trainable parameter (a slot not created yet holds its initial value). A parameter
        without a name, or whose name another parameter shares, is keyed by its position
        in `params` ("0.m").

        >>> opt.state_dict()
        {'lr': array(0.001), 'fc1.weight.m': array(...), 'fc1.weight.v': ..., ...}
        """
        state = {"lr": self._lr.numpy().copy()}
        for prefix, param in self._keys():
            if self._has_state(param):
                for slot in self.slots:
                    state[f"{prefix}.{slot}"] = self._slot_value(param, slot)
        return state

    def _expected(self) -> dict:
        """{key: (shape, dtype)} of what `state_dict` holds."""
        expected = {"lr": ((), "float64")}
        for prefix, param in self._keys():
            if self._has_state(param):
                for slot in self.slots:
                    initial = self._initial(param, slot)
                    expected[f"{prefix}.{slot}"] = (initial.shape, initial.dtype.name)
        return expected

    def load_state_dict(self, state: dict) -> None:
        """Load what `state_dict` saved; state tensors not in `state` are reset. Every key
        and shape is checked before anything is set: on an error nothing was loaded.

        >>> opt.load_state_dict(saved)
        """
        owner = type(self).__name__
        by_key = {f"{prefix}.{slot}": (param, slot)
                  for prefix, param in self._keys() for slot in self.slots}
        unknown = [key for key in state if key != "lr" and key not in by_key]
        if unknown:
            raise KeyError(f"{owner}.load_state_dict: unexpected keys {', '.join(unknown)} "
                           f"(this optimizer's keys: {', '.join(['lr', *by_key])})")
        checked = []
        for key, (param, slot) in by_key.items():
            if key not in state:
                continue
            value = np.asarray(state[key])
            expected = self._initial(param, slot).shape
            if value.shape != expected:
                raise ValueError(f"{owner}.load_state_dict: {key!r} has shape "
                                 f"{list(value.shape)}, expected {list(expected)} "
                                 "(nothing was loaded)")
            checked.append((param, slot, value))
        lr = None
        if "lr" in state:
            lr = checked_number(owner, "lr", np.asarray(state["lr"], dtype=np.float64)[()])
        # All checked: now set everything (nothing half-loaded).
        if lr is not None:
            self._lr.set_value(np.float64(lr))
        loaded = {(id(param), slot) for param, slot, _ in checked}
        for (param_id, slot), holder in self._state.items():
            if (param_id, slot) not in loaded:
                param = next(p for p in self.params if id(p) == param_id)
                holder.set_value(self._initial(param, slot))
        for param, slot, value in checked:
            self.state(param, slot).set_value(value)

    def save(self, path) -> None:
        """Write `state_dict()` to `path` in the safetensors format (no pickle: loading it
        can never run code), with the optimizer's class and hyperparameters in the header.
        Save the model beside it (`model.save`) to resume training later, on any target.

        >>> opt.save("opt.safetensors"); model.save("model.safetensors")
        """
        from unigraph.weights import save

        save(self.state_dict(), path, metadata={
            "optimizer": type(self).__name__,
            "hyperparameters": json.dumps(self.hyperparameters()),
        })

    def load(self, path) -> None:
        """Load optimizer state written by `save` (by any backend). The optimizer class,
        every name, shape and dtype are checked first and all differences reported at once;
        a damaged file or any difference loads nothing (the state stays as it was).

        >>> opt = ug.optim.Adam(model, lr=1e-3); opt.load("opt.safetensors")
        """
        from unigraph.weights import WeightFileError, check_fits, load, metadata

        arrays = load(path)  # a damaged file fails here, before anything else
        header = metadata(path)
        owner = type(self).__name__
        written_by = header.get("optimizer")
        if written_by is None:
            what = f"a {header['module']} module's weights" if "module" in header else \
                "not optimizer state"
            raise WeightFileError(f"{os.fspath(path)!r} is {what}: load it with "
                                  "model.load(path); optimizer state is written by opt.save")
        if written_by != owner:
            raise WeightFileError(f"{os.fspath(path)!r} holds {written_by} state; this "
                                  f"optimizer is {owner}: make a ug.optim.{written_by} to "
                                  "load it (nothing was loaded)")
        check_fits(self._expected(), arrays, f"{os.fspath(path)!r} ({owner} state)")
        self.load_state_dict(arrays)

    def reset(self) -> None:
        """Put every state tensor back to its initial value (the objects stay the same,
        so compiled steps that hold them stay valid)."""
        for (param_id, slot), holder in self._state.items():
            param = next(p for p in self.params if id(p) == param_id)
            holder.set_value(self._initial(param, slot))

    def hyperparameters(self) -> dict:
        """The constructor's keyword arguments, e.g. {"lr": 0.5, "weight_decay": 0.0}."""
        return {"lr": self.lr, **self.constants()}

    def constants(self) -> dict:
        """The hyperparameters but the learning rate: the numbers a traced step bakes in
        (the learning rate is a parameter of the graph)."""
        return {"weight_decay": self.weight_decay}

    def copy_for(self, params) -> Optimizer:
        """The same optimizer (hyperparameters and state, matched by position) for other
        parameters, e.g. those of `model.copy("float64")`."""
        twin = type(self)(params, **self.hyperparameters())
        if len(twin.params) != len(self.params):
            raise ValueError(f"copy_for: {len(twin.params)} parameters given, this optimizer "
                             f"has {len(self.params)}")
        # By position: the twin's parameters may be named differently (or not at all).
        twin.lr = self.lr
        for mine, theirs in zip(self.params, twin.params):
            for slot in self.slots:
                if (id(mine), slot) in self._state:
                    twin.state(theirs, slot).set_value(self._slot_value(mine, slot))
        return twin

    # -- updating -------------------------------------------------------------------------
    def _pairs(self, grads) -> list:
        if isinstance(grads, dict):
            by_id = {id(param): grad for param, grad in grads.items()}
            return [(param, by_id.get(id(param))) for param in self.params]
        grads = list(grads)
        if len(grads) == len(self.params):
            return list(zip(self.params, grads))
        trainable = self.trainable()
        if len(grads) == len(trainable):
            return list(zip(trainable, grads))
        raise ValueError(
            f"{type(self).__name__}.apply: got {len(grads)} gradients for {len(self.params)} "
            f"parameters ({len(trainable)} trainable); pass one per parameter (in `params` "
            "or `trainable()` order), or a dict {parameter: gradient}"
        )

    def apply(self, grads) -> None:
        """Update the parameters with `grads` (see the module docstring for the common
        part and the class docstring for the update). Eager: now; tracing: graph updates."""
        builder = _builder.get()
        if builder is not None:
            # The trace bakes these numbers into the graph: a compiled step retraces when
            # one changes, as an eager step takes it at once (the learning rate is a graph
            # parameter instead: setting it needs no trace).
            note_state(("optimizer", id(self)), self._traced_numbers, self._traced_numbers(),
                       f"{type(self).__name__}'s hyperparameters and its parameters' "
                       "trainable and lr_scale")
        pairs = self._pairs(grads)
        for param, grad in pairs:  # every gradient checked before any parameter changes
            if grad is not None and param.trainable and grad.shape != param.shape and \
                    tuple(grad.shape) != tuple(param.shape):
                raise ValueError(
                    f"{type(self).__name__}: the gradient of {param.name!r} has shape "
                    f"{list(grad.shape)}, but the parameter has {list(param.shape)}; no "
                    "parameter was updated. Pass the gradients in the order of the "
                    "optimizer's parameters (or a dict {parameter: gradient})"
                )
        rates: dict = {}  # (lr_scale, dtype) -> lr_p: made once per distinct pair, not per param
        self._eager_on = current_backend() if builder is None and current_region() is None \
            else None
        weight_decay, update = self.weight_decay, self.update
        try:
            for param, grad in pairs:
                if grad is None or not param.trainable:
                    continue
                dtype = param.dtype
                if grad.dtype != dtype:
                    grad = api.cast(grad, dtype)
                if weight_decay:
                    grad = grad + param * weight_decay
                key = (param.lr_scale, dtype)
                rate = rates.get(key)
                if rate is None:
                    rate = rates[key] = self._rate(param.lr_scale, dtype)
                update(param, grad, rate)
        finally:
            self._eager_on = None

    def _traced_numbers(self) -> tuple:
        """What a traced step reads as Python numbers: `constants()`, and each parameter's
        `trainable` and `lr_scale`."""
        return (*self.constants().values(),
                *[(param.trainable, param.lr_scale) for param in self.params])

    def _rate(self, lr_scale: float, dtype: str | None):
        """lr_p = cast(lr * lr_scale, dtype) (dtype None: lr * lr_scale in float64, uncast).
        `lr * 1.0` is lr exactly (lr is finite), so a scale of 1 costs no multiply. Eagerly
        the tensor is kept for later steps, keyed by the backend object, the learning
        rate's version (`opt.lr = ...`, `load_state_dict` write a new one) and (lr_scale,
        dtype): a step then runs no op for it (it cost a multiply and a cast per distinct
        pair and step). While tracing, the ops (the graph reads the learning-rate
        parameter, so setting `lr` needs no recompilation)."""
        if _builder.get() is None:
            key = (current_backend(), self._lr.version, lr_scale, dtype)
            rate = self._rates.get(key)
            if rate is None:
                if len(self._rates) >= 16:  # old versions and backends: never read again
                    self._rates.clear()
                rate = self._rates[key] = self._rate_ops(lr_scale, dtype)
            return rate
        return self._rate_ops(lr_scale, dtype)

    def _rate_ops(self, lr_scale: float, dtype: str | None):
        scaled = self._lr if lr_scale == 1.0 else self._lr * lr_scale
        return scaled if dtype is None else api.cast(scaled, dtype)

    def step(self, grads) -> None:
        """Update the parameters with `grads`: the same as `apply` (PyTorch's name). There
        is no `zero_grad`: gradients are values returned by `ug.value_and_grad`, not
        accumulated in the parameters.

        >>> loss, grads = ug.value_and_grad(loss_fn, wrt=opt.params)()
        >>> opt.step(grads)
        """
        self.apply(grads)

    def update(self, param: Parameter, grad, lr) -> None:
        raise NotImplementedError

    @staticmethod
    def subtract(param: Parameter, delta) -> None:
        """`param <- param - delta`, the last step of every update. Eagerly, on a backend
        whose lowering table has `sub_` (numpy, torch, paddle), the parameter's own tensor
        is updated in place from the second step on, as native optimizers do: a training
        step allocates no new parameter tensors. The numbers are those of
        `assign(param, param - delta)`. When it is written in place: see `write`.

        >>> Optimizer.subtract(param, lr * grad)
        """
        Optimizer.write(param, ("sub", delta))

    @staticmethod
    def write(holder: Parameter, *steps) -> Tensor:
        """`holder <- holder op1 operand1 op2 operand2 ...` for steps `(op, operand)`, op
        "sub", "add" or "mul" (left to right, each rounded as that op), on an optimizer's
        parameter or state slot; an operand is a tensor of the holder's shape and dtype or a
        Python number. Returns what reads the new value: the holder eagerly, the new tensor
        while tracing (one graph update, which takes effect after the step).

        Eagerly, on a backend whose lowering table has `<op>_` (numpy, torch and paddle:
        `sub_`, `add_`, `mul_`), each step writes the holder's own tensor in place
        from the second step of training on, as native optimizers do with parameters,
        momentum buffers and Adam's moments; the numbers are those of
        `assign(holder, holder op operand)` (the same kernel). In place only while the
        holder alone holds that tensor: nobody has read it since it was written
        (`.numpy()` and `state_dict()` may share its memory), no other tensor or parameter
        holds the same object (`ug.assign(other, param)`, a cast to its own dtype) and, on
        the backend's side (the lowering decides), nothing views its memory or aliases it;
        otherwise a new tensor.

        >>> velocity = Optimizer.write(velocity, ("mul", 0.9), ("add", grad))
        """
        return write_steps(holder, *steps)


class SGD(Optimizer):
    """Plain stochastic gradient descent:

        p <- p - lr_p * g

    >>> opt = ug.optim.SGD(net.parameters(), lr=0.5)
    """

    def __init__(self, params, lr=0.01, weight_decay=0.0):
        super().__init__(params, lr, weight_decay)

    def update(self, param, grad, lr):
        backend = self._eager_on
        if backend is not None and self._update_in_place(param, grad, lr, backend):
            return
        # Not one fused kernel (torch's sub_(g, alpha=lr), Paddle's sgd_): both may round
        # p - lr * g as an FMA (Paddle's on some CPUs, and not where p is float32 of a
        # multiple of 8 elements: quirk "sgd update"), not as mul, sub.
        self.subtract(param, lr * grad)

    def _update_in_place(self, param, grad, lr, backend) -> bool:
        """The eager update above as the same lowering calls the op-by-op path makes in its
        steady state, on the native tensors of `backend` (see `Adam._update_in_place`). True
        when done."""
        found = update_natives(param, grad, _SGD_LOWERINGS, (), (lr,), (), backend)
        if found is None:
            return False
        p_native, g, lr = found[1]
        op = backend.eager_op
        written_into(param, backend, op("sub_", [p_native, op("mul", [lr, g], {})], {}),
                     p_native)
        return True


# The in-place lowering SGD's eager update on the native tensors calls.
_SGD_LOWERINGS = ("sub_",)


class Momentum(Optimizer):
    """SGD with momentum (PyTorch's SGD(momentum=mu), Paddle's Momentum; the velocity v
    starts at 0):

        v <- mu * v + g
        p <- p - lr_p * v                   (nesterov=False)
        p <- p - lr_p * (g + mu * v)        (nesterov=True, with the new v)

    >>> opt = ug.optim.Momentum(net.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    """

    slots = ("velocity",)

    def __init__(self, params, lr=0.01, momentum=0.9, nesterov=False, weight_decay=0.0):
        momentum = checked_number("Momentum", "momentum", momentum)
        super().__init__(params, lr, weight_decay)
        self.momentum = momentum
        self.nesterov = bool(nesterov)

    def constants(self):
        return {**super().constants(), "momentum": self.momentum, "nesterov": self.nesterov}

    def update(self, param, grad, lr):
        velocity = self.state(param, "velocity")
        backend = self._eager_on
        if backend is not None and self._update_in_place(param, grad, lr, velocity, backend):
            return
        # In place eagerly (see `write`): v.mul_(mu).add_(g), as torch.optim does.
        new_velocity = self.write(velocity, ("mul", self.momentum),
                                  ("add", grad))
        step = grad + new_velocity * self.momentum if self.nesterov else new_velocity
        self.subtract(param, lr * step)

    def _update_in_place(self, param, grad, lr, velocity, backend) -> bool:
        """The eager update above as the same lowering calls the op-by-op path makes in its
        steady state, on the native tensors of `backend` (see `Adam._update_in_place`). True
        when done."""
        found = update_natives(param, grad, ("sub_", "add_", "mul_"), (velocity,), (lr,),
                               (self.momentum,), backend)
        if found is None:
            return False
        p_native, v_native, g, mu, lr = found[1]
        op = backend.eager_op
        held = v_native
        v_native = op("add_", [op("mul_", [v_native, mu], {}), g], {})  # v <- v * mu + g
        written_into(velocity, backend, v_native, held)
        if self.nesterov:  # p <- p - lr * (g + v * mu)
            step = op("mul", [lr, op("add", [g, op("mul", [v_native, mu], {})], {})], {})
        else:  # p <- p - lr * v
            step = op("mul", [lr, v_native], {})
        written_into(param, backend, op("sub_", [p_native, step], {}), p_native)
        return True


# The in-place lowerings Adam's eager update on the native tensors calls.
_ADAM_LOWERINGS = ("sub_", "add_", "mul_", "div_", "sqrt_")


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015) with bias correction, as in torch.optim.Adam. With
    t the parameter's step count (starting at 1) and m, v starting at 0:

        m <- beta1 * m + (1 - beta1) * g
        v <- beta2 * v + (1 - beta2) * g * g
        m_hat = m / (1 - beta1 ** t)
        v_hat = v / (1 - beta2 ** t)
        p <- p - lr_p * m_hat / (sqrt(v_hat) + eps)

    eps is added to sqrt(v_hat) (PyTorch's and the paper's form; Paddle and TF add an
    eps-hat to sqrt(v) before bias correction, which differs by O(eps)). t is a float64
    scalar per parameter; 1 - beta ** t is computed in float64, then cast to p's dtype.
    Each op is rounded in p's dtype, one after another: every target gives the same bits.
    float16 parameters: the update runs in float32 (p, g, m and v widened exactly, lr and
    the corrections cast to float32) and p, m and v are each rounded to float16 once, as
    torch.optim.Adam(fused=True) and Paddle update float16 parameters; m and v stay
    float16. In float16 alone the default eps 1e-8 is 0, and a zero v gives 0 / 0 = NaN
    (torch's default foreach Adam does), a v whose g * g underflows inf.

    fused=True (torch.optim.Adam's name): on a backend that lowers the fused update
    `adam_update` (`unigraph.ops.updates`; torch, Paddle, TensorFlow's graph modes), each
    parameter's update is one call of its framework's own Adam kernels, eagerly and in a
    compiled step: the same algebra, rounded as that framework rounds it (the bits of
    `torch.optim.Adam`, `paddle.optimizer.Adam`; TF's `ResourceApplyAdam`, given this
    formula's rate and epsilon), within the checker's budgets of the formula, in fewer
    passes over memory. Elsewhere the formula above runs. The state (state_dict) is the
    same either way.

    >>> opt = ug.optim.Adam(net.parameters(), lr=1e-3)
    >>> opt = ug.optim.Adam(net.parameters(), lr=1e-3, fused=True)   # torch's kernels
    """

    slots = ("m", "v", "step")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 fused=False):
        if isinstance(betas, str) or not hasattr(betas, "__len__") or len(betas) != 2:
            raise TypeError(f"Adam: betas must be a pair (beta1, beta2), got {betas!r}")
        beta1, beta2 = (checked_number("Adam", f"betas[{i}]", b, high=1.0, high_open=True)
                        for i, b in enumerate(betas))
        eps = checked_number("Adam", "eps", eps, low_open=True)
        super().__init__(params, lr, weight_decay)
        self.beta1, self.beta2, self.eps = beta1, beta2, eps
        self.fused = fused
        self._fused_here = False  # during `apply`: fused, and the backend lowers it
        # Eager only, see `_bias_corrections`: {(t, dtype): (t, correction1, correction2)}
        # during one `apply`, and {id(step slot): (the slot, its version, its value)} as last
        # written (the slot is kept so that its id cannot be reused by a later slot).
        self._corrections: dict | None = None
        self._step_values: dict = {}

    @property
    def fused(self) -> bool:
        """Whether each update is one call of the framework's own Adam kernels where the
        backend has them (see the class docstring); set it between steps (a compiled step
        retraces)."""
        return self._fused

    @fused.setter
    def fused(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"Adam: fused must be True or False, got {value!r}")
        self._fused = value

    def constants(self):
        return {**super().constants(), "betas": (self.beta1, self.beta2), "eps": self.eps,
                "fused": self.fused}

    def _initial(self, param, slot):
        if slot == "step":
            return np.zeros((), dtype=np.float64)
        return super()._initial(param, slot)

    def apply(self, grads) -> None:
        self._corrections = {} if _builder.get() is None and current_region() is None else None
        self._fused_here = self.fused and lowers(current_backend(), "adam_update")
        try:
            super().apply(grads)
        finally:
            self._corrections = None
            self._fused_here = False

    def _rate(self, lr_scale: float, dtype: str | None):
        # The fused update takes lr * lr_scale in float64 (torch: lr / (1 - beta1 ** t) as
        # a Python float, then rounded once); a float16 parameter's update runs in float32.
        if self._fused_here:
            return super()._rate(lr_scale, None)
        return super()._rate(lr_scale, "float32" if dtype == "float16" else dtype)

    def update(self, param, grad, lr):
        m, v, step = self.state(param, "m"), self.state(param, "v"), self.state(param, "step")
        if self._fused_here:
            self._fused_update(param, grad, lr, m, v, step)
            return
        if param.dtype == "float16":
            self._update_in_float32(param, grad, lr, m, v, step)
            return
        b1, b2 = self.beta1, self.beta2
        if self._corrections is not None:  # eagerly, not inside control flow
            t, correction1, correction2, t_value = self._bias_corrections(step, param.dtype)
            if self._update_in_place(param, grad, lr, m, v, step, t, correction1,
                                     correction2):
                self._step_values[id(step)] = (step, step.version, t_value)
                return
        # The moments in place eagerly (see `write`), each rounded as m * b1 + g * (1 - b1).
        new_m = self.write(m, ("mul", b1), ("add", grad * (1.0 - b1)))
        new_v = self.write(v, ("mul", b2), ("add", scratch(grad * grad, "mul", 1.0 - b2)))
        t, correction1, correction2, t_value = self._bias_corrections(step, param.dtype)
        assign(step, t)
        if t_value is not None:
            self._step_values[id(step)] = (step, step.version, t_value)
        # lr * m_hat / (sqrt(v_hat) + eps), op by op, the temporaries reused eagerly.
        denominator = scratch(scratch(new_v / correction2, "sqrt"), "add", self.eps)
        self.subtract(param, scratch(scratch(new_m / correction1, "mul", lr), "div",
                                      denominator))

    def _update_in_float32(self, param, grad, lr, m, v, step) -> None:
        """`update` of a float16 parameter: the formula's ops in float32 on the widened p,
        g, m and v (lr: float32), p, m and v each rounded to float16 once (see the class
        docstring)."""
        b1, b2 = self.beta1, self.beta2
        wide_p, wide_g, wide_m, wide_v = (api.cast(x, "float32")
                                          for x in (param, grad, m, v))
        new_m = wide_m * b1 + wide_g * (1.0 - b1)
        new_v = wide_v * b2 + (wide_g * wide_g) * (1.0 - b2)
        t, correction1, correction2, t_value = self._bias_corrections(step, "float32")
        assign(step, t)
        if t_value is not None:
            self._step_values[id(step)] = (step, step.version, t_value)
        new_p = wide_p - ((new_m / correction1) * lr) / (api.sqrt(new_v / correction2)
                                                         + self.eps)
        assign(m, api.cast(new_m, "float16"))
        assign(v, api.cast(new_v, "float16"))
        assign(param, api.cast(new_p, "float16"))

    def _fused_update(self, param, grad, lr, m, v, step) -> None:
        """The update as one `adam_update` call (`fused=True` on a backend that lowers it):
        eagerly written into the parameter's and moments' own tensors where nothing else
        holds them (`update_natives`, the backend's `adam_update_`), else new tensors
        assigned; while tracing, one node whose results are the graph's updates. lr: float64
        lr * lr_scale."""
        attrs = {"beta1": self.beta1, "beta2": self.beta2, "eps": self.eps}
        if self._corrections is not None:  # eagerly, not inside control flow
            t, _, _, t_value = self._bias_corrections(step, None)
            found = update_natives(param, grad, ("adam_update_",), (m, v))
            if found is not None:
                backend, (p_native, m_native, v_native, g) = found
                p_native, m_native, v_native = backend.eager_op("adam_update_", [
                    p_native, g, m_native, v_native, lr.native_for(backend),
                    t.native_for(backend)], attrs)
                m._written_eager(backend, m_native)
                v._written_eager(backend, v_native)
                param._written_eager(backend, p_native)
                step._written_eager(backend, t.native_for(backend))
                self._step_values[id(step)] = (step, step.version, t_value)
                return
        else:
            t, t_value = step + 1.0, None
        new_param, new_m, new_v = fused_update("adam_update", [param, grad, m, v, lr, t],
                                               attrs)
        assign(m, new_m)
        assign(v, new_v)
        assign(step, t)
        assign(param, new_param)
        if t_value is not None:
            self._step_values[id(step)] = (step, step.version, t_value)

    def _update_in_place(self, param, grad, lr, m, v, step, t, correction1,
                         correction2) -> bool:
        """The eager update above (moments, then the parameter, then `step <- t`) as the
        same lowering calls the op-by-op path makes in its steady state, on the native
        tensors, with none of the frontend's per-op work (~7 us an op, 14 ops and an
        `assign` a parameter): where the backend has the in-place lowerings, the parameter
        and both moments are held by nothing else (`sole_native`) and the gradient is a
        tensor of the parameter's shape and dtype on this backend. Each lowering still
        decides whether it writes in place (a view of the memory, an autograd trace: a new
        tensor), as on the op-by-op path. True when done; False when nothing was done (the
        caller takes the op-by-op path)."""
        found = update_natives(
            param, grad, _ADAM_LOWERINGS, (m, v), (lr, correction1, correction2),
            (self.beta1, 1.0 - self.beta1, self.beta2, 1.0 - self.beta2, self.eps))
        if found is None:
            return False
        backend, (p_native, m_native, v_native, g, b1, one_minus_b1, b2, one_minus_b2, eps,
                  lr, c1, c2) = found
        op = backend.eager_op
        held = p_native, m_native, v_native
        # m <- m * b1 + g * (1 - b1);  v <- v * b2 + (g * g) * (1 - b2)
        m_native = op("mul_", [m_native, b1], {})
        m_native = op("add_", [m_native, op("mul", [g, one_minus_b1], {})], {})
        v_native = op("mul_", [v_native, b2], {})
        v_native = op("add_", [v_native, _into(op, "mul", op("mul", [g, g], {}),
                                               one_minus_b2)], {})
        # p <- p - ((m / c1) * lr) / (sqrt(v / c2) + eps)
        denominator = _into(op, "add", _into(op, "sqrt", op("div", [v_native, c2], {})), eps)
        delta = _into(op, "div", _into(op, "mul", op("div", [m_native, c1], {}), lr),
                      denominator)
        written_into(m, backend, m_native, held[1])
        written_into(v, backend, v_native, held[2])
        written_into(param, backend, op("sub_", [p_native, delta], {}), held[0])
        # `assign(step, t)`'s write (its checks hold by construction: t is step + 1)
        step._written_eager(backend, t.native_for(backend))
        return True

    def _bias_corrections(self, step, dtype: str | None) -> tuple:
        """(t, cast(1 - beta1 ** t, dtype), cast(1 - beta2 ** t, dtype), t's value or None)
        with t = step + 1, as ops (a traced step reads the step slot: its value is None);
        dtype None: t alone, the corrections None (the fused update makes its own).
        Eagerly, within one `apply`, parameters whose step slots hold the same value and
        whose dtype is the same share the first one's tensors: the same ops on the same
        numbers, made once a step instead of 7 ops per parameter. A slot's value is known
        without reading it while this optimizer wrote it last (its version unchanged).

        >>> t, correction1, correction2, t_value = opt._bias_corrections(step, "float32")
        """
        shared = self._corrections
        if shared is None:
            return (*self._correction_ops(step, dtype), None)
        slot, version, value = self._step_values.get(id(step), (None, None, None))
        if slot is not step or version != step.version:
            value = float(step.numpy())
        key = (value, dtype)
        found = shared.get(key)
        if found is None:
            # value + 1.0 is t's value: one float64 addition, rounded as the op rounds it.
            found = shared[key] = (*self._correction_ops(step, dtype), value + 1.0)
        return found

    def _correction_ops(self, step, dtype: str | None) -> tuple:
        t = step + 1.0
        if dtype is None:
            return t, None, None
        correction1 = api.cast(1.0 - api.pow(self.beta1, t), dtype)
        correction2 = api.cast(1.0 - api.pow(self.beta2, t), dtype)
        return t, correction1, correction2
