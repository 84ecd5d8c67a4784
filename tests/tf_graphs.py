"""What a TensorFlow graph built by unigraph runs, for the TF layout and conv tests."""

from __future__ import annotations

import unigraph as ug


def graph_ops(target: str, fn, *args) -> list:
    """The ops one run of `fn`'s TF graph on `target` (tensorflow:static or
    tensorflow:function) executes: those its fetches depend on (a Session and a function
    body run no others)."""
    from unigraph.plugins import get_backend

    executable = get_backend("tensorflow").compile(ug.function(fn).trace(*args),
                                                   target.split(":")[1])
    pending = [getattr(out, "op", out) for out in executable.native_outputs]
    seen = {}
    while pending:
        op = pending.pop()
        if op.name not in seen:
            seen[op.name] = op
            pending.extend(tensor.op for tensor in op.inputs)
            pending.extend(op.control_inputs)
    return list(seen.values())
