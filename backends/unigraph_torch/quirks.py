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



def _topk_misorders_ties() -> bool:
    import numpy as np
    import torch

    x = np.array([3, 1, 3, 0, -1, 1, 3, 0, 2, 2, 5, -7, 3, 3])
    got = torch.topk(torch.tensor(x), len(x)).indices.numpy()
    stable = len(x) - 1 - np.argsort(x[::-1], kind="stable")[::-1]
    return bool((got != stable).any())


def _pair_quirk(name: str) -> Quirk:
    return Quirk(
        op=name, framework="torch", versions=VERSIONS,
        behaviour=f"torch.{name}'s backward gives BOTH inputs the full gradient where the "
                  "result is NaN (one operand NaN, or both)",
        workaround="under autograd and with a NaN in the result, torch.where(isnan(out), "
                   "(x + y) * nan, out): NaN to both inputs there, as the op's rule says",
        pin=_full_gradient_to_both_at_nan(name),
    )


def _float16_prod_no_closer_than_float32_rounded() -> bool:
    # What unigraph relies on: torch.prod in float32 rounded to float16 once is within 1 ulp
    # of the exact product, and the float16 kernel is no closer. Here (4,096 factors within
    # 2% of 1, down axis 0) it multiplies in float16: 144 ulps off, past the checker's budget.
    import numpy as np
    import torch

    x = np.random.default_rng(0).uniform(0.98, 1.02, (4096, 4)).astype(np.float16)
    exact = x.astype(np.float64).prod(0)
    spacing = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64)

    def ulps(got) -> float:
        return float((np.abs(got.numpy().astype(np.float64) - exact) / spacing).max())

    rounded = ulps(torch.prod(torch.from_numpy(x), dim=0, dtype=torch.float32).half())
    return rounded <= 1.0 and ulps(torch.prod(torch.from_numpy(x), dim=0)) >= rounded


def _float16_adam_of_a_zero_gradient_is_nan() -> bool:
    import torch

    param = torch.nn.Parameter(torch.tensor([0.5, 0.75], dtype=torch.float16))
    adam = torch.optim.Adam([param], lr=0.01, foreach=False)  # eps: the default, 1e-8
    param.grad = torch.tensor([1.0, 0.0], dtype=torch.float16)
    adam.step()
    return bool(torch.isnan(param.detach()[1])) and not bool(torch.isnan(param.detach()[0]))


QUIRKS = [
    Quirk(
        op="adam_update", framework="torch", versions=VERSIONS,
        behaviour="torch.optim.Adam's default (foreach and for-loop) update of a float16 "
                  "parameter runs in float16, where the default eps 1e-8 is 0: an entry "
                  "whose gradient is 0 becomes 0 / 0 = NaN (fused=True runs in float32)",
        workaround="a float16 adam_update runs the same kernels on float32 copies, p, m and "
                   "v each rounded to float16 once (lowerings._adam_into), as ug.optim.Adam's "
                   "formula",
        pin=_float16_adam_of_a_zero_gradient_is_nan,
    ),
    Quirk(
        op="prod", framework="torch", versions=VERSIONS,
        behaviour="the CPU float16 torch.prod is no closer than the float32 one rounded, and "
                  "multiplies in float16: 4,096 factors within 2% of 1 are 144 ulps off, "
                  "past the checker's budget",
        workaround="float16 prod runs in float32, rounded to float16 once (within 1 ulp)",
        pin=_float16_prod_no_closer_than_float32_rounded,
    ),
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
    Quirk(
        op="topk", framework="torch", versions=VERSIONS,
        behaviour="torch.topk orders equal values by no rule of their index: the 3s of "
                  "[3, 1, 3, 0, -1, 1, 3, 0, 2, 2, 5, -7, 3, 3] come as indices 0, 2, 13, 12, "
                  "6 (largest=False too)",
        workaround="the first k of torch.sort(descending=largest, stable=True): ties in index "
                   "order, NaN first when largest (lowerings.topk)",
        pin=_topk_misorders_ties,
    ),
]
