"""A Conv2D layer, written once: 3 -> 2 channels, 3x3 kernel, ReLU, Xavier-normal weights,
learning-rate multiplier 0.001 (Paddle's `ParamAttr(learning_rate=0.001)`).

It runs the layer on a random [1, 3, 32, 32] input drawn from unigraph's seeded generator
and prints the output shape and a checksum, then takes one SGD step (lr 1.0) on the mean
output to show that `lr_scale` shrinks the weights' step 1000 times.

    python examples/conv2d.py --backend numpy --mode static
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from _cli import parse_args, target_context, target_name  # noqa: E402

import unigraph as ug  # noqa: E402


def checks() -> dict:
    """For `unigraph check examples/conv2d.py`: the layer's output and its gradients."""
    ug.manual_seed(0)
    conv = ug.nn.Conv2D(3, 2, 3, act="relu", weight_init=ug.init.xavier_normal(),
                        lr_scale=0.001)
    x = ug.random.generator().standard_normal((1, 3, 32, 32)).astype(np.float32)
    return {"conv2d": (conv, (x,))}


CHECKS = checks


def run(args) -> dict:
    """Build the layer and the input from the seed, run on the target chosen by `args`."""
    ug.manual_seed(args.seed)
    conv = ug.nn.Conv2D(3, 2, 3, act="relu", weight_init=ug.init.xavier_normal(),
                        lr_scale=0.001)
    x = ug.random.generator().standard_normal((1, 3, 32, 32)).astype(np.float32)
    weight_before = conv.weight.numpy().copy()
    optimizer = ug.optim.SGD(conv.parameters(), lr=1.0)

    @ug.function
    def forward(x):
        return conv(x)

    @ug.function
    def train_step(x):
        loss, grads = ug.value_and_grad(lambda: ug.mean(conv(x)),
                                        wrt=conv.parameters())()
        optimizer.apply(grads)
        return loss, grads[0]

    with target_context(args):
        out = forward(x).numpy()
        loss, weight_grad = train_step(x)
        loss, weight_grad = float(loss), weight_grad.numpy()
    step = conv.weight.numpy() - weight_before
    return {
        "shape": list(out.shape),
        "checksum": float(out.astype(np.float64).sum()),
        "mean_abs": float(np.abs(out).mean()),
        "loss": loss,
        # -lr * lr_scale * grad: the step is 0.001 times the plain SGD step.
        "step_ratio": float(np.abs(step).sum() / np.abs(weight_grad).sum()),
        "weight_checksum": float(conv.weight.numpy().astype(np.float64).sum()),
    }


def main(argv=None) -> dict:
    args = parse_args(__doc__.splitlines()[0], None, argv)
    result = run(args)
    print(f"target: {target_name(args)}")
    print(f"output shape: {result['shape']}")
    print(f"output checksum (sum): {result['checksum']:.6f}")
    print(f"output mean |y|: {result['mean_abs']:.6f}")
    print(f"loss (mean output): {result['loss']:.6f}")
    print(f"|weight step| / |grad| (lr 1.0 x lr_scale 0.001): {result['step_ratio']:.6f}")
    print(f"weight checksum after one step: {result['weight_checksum']:.6f}")
    return result


if __name__ == "__main__":
    main()
