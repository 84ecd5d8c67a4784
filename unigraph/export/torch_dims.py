"""The `dynamic_shapes` that `torch.export` needs for a graph with unknown dims.

A graph traced with an `input_spec` (or `ug.export(..., dynamic_batch=True)`) has inputs
with `None` dims; `torch.export.export` specialises every dim to the example's size unless
it is told which dims vary. Used by the torch writer (`unigraph_torch.export.save_torch`):

    shapes, examples = dynamic_shapes(prepared, examples)
    program = torch.export.export(module, examples, dynamic_shapes=shapes, strict=False)

Imports torch only when called (the torch writer has loaded it by then).
"""

from __future__ import annotations


def dynamic_shapes(prepared, examples: tuple) -> tuple:
    """(dynamic_shapes, examples) for `torch.export.export`: one entry per input, a
    `torch.export.Dim.DYNAMIC` for each of its `None` dims (None for an input without any);
    `(None, examples)` when every dim is known. torch.export specialises sizes 0 and 1, so
    an example that is 0 or 1 along a varying dim is widened to 2 there first (repeated, or
    zeros when empty): the program it traces serves every size.

    >>> shapes, examples = dynamic_shapes(prepared, (torch.ones(1, 4),))
    >>> shapes, examples[0].shape
    (({0: Dim.DYNAMIC},), torch.Size([2, 4]))
    """
    import torch

    if not any(None in value.shape for value in prepared.graph.inputs):
        return None, examples
    shapes, widened = [], []
    for value, example in zip(prepared.graph.inputs, examples):
        axes = [axis for axis, size in enumerate(value.shape) if size is None]
        for axis in axes:
            if example.shape[axis] < 2:
                wide = list(example.shape)
                wide[axis] = 2
                base = example if example.shape[axis] else torch.zeros(wide, dtype=example.dtype)
                example = base.expand(wide).contiguous()
        shapes.append({axis: torch.export.Dim.DYNAMIC for axis in axes} or None)
        widened.append(example)
    return tuple(shapes), tuple(widened)
