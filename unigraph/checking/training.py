"""`ug.check_training`: the same training steps on every target, compared step by step.

Each target starts from the same weights and optimizer state (restored from a snapshot),
runs `steps` steps of `ug.Trainer`'s training step (forward, `ug.value_and_grad`, the
optimizer's update) on the same batches with the same random draws, and reports the loss
of every step and every weight and buffer after the last step. The reference runs the
same traced step graph promoted to float64 on the NumPy engine, carrying its float64
weights from step to step.

Budgets: a loss or weight gets the widest budget of the step's ops, multiplied by the
number of steps (errors of one step feed the next).
"""

from __future__ import annotations

import itertools
import time

import numpy as np

from unigraph import pytree
from unigraph.checking import compare as cmp
from unigraph.checking.report import Comparison, Report, TargetReport, odd_one_out
from unigraph.checking.run import Case, cast_leaf, error_text, params_cast, trace_with_params
from unigraph.config import Target, use_backend
from unigraph.function import is_array_leaf
from unigraph.ir import FLOAT_DTYPES
from unigraph.random import seeded
from unigraph.reference.float64 import compile_float64, upcast


def check_training(model, loss_fn, optimizer, batches, steps=1, targets="all",
                   dtype="float32", rtol=None, atol=None, seed=0, localize_divergence=True,
                   name=None) -> Report:
    """Train `model` for `steps` steps on every target and compare each step's loss and
    every weight afterwards with a float64 NumPy run of the same steps.

    loss_fn: `loss_fn(model(x), y) -> scalar`, as for `ug.Trainer`.
    optimizer: a `ug.optim` optimizer over the model's parameters, or a factory
        `lambda model: ug.optim.SGD(model, lr=0.1)`.
    batches: (x, y) pairs; the first `steps` are used (cycled if there are fewer).

    >>> report = ug.check_training(net, F.cross_entropy, ug.optim.SGD(net, lr=0.1),
    ...                            [(x, y)], steps=3)
    """
    from unigraph.checking.checker import resolve_targets
    from unigraph.checking.scripts import loading_script, not_run_report
    from unigraph.training import Trainer

    if loading_script():  # a worker importing a script without a main guard: not again
        return not_run_report("training", name or type(model).__name__, dtype)
    if not hasattr(optimizer, "apply") and callable(optimizer):
        optimizer = optimizer(model)
    if steps < 1:
        raise ValueError(f"check_training: steps must be >= 1, got {steps}")
    batches = list(itertools.islice(itertools.cycle(list(batches)), steps))
    if not batches:
        raise ValueError("check_training: no batches")
    batches = [tuple(cast_leaf(x, dtype) for x in batch) for batch in batches]
    chosen, skipped = resolve_targets(targets)
    from unigraph.checking.run import inference_only

    for target in [t for t in chosen if inference_only(t)]:
        chosen.remove(target)
        skipped[str(target)] = "inference-only: it cannot train"
    was_training = model.training
    trainer = Trainer(model, loss_fn, optimizer)
    step_fn = trainer.train_step_function
    run = _TrainingRun(model, step_fn, batches, dtype, seed, name or type(model).__name__)
    weight_names = [n for n, _ in model.named_parameters()] + [n for n, _ in
                                                                model.named_buffers()]
    expected = run.reference()
    reports = []
    for target in chosen:
        started = time.perf_counter()
        report = TargetReport(str(target), "ok")
        result = run.on_target(target)
        first_bad = steps - 1
        if isinstance(result, str):
            report.status, report.error, report.error_stage = "error", result, "training"
        else:
            losses, weights = result
            budget = run.budget("loss", rtol, atol)
            report.comparisons.append(Comparison(
                f"loss[0:{steps}]", "loss", cmp.compare(losses, expected[0], budget), budget,
                (steps,), "float64"))
            for step in range(steps):
                if not cmp.compare(losses[step:step + 1], expected[0][step:step + 1],
                                   budget).ok:
                    first_bad = step
                    break
            for weight_name, got, want, param in zip(weight_names, weights, expected[1],
                                                     run.weights):
                budget = run.budget(f"weight({weight_name})", rtol, atol, run.run_dtype(param))
                report.comparisons.append(Comparison(
                    f"weight({weight_name})", "weight",
                    cmp.compare(got, want, budget, dtype=run.run_dtype(param)), budget,
                    tuple(param.shape), run.run_dtype(param)))
            if not all(c.ok for c in report.comparisons):
                report.status = "disagree"
        if report.status != "ok" and localize_divergence:
            report.divergence = run.localize(target, first_bad)
        report.seconds = time.perf_counter() - started
        reports.append(report)
    run.restore()
    model.train(was_training)
    result = Report(run.name, dtype, reports, kind="training", skipped=skipped,
                    notes=run.notes)
    result.odd_one_out = odd_one_out(reports)
    return result


