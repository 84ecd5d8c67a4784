"""The lowering table of `onnxruntime:static`: op name -> a function running that op on
NumPy arrays as a one-node ONNX model (ONNX Runtime has no eager mode).

The frontend sends an op here when it runs outside `@ug.function` while this target is
current. Each (op, input types, attrs) is written once (`unigraph.onnx.graph_to_model` of a
one-node graph) and its session kept (the 256 most recently used), so a loop of eager ops
pays one compile per distinct call, not per call.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from unigraph.errors import BackendError, IndexOutOfRangeError
from unigraph.index_checks import translate_run_error
from unigraph.ir import Graph, Node, Value
from unigraph.onnx.emitters import EMITTERS
from unigraph.onnx.export import graph_to_model
from unigraph.ops import OPS, TensorSpec
from unigraph.tracing import user_source
from unigraph_onnxruntime.static import open_session

MAX_SESSIONS = 256
_sessions: OrderedDict = OrderedDict()
_lock = threading.Lock()  # the cache, not the sessions: ORT runs a session from any thread


def _attr_key(value):
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, list | tuple):
        return tuple(_attr_key(v) for v in value)
    return value


def _session(op: str, arrays: list, attrs: dict):
    key = (op, tuple((a.shape, a.dtype.str) for a in arrays),
           tuple((k, _attr_key(v)) for k, v in sorted(attrs.items())))
    with _lock:
        session = _sessions.get(key)
        if session is not None:
            _sessions.move_to_end(key)
            return session
    inputs = [Value(a.shape, a.dtype.name) for a in arrays]
    spec = OPS[op].infer(*[TensorSpec(v.shape, v.dtype) for v in inputs], **attrs)
    out = Value(spec.shape, spec.dtype)
    graph = Graph(op, inputs, [], [Node(op, inputs, [out], dict(attrs))], [out])
    names = [f"input_{i}" for i in range(len(inputs))]
    session = _OneNodeSession(open_session(graph_to_model(graph, [], names, ["output"])), graph)
    with _lock:
        _sessions[key] = session
        if len(_sessions) > MAX_SESSIONS:
            _sessions.popitem(last=False)
    return session


class _OneNodeSession:
    """An op's session and its one-node graph, which `translate_run_error` reads (as it
    reads a compiled function's) to turn a Gather's refusal into `IndexOutOfRangeError`."""

    target = "onnxruntime:static"

    def __init__(self, session, graph: Graph):
        self.session, self.graph = session, graph


def _one_node(op: str):
    def run(*arrays, **attrs):
        arrays = [np.asarray(a, order="C") for a in arrays]  # ascontiguousarray: 0-d -> 1-d
        session = _session(op, arrays, attrs)
        try:
            (out,) = session.session.run(None, {f"input_{i}": a for i, a in enumerate(arrays)})
        except Exception as error:
            refused = translate_run_error(error, session)
            if refused is not None:  # an index out of range: the error of every target
                raise IndexOutOfRangeError(
                    refused.op, refused.index, refused.size, axis=refused.axis,
                    target=session.target, where=user_source()) from None
            raise BackendError(f"{op} at {user_source()} failed on onnxruntime:static: "
                               f"{error}") from None
        return out

    run.__name__ = f"onnxruntime_{op}"
    return run


LOWERINGS = {op: _one_node(op) for op in EMITTERS}
