"""`tensorflow:static`: the IR graph built once into a `tf.compat.v1.Graph`, run by a Session.

The build happens inside `with graph.as_default():` only; nothing process-wide changes (no
`disable_v2_behavior`), so eager TF keeps working next to it. Inputs are placeholders,
parameters resource variables whose values only ever come from `set_param` (through a fed
assign op built with the graph), `cond`/`while_loop` become `tf.cond`/`tf.while_loop`
(functional `StatelessIf`/`StatelessWhile` ops: control flow v2 also applies to a v1 graph),
`grad` becomes `tf.compat.v1.gradients`. The graph is finalized after the build, so a run can
only feed and fetch: one `Session.run` returns the outputs and applies the updates.
"""

from __future__ import annotations

import re
import weakref

import numpy as np

from unigraph.backend import Executable, lower_nodes
from unigraph.ir import Graph
from unigraph.ops.updates import ADAM_READ, ADAM_WRITTEN
from unigraph_tensorflow.control_flow import make_control_flow
from unigraph_tensorflow.lowerings import PRINTS

# The NCHW view of an NHWC array (layout.py's views, taken at the fetch).
NHWC_TO_NCHW = (0, 3, 1, 2)

# Ops whose TF kernel may hand back its input's buffer (reshape, a same-dtype cast, an empty
# reduction, a one-tensor concat, a control-flow pass-through ...): see `may_hold_a_feed`.
FORWARDING_OPS = frozenset({
    "reshape", "squeeze", "expand_dims", "cast", "transpose", "slice", "broadcast_to",
    "concat", "stack", "sum", "mean", "max", "min", "cond", "while_loop", "grad",
})


def may_hold_a_feed(graph: Graph, value) -> bool:
    """Whether `value` may share memory with a fed input (conservatively).

    Session.run feeds a 64-byte aligned NumPy array without copying it, and a resource
    assign adopts the buffer it is given: a parameter updated straight from an input would
    then alias the caller's array, and change when the caller reuses that array.
    """
    producers = {out.id: node for node in graph.nodes for out in node.outputs}
    inputs = {v.id for v in graph.inputs}
    pending, seen = [value], set()
    while pending:
        current = pending.pop()
        if current.id in inputs:
            return True
        node = producers.get(current.id)
        if node is not None and node.op in FORWARDING_OPS and current.id not in seen:
            seen.add(current.id)
            pending.extend(node.inputs)
    return False


def op_name(prefix: str, name: str) -> str:
    """A TF op name from a parameter's or input's name (TF accepts only [A-Za-z0-9_.\\-/])."""
    cleaned = re.sub(r"[^A-Za-z0-9_.\-]", "_", name)
    return f"{prefix}_{cleaned}" if cleaned else prefix


def session_config(tf):
    """Thread settings for a Session: whatever the process gave TF's own runtime
    (`tf.config.threading.set_*_parallelism_threads`), 0 meaning TF's default (all cores).
    Grappler's arithmetic optimizer is off: in a Session it rewrites -(reshape(-x)) to
    -x, forward and in TF's own gradients (quirk "neg (Grappler)")."""
    from tensorflow.core.protobuf import rewriter_config_pb2

    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=tf.config.threading.get_intra_op_parallelism_threads(),
        inter_op_parallelism_threads=tf.config.threading.get_inter_op_parallelism_threads(),
    )
    rewrites = config.graph_options.rewrite_options
    rewrites.arithmetic_optimization = rewriter_config_pb2.RewriterConfig.OFF
    return config


def held_constant(tf):
    """The "constant" lowering of a Session's graph: a PlaceholderWithDefault of the value,
    never fed. A Const would be Grappler's to rewrite with (its constant folding turns
    `x / c` into `x * (1 / c)`, not correctly rounded; `x + 0.0` into x; `0.0 - x` into
    Neg(x): quirks "div", "add", "sub"); a placeholder's value is not known to it."""

    def constant(*, value):
        held = tf.constant(value)
        return tf.compat.v1.placeholder_with_default(held, held.shape)

    return constant


def as_feed(tf, value):
    """A feed value: Session.run refuses tf.Tensor objects, so eager tensors become NumPy."""
    if isinstance(value, tf.Tensor):
        return value.numpy()
    return value