class _TrainingRun:
    def __init__(self, model, step_fn, batches, dtype, seed, name):
        self.model, self.step_fn, self.batches = model, step_fn, batches
        self.dtype, self.seed, self.name = dtype, seed, name
        self.notes: list = []
        self.weights = [p for _, p in model.named_parameters()] + [b for _, b in
                                                                    model.named_buffers()]
        self.graphs: dict = {}  # input signature -> (graph, params, randoms)
        self._trace_all()
        params = {id(p): p for p in self.weights}
        for _, graph_params, _ in self.graphs.values():
            params.update({id(p): p for p in graph_params})
        self.params = list(params.values())
        self.original_dtypes = {id(p): p.dtype for p in self.params}
        self.snapshot = {id(p): np.array(p.numpy(), copy=True) for p in self.params}
        if any(self.run_dtype(p) != p.dtype for p in self.params):
            with self.cast_params():  # trace again with the parameters in the checked dtype
                self.graphs.clear()
                self._trace_all()
        self.history: list = []  # reference parameter values before each step

    def _trace_all(self) -> None:
        with seeded(self.seed):
            for batch in self.batches:
                self._graph(batch)

    def run_dtype(self, param) -> str:
        """The dtype of `param` during the check: the checked dtype if it is floating."""
        original = self.original_dtypes[id(param)]
        return self.dtype if original in FLOAT_DTYPES else original

    def cast_params(self):
        """Parameters (and optimizer state) in the checked dtype inside the block; the
        user's dtypes and values after it."""
        return params_cast(self.params, self.snapshot, self.original_dtypes, self.run_dtype)

    def _graph(self, batch):
        key = tuple((x.shape, x.dtype.name) for x in batch)
        if key not in self.graphs:
            graph, params, _, randoms = trace_with_params(self.step_fn, batch)
            self.graphs[key] = (graph, params, randoms)
        return self.graphs[key]

    def restore(self) -> None:
        for param in self.params:
            param.set_value(self.snapshot[id(param)])

    def budget(self, name, rtol, atol, dtype=None) -> tuple:
        """The budget of a loss (dtype None: the checked dtype) or of a weight in `dtype`,
        times the number of steps."""
        dtype = dtype or self.dtype
        ops = set()
        for graph, _, _ in self.graphs.values():
            ops |= cmp.ops_of(graph)
        rtol0, atol0 = cmp.value_budget(dtype, self.dtype, ops)
        scale = len(self.batches)
        return cmp.override((rtol0 * scale, atol0 * scale), name, rtol, atol)

    def reference(self) -> tuple:
        """(losses, weights after the last step) of the float64 run."""
        state = {id(p): upcast(self.snapshot[id(p)].astype(self.run_dtype(p)))
                 for p in self.params}
        rng = np.random.default_rng(self.seed)
        compiled: dict = {}
        losses = []
        for batch in self.batches:
            self.history.append(dict(state))
            graph, params, randoms = self._graph(batch)
            if id(graph) not in compiled:
                compiled[id(graph)] = compile_float64(graph)
            executable = compiled[id(graph)]
            for index, param in enumerate(params):
                executable.set_param(index, state[id(param)])
            draws = [upcast(rng.random(shape).astype(dtype)) for shape, dtype in randoms]
            outputs = executable.run([upcast(x) for x in batch] + draws)
            for index, param in enumerate(params):
                state[id(param)] = executable.get_param(index)
            losses.append(float(np.asarray(outputs[0])))
        return np.array(losses), [state[id(p)] for p in self.weights]

    def on_target(self, target: Target):
        """(losses, weights) after the steps on `target`, or the error text."""
        losses = []
        try:
            with use_backend(target.backend, target.mode), self.cast_params():
                with seeded(self.seed):
                    for batch in self.batches:
                        result = self.step_fn(*batch)
                        leaves, _ = pytree.flatten(result, is_array_leaf)
                        losses.append(float(np.asarray(leaves[0].numpy())))
                weights = [np.array(p.numpy(), copy=True) for p in self.weights]
        except Exception as error:
            return error_text(error)
        return np.array(losses), weights

    def localize(self, target: Target, step: int):
        """Localize on training step `step` (the first whose loss is off, else the last),
        starting from the reference's weights before that step."""
        from unigraph.checking.localize import localize
        from unigraph.plugins import get_backend

        batch = self.batches[step]
        graph, params, randoms = self._graph(batch)
        state = self.history[step] if step < len(self.history) else self.snapshot
        case = Case(
            name=self.name, function=self.step_fn, inputs=batch, leaves=list(batch),
            dtype=self.dtype, seed=self.seed, params=list(params),
            snapshot={id(p): np.asarray(state[id(p)]).astype(self.run_dtype(p)) for p in params},
            graph=graph, graph_params=list(params), randoms=randoms,
            output_names=[], output_budgets=[],
        )
        try:
            backend = get_backend(target.backend, target.mode)
            divergence = localize(case, target, backend, "forward")
        except Exception as error:
            self.notes.append(f"{target}: localization failed: {error_text(error)}")
            return None
        if divergence is not None:
            divergence.note = (divergence.note + "; " if divergence.note else "") + \
                f"found in training step {step}, started from the reference's weights"
        return divergence

