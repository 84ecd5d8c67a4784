"""The training step the fast-path tests run: a user's SGD step on mean cross-entropy.

>>> step = sgd_cross_entropy_step(ug.nn.Linear(3, 2), lr=0.5)
>>> loss = step(x, labels)  # one update of the layer's weight and bias
"""

from __future__ import annotations

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
