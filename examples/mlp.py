"""A multilayer perceptron, 64 (or 784) -> 256 -> 10, trained with Adam, written once.

    logits = Linear(256 -> 10)(dropout(relu(Linear(in -> 256)(x))))

On the bundled 8x8 digits by default (or MNIST with `--data PATH`), a few epochs with a
progress bar; `--plot loss.png` saves the loss curve.

    python examples/mlp.py --backend numpy --mode static --plot loss.png
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


class MLP(ug.nn.Module):
    def __init__(self, in_features, hidden=256, classes=10, dropout=0.1):
        super().__init__()
        self.fc1 = ug.nn.Linear(in_features, hidden, act="relu",
                                weight_init=ug.init.kaiming_uniform())
        self.dropout = ug.nn.Dropout(dropout)
        self.fc2 = ug.nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc2(self.dropout(self.fc1(x)))


def checks() -> dict:
    """For `unigraph check examples/mlp.py`: the forward pass and three Adam steps."""
    ug.manual_seed(0)
    (x_train, y_train), _ = ug.data.digits()
    x, y = x_train[:32], y_train[:32]
    return {"forward": (MLP(x.shape[1]).eval(), (x,)),
            "training": {"model": MLP(x.shape[1]), "loss_fn": F.cross_entropy,
                         "optimizer": lambda m: ug.optim.Adam(m, lr=1e-3),
                         "batches": [(x, y)], "steps": 3}}


CHECKS = checks


def run(args) -> dict:
    """Train and test on the target chosen by `args`; returns the numbers it prints."""
    ug.manual_seed(args.seed)
    (x_train, y_train), (x_test, y_test) = load_data(args)
    model = MLP(x_train.shape[1])
    optimizer = ug.optim.Adam(model.parameters(), lr=args.lr)
    trainer = ug.Trainer(model, F.cross_entropy, optimizer, metrics=["accuracy"])
    train = ug.data.batches(x_train, y_train, batch_size=args.batch_size, shuffle=True,
                            seed=args.seed)
    test = ug.data.batches(x_test, y_test, batch_size=1000)
    if args.summary:
        model.summary((args.batch_size, x_train.shape[1]))
    with target_context(args):
        data, epochs = training_plan(args, train, args.epochs)
        trainer.fit(data, epochs=epochs, validation=test, progress=args.progress)
        result = trainer.evaluate(test)
    if args.plot:
        trainer.plot(args.plot)
    return {"train_loss": trainer.history["loss"][-1], "test_loss": result["loss"],
            "test_accuracy": result["accuracy"], "history": trainer.history,
            **steps_report(args, model)}


def _extra(parser):
    parser.add_argument("--epochs", type=int, default=5, help="passes over the data")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--summary", action="store_true", help="print the model summary")


def main(argv=None) -> dict:
    args = parse_args(__doc__.splitlines()[0], _extra, argv)
    result = run(args)
    print(f"target: {target_name(args)}")
    for epoch, (loss, accuracy) in enumerate(zip(result["history"]["loss"],
                                                 result["history"]["val_accuracy"]), 1):
        print(f"epoch {epoch}: train loss {loss:.4f}, test accuracy {accuracy:.4f}")
    print(f"test loss: {result['test_loss']:.4f}")
    print(f"test accuracy: {result['test_accuracy']:.4f}")
    if args.plot:
        print(f"loss curve saved to {args.plot}")
    return result


if __name__ == "__main__":
    main()
