"""`Module`: a tree of layers that owns Parameters (weights) and buffers (running statistics).

A module's weights are `ug.Parameter`s, initialised once in NumPy, so the same module runs
on every target. Assigning a Parameter or a Module to an attribute registers it; the
parameter's `name` becomes its dotted path from the root (`"fc1.weight"`), which is also its
name in traced graphs and the key in `state_dict()`.

>>> class Net(ug.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.fc1 = ug.nn.Linear(784, 10)
...     def forward(self, x):
...         return self.fc1(x)
>>> net = Net(); [name for name, _ in net.named_parameters()]
['fc1.weight', 'fc1.bias']
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import numbers
import sys
import types

import numpy as np

from unigraph import autograph
from unigraph.function import assign
from unigraph.tensor import Parameter
from unigraph.tracing import _builder, current_builder, current_region, note_state

__all__ = ["Module", "collect_updates", "update_buffer"]

# A list of (buffer, new value) while `collect_updates()` is active, else None.
_pending_updates: contextvars.ContextVar = contextvars.ContextVar(
    "unigraph_nn_pending_updates", default=None
)
# A _SummaryRecorder while `Module.summary` traces, else None.
_summary_rows: contextvars.ContextVar = contextvars.ContextVar(
    "unigraph_nn_summary_rows", default=None
)


class _SummaryRecorder:
    """Every module call while `Module.summary` traces: [module, output] in the order the
    calls start (execution order: a parent before the layers it calls)."""

    def __init__(self):
        self.rows: list = []

    def call(self, module, forward, args, kwargs):
        row = [module, None]
        self.rows.append(row)
        row[1] = forward(*args, **kwargs)
        return row[1]


@contextlib.contextmanager
def collect_updates():
    """Collect buffer updates (BatchNorm running statistics) instead of assigning them.

    A differentiated function (`ug.value_and_grad`) cannot assign parameters inside a static
    graph, so a training step runs the forward pass inside this block, returns the collected
    values from the differentiated function, and assigns them after it:

    >>> def closure():
    ...     with ug.nn.collect_updates() as updates:
    ...         loss = loss_fn(model(x), y)
    ...     return loss, [value for _, value in updates]
    >>> (loss, values), grads = ug.value_and_grad(closure, wrt=params)()
    >>> for (buffer, _), value in zip(updates, values):
    ...     ug.assign(buffer, value)

    `ug.Trainer` does this for you.
    """
    updates: list = []
    token = _pending_updates.set(updates)
    try:
        yield updates
    finally:
        _pending_updates.reset(token)


def update_buffer(module: Module, buffer: Parameter, value) -> None:
    """Give `buffer` a new value now, or hand it to an active `collect_updates()`."""
    pending = _pending_updates.get()
    if pending is not None:
        pending.append((buffer, value))
        return
    builder = current_builder()
    inside = current_region()
    if inside is not None or (builder is not None and builder.parent is not None):
        # Refused in every mode, eager included: a static graph cannot assign it there.
        where = f" at {inside[1]}" if inside is not None else ""
        raise RuntimeError(
            f"{type(module).__name__} {module.path!r} updates its buffer {buffer.name!r} in "
            "training mode inside a differentiated function (ug.value_and_grad) or a "
            f"cond/while_loop branch{where}, where a static graph cannot assign it: run the "
            "forward pass inside `with ug.nn.collect_updates() as updates:` and assign the "
            "values after the gradient (ug.Trainer does), or call module.eval()"
        )
    assign(buffer, value)


def _holds_state(value) -> bool:
    """Whether a list/tuple/dict attribute holds Modules or Parameters (at any depth), or
    is an empty list/dict that may receive them later."""
    items = list(value.values()) if isinstance(value, dict) else list(value)
    if not items:
        return not isinstance(value, tuple)
    return any(isinstance(item, Module | Parameter) or
               (isinstance(item, list | tuple | dict) and _holds_state(item)) for item in items)


def _contained(name: str, value):
    """(dotted name, item) for every Module and Parameter inside a list/tuple/dict."""
    if isinstance(value, Module | Parameter):
        yield name, value
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _contained(f"{name}.{index}", item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _contained(f"{name}.{key}", item)


# Kept on a forward function (as autograph keeps its conversion, an ordinary cycle the
# collector frees): (the function, its conversion's function). A traced model calls every
# layer's forward, and autograph's own lookup builds a bound Conversion each time.
_CONVERTED = "__unigraph_module_forward__"


def _converted(forward):
    """`autograph.convert(forward).function`, looked up once per function for a bound
    method."""
    function = getattr(forward, "__func__", None)
    if type(function) is not types.FunctionType:
        return autograph.convert(forward).function
    cached = function.__dict__.get(_CONVERTED)
    if cached is None or cached[0] is not function:  # (functools.wraps copies __dict__)
        cached = (function, autograph.convert(function).function)
        function.__dict__[_CONVERTED] = cached
    return types.MethodType(cached[1], forward.__self__)


# class -> (its `forward` function, that function's conversion): what a traced call of a
# module whose own `__dict__` holds no `forward` runs (Module.__call__), while the class's
# `forward` is still that function
_CLASS_FORWARDS: dict = {}


def _note_class_forward(module, forward) -> None:
    """Keep `forward` (`_converted(module.forward)`) in `_CLASS_FORWARDS` where it is the
    conversion of the plain function `forward` of `module`'s class, bound to `module`."""
    kind = type(module)
    function = getattr(kind, "forward", None)
    if (type(function) is types.FunctionType and "forward" not in module.__dict__
            and type(forward) is types.MethodType and forward.__self__ is module):
        if len(_CLASS_FORWARDS) > 4096:  # (classes made in a loop: keep the table small)
            _CLASS_FORWARDS.clear()
        _CLASS_FORWARDS[kind] = (function, forward.__func__)


