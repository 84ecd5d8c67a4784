"""`ug.Trainer`: fit a model with a loss and an optimizer on whatever target is current.

The training step is one `@ug.function`: forward pass, `ug.value_and_grad` over the
trainable parameters, the optimizer's update (`ug.assign`), and the metrics. Eagerly it runs
op by op; on a static target the whole step (forward + backward + update) is traced into
ONE graph, compiled once per batch signature and reused for every later batch.

>>> trainer = ug.Trainer(net, ug.nn.functional.cross_entropy, ug.optim.SGD(net, lr=0.5),
...                      metrics=["accuracy"])
>>> with ug.use_backend("numpy", mode="static"):
...     trainer.fit(ug.data.batches(x_train, y_train, 100, shuffle=True), epochs=10)
...     print(trainer.evaluate(ug.data.batches(x_test, y_test, 500)))
>>> trainer.fit(x_train, y_train, epochs=10, batch_size=100)   # the same, from arrays
>>> trainer.plot("loss.png")
"""

from __future__ import annotations

import numbers
import sys

import numpy as np

from unigraph.autodiff import value_and_grad
from unigraph.function import assign, function
from unigraph.nn import functional as F
from unigraph.nn.module import Module, collect_updates
from unigraph.optim import no_trainable_parameters
from unigraph.tensor import Tensor

__all__ = ["Trainer"]

_NAMED_METRICS = {"accuracy": F.accuracy, "acc": F.accuracy}


def _metric_table(metrics) -> dict:
    if metrics is None:
        return {}
    if isinstance(metrics, dict):
        items = list(metrics.items())
    else:
        items = []
        for metric in metrics:
            if isinstance(metric, str):
                if metric not in _NAMED_METRICS:
                    raise ValueError(f"unknown metric {metric!r}; use one of "
                                     f"{', '.join(_NAMED_METRICS)} or a callable "
                                     "(outputs, y) -> scalar")
                items.append(("accuracy" if metric == "acc" else metric,
                              _NAMED_METRICS[metric]))
            elif callable(metric):
                items.append((getattr(metric, "__name__", f"metric{len(items)}"), metric))
            else:
                raise TypeError(f"a metric must be a name or a callable, got {metric!r}")
    names = [name for name, _ in items]
    if "loss" in names or len(set(names)) != len(names):
        raise ValueError(f"metric names must be unique and not 'loss', got {names}")
    return dict(items)


