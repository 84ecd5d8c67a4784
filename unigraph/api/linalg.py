"""Linear algebra: `ug.matmul` and `ug.einsum`.
"""

from __future__ import annotations

from unigraph.api.operands import (
    _docs_from_records,
    _promote,
    _record_doc,
)
from unigraph.dispatch import apply


def matmul(a, b):
    """Matrix product; batch dimensions broadcast (`a @ b`)."""
    x, y = _promote(a, b, to_float=True)
    return apply("matmul", [x, y], {})


def einsum(equation, *operands):
    """Einstein summation (see the op record), operands promoted to one float dtype."""
    equation = equation.replace(" ", "")
    if "->" not in equation:
        letters = equation.replace(",", "")
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        equation = f"{equation}->{output}"
    inputs = _promote(*operands, to_float=True)
    return apply("einsum", list(inputs), {"equation": equation})


einsum.__doc__ = _record_doc("einsum")


_docs_from_records(matmul)