def _read_training(module) -> bool:
    return module.__dict__["_training"]


class Module:
    """Base class of every layer and model. Subclasses define `forward`; calling the module
    calls `forward`.

    Registration is by attribute: `self.fc = Linear(...)` adds a child module,
    `self.w = ug.Parameter(...)` a parameter, `self.register_buffer(name, array)` a
    non-trainable buffer (saved in `state_dict`, never given to optimizers). Modules and
    Parameters held in a list, tuple or dict attribute are registered too, named by their
    index or key (`self.layers = [Linear(...), ...]` gives `layers.0.weight`), including
    ones appended later; `ModuleList` and `ModuleDict` are the explicit containers.
    """

    # torch's layout of this module's own state (`load_state_dict(layout="torch")`): the
    # parameters torch stores transposed, and the entries torch has that this module has not.
    torch_transposed: tuple = ()
    torch_only: tuple = ()

    def __init__(self):
        # (stores into the new instance's dict, not __setattr__ six times, nor a keyword
        # dict made for one `update`: every layer built runs this)
        own = self.__dict__
        own["_parameters"] = {}
        own["_buffers"] = {}
        own["_modules"] = {}
        own["_containers"] = {}  # name -> list/tuple/dict attribute
        own["_training"] = True
        own["path"] = ""

    @property
    def training(self) -> bool:
        """True in training mode (see `train`/`eval`). Reading it while a static function
        is traced makes the compiled graph depend on it: after `eval()`/`train()` the
        function traces again (once per mode) instead of reusing the other mode's graph."""
        value = self.__dict__["_training"]
        note_state(("training", id(self)), functools.partial(_read_training, self), value,
                   f"{type(self).__name__} {self.path or '(model)'!r}.training")
        return value

    @training.setter
    def training(self, value) -> None:
        object.__setattr__(self, "_training", bool(value))

    # -- registration ---------------------------------------------------------------------
    def __setattr__(self, name, value):
        own = self.__dict__
        if "_parameters" not in own:
            raise AttributeError(
                f"{type(self).__name__}: call super().__init__() before assigning attributes"
            )
        tables = (own["_parameters"], own["_buffers"], own["_modules"], own["_containers"])
        registered = name in tables[0] or name in tables[1] or name in tables[2] or \
            name in tables[3]
        if not registered and not isinstance(value, _REGISTERED):
            # A plain attribute (a size, a flag) that replaces nothing registered: the
            # common case, ~6 per layer built.
            object.__setattr__(self, name, value)
            return
        if registered:
            for table in tables:
                table.pop(name, None)
        if isinstance(value, Parameter):
            tables[0][name] = value
            value.name = self._child_path(name)
        elif isinstance(value, Module):
            tables[2][name] = value
            value._set_path(self._child_path(name))
        elif isinstance(value, list | tuple | dict) and _holds_state(value):
            tables[3][name] = value
            self._name_contents(name, value, force=True)
        object.__setattr__(self, name, value)

    def _register_new(self, name: str, value) -> None:
        """`setattr(self, name, value)` for a Parameter or Module `value` under a `name` this
        module has registered nothing under (a constructor's own: Linear's weight and bias,
        Sequential's children), without `__setattr__`'s tests where the class keeps
        Module's: the same tables, names and attribute (a 100-layer Sequential of Linears
        made 300 such assignments, ~1 us each in `__setattr__`)."""
        if type(self).__setattr__ is not Module.__setattr__:
            setattr(self, name, value)
            return
        own = self.__dict__
        if isinstance(value, Parameter):
            own["_parameters"][name] = value
            value.name = self._child_path(name)
        else:
            own["_modules"][name] = value
            value._set_path(self._child_path(name))
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        for table in (self._parameters, self._buffers, self._modules, self._containers):
            table.pop(name, None)
        object.__delattr__(self, name)

    def _child_path(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def _set_path(self, path: str) -> None:
        own = self.__dict__
        own["path"] = path
        prefix = f"{path}." if path else ""  # (the _child_path of each, without its calls)
        for table in (own["_parameters"], own["_buffers"]):
            for name, param in table.items():
                param.name = prefix + name
        for name, child in own["_modules"].items():
            child._set_path(prefix + name)
        for name, value in own["_containers"].items():
            self._name_contents(name, value, force=True)

    def _name_contents(self, name: str, value, force: bool) -> list:
        """Name the Modules and Parameters in container attribute `name` by their dotted
        path (`force`: even those already named; else only items added since). Returns
        (relative dotted name, item) pairs."""
        items = list(_contained(name, value))
        for relative, item in items:
            if isinstance(item, Module):
                if force or not item.path:
                    item._set_path(self._child_path(relative))
            elif force or not item.name:
                item.name = self._child_path(relative)
        return items

    def _named_children(self):
        """(name, module) of the direct children, containers' items included, in the order
        their attributes were assigned."""
        if not self._containers:
            yield from self._modules.items()
            return
        order = {name: index for index, name in enumerate(self.__dict__)}
        names = sorted([*self._modules, *self._containers],
                       key=lambda name: order.get(name, len(order)))
        for name in names:
            if name in self._modules:
                yield name, self._modules[name]
                continue
            for relative, item in self._name_contents(name, self._containers[name], False):
                if isinstance(item, Module):
                    yield relative, item

    def _own_parameters(self):
        yield from self._parameters.items()
        for name, value in self._containers.items():
            for relative, item in self._name_contents(name, value, force=False):
                if isinstance(item, Parameter):
                    yield relative, item

    def register_buffer(self, name: str, value, dtype=None) -> Parameter:
        """Add a non-trainable tensor (e.g. running statistics) saved with the weights."""
        buffer = value if isinstance(value, Parameter) else Parameter(value, dtype=dtype)
        buffer.trainable = False
        for table in (self._parameters, self._modules):
            table.pop(name, None)
        self._buffers[name] = buffer
        buffer.name = self._child_path(name)
        object.__setattr__(self, name, buffer)
        return buffer

    def add_parameter(self, name: str, array, trainable=True, lr_scale=1.0) -> Parameter:
        """Register `array` as a Parameter called `name` (a shortcut for setattr)."""
        param = Parameter(array, trainable=trainable, lr_scale=lr_scale)
        setattr(self, name, param)
        return param

    # -- traversal ------------------------------------------------------------------------
    def named_modules(self, prefix: str = ""):
        """(dotted name, module) for this module ("") and every descendant, depth first."""
        yield prefix, self
        for name, child in self._named_children():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        return [module for _, module in self.named_modules()]

    def children(self):
        return [child for _, child in self._named_children()]

    def _named(self, table: str) -> list:
        """(dotted name, Parameter) of every parameter (`table` "_parameters") or buffer
        ("_buffers"), in `named_modules` order; one shared by two layers is listed (and
        trained) once."""
        params, buffers = self._named_state()
        return params if table == "_parameters" else buffers

    def _named_state(self) -> tuple[list, list]:
        """(`named_parameters()`, `named_buffers()`) from one walk of the modules, in the
        order of `named_modules`. (Module's own traversal written out, without its
        generators: `load_state_dict` of a 100-layer model walked 100 of them twice. A
        module whose class overrides the traversal is walked by its own methods.)"""
        found = ([], [], set(), set())  # parameters, buffers, and the ids of each listed
        _walk_state(self, "", found)
        return found[0], found[1]

    def named_parameters(self):
        """(dotted name, Parameter) for every parameter, trainable or frozen."""
        return self._named("_parameters")

    def parameters(self):
        """Every parameter (give these to an optimizer; frozen ones are skipped there)."""
        return [param for _, param in self._named("_parameters")]

    def trainable_parameters(self):
        return [param for param in self.parameters() if param.trainable]

    def named_buffers(self):
        return self._named("_buffers")

    def buffers(self):
        return [buffer for _, buffer in self._named("_buffers")]

    # -- modes ----------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Training mode (dropout drops, batch norm uses and updates batch statistics)."""
        for module in self.modules():
            object.__setattr__(module, "_training", bool(mode))
        return self

    def eval(self) -> Module:
        """Evaluation mode (dropout is the identity, batch norm uses running statistics)."""
        return self.train(False)

    # -- weights as NumPy -----------------------------------------------------------------
    def state_dict(self, layout: str = "unigraph") -> dict:
        """{dotted name: NumPy array copy} of every parameter and buffer. `layout="torch"`
        gives them as the same model written with torch.nn stores them (load with
        `{k: torch.from_numpy(v) for k, v in state.items()}`): Linear weights transposed,
        and BatchNorm's `num_batches_tracked`, which unigraph does not count, as 0 (torch
        reads it only with momentum=None)."""
        _check_layout("state_dict", layout)
        state = {name: param.numpy().copy() for name, param in self.named_parameters()}
        state.update({name: buffer.numpy().copy() for name, buffer in self.named_buffers()})
        if layout == "torch":
            transposed, torch_only = _torch_entries(self)
            for key in transposed:
                if key in state:
                    state[key] = np.ascontiguousarray(state[key].T)
            state.update((key, np.array(0, np.int64)) for key in torch_only)
        return state

    def load_state_dict(self, state: dict, strict: bool = True, layout: str = "unigraph") -> None:
        """Load arrays saved by `state_dict` (shapes must match; dtypes are converted).

        With `strict` (the default) the keys must be exactly this module's keys.
        `layout="torch"` loads a torch model's `state_dict()` (torch tensors or arrays) whose
        module names match this one's: a Linear's weight is transposed ([out, in] in torch,
        [in, out] here) and BatchNorm's `num_batches_tracked` is left out; every other layer
        stores its parameters as torch does. torch tensors with the default layout are
        refused (a square Linear weight would load transposed, silently).
        """
        state = _in_unigraph_layout(self, state, layout)
        params, buffers = self._named_state()
        own = dict(params)
        own.update(buffers)
        missing = [key for key in own if key not in state]
        unexpected = [key for key in state if key not in own]
        if strict and (missing or unexpected):
            parts = []
            if missing:
                parts.append(f"missing keys: {', '.join(missing)}")
            if unexpected:
                parts.append(f"unexpected keys: {', '.join(unexpected)}")
            raise KeyError(f"load_state_dict into {type(self).__name__}: {'; '.join(parts)}")
        checked = []
        for key, param in own.items():
            if key not in state:
                continue
            array = np.asarray(state[key])
            if array.shape != param.shape:
                raise ValueError(
                    f"load_state_dict into {type(self).__name__}: {key!r} has shape "
                    f"{list(array.shape)} in the state dict but {list(param.shape)} in the model"
                )
            checked.append((param, array))
        for param, array in checked:  # all or nothing; set_value copies each array once
            param.set_value(array)

    def save(self, path) -> None:
        """Write every parameter and buffer (`state_dict()`) to `path` in the safetensors
        format: no pickle, so loading the file can never run code.

        >>> net.save("net.safetensors")
        """
        from unigraph.weights import save

        save(self.state_dict(), path, metadata={"module": type(self).__name__})

    def load(self, path) -> None:
        """Load weights written by `save`. Every name, shape and dtype is checked first and
        all differences are reported at once; a damaged file or any difference loads
        nothing (the module keeps its previous weights).

        >>> net.load("net.safetensors")
        """
        from unigraph.weights import check_fits, load

        arrays = load(path)
        own = {name: (p.shape, p.dtype) for name, p in self.named_parameters()}
        own.update({name: (b.shape, b.dtype) for name, b in self.named_buffers()})
        check_fits(own, arrays, str(path))
        self.load_state_dict(arrays)

    def copy(self, dtype=None) -> Module:
        """A deep copy with new Parameters holding copies of the values (floating ones cast
        to `dtype` when given): e.g. a float64 twin of a float32 model for a reference run.

        >>> reference = net.copy("float64")
        """
        memo: dict = {}
        for param in [*self.parameters(), *self.buffers()]:
            array = np.array(param.numpy(), copy=True)
            if dtype is not None and array.dtype.kind == "f":
                array = array.astype(dtype)
            memo[id(param)] = Parameter(array, name=param.name, trainable=param.trainable,
                                        lr_scale=param.lr_scale, order=param.order)
        return copy.deepcopy(self, memo)

    # -- calling --------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args, **kwargs):
        builder = _builder.get()  # (current_builder(), without its call)
        if builder is None:  # (eager: every step of a training loop comes here, directly)
            recorder = _summary_rows.get()
            if recorder is None:
                return self.forward(*args, **kwargs)
            return recorder.call(self, self.forward, args, kwargs)
        # Traced: Python control flow in forward() becomes cond/while_loop (cached). This
        # call is where the walk for each node's user line stops (GraphBuilder.mark_call).
        frame = sys._getframe()
        builder.mark_call(frame)
        try:
            recorder = _summary_rows.get()
            if recorder is None:
                # The class's forward converted, found by the class: no bound method made
                # and unwrapped a layer (`_converted`'s lookup, ~1 us of each call traced)
                kind = type(self)
                entry = _CLASS_FORWARDS.get(kind)
                if entry is not None and entry[0] is kind.forward and \
                        "forward" not in self.__dict__:
                    return entry[1](self, *args, **kwargs)
                forward = _converted(self.forward)
                _note_class_forward(self, forward)
                return forward(*args, **kwargs)
            return recorder.call(self, _converted(self.forward), args, kwargs)
        finally:
            builder.unmark_call(frame)
            del frame  # (a frame holding itself in a local would be a reference cycle)

    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, child in self._named_children():
            child_lines = repr(child).splitlines()
            lines.append(f"  ({name}): {child_lines[0]}")
            lines.extend(f"  {line}" for line in child_lines[1:])
        if len(lines) == 1:
            return lines[0] + ")"
        return "\n".join(lines) + "\n)"

    def summary(self, *example_inputs, input_shape=None, dtype="float32",
                print_fn=print) -> str:
        """A table of the layers in execution order, with output shapes, the parameters
        each one holds and their counts; the rows' counts add up to the total.

        The model is traced (nothing is computed) in evaluation mode on `example_inputs`
        (arrays or tensors: only their shapes and dtypes matter), or on one zero input of
        `input_shape` and `dtype`; a tuple of ints as the only argument is `input_shape`.
        A parameter is counted in the first row that holds it: a parameter held directly
        by the model gets a row for the model, a layer that is never called a row at the
        end, and a layer called twice counts its weights once. Returns the table and passes
        it to `print_fn` (None: don't).

        >>> net.summary(np.zeros((1, 784), np.float32))
        >>> net.summary((1, 784))                          # the same, from a shape
        """
        from unigraph.function import function

        inputs = _summary_inputs(example_inputs, input_shape, dtype)
        recorder = _SummaryRecorder()
        was_training = self.training
        self.eval()
        token = _summary_rows.set(recorder)
        try:
            function(lambda *xs: self(*xs), name="summary", autograph=False).trace(*inputs)
        finally:
            _summary_rows.reset(token)
            self.train(was_training)
        table = _summary_table(self, recorder.rows)
        if print_fn is not None:
            print_fn(table)
        return table


def _add_state(prefix: str, entries, listed: list, seen: set) -> None:
    for name, param in entries:
        if id(param) in seen:
            continue  # a parameter shared by two layers is listed (and trained) once
        seen.add(id(param))
        listed.append(((f"{prefix}.{name}" if prefix else name), param))


LAYOUTS = ("unigraph", "torch")


def _check_layout(method: str, layout: str) -> None:
    if layout not in LAYOUTS:
        raise ValueError(f"{method}: layout must be one of {LAYOUTS}, got {layout!r}")


def _torch_entries(model: Module) -> tuple[list, list]:
    """The state keys of `model` that torch stores transposed, and those only torch has:
    each module's `torch_transposed` and `torch_only` under its dotted name."""
    transposed, torch_only = [], []
    for name, module in model.named_modules():
        prefix = f"{name}." if name else ""
        transposed += [prefix + entry for entry in module.torch_transposed]
        torch_only += [prefix + entry for entry in module.torch_only]
    return transposed, torch_only


def _in_unigraph_layout(model: Module, state: dict, layout: str) -> dict:
    """`state` as unigraph arrays: torch tensors copied to NumPy and, for layout "torch",
    each module's `torch_transposed` entries transposed and its `torch_only` ones dropped."""
    _check_layout("load_state_dict", layout)
    tensors = [key for key, value in state.items() if type(value).__module__ == "torch"]
    if tensors and layout != "torch":
        raise ValueError(
            f"load_state_dict into {type(model).__name__}: {tensors[0]!r} is a torch tensor; "
            "pass layout='torch' to load a torch model's state_dict (a Linear's weight is "
            "[out, in] there and [in, out] here: a square one would load transposed)")
    if layout == "unigraph":
        return state
    state = {key: value.detach().cpu().numpy() if key in tensors else value
             for key, value in state.items()}
    transposed, torch_only = _torch_entries(model)
    for key in torch_only:
        state.pop(key, None)
    for key in transposed:
        if key in state:
            state[key] = np.asarray(state[key]).T
    return state


def _walk_state(module: Module, prefix: str, found: tuple) -> None:
    """Add the parameters and buffers of `module` (named from `prefix`) and of its
    descendants to `found` (see `Module._named_state`). (A function, not a closure calling
    itself: that would be a reference cycle holding every Parameter listed.)"""
    params, buffers, seen_params, seen_buffers = found
    kind = type(module)
    plain = _PLAIN_TRAVERSAL.get(kind)
    if plain is None:
        plain = _PLAIN_TRAVERSAL[kind] = all(
            getattr(kind, name) is getattr(Module, name)
            for name in ("named_modules", "_named_children", "_own_parameters"))
    if not plain:
        for sub_prefix, sub in module.named_modules(prefix):
            _add_state(sub_prefix, sub._own_parameters(), params, seen_params)
            _add_state(sub_prefix, sub._buffers.items(), buffers, seen_buffers)
        return
    own = module.__dict__
    if own["_containers"]:
        _add_state(prefix, module._own_parameters(), params, seen_params)
        _add_state(prefix, own["_buffers"].items(), buffers, seen_buffers)
        children = module._named_children()
    else:  # (the usual module: its tables are all there is)
        if own["_parameters"]:
            _add_state(prefix, own["_parameters"].items(), params, seen_params)
        if own["_buffers"]:
            _add_state(prefix, own["_buffers"].items(), buffers, seen_buffers)
        children = own["_modules"].items()
    for name, child in children:
        _walk_state(child, f"{prefix}.{name}" if prefix else name, found)


# class -> whether it keeps Module's own traversal (named_modules, _named_children,
# _own_parameters), which `Module._named_state` then runs inline
_PLAIN_TRAVERSAL: dict = {}

# What an attribute assignment may register (see Module.__setattr__).
_REGISTERED = (Parameter, Module, list, tuple, dict)


def _is_shape(value) -> bool:
    return isinstance(value, tuple | list) and all(
        isinstance(n, numbers.Integral) and not isinstance(n, bool) for n in value)


def _summary_inputs(example_inputs, input_shape, dtype) -> tuple:
    """The inputs to trace: the examples, or one zero array of `input_shape`."""
    if input_shape is None and len(example_inputs) in (1, 2) and \
            _is_shape(example_inputs[0]) and all(
                isinstance(d, str) for d in example_inputs[1:]):
        # summary((1, 784)) and summary((1, 784), "float64"): the shape form
        input_shape, dtype = example_inputs[0], (example_inputs[1:] or [dtype])[0]
        example_inputs = ()
    if input_shape is not None:
        if example_inputs:
            raise TypeError("summary: pass example inputs or input_shape=..., not both")
        return (np.zeros(tuple(input_shape), dtype=dtype),)
    if not example_inputs:
        raise TypeError("summary: pass the model's example inputs, e.g. "
                        "net.summary(np.zeros((1, 784), np.float32)), or an input shape "
                        "net.summary((1, 784))")
    return example_inputs


def _shape_text(out) -> str:
    if isinstance(out, tuple | list):
        return ", ".join(_shape_text(x) for x in out)
    shape = getattr(out, "shape", None)
    return str(list(shape)) if shape is not None else type(out).__name__


def _size(param) -> int:
    return int(np.prod(param.shape))


def _summary_table(model: Module, rows: list) -> str:
    named = dict(model.named_modules())
    path_of = {id(module): name for name, module in named.items()}
    counted: set = set()  # ids of parameters already in a row

    def row_for(module, shape_text):
        own, count = [], 0
        for name, param in module._own_parameters():
            text = f"{name} {list(param.shape)}" + ("" if param.trainable else " frozen")
            if id(param) in counted:
                own.append(f"{name} (counted above)")
                continue
            counted.add(id(param))
            own.append(text)
            count += _size(param)
        if own and count == 0 and all(text.endswith("(counted above)") for text in own):
            own = ["(counted above)"]  # a layer called again
        path = path_of.get(id(module), module.path) or "(model)"
        return (f"{path} ({type(module).__name__})", shape_text, ", ".join(own), f"{count:,}")

    # Like Keras, list the layers rather than the model around them, unless the model holds
    # parameters of its own or has no layers.
    show_model = not model.children() or any(True for _ in model._own_parameters())
    body = [row_for(module, _shape_text(out)) for module, out in rows
            if show_model or module is not model]
    called = {id(module) for module, _ in rows}
    for module in named.values():  # layers never called still hold parameters
        if id(module) not in called and any(True for _ in module._own_parameters()):
            body.append(row_for(module, "(not called)"))

    header = ("Layer (type)", "Output shape", "Parameters", "Param #")
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(4)]
    rule = "-" * (sum(widths) + 6)

    def line(row):
        return (f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  "
                f"{row[3]:>{widths[3]}}")

    params = model.parameters()
    trainable = sum(_size(p) for p in params if p.trainable)
    frozen = sum(_size(p) for p in params if not p.trainable)
    buffers = sum(_size(b) for b in model.buffers())
    lines = [f'Model: "{type(model).__name__}"', rule, line(header), rule.replace("-", "=")]
    lines += [line(row) for row in body]
    lines += [
        rule,
        f"Total params: {trainable + frozen:,}",
        f"Trainable params: {trainable:,}",
        f"Non-trainable params: {frozen:,}",
        f"Buffers: {buffers:,}",
        rule,
    ]
    return "\n".join(lines)