class Trainer:
    """Train `model` to minimise `loss_fn(model(x), y)` with `optimizer`.

    metrics: names ("accuracy") or callables `(outputs, y) -> scalar tensor`, or a dict
        {name: callable}; computed inside the step graph and averaged per epoch (weighted by
        batch size), like the loss.
    history: {"loss": [per-epoch mean], "<metric>": [...], "val_loss": [...], ...}.

    `train_step_function` is the step as a `ug.Function` (its cache holds one compiled graph
    per batch signature on a static target). What the graph trains is fixed when it is
    compiled: after changing a parameter's `trainable` flag, make a new Trainer.
    """

    def __init__(self, model: Module, loss_fn, optimizer, metrics=None):
        if not optimizer.trainable():
            raise no_trainable_parameters("Trainer", model)
        self.model = model
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.metrics = _metric_table(metrics)
        self.history: dict = {"loss": [], **{name: [] for name in self.metrics}}
        self.step_losses: list = []  # (epoch position, loss) of every training step
        self.epochs_done = 0
        # Our own step code has no Python control flow on tensors: nothing to convert.
        self.train_step_function = function(self._train_step, name="train_step",
                                            autograph=False)
        self.eval_step_function = function(self._eval_step, name="eval_step", autograph=False)
        self.predict_function = function(self._predict, name="predict", autograph=False)

    # -- the steps (traced once per batch signature on a static target) -----------------
    def _train_step(self, x, y):
        model, optimizer = self.model, self.optimizer
        model.train()
        params = optimizer.trainable()
        collected: list = []

        def closure():
            # Buffer updates (batch norm statistics) cannot be assigned inside a
            # differentiated function: return them and assign them afterwards.
            with collect_updates() as updates:
                outputs = model(x)
                loss = self.loss_fn(outputs, y)
            collected[:] = updates
            return loss, outputs, [value for _, value in updates]

        (loss, outputs, values), grads = value_and_grad(closure, wrt=params)()
        for (buffer, _), value in zip(collected, values):
            assign(buffer, value)
        optimizer.apply(dict(zip(params, grads)))
        return loss, [metric(outputs, y) for metric in self.metrics.values()]

    def _eval_step(self, x, y):
        self.model.eval()
        outputs = self.model(x)
        return self.loss_fn(outputs, y), [metric(outputs, y) for metric in self.metrics.values()]

    def _predict(self, x):
        self.model.eval()
        return self.model(x)

    # -- public ---------------------------------------------------------------------------
    def step(self, x, y) -> dict:
        """One optimisation step on one batch; returns {"loss": float, metric: float}."""
        if not self.optimizer.trainable():  # every parameter frozen since __init__
            raise no_trainable_parameters("Trainer.step", self.model)
        was_training = self.model.training
        try:
            loss, metrics = self.train_step_function(x, y)
        finally:
            self.model.train(was_training)
        return self._numbers(loss, metrics)

    def _numbers(self, loss, metrics) -> dict:
        result = {"loss": float(loss)}
        result.update({name: float(m) for name, m in zip(self.metrics, metrics)})
        return result

    def fit(self, data, y=None, *, epochs=1, batch_size=None, shuffle=False, validation=None,
            progress=True) -> dict:
        """Train for `epochs` passes over the data and return `history`.

        data: re-iterable (x, y) batches (`ug.data.batches(...)`, a list), a callable
            returning a fresh iterator of batches for each epoch, or the arrays themselves:
            `fit(x, y)` or `fit((x, y))`.
        batch_size, shuffle: for arrays only: mini-batches of `batch_size` rows (reshuffled
            each epoch with `shuffle`, reproducibly); None trains on all rows as one batch.
        validation: data evaluated after each epoch (history gets "val_loss", ...): batches,
            or a pair of arrays (x_val, y_val).
        progress: show a tqdm progress bar per epoch (False: print nothing).

        >>> trainer.fit(x_train, y_train, epochs=5, batch_size=32, shuffle=True)
        >>> trainer.fit(ug.data.batches(x_train, y_train, 32), epochs=5)
        """
        data = _as_batches("fit", data, y, batch_size, shuffle)
        if validation is not None:
            validation = _as_batches("fit(validation=...)", validation, None, None, False)
        if epochs < 1:
            raise ValueError(f"fit: epochs must be >= 1, got {epochs}")
        bar_class = _progress_bar_class() if progress else None
        was_training = self.model.training
        try:
            for _ in range(int(epochs)):
                self.epochs_done += 1
                epoch = self.epochs_done
                batches = _epoch_iterator(data, epoch)
                total = _length(data)
                bar = bar_class(total=total, desc=f"epoch {epoch}", unit="batch",
                                leave=True, file=sys.stdout) if bar_class else None
                sums, rows, losses = {}, 0, []
                for x, y in batches:
                    numbers = self.step(x, y)
                    count = len(x)
                    rows += count
                    for name, value in numbers.items():
                        sums[name] = sums.get(name, 0.0) + value * count
                    losses.append(numbers["loss"])
                    if bar is not None:
                        bar.update(1)
                        bar.set_postfix(loss=f"{sums['loss'] / rows:.4f}", refresh=False)
                if rows == 0:
                    if bar is not None:
                        bar.close()
                    raise ValueError(
                        f"fit: the data gave no batches in epoch {epoch}; pass a re-iterable "
                        "(a list, ug.data.batches(...)) or a callable returning a fresh "
                        "iterator per epoch, not a one-shot iterator"
                    )
                for i, loss in enumerate(losses):
                    self.step_losses.append((epoch - 1 + (i + 1) / len(losses), loss))
                for name, total_value in sums.items():
                    self.history.setdefault(name, []).append(total_value / rows)
                if validation is not None:
                    for name, value in self.evaluate(validation).items():
                        self.history.setdefault(f"val_{name}", []).append(value)
                if bar is not None:
                    bar.set_postfix(self._epoch_summary(), refresh=False)
                    bar.close()
        finally:
            self.model.train(was_training)
        return self.history

    def _epoch_summary(self) -> dict:
        return {name: f"{values[-1]:.4f}" for name, values in self.history.items() if values}

    def evaluate(self, data, y=None, *, batch_size=None, progress=False) -> dict:
        """Mean loss and metrics over `data` (weighted by batch size), in eval mode. `data`
        is as for `fit`: batches, or arrays `evaluate(x, y)` / `evaluate((x, y))`.

        >>> trainer.evaluate(x_test, y_test)
        {'loss': 0.31, 'accuracy': 0.92}
        """
        data = _as_batches("evaluate", data, y, batch_size, False)
        bar_class = _progress_bar_class() if progress else None
        bar = bar_class(total=_length(data), desc="evaluate", unit="batch",
                        file=sys.stdout) if bar_class else None
        was_training = self.model.training
        sums, rows = {}, 0
        try:
            for x, y in _epoch_iterator(data, 1):
                loss, metrics = self.eval_step_function(x, y)
                count = len(x)
                rows += count
                for name, value in self._numbers(loss, metrics).items():
                    sums[name] = sums.get(name, 0.0) + value * count
                if bar is not None:
                    bar.update(1)
        finally:
            self.model.train(was_training)
            if bar is not None:
                bar.close()
        if rows == 0:
            raise ValueError("evaluate: the data gave no batches")
        return {name: value / rows for name, value in sums.items()}

    def predict(self, x) -> np.ndarray:
        """The model's outputs for `x` in eval mode, as a NumPy array."""
        was_training = self.model.training
        try:
            return np.asarray(self.predict_function(x).numpy())
        finally:
            self.model.train(was_training)

    def plot(self, path, title=None):
        """Save the loss curve (every step, and the per-epoch means) as an image (PNG by
        the file's extension). Needs matplotlib: pip install 'unigraph[train]'."""
        if not self.history["loss"]:
            raise ValueError("Trainer.plot: nothing to plot yet; call fit() first")
        try:
            from matplotlib.figure import Figure
        except ImportError:
            raise ImportError(
                "Trainer.plot needs matplotlib: pip install 'unigraph[train]' "
                "(or pip install matplotlib)"
            ) from None
        figure = Figure(figsize=(6.4, 4.0), dpi=100)
        axes = figure.add_subplot()
        if self.step_losses:
            positions, losses = zip(*self.step_losses)
            axes.plot(positions, losses, color="tab:blue", alpha=0.35, linewidth=1,
                      label="loss (per step)")
        epochs = np.arange(1, len(self.history["loss"]) + 1)
        # An epoch's mean loss belongs to the middle of the epoch; validation to its end.
        axes.plot(epochs - 0.5, self.history["loss"], "o-", color="tab:blue",
                  label="loss (epoch mean)")
        if self.history.get("val_loss"):
            axes.plot(epochs[-len(self.history["val_loss"]):], self.history["val_loss"], "s--",
                      color="tab:orange", label="validation loss")
        axes.set_xlabel("epoch")
        axes.set_ylabel("loss")
        axes.set_title(title or f"{type(self.model).__name__}: training loss")
        axes.grid(alpha=0.3)
        axes.legend()
        figure.tight_layout()
        figure.savefig(path)
        return path