def native_spec(tf, x):
    """(shape, NumPy dtype) of an eager TF tensor, None for anything else."""
    if isinstance(x, tf.Tensor):
        return tuple(x.shape), np.dtype(x.dtype.as_numpy_dtype)
    return None


def prepared_run(session, feeds: list, outputs: list, targets: list):
    """(callable, picks): one run of `session` feeding the placeholders `feeds` (its
    arguments, in order), fetching the tensors `outputs` and running the ops `targets`,
    prepared once (TF's own `Session._make_callable_from_options`, what `tf.keras`'s v1
    backend runs on). Session.run sorts out the fetch structure and the feed dict again at
    every call: ~200 us of Python a run, the whole cost of a small graph (measured on the
    counter loop: 376 -> 171 us). Output i is `(fetched + fed)[picks[i]]`, where `fetched`
    is what the callable returns (each distinct tensor once) and `fed` its arguments: an
    output that is an input is its fed value, as Session.run gives it (a callable refuses
    to fetch what it feeds)."""
    from tensorflow.core.protobuf import config_pb2

    fed = [ph.name for ph in feeds]
    names = list(dict.fromkeys(t.name for t in outputs if t.name not in fed))
    options = config_pb2.CallableOptions(feed=fed, fetch=names,
                                         target=[op.name for op in targets])
    picks = [len(names) + fed.index(t.name) if t.name in fed else names.index(t.name)
             for t in outputs]
    if not names and not options.target:  # every output is an input: nothing to run
        return (lambda *fed_values: []), picks
    return session._make_callable_from_options(options), picks


