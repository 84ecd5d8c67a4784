"""The training step the optimizer tests run: least squares on `optim_reference`'s data,
`loss = sum(r * r) / n` with `r = x @ w + b - y`, one `@ug.function` step that takes the
gradients with respect to the optimizer's parameters and applies them.

>>> step = least_squares_step(x, y, params, optimizer)
>>> loss = step()
"""

from __future__ import annotations

import unigraph as ug


def least_squares_step(x, y, params, optimizer):
    """The step for `params` = [w, b] (ug.Parameter) trained by `optimizer`."""

    def loss_fn():
        r = ug.matmul(ug.tensor(x), params[0]) + params[1] - ug.tensor(y)
        return ug.sum(r * r) / float(len(x))

    @ug.function
    def step():
        loss, grads = ug.value_and_grad(loss_fn, wrt=optimizer.params)()
        optimizer.step(grads)
        return loss

    return step
