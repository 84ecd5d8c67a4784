"""The random-program tester's training draws (`unigraph.testing.random_programs.training`):
each kind of layer, loss, optimizer and step style is drawn, and a drawn training program
(each step's loss, the weights, buffers and optimizer state after the steps) agrees with the
float64 reference on every target, or is refused by name where a target cannot train.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import INFERENCE_TARGETS, TARGETS
from hypothesis import HealthCheck, find, settings
from hypothesis.errors import NoSuchExample

from unigraph.testing.random_programs import evaluate, render
from unigraph.testing.random_programs.model import Input, Var, load
from unigraph.testing.random_programs.runner import reference
from unigraph.testing.random_programs.strategies import programs
from unigraph.testing.random_programs.training import CustomModule, Training, trainings

FIND = settings(max_examples=2000, database=None, derandomize=True,
                suppress_health_check=list(HealthCheck))

# (what is drawn, a pattern of the rendered source that shows it)
DRAWN = [
    ("Linear", r"ug\.nn\.Linear\(\d, \d, dtype=DTYPE\)"),
    ("Linear with act=", r'ug\.nn\.Linear\(\d, \d, act="(relu|tanh)", dtype=DTYPE\)'),
    ("Conv2D", r"ug\.nn\.Conv2D\(\d, \d, \d, stride=2, padding=1, dtype=DTYPE\)"),
    ("Conv2D without a bias before BatchNorm2D",
     r"ug\.nn\.Conv2D\(.*, bias=False, dtype=DTYPE\),\n *ug\.nn\.BatchNorm2D"),
    ("GroupNorm", r"ug\.nn\.GroupNorm\(2, \d, dtype=DTYPE\)"),
    ("AdaptiveAvgPool2D", r"ug\.nn\.AdaptiveAvgPool2D\(2\)"),
    ("lr_scale", r"ug\.nn\.Linear\(\d, \d, lr_scale=0\.5, dtype=DTYPE\)"),
    ("a frozen parameter", r"model\[\d\]\.bias\.trainable = False"),
    ("an open batch dim", r'spec = \[ug\.Spec\(\(None, \d, \d, \d\), str\(x\.dtype\)\), '
     r'ug\.Spec\(\(None,\), "int64"\)\]\n    @ug\.function\(input_spec=spec\)'),
    ("MaxPool2D", r"ug\.nn\.MaxPool2D\(2\)"),
    ("AvgPool2D", r"ug\.nn\.AvgPool2D\(2\)"),
    ("BatchNorm2D, train mode", r"ug\.nn\.BatchNorm2D\((.|\n)*collect_updates\(\)"),
    ("BatchNorm2D, eval mode", r"ug\.nn\.BatchNorm2D\((.|\n)*model\.eval\(\)"),
    ("LayerNorm", r"ug\.nn\.LayerNorm\(\d, dtype=DTYPE\)"),
    ("Dropout", r"ug\.nn\.Dropout\(0\.\d+\)"),
    ("activations", r"ug\.nn\.(ReLU|Tanh|Sigmoid)\(\)(.|\n)*ug\.nn\.(ReLU|Tanh|Sigmoid)\(\)"),
    ("Flatten", r"ug\.nn\.Flatten\(\)"),
    ("a custom Module with children and a parameter of its own",
     r"self\.norm = ug\.nn\.LayerNorm(.|\n)*self\.scale = ug\.nn\.Parameter(.|\n)*"
     r"\* self\.scale \+ x\n"),
    ("cross_entropy", r"F\.cross_entropy\(model\(x\), y\)"),
    ("mse_loss", r"def program\(x, y\):(.|\n)*F\.mse_loss\(model\(x\), y\)"),
    ("SGD with weight decay", r"ug\.optim\.SGD\(model\.parameters\(\), lr=[\d.]+, "
     r"weight_decay="),
    ("Momentum", r"ug\.optim\.Momentum\(model\.parameters\(\), lr=[\d.]+, momentum=[\d.]+\)"),
    ("Momentum, Nesterov", r"ug\.optim\.Momentum\(.*nesterov=True"),
    ("Adam", r"ug\.optim\.Adam\(model\.parameters\(\), lr=[\d.]+\)"),
    ("Adam, fused", r"ug\.optim\.Adam\(.*weight_decay=[\d.]+, fused=True\)"),
    ("a compiled step, three times", r"STEPS = 3(.|\n)*    @ug\.function\n    def step\("),
    ("an eager step", r"opt = .*\n\n    def step\(x, y\):"),
    ("steps unrolled in one function",
     r"@ug\.function\n    def train\(x, y\):\n        return \[step\(x, y\), step\(x, y\)\]"),
]


def _shown(pattern):
    return lambda training: re.search(pattern, render(training)) is not None


@pytest.mark.parametrize("what,pattern", DRAWN, ids=[what for what, _ in DRAWN])
def test_the_training_draws_hold(what, pattern):
    """Each of these is drawn: hypothesis finds a training program holding it."""
    found = find(trainings(), _shown(pattern), settings=FIND)
    assert re.search(pattern, render(found)), render(found)


def test_programs_draw_training():
    """The tester's strategy draws training programs beside programs of ops (and, with
    training=False, none)."""
    found = find(programs(), lambda p: isinstance(p, Training), settings=FIND)
    assert "opt.step(grads)" in render(found)
    quick = settings(FIND, max_examples=200)
    with pytest.raises(NoSuchExample):
        find(programs(training=False), lambda p: isinstance(p, Training), settings=quick)


def test_training_only_draws_nothing_else():
    """`training="only"` (`--training-only`) draws training programs alone, and the survey
    counts them."""
    from unigraph.testing.random_programs.cli import parser
    from unigraph.testing.random_programs.tester import survey

    quick = settings(FIND, max_examples=200)
    with pytest.raises(NoSuchExample):
        find(programs(training="only"), lambda p: not isinstance(p, Training), settings=quick)
    assert parser().parse_args(["--training-only"]).training_only
    found = survey(["numpy:eager"], count=3, seed_value=1, training="only")
    assert found.programs == found.training_programs == 3
    assert survey(["numpy:eager"], count=3, seed_value=1, training=False).training_programs == 0


def _training(style: str, optimizer: str, mode="train", dtype="float32",
              open_batch=False, dropout=True) -> Training:
    """A conv model with BatchNorm2D and a pool, then the custom Block (every part drawn)
    and a Linear whose bias is frozen; two steps of `optimizer`."""
    x = Input(Var("x", (3, 2, 4, 4)), seed=5)
    layers = ["ug.nn.Conv2D(2, 3, 3, stride=1, padding=1, bias=False, dtype=DTYPE)",
              "ug.nn.BatchNorm2D(3, dtype=DTYPE)", "ug.nn.Tanh()", "ug.nn.AvgPool2D(2)",
              "ug.nn.Flatten()", f"ug.nn.Dropout({0.25 if dropout else 0.0})", "Block(12, 12)",
              "ug.nn.Linear(12, 3, dtype=DTYPE)"]
    custom = CustomModule(12, 12, "tanh", norm=True, scale=True, residual=True)
    return Training(dtype, [x], layers, custom, "cross_entropy", (0, 2, 1),
                    f"ug.optim.{optimizer}", 2, style, mode, init_seed=9,
                    frozen="model[7].bias", open=open_batch)


OPTIMIZERS = ["SGD({params}, lr=0.1, weight_decay=0.01)",
              "Momentum({params}, lr=0.1, momentum=0.9, nesterov=True)",
              "Adam({params}, lr=0.01)", "Adam({params}, lr=0.01, weight_decay=0.1, fused=True)"]


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_a_training_program_is_judged_with_its_state(optimizer):
    """The reference returns each step's loss, every weight, BatchNorm's running
    statistics and every optimizer slot; Adam's step counts are float64 on every target
    (the judge expects that dtype), the rest in the program's dtype."""
    training = _training("function", optimizer)
    expected = reference(training, render(training), grads=True)
    names = list(load(render(training))["program"](*training.arrays("float64")))
    assert names[:2] == ["loss0", "loss1"] and "0.weight" in names, names
    assert "1.running_mean" in names and "6.scale" in names, names
    slots = {name.rsplit(".", 1)[1] for name in names if name.startswith("7.weight.")}
    assert slots == {"SGD": set(), "Momentum": {"velocity"}}.get(
        optimizer.split("(")[0], {"m", "v", "step"}), names
    assert len(expected.outputs) == len(names)
    assert expected.dtypes == [("float64" if n.endswith(".step") else None) for n in names]
    if "Adam" in optimizer:
        step = expected.outputs[names.index("7.weight.step")]
        assert float(step) == 2.0
    # The frozen bias kept its initial value (zeros), and its state stayed as it starts.
    frozen = expected.outputs[names.index("7.bias")]
    assert not frozen.any(), frozen


