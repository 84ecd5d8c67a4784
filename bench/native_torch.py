"""The workloads hand-tuned in PyTorch eager code (raw tensors, `x @ w + b`, no `nn`
modules): the second column ("vs hand") of `torch:eager` and `torch:static` in bench/run.py;
the baseline is `idiomatic_torch`.

Tensors are made once from the shared NumPy data; training uses autograd and
`torch.optim.SGD`, whose update `p <- p - lr * grad` is unigraph's SGD formula.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _tensors(data, *names):
    return [torch.from_numpy(data[n].copy()) for n in names]


def counter(data):
    a0, b0 = _tensors(data, "a", "b")

    def run():
        a, b = a0, b0
        while a < b:
            a, b = a + 2, b + 1
        return a, b

    return run


def cond(data):
    x, y = _tensors(data, "x", "y")

    def run():
        return x + y if x > y else x - y

    return run


def conv2d(data):
    x, w, b = _tensors(data, "x", "w", "b")

    def run():
        return torch.relu(F.conv2d(x, w, b, padding=1))

    return run


def _params(data, *names):
    return [t.requires_grad_() for t in _tensors(data, *names)]


def _sgd_step(loss_fn, params, lr):
    optimizer = torch.optim.SGD(params, lr=lr)

    def run():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        optimizer.step()
        return loss.detach()

    return run


def softmax_step(data):
    x, y = _tensors(data, "x", "y")
    w, b = params = _params(data, "w", "b")
    return _sgd_step(lambda: F.cross_entropy(x @ w + b, y), params, 0.5)


def _mlp(data):
    x, y = _tensors(data, "x", "y")
    w1, b1, w2, b2 = params = _params(data, "w1", "b1", "w2", "b2")

    def loss_fn():
        return F.cross_entropy(torch.relu(x @ w1 + b1) @ w2 + b2, y)

    return loss_fn, params


def mlp_step(data):
    loss_fn, params = _mlp(data)
    return _sgd_step(loss_fn, params, 0.1)


_EAGER = {
    "counter": counter,
    "cond": cond,
    "conv2d": conv2d,
    "softmax_step": softmax_step,
    "mlp_step": mlp_step,
}
BUILDERS = {(name, mode): build for name, build in _EAGER.items() for mode in ("eager", "static")}
