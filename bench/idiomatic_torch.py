"""The workloads as a PyTorch user writes them: `nn.Linear` / `nn.Conv2d` modules,
`F.cross_entropy`, `torch.optim.SGD` / `Adam` (in-place updates), inference under `torch.no_grad()`.

This is the baseline of `torch:eager` and also of `torch:static`: a torch user runs eager
module code (no `torch.compile`), so that is what unigraph's compiled torch callable must
match. Weights are loaded with `load_state_dict`; `nn.Linear` keeps its weight `[out, in]`,
so unigraph's `[in, out]` weights are transposed once, outside the timing.
"""

from __future__ import annotations

import native_torch
import torch
import torch.nn.functional as F
from torch import nn


def _load(module, state):
    module.load_state_dict({key: torch.from_numpy(value.copy()) for key, value in state.items()})
    return module


def conv(data):
    out_channels, in_channels, kernel, _ = data["w"].shape
    layer = _load(nn.Conv2d(in_channels, out_channels, kernel, padding=1),
                  {"weight": data["w"], "bias": data["b"]})
    x = torch.from_numpy(data["x"])

    def run():
        with torch.no_grad():
            return F.relu(layer(x))

    return run


def _train_step(model, data, lr, optimizer=torch.optim.SGD, **options):
    x, y = torch.from_numpy(data["x"]), torch.from_numpy(data["y"])
    optimizer = optimizer(model.parameters(), lr=lr, **options)

    def run():
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return run


def softmax_step(data):
    model = _load(nn.Linear(*data["w"].shape), {"weight": data["w"].T, "bias": data["b"]})
    return _train_step(model, data, 0.5)


def _mlp(data):
    model = nn.Sequential(nn.Linear(*data["w1"].shape), nn.ReLU(), nn.Linear(*data["w2"].shape))
    return _load(model, {"0.weight": data["w1"].T, "0.bias": data["b1"],
                         "2.weight": data["w2"].T, "2.bias": data["b2"]})


def mlp_step(data):
    return _train_step(_mlp(data), data, 0.1)


def mlp_momentum(data):
    # torch's buffer convention (buf = mu * buf + g, p -= lr * buf, dampening 0) is
    # ug.optim.Momentum's formula.
    return _train_step(_mlp(data), data, 0.1, torch.optim.SGD, momentum=0.9)


def mlp_adam(data):
    # torch's Adam: eps added to sqrt(v_hat), as ug.optim.Adam (rounded in another order).
    return _train_step(_mlp(data), data, 1e-3, torch.optim.Adam)


def build(data):
    depth = sum(1 for key in data if key.startswith("w"))
    width = data["w0"].shape[0]
    state = {}
    for i in range(depth):
        state[f"{2 * i}.weight"], state[f"{2 * i}.bias"] = data[f"w{i}"].T, data[f"b{i}"]
    x = torch.from_numpy(data["x"])

    def build_and_run():
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.ReLU()]
        model = _load(nn.Sequential(*layers), state)
        with torch.no_grad():
            return model(x)

    return build_and_run


_EAGER = {
    "counter": native_torch.counter,
    "cond": native_torch.cond,
    "conv_n1": conv,
    "conv_n64": conv,
    "softmax_step": softmax_step,
    "softmax_saturated": softmax_step,
    "mlp_step": mlp_step,
    "mlp_momentum": mlp_momentum,
    "mlp_adam": mlp_adam,
    "build100": build,
}
BUILDERS = {(name, mode): build for name, build in _EAGER.items() for mode in ("eager", "static")}