@pytest.mark.parametrize("style", ["function", "eager", "unrolled"])
@pytest.mark.parametrize("target", TARGETS)
def test_training_agrees_on_every_target(target, style):
    """Two steps of each optimizer on the model above (a compiled step called twice, the
    same step eagerly, both steps in one compiled function): losses, weights, running
    statistics and optimizer state agree with the float64 reference."""
    for optimizer in OPTIMIZERS:
        (outcome,) = evaluate(_training(style, optimizer), [target]).outcomes
        assert outcome.status == "ok", (optimizer, outcome)


@pytest.mark.parametrize("style", ["function", "unrolled"])
@pytest.mark.parametrize("target", TARGETS)
def test_training_with_an_open_batch_dim_agrees(target, style):
    """The compiled step (or steps) traced with the batch dim open (input_spec): the same
    numbers on every target (BatchNorm2D's running variance counts n when the program
    runs: static targets raised a raw TypeError); with Dropout drawing its masks too (the
    static targets refused it, a documented open-dim limit, before a static run drew with
    the run's sizes)."""
    training = _training(style, OPTIMIZERS[3], open_batch=True, dropout=False)
    assert "@ug.function(input_spec=spec)" in render(training)
    (outcome,) = evaluate(training, [target]).outcomes
    assert outcome.status == "ok", outcome
    (outcome,) = evaluate(_training(style, OPTIMIZERS[3], open_batch=True), [target]).outcomes
    assert outcome.status == "ok", outcome


