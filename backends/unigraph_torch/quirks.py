"""The PyTorch behaviours the torch lowerings route around (see `unigraph.quirks`).

Listing them imports nothing; each `pin` imports torch, runs torch's own call and returns
True while torch still behaves as written down here.
"""

from __future__ import annotations

from unigraph.quirks import Quirk

VERSIONS = "2.13.0"


def _relu_passes_gradient_through_nan() -> bool:
    import torch

    x = torch.tensor([float("nan")], requires_grad=True)
    torch.relu(x).sum().backward()
    return x.grad.item() == 1.0


def _full_gradient_to_both_at_nan(name: str):
    def pin() -> bool:
        import torch

        x = torch.tensor([float("nan")], requires_grad=True)
        y = torch.tensor([1.0], requires_grad=True)
        getattr(torch, name)(x, y).sum().backward()
        return x.grad.item() == 1.0 and y.grad.item() == 1.0

    return pin


def _max_pool_gradient_to_last_nan() -> bool:
    import torch

    x = torch.tensor([[[[float("nan"), float("nan")]]]], requires_grad=True)
    torch.nn.functional.max_pool2d(x, (1, 2)).sum().backward()
    return x.grad.flatten().tolist() == [0.0, 1.0]


def _pair_quirk(name: str) -> Quirk:
    return Quirk(
        op=name, framework="torch", versions=VERSIONS,
        behaviour=f"torch.{name}'s backward gives BOTH inputs the full gradient where the "
                  "result is NaN (one operand NaN, or both)",
        workaround="under autograd and with a NaN in the result, torch.where(isnan(out), "
                   "(x + y) * nan, out): NaN to both inputs there, as the op's rule says",
        pin=_full_gradient_to_both_at_nan(name),
    )


QUIRKS = [
    Quirk(
        op="relu", framework="torch", versions=VERSIONS,
        behaviour="torch.relu's backward passes the gradient through a NaN input "
                  "(relu'(NaN) = 1)",
        workaround="under autograd and with a NaN in x (one sum of the output says), "
                   "relu(x) * (x > 0): the same value, gradient 1 only where x > 0",
        pin=_relu_passes_gradient_through_nan,
    ),
    _pair_quirk("maximum"),
    _pair_quirk("minimum"),
    Quirk(
        op="max_pool2d", framework="torch", versions=VERSIONS,
        behaviour="F.max_pool2d's gradient goes to the LAST NaN of a window holding several "
                  "(ties among numbers go to the first, as the op says)",
        workaround="under autograd and with a NaN in x, the window maximum is a gather at "
                   "torch.argmax over F.unfold windows (the first maximum, NaN counting as "
                   "the maximum)",
        pin=_max_pool_gradient_to_last_nan,
    ),
]