def _is_array(x) -> bool:
    return isinstance(x, Tensor | np.ndarray) and len(x.shape) >= 1


def _as_batches(where, data, y, batch_size, shuffle):
    """The batches to iterate: `data` as given, or the arrays (x, y) cut into batches."""
    if y is None and isinstance(data, tuple | list) and len(data) == 2 and \
            all(_is_array(item) for item in data):
        data, y = data  # fit((x, y)): one pair of arrays, not a list of two batches
    if y is None:
        if batch_size is not None or shuffle:
            raise TypeError(f"{where}: batch_size and shuffle apply to arrays (x, y); these "
                            "batches are used as given")
        return data
    if isinstance(y, numbers.Integral) and not _is_array(y):
        hint = f"; for {y} epochs write fit(data, epochs={y})" if where == "fit" else ""
        raise TypeError(f"{where}: the second argument is y (the targets), got {y!r}{hint}")
    if not _is_array(data) or not _is_array(y):
        raise TypeError(f"{where}(x, y): x and y must be arrays or tensors, got "
                        f"{type(data).__name__} and {type(y).__name__}")
    if len(data) != len(y):
        raise ValueError(f"{where}(x, y): x has {len(data)} rows but y has {len(y)}")
    if batch_size is None and not shuffle:
        return [(data, y)]
    from unigraph.data import batches

    # Batches slices rows in NumPy: feed data from the host (a Tensor comes back as one).
    x_rows = data.numpy() if isinstance(data, Tensor) else data
    y_rows = y.numpy() if isinstance(y, Tensor) else y
    return batches(x_rows, y_rows, batch_size or len(x_rows), shuffle=shuffle)


def _progress_bar_class():
    try:
        from tqdm.auto import tqdm
    except ImportError:
        print("unigraph: install tqdm for a progress bar (pip install 'unigraph[train]'); "
              "continuing without one", file=sys.stderr)
        return None
    return tqdm


def _epoch_iterator(data, epoch):
    if callable(data) and not hasattr(data, "__iter__"):
        return iter(data())
    if hasattr(data, "__next__") and epoch > 1:
        return iter(())  # a one-shot iterator is spent after the first epoch
    return iter(data)


def _length(data):
    try:
        return len(data)
    except TypeError:
        return None
