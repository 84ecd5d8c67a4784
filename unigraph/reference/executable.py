"""`numpy:static`'s executable: a `Plan` holding the parameters between runs.

Memory contract: nothing a caller holds can change what the engine holds, and nothing the
engine holds can be written through what it hands out. Parameters are copied in
(`set_param`), or kept as read-only views of arrays their owner never writes (`share_param`,
a Parameter's own value: a model's first run copies none of its weights), and stored
read-only, so every view of them (`get_param`, an output that is a parameter or a reshape of
one) is read-only too; a value the graph assigns to a parameter is
copied when it may share memory with an array the caller fed (an identity, reshape or slice
of an input). Outputs are fresh arrays, or copies where they would alias a feed. The engine
never writes an array in place, so sharing read-only memory is safe.
"""

from __future__ import annotations

import numpy as np

from unigraph.backend import Executable
from unigraph.reference.plan import Plan


def read_only(array) -> np.ndarray:
    """A view of `array` that cannot be written (the array itself is left as it was)."""
    view = np.asarray(array).view()
    view.flags.writeable = False
    return view


def aligned_copy(array, alignment: int = 64) -> np.ndarray:
    """A C-contiguous copy of `array` whose data starts on an `alignment`-byte boundary.
    `malloc` places a large array 16 bytes past one (a place that changes from process to
    process), and OpenBLAS's sgemm reads such an operand slower: `x.T @ d` of a [100, 784]
    float32 x, 21.0 us against 14.7 us aligned."""
    array = np.asarray(array)
    buffer = np.empty(array.nbytes + alignment, np.uint8)
    offset = -buffer.ctypes.data % alignment
    out = buffer[offset:offset + array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


def _owned(value, feeds: list):
    """`value`, copied if it may share memory with one of `feeds` (the caller's arrays).

    Most values are NumPy scalars (immutable) or fresh arrays that own their memory: those
    cost a type check, an attribute read and an identity test per feed."""
    if type(value) is not np.ndarray:
        return value
    if value.base is None:
        for feed in feeds:
            if value is feed:
                return value.copy()
        return value
    for feed in feeds:
        if isinstance(feed, np.ndarray) and np.may_share_memory(value, feed):
            return value.copy()
    return value


def _frozen(array):
    # (setflags(False), positional: ~0.3 us, as much as reading `flags.writeable`; the
    # keyword costs ~0.7 us more in its argument parsing. A frozen array stays frozen.)
    if type(array) is np.ndarray:
        array.setflags(False)
    return array


def _whole_run(run, params: list, updates: list, inputs: int):
    """`ReferenceExecutable._run`'s work once the plan's generated function `run` is made
    (`Plan.values_function`: the outputs, then the updates' new values) as one function of
    the `inputs` feeds: `run` on the feeds and the parameters (the list `params`, read at
    each call), each update's value stored into its parameter's place, frozen and copied
    first where it may share a feed's memory (`_owned`; a value `run` made shares none:
    `run.unshared`), the outputs that may share a feed's memory copied. `run` itself when
    there are no parameters, no updates and no such output. Generated code: no loops over
    the updates and outputs, no `_owned` call where none can copy.

    >>> whole = _whole_run(plan_function, executable.params, executable.updates, 2)
    >>> outputs = whole(x, y)
    """
    count = len(run.unshared) - len(updates)
    shared = [i for i in range(count) if not run.unshared[i]]
    if not (params or updates or shared):
        return run
    names = [f"i{k}" for k in range(inputs)]
    fed = f"({''.join(name + ', ' for name in names)})"
    args = ", ".join([*names, *(f"P[{k}]" for k in range(len(params)))])
    lines = [f"def whole({', '.join(names)}):", f"    values = run({args})"]
    for position, (index, _) in enumerate(updates, count):
        value = f"values[{position}]"
        if run.unshared[position]:
            # an array the run made (`run.unshared`: an ndarray, never a NumPy scalar):
            # `_frozen`'s setflags without its call and type test (~0.8k instructions)
            lines += [f"    {value}.setflags(False)", f"    P[{index}] = {value}"]
        else:
            lines.append(f"    P[{index}] = frozen(owned({value}, {fed}))")
    lines += [f"    values[{i}] = owned(values[{i}], {fed})" for i in shared]
    if updates:
        lines.append(f"    del values[{count}:]")
    lines.append("    return values")
    scope = {"run": run, "P": params, "owned": _owned, "frozen": _frozen}
    exec(compile("\n".join(lines), "<unigraph run of a numpy:static plan>", "exec"), scope)
    return scope["whole"]


class ReferenceExecutable(Executable):
    """A graph compiled for the reference engine. `ops` replaces the op table (tests build
    deliberately wrong backends this way). The checks and copies in and out are the
    `Executable` base's; this class only runs the plan.

    >>> executable = ReferenceExecutable(graph)
    >>> executable.set_param(0, w)
    >>> outputs = executable.run([x])
    """

    target = "numpy:static"
    outputs_unshared = True  # `_owned` copies every output that may alias a feed
    keeps_shared_params = True  # the engine never writes an array in place

    def __init__(self, graph, ops=None):
        super().__init__(graph)
        self.plan = Plan(graph, ops)
        self.params = [None] * len(graph.params)
        self.updates = []
        if graph.updates:  # (a forward model has none: no table of its 200 parameters)
            index = {v.id: i for i, v in enumerate(graph.params)}
            self.updates = [(index[p.id], self.plan.slots[v.id]) for p, v in graph.updates]
        # what a run reads besides the outputs: other values may be dropped once dead
        self.keep = frozenset(slot for _, slot in self.updates)
        # From the plan's second run: one generated function from the inputs to the
        # outputs, then the updates' new values (`Plan.values_function`)
        self.values = (*self.plan.output_slots, *(slot for _, slot in self.updates))
        # From the plan's second run, the whole run as one function of the feeds
        # (`_whole_run`): what `_run`, `run_known` and a @ug.function's caller call
        self._whole = None

    def _run(self, feeds):
        run = self._whole
        if run is None:
            values = self.plan.values_function(self.keep, self.values)
            if values is None:  # the plan's first run: its steps
                return self._walk(feeds)
            run = self._whole = _whole_run(values, self.params, self.updates,
                                           len(self.graph.inputs))
        return run(*feeds)

    def run_known(self, feeds):
        # `run` is the base's, so `run_known` is its `_run_feeds`; once the whole run is
        # one function (`_whole_run`), it is called here, with `_run_feeds`' translation of
        # a failure: the same outputs, two calls fewer. `_whole` is made by a `_run`, which
        # `_run_feeds` calls only once every parameter is set (and none is ever unset
        # again), so `_run_feeds`' test of unset parameters would pass.
        run = self._whole
        if run is None:
            return self._run_feeds(feeds)
        try:
            return run(*feeds)
        except Exception as error:
            raise self._run_error(error)  # noqa: B904 (its context, as `from None`)

    def direct_run(self):
        """For a @ug.function's prebuilt caller (`function._direct_lines`): once the whole
        run is one function (see `run_known`), `(that function, None, True)`:
        `function(*feeds)` is `run_known(feeds)` for any feeds `run_known` takes (arrays
        included) but for the translation of a failure, which the caller does
        (`_run_error`); else None (`run_known` it is). The caller loads the parameters
        before it and notes the updates after it, as around `run_known`.

        >>> function, _, _ = executable.direct_run()
        >>> outputs = function(x, y)
        """
        return None if self._whole is None else (self._whole, None, True)

    def _walk(self, feeds):
        env, _ = self.plan.forward(feeds + self.params, False, self.keep)
        for index, slot in self.updates:
            self.params[index] = _frozen(_owned(env[slot], feeds))
        outputs = self.plan.outputs_of(env)
        for i, out in enumerate(outputs):
            outputs[i] = _owned(out, feeds)
        return outputs

    def _run_all(self, feeds):
        env, _ = self.plan.forward(feeds + self.params, False)
        return {value_id: env[slot] for value_id, slot in self.plan.slots.items()
                if env[slot] is not None}

    def _set_param(self, index, array):
        # the base's private copy or a view of a Parameter's array, read-only either way
        # (`keeps_shared_params`): kept as it is, no second setflags (~0.5 us a parameter)
        self.params[index] = array

    def _get_param(self, index):
        return self.params[index]