@pytest.mark.parametrize("target", TARGETS)
def test_training_in_eval_mode_and_float64_agrees(target):
    """model.eval() (BatchNorm2D on its running statistics, Dropout the identity), in
    float64: the same."""
    training = _training("function", OPTIMIZERS[2], mode="eval", dtype="float64")
    (outcome,) = evaluate(training, [target]).outcomes
    assert outcome.status == "ok", outcome


@pytest.mark.parametrize("target", INFERENCE_TARGETS)
def test_an_inference_target_refuses_training_by_name(target):
    """onnxruntime:static cannot train: a refusal naming the program's line, not a
    failure."""
    (outcome,) = evaluate(_training("function", OPTIMIZERS[0]), [target]).outcomes
    assert outcome.status == "refused", outcome
    assert "runs inference only" in outcome.detail


@pytest.mark.parametrize("target", ["numpy:static", "torch:eager", "paddle:static",
                                    "tensorflow:function"])
def test_a_wrong_update_is_a_disagreement(monkeypatch, target):
    """A momentum update that takes each gradient 1% too large (written once, so every
    target runs it; the reference ran the right one): the target disagrees."""
    from unigraph import optim

    original = optim.Momentum.update

    def wrong(self, param, grad, lr):
        original(self, param, grad * 1.01, lr)

    training = _training("function", OPTIMIZERS[1])
    source = render(training)
    expected = reference(training, source, grads=True)
    monkeypatch.setattr(optim.Momentum, "update", wrong)
    from unigraph.testing.random_programs.runner import judge
    from unigraph.testing.random_programs.workers import execute

    outcome = judge(target, execute(target, source, training.arrays(), True), expected,
                    training.dtype)
    assert outcome.status == "disagree", outcome
    assert np.isfinite(expected.budget).all()
