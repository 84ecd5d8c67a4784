"""ug.Trainer: one compiled graph per static training step, eager and static giving the
same numbers (with dropout and batch norm inside), fit/evaluate/history/progress/plot; and
the three examples, which must agree between numpy:eager and numpy:static."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import unigraph as ug

F = ug.nn.functional
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


class SmallConvNet(ug.nn.Module):
    def __init__(self):
        super().__init__()
        # no bias before batch norm: its gradient is zero up to rounding, and Adam would
        # turn that rounding noise into full-size steps that differ between backends
        self.conv = ug.nn.Conv2D(1, 3, 3, padding=1, bias=False,
                                 weight_init=ug.init.kaiming_normal())
        self.norm = ug.nn.BatchNorm2D(3)
        self.pool = ug.nn.MaxPool2D(2)
        self.dropout = ug.nn.Dropout(0.25)
        self.fc = ug.nn.Linear(3 * 4 * 4, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.norm(self.conv(x))))
        return self.fc(self.dropout(F.flatten(x)))


def _digits_images(count=120):
    (x, y), _ = ug.data.digits(flatten=False)
    return x[:count], y[:count]


def _train(mode, epochs=2, **fit_options):
    ug.manual_seed(0)
    model = SmallConvNet()
    trainer = ug.Trainer(model, F.cross_entropy, ug.optim.Adam(model, lr=0.01),
                         metrics=["accuracy"])
    x, y = _digits_images()
    with ug.use_backend("numpy", mode):
        trainer.fit(ug.data.batches(x, y, 40, shuffle=True), epochs=epochs, progress=False,
                    **fit_options)
    return trainer, model


def test_static_step_is_one_graph_compiled_once():
    trainer, _ = _train("static", epochs=2)
    function = trainer.train_step_function
    assert len(function._cache) == 1  # 6 steps, one signature, one graph
    (compiled,) = function._cache.values()
    ops = {node.op for node in compiled.graph.nodes}
    assert "grad" in ops  # forward + backward in the graph ...
    updated = {param.name for param, _ in compiled.graph.updates}
    assert {"conv.weight", "fc.bias", "norm.running_mean", "norm.running_var"} <= updated
    assert any(name.endswith(".m") for name in updated)  # ... and the optimizer's update


def test_eager_and_static_training_agree():
    eager, eager_model = _train("eager")
    static, static_model = _train("static")
    np.testing.assert_allclose(static.history["loss"], eager.history["loss"], rtol=1e-5)
    np.testing.assert_allclose(static.history["accuracy"], eager.history["accuracy"])
    for key, value in eager_model.state_dict().items():
        np.testing.assert_allclose(static_model.state_dict()[key], value, rtol=1e-4,
                                   atol=1e-6, err_msg=key)
    assert eager.history["loss"][-1] < eager.history["loss"][0]
    # the running statistics were trained too
    assert not np.allclose(eager_model.norm.running_mean.numpy(), 0)


def test_step_returns_numbers_and_restores_the_mode():
    ug.manual_seed(0)
    model = ug.nn.Linear(64, 10)
    trainer = ug.Trainer(model, F.cross_entropy, ug.optim.SGD(model, lr=0.5),
                         metrics={"acc": F.accuracy})
    model.eval()
    (x, y), _ = ug.data.digits()
    numbers = trainer.step(x[:50], y[:50])
    assert set(numbers) == {"loss", "acc"} and numbers["loss"] > 0
    assert not model.training


def test_fit_history_validation_evaluate_predict():
    ug.manual_seed(0)
    model = ug.nn.Sequential(ug.nn.Linear(64, 32, act="relu"), ug.nn.Linear(32, 10))
    trainer = ug.Trainer(model, F.cross_entropy, ug.optim.Momentum(model, lr=0.1),
                         metrics=["accuracy"])
    (x, y), (xt, yt) = ug.data.digits()
    with ug.use_backend("numpy", "static"):
        history = trainer.fit(lambda: iter(ug.data.batches(x, y, 100)), epochs=3,
                              validation=[(xt, yt)], progress=False)
        result = trainer.evaluate(ug.data.batches(xt, yt, 100))
        predictions = trainer.predict(xt)
    assert set(history) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert all(len(values) == 3 for values in history.values())
    assert history["loss"][2] < history["loss"][0]
    assert result["loss"] == pytest.approx(history["val_loss"][-1], rel=1e-5)
    assert result["accuracy"] == pytest.approx(np.mean(predictions.argmax(1) == yt))
    assert len(trainer.step_losses) == 3 * 15
    assert model.training  # fit and evaluate put the mode back


def test_one_shot_iterator_is_refused_for_a_second_epoch():
    model = ug.nn.Linear(2, 2)
    trainer = ug.Trainer(model, F.mse_loss, ug.optim.SGD(model, lr=0.1))
    data = iter([(np.ones((2, 2), np.float32), np.zeros((2, 2), np.float32))])
    with pytest.raises(ValueError, match="no batches in epoch 2.*re-iterable"):
        trainer.fit(data, epochs=2, progress=False)


def test_progress_bar_can_be_switched_off(capsys):
    model = ug.nn.Linear(2, 2)
    trainer = ug.Trainer(model, F.mse_loss, ug.optim.SGD(model, lr=0.1))
    data = [(np.ones((2, 2), np.float32), np.zeros((2, 2), np.float32))]
    trainer.fit(data, epochs=1, progress=False)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    trainer.fit(data, epochs=1, progress=True)
    captured = capsys.readouterr()
    assert "epoch 2" in captured.out + captured.err


def test_plot_writes_a_png(tmp_path):
    trainer, _ = _train("eager", epochs=2, validation=[_digits_images(40)])
    path = trainer.plot(tmp_path / "loss.png")
    assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_errors(monkeypatch):
    model = ug.nn.Linear(2, 2)
    trainer = ug.Trainer(model, F.mse_loss, ug.optim.SGD(model, lr=0.1))
    with pytest.raises(ValueError, match="call fit"):
        trainer.plot("never.png")
    trainer.history["loss"].append(1.0)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match="matplotlib"):
        trainer.plot("never.png")


def test_unknown_metric():
    model = ug.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="unknown metric 'f1'"):
        ug.Trainer(model, F.mse_loss, ug.optim.SGD(model), metrics=["f1"])


def test_frozen_parameters_do_not_move():
    ug.manual_seed(0)
    model = ug.nn.Sequential(ug.nn.Linear(64, 16), ug.nn.Linear(16, 10))
    model[0].weight.trainable = False
    before = model[0].weight.numpy().copy()
    trainer = ug.Trainer(model, F.cross_entropy, ug.optim.SGD(model, lr=0.5))
    (x, y), _ = ug.data.digits()
    with ug.use_backend("numpy", "static"):
        trainer.fit([(x[:100], y[:100])], epochs=2, progress=False)
    np.testing.assert_array_equal(model[0].weight.numpy(), before)
    assert not np.array_equal(model[0].bias.numpy(), np.zeros(16))


# -- the examples, eager against static -------------------------------------------------------
def _example(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _both_modes(name, *options):
    module = _example(name)
    return [module.main(["--backend", "numpy", "--mode", mode, "--no-progress", *options])
            for mode in ("eager", "static")]


def test_softmax_regression_example(capsys):
    eager, static = _both_modes("softmax_regression")
    assert eager["test_accuracy"] >= 0.90
    for key in ("train_loss", "test_loss", "test_accuracy"):
        assert static[key] == pytest.approx(eager[key], rel=1e-5), key
    assert "test accuracy: " in capsys.readouterr().out


def test_mlp_example(tmp_path, capsys):
    plot = tmp_path / "mlp.png"
    eager, static = _both_modes("mlp", "--epochs", "2", "--plot", str(plot))
    for key in ("train_loss", "test_loss", "test_accuracy"):
        assert static[key] == pytest.approx(eager[key], rel=1e-5), key
    assert eager["test_accuracy"] > 0.8
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert "loss curve saved" in capsys.readouterr().out


def test_conv2d_example():
    eager, static = _both_modes("conv2d")
    assert eager["shape"] == static["shape"] == [1, 2, 30, 30]
    for key in ("checksum", "loss", "weight_checksum"):
        assert static[key] == pytest.approx(eager[key], rel=1e-5), key
    assert eager["step_ratio"] == pytest.approx(0.001, rel=1e-3)


def test_example_cli_defaults():
    sys.path.insert(0, str(EXAMPLES))
    try:
        from _cli import parse_args, target_context
    finally:
        sys.path.remove(str(EXAMPLES))
    args = parse_args("demo", None, [])
    assert (args.backend, args.mode, args.data, args.plot, args.progress) == \
        (None, None, None, None, True)
    before = ug.current_target()
    with target_context(args):  # no --backend/--mode: the configured target stays
        assert ug.current_target() == before
    args = parse_args("demo", lambda p: p.add_argument("--epochs", type=int, default=3),
                      ["--backend", "numpy", "--mode", "static", "--no-progress"])
    assert args.epochs == 3 and not args.progress and args.steps is None
    with target_context(args):
        assert str(ug.current_target()) == "numpy:static"
