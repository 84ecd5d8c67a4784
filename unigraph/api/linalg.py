"""Linear algebra: `ug.matmul`, `ug.einsum`, `ug.tril` and `ug.triu`.
"""

from __future__ import annotations

import operator

from unigraph.api.operands import (
    _docs_from_records,
    _record_doc,
    promote_for,
    ready_dtypes,
)
from unigraph.dispatch import apply, apply_simple
from unigraph.tensor import Parameter, Tensor

_READY = ready_dtypes("matmul")
_PLAIN = (Tensor, Parameter)  # never a WeakTensor: it promotes like a Python number


def matmul(a, b):
    """Matrix product; batch dimensions broadcast (`a @ b`)."""
    # Nothing to promote (a layer's weight is a Parameter: the same fast path).
    if type(a) in _PLAIN and type(b) in _PLAIN and a.dtype == b.dtype and a.dtype in _READY:
        return apply_simple("matmul", a, b)
    return apply("matmul", promote_for("matmul", a, b), {})


def einsum(equation, *operands):
    """Einstein summation (see the op record), operands promoted to one float dtype."""
    equation = equation.replace(" ", "")
    if "->" not in equation:
        letters = equation.replace(",", "")
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        equation = f"{equation}->{output}"
    return apply("einsum", promote_for("einsum", *operands), {"equation": equation})


einsum.__doc__ = _record_doc("einsum")


def _triangle(op: str):
    def function(x, k=0):
        (a,) = promote_for(op, x)
        return apply(op, [a], {"k": operator.index(k)})

    function.__name__ = function.__qualname__ = op
    function.__doc__ = _record_doc(op)
    return function


tril = _triangle("tril")
triu = _triangle("triu")


_docs_from_records(matmul)
