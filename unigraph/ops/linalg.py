"""Linear algebra: matmul, einsum, and the triangles tril and triu."""

from __future__ import annotations

import numpy as np

from unigraph.errors import ShapeError
from unigraph.ops._util import (
    ACCUMULATING_TOLERANCE,
    accumulator,
    broadcast_shapes,
    dims_conflict,
    fmt,
    grad_for,
    normal,
    require_float,
    require_same_dtype,
)
from unigraph.ops.base import OpDef, Sample, TensorSpec, register


def _infer(a, b):
    for what, spec in (("a", a), ("b", b)):
        require_float("matmul", what, spec)
        if len(spec.shape) < 2:
            raise ShapeError(
                f"matmul: {what} is {fmt(spec)}, but matmul needs rank >= 2 "
                f"(use expand_dims to make a vector a [1, n] or [n, 1] matrix)"
            )
    dtype = require_same_dtype("matmul", {"a": a, "b": b})
    if dims_conflict(a.shape[-1], b.shape[-2]):
        raise ShapeError(
            f"matmul: inner dimensions differ: a is {fmt(a)}, b is {fmt(b)} "
            "(a.shape[-1] must equal b.shape[-2])"
        )
    batch = broadcast_shapes(
        "matmul (batch dims)",
        {"a": TensorSpec(a.shape[:-2], dtype), "b": TensorSpec(b.shape[:-2], dtype)},
    )
    return TensorSpec(batch + (a.shape[-2], b.shape[-1]), dtype)


def _vjp(g, inputs, out, needs=(True, True)):
    a, b = inputs
    # grad_for sums over the batch dims that broadcasting stretched.
    return [grad_for(g @ np.swapaxes(b, -1, -2), a) if needs[0] else None,
            grad_for(np.swapaxes(a, -1, -2) @ g, b) if needs[1] else None]


def _samples(rng):
    return [
        Sample((normal(rng, (3, 4)), normal(rng, (4, 5)))),
        Sample((normal(rng, (2, 3, 4)), normal(rng, (4, 2)))),
        Sample((normal(rng, (2, 1, 3, 4)), normal(rng, (3, 4, 2)))),
    ]


register(OpDef(
    name="matmul",
    promote="float",
    infer=_infer,
    reference=lambda a, b: np.matmul(a, b).astype(a.dtype, copy=False),
    vjp=_vjp,
    partial_vjp=True,
    doc="Matrix product over the last two dims, a[..., m, k] @ b[..., k, n] -> [..., m, n]; "
        "the batch dims broadcast. Both operands must have rank >= 2 (unlike NumPy, no "
        "implicit vector promotion) and one floating dtype.",
    example="ug.matmul([[1.0, 2.0]], [[3.0], [4.0]])  # [[11.0]]",
    samples=_samples,
    tolerance=ACCUMULATING_TOLERANCE,  # each output sums k products
))


def _einsum_parts(equation: str):
    """'ab,bc->ac' -> (['ab', 'bc'], 'ac'); the frontend has made it explicit."""
    inputs, output = equation.split("->")
    return inputs.split(","), output


def _einsum_infer(*xs, equation):
    if "." in equation:
        raise ShapeError(
            f"einsum: '...' in {equation!r} is not supported on any target: name each dim it "
            "stands for with a letter of its own, the same in every operand ('...ij,...jk->"
            "...ik' of 3-d operands is 'bij,bjk->bik'); a letter has one size in every "
            "operand, so broadcast a dim of size 1 first (ug.broadcast_to)")
    if "->" not in equation:  # (ug.einsum adds NumPy's output; an op built by hand may not)
        raise ShapeError(f"einsum: equation {equation!r} must name its output ('ij,jk->ik')")
    subscripts, output = _einsum_parts(equation)
    if len(subscripts) != len(xs):
        raise ShapeError(f"einsum: {equation!r} names {len(subscripts)} operands but "
                         f"{len(xs)} were given")
    dtype = require_same_dtype("einsum", {f"xs[{i}]": x for i, x in enumerate(xs)})
    for i, x in enumerate(xs):
        require_float("einsum", f"xs[{i}]", x)
    sizes: dict = {}
    for letters, x in zip(subscripts, xs, strict=True):
        if len(letters) != len(x.shape) or len(set(letters)) != len(letters):
            raise ShapeError(
                f"einsum: operand {letters!r} of {equation!r} does not fit {fmt(x)} (one "
                "distinct letter per dim; a repeated letter inside one operand, a diagonal, "
                "is not supported)")
        for letter, dim in zip(letters, x.shape, strict=True):
            if dims_conflict(sizes.get(letter), dim):
                raise ShapeError(f"einsum: index {letter!r} of {equation!r} has sizes "
                                 f"{sizes[letter]} and {dim} (they must be equal)")
            sizes[letter] = sizes.get(letter) if dim is None else dim
    if len(set(output)) != len(output) or any(c not in sizes for c in output):
        raise ShapeError(f"einsum: output {output!r} of {equation!r} must list distinct "
                         "letters of the operands")
    return TensorSpec(tuple(sizes[c] for c in output), dtype)


