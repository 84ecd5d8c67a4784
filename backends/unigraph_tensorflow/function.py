"""`tensorflow:function`: the same lowering traced once into a `tf.function`.

Parameters are `tf.Variable`s read at the top of the function and written by `assign` at
its end, or by TF's `ResourceApplyAdam` for a fused Adam update (`adam.py`; tf.function's
automatic control dependencies order the reads before the writes on each variable); `grad`
nodes use a `tf.GradientTape` inside the trace; `cond`/`while_loop` are
`tf.cond`/`tf.while_loop`. An output that is the NCHW view of an NHWC value (a conv's
result, `layout.py`) leaves the function NHWC and comes back as NumPy's transposed view.
The trace happens in `compile`, with an `input_signature` taken from the IR, so there is
exactly one concrete function per executable and a run only calls it.
"""

from __future__ import annotations

import numpy as np

from unigraph.backend import Executable, lower_nodes
from unigraph.ir import Graph
from unigraph.ops.updates import ADAM_READ, ADAM_WRITTEN
from unigraph_tensorflow.control_flow import make_control_flow
from unigraph_tensorflow.static import NHWC_TO_NCHW, native_spec, op_name


class FunctionExecutable(Executable):
    """One concrete tf.function; parameters live in `tf.Variable`s. The checks and copies
    in and out are the `Executable` base's."""

    target = "tensorflow:function"

    def __init__(self, tf, graph: Graph, lowerings: dict):
        super().__init__(graph)
        self._tf = tf
        # Images stay NHWC through conv/pool/activation chains, or convs run NCHW where TF
        # can (layout.py); imported here, after paddle, like every module importing tensorflow.
        from unigraph_tensorflow.adam import written_by_adam
        from unigraph_tensorflow.layout import (
            carry_nhwc,
            conv_reaches_an_output,
            takes_nchw_convs,
        )

        # Asked before the build (the probe runs eagerly). A conv whose result reaches an
        # output keeps the NHWC kernels: that output is returned NHWC (see `_run`).
        nchw_convs = takes_nchw_convs(graph) and not conv_reaches_an_output(graph)
        lowerings = {**carry_nhwc(lowerings, nchw_convs), "constant": captured_constant(tf)}
        control_flow = make_control_flow(tf, lowerings, gradients="tape")
        # A variable needs some value to exist; zeros are a placeholder that run() never
        # sees: it refuses to run until set_param has given every parameter its value.
        self.variables = [
            tf.Variable(tf.zeros(p.shape, p.dtype), trainable=False,
                        name=op_name("param", p.name))
            for p in graph.params
        ]
        index = {p.id: i for i, p in enumerate(graph.params)}
        # Adam's fused updates write their variables with TF's kernel (adam.py).
        fused, written = written_by_adam(graph)
        updates = [(self.variables[index[p.id]], new.id) for p, new in graph.updates
                   if new.id not in written]
        adams = [([self.variables[index[node.inputs[i].id]] for i in ADAM_WRITTEN],
                  [node.inputs[i].id for i in ADAM_READ], node.attrs) for node in fused]
        self._signature = [tf.TensorSpec(v.shape, v.dtype) for v in graph.inputs]
        # The traced functions close over what they use, never over `self`: a tf.function of
        # a bound method would make a reference cycle, and the executable (its graphs, its
        # variables) would outlive its last user until the cyclic GC ran.
        self._lower = lowering(graph, self.variables, lowerings, control_flow)
        # Indices of the outputs the function returns NHWC, found by the trace (`step`).
        self._views: list = []
        self.function = tf.function(step(self._lower, graph, updates, adams, self._views),
                                    input_signature=self._signature, autograph=False)
        self.concrete = self.function.get_concrete_function()
        self._all_call = None

    @property
    def native_outputs(self) -> list:
        """The concrete function's output tensors and its control outputs (the updates)."""
        graph = self.concrete.graph
        return list(graph.outputs) + list(graph.control_outputs)

    def _native_spec(self, x):
        return native_spec(self._tf, x)

    def _run(self, feeds: list) -> list:
        outputs = self.concrete(*feeds)
        if self._views:
            # An output that is the NCHW view of an NHWC value (what the layout pass makes of
            # a conv's result) comes back NHWC and is handed back as NumPy's transposed view
            # of its buffer, as tensorflow:static does at the fetch: TF's NCHW kernel or
            # transpose of a [64, 16, 32, 32] result costs about a third of the conv.
            # `_numpy()` (private TF API) is that buffer, writable: nothing else holds the
            # returned tensor (the public `numpy()` copies it).
            outputs = list(outputs)
            for i in self._views:
                outputs[i] = outputs[i]._numpy().transpose(NHWC_TO_NCHW)
        return outputs

    def _run_all(self, feeds: list) -> dict:
        if self._all_call is None:
            # Built on first use, for the checker only: the same lowering without updates.
            lower = self._lower
            self._all_call = self._tf.function(
                lambda *args: lower(args), input_signature=self._signature, autograph=False
            ).get_concrete_function()
        return {value_id: np.asarray(t) for value_id, t in self._all_call(*feeds).items()}

    def _set_param(self, index: int, array) -> None:
        self.variables[index].assign(array)

    def _get_param(self, index: int) -> np.ndarray:
        return np.asarray(self.variables[index].numpy())  # 0-d: an array, not a scalar


def captured_constant(tf):
    """The "constant" lowering of a tf.function: an eager tensor made outside the trace
    (`tf.init_scope`), which the function captures as an input. A Const node in the
    function's graph would be Grappler's to rewrite with: its constant folding turns
    `x / c` into `x * (1 / c)`, not correctly rounded, `x + 0.0` into x and `0.0 - x` into
    Neg(x) (quirks "div", "add", "sub"; tensorflow:static: `static.held_constant`)."""

    def constant(*, value):
        with tf.init_scope():
            held = tf.constant(value)
        return tf.identity(held)  # (the trace's tensor: its op is an Identity of the capture)

    return constant


def lowering(graph: Graph, variables: list, lowerings: dict, control_flow: dict):
    """lower(inputs) -> {value id: tensor}: `graph` lowered on `inputs`, its parameters read
    from `variables` (in a tf.function trace)."""

    def lower(inputs) -> dict:
        env = {v.id: x for v, x in zip(graph.inputs, inputs)}
        env.update((p.id, var.read_value()) for p, var in zip(graph.params, variables))
        lower_nodes(graph, env, lowerings, control_flow)
        return env

    return lower


def step(lower, graph: Graph, updates: list, adams: list = (), views: list | None = None):
    """The traced step: `graph`'s outputs, after assigning each (variable, value id) of
    `updates` its new value, and applying each ([param, m, v variables], [grad, lr, step
    value ids], attrs) of `adams` (`adam.apply_adam`; the function orders each after the
    reads of its variables). With `views` (a list), an output that is the NCHW view of an
    NHWC value is returned NHWC, and the trace lists its index in `views`."""
    # These import tensorflow (after paddle).
    from unigraph_tensorflow.adam import apply_adam
    from unigraph_tensorflow.layout import nhwc_of_view

    def run_step(*inputs):
        env = lower(inputs)
        for variable, value_id in updates:
            variable.assign(env[value_id], read_value=False)
        for variables, value_ids, attrs in adams:
            apply_adam(*variables, *(env[i] for i in value_ids), **attrs)
        outputs = [env[v.id] for v in graph.outputs]
        if views is None:
            return outputs
        sources = [nhwc_of_view(out) for out in outputs]
        views[:] = [i for i, source in enumerate(sources) if source is not None]
        return [out if source is None else source for out, source in zip(outputs, sources)]

    return run_step
