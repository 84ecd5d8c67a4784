"""`print`: the one op with a side effect. It writes its inputs (formatted by unigraph, see
`unigraph.printing`) to stdout when it runs and returns its first input unchanged, so the
printed value flows on and its gradient is the identity."""

from __future__ import annotations

import numpy as np

from unigraph.ops.base import OpDef, Sample, TensorSpec, register


def _print_infer(*xs, message, texts=None):
    return TensorSpec(xs[0].shape, xs[0].dtype)


def _print_reference(*xs, message, texts=None):
    from unigraph.printing import emit

    emit(message, *xs, texts=texts)
    return xs[0]


def _print_vjp(g, inputs, output, *, message, texts=None):
    return [g] + [None] * (len(inputs) - 1)


def _print_samples(rng):
    return [Sample((rng.normal(size=(2, 3)),), {"message": "x"}),
            Sample((rng.normal(size=(3,)), np.array([1, 2], np.int64)), {"message": "two"}),
            Sample((rng.normal(size=(2,)), np.array(3, np.int64)),
                   {"message": "", "texts": ("x = ", " at ", "!\n")})]


register(OpDef(
    "print", _print_infer, _print_reference, _print_vjp,
    "Write the inputs to stdout when the op runs (the message, then each value as NumPy "
    "prints it; with `texts`, a Python print's text before each value and after the last, "
    "its end included); the result is the first input, unchanged.",
    _print_samples,
    differentiable_inputs=(0,),
    example="ug.print(ug.tensor([1.0, 2.0]), message='x')  # [1.0, 2.0]",
))