def _einsum_vjp(g, inputs, out, *, equation):
    """d/d operand k: the einsum of g with the other operands, onto operand k's letters;
    letters summed inside operand k alone come back by broadcasting."""
    subscripts, output = _einsum_parts(equation)
    grads = []
    for k, (letters, x) in enumerate(zip(subscripts, inputs, strict=True)):
        others = [s for i, s in enumerate(subscripts) if i != k]
        present = set(output).union(*others)
        kept = "".join(c for c in letters if c in present)
        terms = [output, *others]
        # float16 contracts in float32, rounded once (by grad_for), as the forward does
        dx = np.einsum(f"{','.join(terms)}->{kept}", g,
                       *[v for i, v in enumerate(inputs) if i != k],
                       dtype=accumulator(g.dtype))
        shape = tuple(d if c in present else 1 for c, d in zip(letters, x.shape, strict=True))
        grads.append(grad_for(np.broadcast_to(dx.reshape(shape), x.shape), x))
    return grads


register(OpDef(
    name="einsum",
    promote="float",
    infer=_einsum_infer,
    reference=lambda *xs, equation: np.asarray(np.einsum(
        equation, *xs, dtype=accumulator(xs[0].dtype))).astype(xs[0].dtype, copy=False),
    vjp=_einsum_vjp,
    doc="Einstein summation over floats: `equation` names each operand's dims with letters "
        "('ij,jk->ik' is a matmul); letters missing from the output are summed. No '...' and "
        "no letter repeated inside one operand. Without '->' the output is the letters that "
        "occur once, in alphabetical order (NumPy's rule). float16 contracts in float32, "
        "rounded once.",
    example='ug.einsum("ij,j->i", [[1.0, 2.0], [3.0, 4.0]], [1.0, 1.0])  # [3.0, 7.0]',
    samples=lambda rng: [
        Sample((normal(rng, (3, 4)), normal(rng, (4, 5))), {"equation": "ij,jk->ik"}),
        Sample((normal(rng, (2, 3, 4)), normal(rng, (2, 4))), {"equation": "bij,bj->bi"}),
        Sample((normal(rng, (3, 4)), normal(rng, (5,))), {"equation": "ij,k->jk"}),
    ],
    tolerance=ACCUMULATING_TOLERANCE,
))


def _triangle(name, np_fn, side, example):
    """tril / triu: x with the elements on the other side of diagonal `k` of its last two
    dims zeroed (False for bools), as NumPy's np.tril / np.triu."""

    def infer(x, *, k):
        if len(x.shape) < 2:
            raise ShapeError(f"{name}: x is {fmt(x)}, but {name} needs rank >= 2 (a matrix "
                             "or a batch of them; use expand_dims to make a vector a [1, n] "
                             "matrix)")
        if not isinstance(k, int):
            raise ShapeError(f"{name}: k is {k!r}; pass an int (the diagonal: 0 the main "
                             "one, 1 above it, -1 below)")
        return x

    def vjp(g, inputs, out, *, k):
        return [grad_for(np_fn(g, k), inputs[0])]

    def samples(rng):
        return [Sample((normal(rng, (3, 4)),), {"k": 0}),
                Sample((normal(rng, (2, 4, 3)),), {"k": -1}),
                Sample((normal(rng, (3, 5)),), {"k": 2}),
                Sample((rng.integers(-5, 5, (4, 4)),), {"k": 1})]

    register(OpDef(
        name=name,
        infer=infer,
        reference=lambda x, *, k: np_fn(x, k),
        vjp=vjp,
        doc=f"x with every element {side} diagonal k of the last two dims set to 0 (False "
            "for bools), as NumPy's np." + name + ": k = 0 is the main diagonal, k > 0 "
            "above it, k < 0 below. Any dtype; rank >= 2 (the leading dims are a batch). "
            f"Gradient: {name} of the cotangent.",
        samples=samples,
        example=example,
    ))


_triangle("tril", np.tril, "above",
          "ug.tril([[1, 2, 3], [4, 5, 6], [7, 8, 9]], k=-1)  # [[0, 0, 0], [4, 0, 0], [7, 8, 0]]")
_triangle("triu", np.triu, "below",
          "ug.triu([[1, 2, 3], [4, 5, 6], [7, 8, 9]], k=1)  # [[0, 2, 3], [0, 0, 6], [0, 0, 0]]")
