"""Linear algebra: `ug.matmul` and `ug.einsum`.
"""

from __future__ import annotations

from unigraph.api.operands import (
    _docs_from_records,
    _record_doc,
    promote_for,
)
from unigraph.dispatch import apply


def matmul(a, b):
    """Matrix product; batch dimensions broadcast (`a @ b`)."""
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


_docs_from_records(matmul)
