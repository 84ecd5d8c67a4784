"""Softmax regression (the "MNIST for beginners" model), written once for every target.

    y = softmax(x @ W + b), trained on the cross-entropy with SGD, lr 0.5, batches of 100.

On scikit-learn's bundled 8x8 digits (64 -> 10, the default) it reaches about 95% test
accuracy; with `--data PATH` it reads MNIST's IDX files (784 -> 10).

    python examples/softmax_regression.py --backend numpy --mode static
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _cli import (  # noqa: E402
    load_data,
    parse_args,
    steps_report,
    target_context,
    target_name,
    training_plan,
)

import unigraph as ug  # noqa: E402

F = ug.nn.functional


class SoftmaxRegression(ug.nn.Module):
    """One linear layer; `forward` gives the logits (softmax is folded into the loss, which
    is the numerically stable way to compute -sum(y * log(softmax(logits))))."""

    def __init__(self, in_features, classes=10, init=None):
        super().__init__()
        self.fc1 = ug.nn.Linear(in_features, classes, weight_init=init or ug.init.zeros())

    def forward(self, x):
        return self.fc1(x)

    def probabilities(self, x):
        return F.softmax(self.forward(x))


def checks() -> dict:
    """For `unigraph check examples/softmax_regression.py`: the probabilities, and three SGD
    steps (lr 0.5, batch 100) compared weight by weight."""
    ug.manual_seed(0)
    (x_train, y_train), _ = ug.data.digits()
    x, y = x_train[:100], y_train[:100]
    model = SoftmaxRegression(x.shape[1], init=ug.init.normal(std=0.01))
    return {"probabilities": (ug.function(model.probabilities), (x,)),
            "training": {"model": SoftmaxRegression(x.shape[1]), "loss_fn": F.cross_entropy,
                         "optimizer": lambda m: ug.optim.SGD(m, lr=0.5),
                         "batches": [(x, y)], "steps": 3}}


CHECKS = checks


def run(args) -> dict:
    """Train and test on the target chosen by `args`; returns the numbers it prints."""
    ug.manual_seed(args.seed)
    (x_train, y_train), (x_test, y_test) = load_data(args)
    model = SoftmaxRegression(x_train.shape[1])
    trainer = ug.Trainer(model, F.cross_entropy, ug.optim.SGD(model.parameters(), lr=0.5),
                         metrics=["accuracy"])
    train = ug.data.batches(x_train, y_train, batch_size=100, shuffle=True, seed=args.seed)
    with target_context(args):
        data, epochs = training_plan(args, train, args.epochs)
        trainer.fit(data, epochs=epochs, progress=args.progress)
        test = trainer.evaluate(ug.data.batches(x_test, y_test, batch_size=1000))
    if args.plot:
        trainer.plot(args.plot)
    return {"train_loss": trainer.history["loss"][-1], "test_loss": test["loss"],
            "test_accuracy": test["accuracy"], **steps_report(args, model)}


def main(argv=None) -> dict:
    args = parse_args(__doc__.splitlines()[0], _extra, argv)
    result = run(args)
    print(f"target: {target_name(args)}")
    print(f"final train loss: {result['train_loss']:.4f}")
    print(f"test loss: {result['test_loss']:.4f}")
    print(f"test accuracy: {result['test_accuracy']:.4f}")
    return result


def _extra(parser):
    parser.add_argument("--epochs", type=int, default=10, help="passes over the data")


if __name__ == "__main__":
    main()
