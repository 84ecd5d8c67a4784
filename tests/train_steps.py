"""The training step the fast-path tests run: a user's SGD step on mean cross-entropy, and
the float64 cross-entropy their references are written with.

>>> step = sgd_cross_entropy_step(ug.nn.Linear(3, 2), lr=0.5)
>>> loss = step(x, labels)  # one update of the layer's weight and bias
>>> loss, dz = cross_entropy_float64(logits, labels)
"""

from __future__ import annotations

import numpy as np

import unigraph as ug


def sgd_cross_entropy_step(model, lr, also=None):
    """A `ug.function` step(x, y): the loss F.cross_entropy(model(x), y), its gradients with
    respect to the model's parameters, one ug.optim.SGD update. It returns the loss, or with
    `also`, (loss, *also(model, x, grads)): values read before the update."""
    optimizer = ug.optim.SGD(model.parameters(), lr=lr)

    @ug.function
    def step(x, y):
        loss, grads = ug.value_and_grad(
            lambda: ug.nn.functional.cross_entropy(model(x), y), wrt=optimizer.params)()
        extra = None if also is None else tuple(also(model, x, grads))
        optimizer.apply(grads)
        return loss if extra is None else (loss, *extra)

    return step


def cross_entropy_float64(z, y):
    """(loss, dloss/dz) of mean(softmax cross-entropy(z, y)) in float64, by hand: the
    reference the tests compare with (z: float64 logits [n, classes], y: class ids)."""
    e = np.exp(z - z.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    n = len(y)
    loss = -np.mean(np.log(p[np.arange(n), y]))
    dz = p.copy()
    dz[np.arange(n), y] -= 1
    return loss, dz / n
