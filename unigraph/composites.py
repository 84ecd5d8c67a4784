"""Eager native calls for composites of several op records (`Backend.composites`).

`ug.nn.functional.linear` is `matmul` then `add`, and `cross_entropy` with mean reduction
is `sparse_softmax_cross_entropy` then `mean`: the records define them, everywhere. A backend
whose framework runs such a composite as ONE kernel in the code its users write (torch's
`addmm`, `F.cross_entropy`) may name that kernel in its `composites` table; then an eager
call makes it, with the framework's autodiff for its gradient, as any eager op. While
tracing the records are recorded (a static target plans its own fused calls), and on a
backend without the entry the records run.

>>> call = eager_call("linear")            # None while tracing or without a native call
>>> backend, fn = call
"""

from __future__ import annotations

from unigraph.dispatch import current_backend
from unigraph.tracing import _builder


def eager_call(name: str):
    """(backend, native function) for composite `name` on the current target's backend when
    running eagerly and that backend has a native call for it; else None."""
    if _builder.get() is not None:
        return None
    backend = current_backend()
    table = backend.composites
    if table is None:
        if backend.lowerings is not None:  # loaded: this backend has no composites
            return None
        backend.load()  # a backend fills its table when it loads its framework
        table = backend.composites
        if table is None:
            return None
    fn = table.get(name)
    return None if fn is None else (backend, fn)
