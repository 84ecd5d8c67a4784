"""Differentiation with torch.autograd, shared by `eager_grad` and the `grad` node of
`torch:static`.

A gradient is taken with respect to *leaves* made from the operands: `leaf` detaches an
operand and switches `requires_grad` on for that copy only (never for a caller's tensor or a
stored parameter). Inside an enclosing differentiation (a gradient of a gradient), `leaf`
keeps the operand connected to the outer graph through a `view_as`, a fresh node, so the
inner derivative counts only the paths through this operand, and the outer derivative can
still flow through the inner one (`create_graph=True`).
"""

from __future__ import annotations

import torch

# torch.autograd.grad's engine, called directly for the common case (see `_scalar_grads`).
_ENGINE = torch.autograd.Variable._execution_engine


def leaf(x, nested: bool = False):
    """A tensor standing for `x` that autograd differentiates with respect to. Ints and bools
    have no gradient: they are returned unchanged."""
    if not (x.is_floating_point() or x.is_complex()):
        return x
    if nested and x.requires_grad:
        return x.view_as(x)
    return x.detach().requires_grad_(True)


def gradients(output, leaves, create_graph: bool = False) -> list:
    """d output / d leaf for each of `leaves` (made by `leaf`); zeros where `output` does not
    depend on a leaf, or where the leaf is not floating."""
    wanted = [x for x in leaves if x.requires_grad]
    found = iter(())
    if wanted and output.requires_grad:
        found = iter(
            _scalar_grads(output, wanted) if not create_graph and _plain_scalar(output)
            else torch.autograd.grad(output, wanted, allow_unused=True,
                                     create_graph=create_graph)
        )
    grads = []
    for x in leaves:
        grad = next(found, None) if x.requires_grad else None
        grads.append(torch.zeros_like(x) if grad is None else grad)
    return grads


def _plain_scalar(output) -> bool:
    """Whether `output` is the usual loss: a plain 0-d floating CPU tensor (no subclass
    overriding torch functions, no GPU stream to hand the context to)."""
    return type(output) is torch.Tensor and output.dim() == 0 and \
        output.is_floating_point() and output.is_cpu


def _scalar_grads(output, wanted) -> tuple:
    """`torch.autograd.grad(output, wanted, allow_unused=True)` for a `_plain_scalar`
    output and leaves made by `leaf`: the same engine call with the seed
    `torch.ones_like(output)` autograd would make, without its Python wrapper (argument
    normalisation, `_make_grads`, logging hooks: ~10 us a training step; same numbers)."""
    seed = torch.ones_like(output, memory_format=torch.preserve_format)
    # (outputs, seeds, retain_graph, create_graph, inputs, allow_unreachable, accumulate)
    return _ENGINE.run_backward((output,), (seed,), False, False, tuple(wanted), True,
                                accumulate_grad=False)