class SessionExecutable(Executable):
    """A v1 Graph and its long-lived Session; parameters live in the Session's variables.
    The checks and copies in and out are the `Executable` base's."""

    target = "tensorflow:static"

    def __init__(self, tf, graph: Graph, lowerings: dict):
        super().__init__(graph)
        self._tf = tf
        # Images stay NHWC through conv/pool/activation chains, or convs run NCHW where TF
        # can (layout.py); imported here, after paddle, like every module importing tensorflow.
        from unigraph_tensorflow.adam import apply_adam, written_by_adam
        from unigraph_tensorflow.layout import (
            carry_nhwc,
            conv_reaches_an_output,
            nhwc_of_view,
            takes_nchw_convs,
        )

        # Asked before the build (the probe runs eagerly). A conv whose result reaches an
        # output keeps the NHWC kernels: that output is fetched NHWC (see `_views` below).
        nchw_convs = takes_nchw_convs(graph) and not conv_reaches_an_output(graph)
        lowerings = {**carry_nhwc(lowerings, nchw_convs), "constant": held_constant(tf)}
        native = tf.Graph()
        with native.as_default():
            self._placeholders = [
                tf.compat.v1.placeholder(v.dtype, v.shape, name=op_name("input", v.name))
                for v in graph.inputs
            ]
            self._param_feeds, self._param_setters, self._reads = [], [], []
            variables = []
            for param in graph.params:
                # The variable's initializer is an assign from this placeholder: it runs
                # only in set_param, so every value comes from unigraph, never from TF.
                feed = tf.compat.v1.placeholder(param.dtype, param.shape,
                                                name=op_name("value", param.name))
                variable = tf.compat.v1.Variable(feed, trainable=False, use_resource=True,
                                                 name=op_name("param", param.name))
                variables.append(variable)
                self._param_feeds.append(feed)
                self._param_setters.append(variable.initializer)
                self._reads.append(variable.value())
            env = {v.id: ph for v, ph in zip(graph.inputs, self._placeholders)}
            env.update((p.id, read) for p, read in zip(graph.params, self._reads))
            control_flow = make_control_flow(tf, lowerings, gradients="graph")
            outputs = lower_nodes(graph, env, lowerings, control_flow)
            # An output that is the NCHW view of an NHWC value (what the layout pass makes of
            # a conv's result) is fetched NHWC and handed back as NumPy's transposed view of
            # it, at the fetch: TF's transpose of a [64, 16, 32, 32] result costs about as
            # much as the conv itself; NumPy's view costs nothing.
            sources = [nhwc_of_view(out) for out in outputs]
            self._views = [i for i, source in enumerate(sources) if source is not None]
            self._fetches = [out if source is None else source
                             for out, source in zip(outputs, sources)]
            # A Session runs only what it fetches: a print whose value is used nowhere (a
            # statement, or under ug.grad alone) runs because it is fetched too. (A print in
            # a loop body or branch lives in that body's graph and runs with it.)
            prints = [p for p in native.get_collection(PRINTS) if p.graph is native]
            if prints:
                self._fetches.append(tf.group(*prints, name="prints"))
            if graph.updates:
                index = {p.id: i for i, p in enumerate(graph.params)}
                # Adam's fused updates write their variables with TF's kernel (adam.py).
                fused, written = written_by_adam(graph)
                # Every read happens before any write: a resource assign then swaps in a new
                # buffer, and the values read for this step stay as they were (an in-place
                # kernel copies a buffer a read still holds).
                with tf.control_dependencies(self._reads):
                    assigns = [
                        variables[index[p.id]].assign(
                            tf.raw_ops.DeepCopy(x=env[new.id])
                            if may_hold_a_feed(graph, new) else env[new.id],
                            read_value=False,
                        )
                        for p, new in graph.updates if new.id not in written
                    ]
                    assigns += [
                        apply_adam(*(variables[index[node.inputs[i].id]] for i in ADAM_WRITTEN),
                                   *(env[node.inputs[i].id] for i in ADAM_READ), **node.attrs)
                        for node in fused
                    ]
                self._fetches.append(tf.group(*assigns, name="apply_updates"))
            self._all = list(env.items())
        native.finalize()  # from here on a run can only feed and fetch
        self.native_graph = native
        self._count = len(outputs)
        # index -> value given to set_param, not yet in its variable: all of them go in with
        # one Session.run before the next run or read. One run per parameter would cost
        # parameters x graph size (each distinct fetch prunes the whole graph once).
        self._pending: dict = {}
        self._session = tf.compat.v1.Session(graph=native, config=session_config(tf))
        self._step, self._picks = prepared_run(self._session, self._placeholders,
                                               self._fetches[: self._count],
                                               self._fetches[self._count:])
        self._finalizer = weakref.finalize(self, self._session.close)

    @property
    def native_outputs(self) -> list:
        """The tensors and ops one run fetches (outputs, prints, updates); an output that is
        the NCHW view of an NHWC value is fetched as that value (and transposed in NumPy)."""
        return list(self._fetches)

    def _native_spec(self, x):
        return native_spec(self._tf, x)

    def _feed(self, feeds) -> dict:
        tf = self._tf
        return {ph: x if type(x) is np.ndarray else as_feed(tf, x)
                for ph, x in zip(self._placeholders, feeds)}

    def _run(self, feeds: list) -> list:
        if self._pending:
            self._load_pending()
        tf = self._tf
        fed = [x if type(x) is np.ndarray else as_feed(tf, x) for x in feeds]
        values = self._step(*fed) + fed
        # 0-d results come as NumPy scalars: make every output an ndarray.
        outputs = [v if type(v) is np.ndarray else np.asarray(v)
                   for v in (values[i] for i in self._picks)]
        for i in self._views:  # fetched NHWC (see __init__): the NCHW view, no copy
            outputs[i] = outputs[i].transpose(NHWC_TO_NCHW)
        return outputs

    def _run_all(self, feeds: list) -> dict:
        if self._pending:
            self._load_pending()
        values = self._session.run([tensor for _, tensor in self._all], self._feed(feeds))
        return {value_id: np.asarray(v) for (value_id, _), v in zip(self._all, values)}

    def _set_param(self, index: int, array) -> None:
        """Keep the value (the base's private copy: the variable adopts the fed buffer, see
        may_hold_a_feed); it reaches the Session, with every other value set since, in one
        Session.run before the next run or read."""
        self._pending[index] = array

    def _load_pending(self) -> None:
        pending = self._pending
        self._session.run([self._param_setters[i] for i in pending],
                          {self._param_feeds[i]: array for i, array in pending.items()})
        self._pending = {}

    def _get_param(self, index: int) -> np.ndarray:
        if self._pending:
            self._load_pending()
        return np.asarray(self._session.run(self._reads[index]))

    def close(self) -> None:
        """Release the Session now (it is also released when the executable is collected)."""
        self._finalizer()
