"""ug.nn and ug.init: every layer's forward against a NumPy float64 reference, its parameter
(and input) gradients against float64 finite differences, eager against static, the Module
machinery (names, buffers, modes, state_dict, summary), the errors users see, and the
initializers' statistics and reseeding."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.errors import ShapeError

F = ug.nn.functional
NUMPY_TARGETS = [("numpy", "eager"), ("numpy", "static")]


# -- helpers --------------------------------------------------------------------------------
def _run(layer, x, mode="eager"):
    """The layer's output as NumPy on numpy:<mode> (static: through one @ug.function)."""
    with ug.use_backend("numpy", mode):
        if mode == "eager":
            return layer(ug.tensor(x)).numpy()
        return ug.function(lambda x: layer(x))(x).numpy()


def _finite_difference(f, array: np.ndarray, eps=1e-6) -> np.ndarray:
    """Central differences of scalar f() with respect to every entry of `array` (in place)."""
    grad = np.zeros_like(array)
    for index in np.ndindex(array.shape):
        saved = array[index]
        array[index] = saved + eps
        up = f()
        array[index] = saved - eps
        down = f()
        array[index] = saved
        grad[index] = (up - down) / (2 * eps)
    return grad


def check_gradients(layer, x, rtol=1e-6, atol=1e-8, seed_each_call=None,
                    modes=("eager", "static")):
    """Gradients of sum(layer(x) * r) for a fixed random r: the parameters' (from
    ug.value_and_grad, eager and static) and the input's, against finite differences."""
    x = np.array(x, dtype=np.float64)
    out_shape = _run(layer, x).shape
    r = np.random.default_rng(7).standard_normal(out_shape)

    def forward(inp):
        return ug.sum(layer(inp) * r)

    def numeric_loss():
        # A random layer (Dropout) draws the same mask on every call: seeded here, outside
        # any @ug.function (seeding inside one is refused in every mode).
        if seed_each_call is not None:
            ug.manual_seed(seed_each_call)
        with ug.use_backend("numpy", "eager"):
            return float(forward(ug.tensor(x)).numpy())

    params = layer.trainable_parameters()
    for mode in modes:
        with ug.use_backend("numpy", mode):
            if seed_each_call is not None:
                ug.manual_seed(seed_each_call)

            @ug.function
            def both(inp):
                # Each forward draws a fresh mask: with no parameters, only the input's
                # gradient runs it, so it sees the seeded mask numeric_loss sees.
                param_grads = ug.value_and_grad(lambda: forward(inp), wrt=params)()[1] \
                    if params else []
                return param_grads, ug.grad(forward)(inp)

            param_grads, input_grad = both(x)
        for param, got in zip(params, param_grads):
            holder = param.numpy().copy()

            def perturbed(param=param, holder=holder):
                param.set_value(holder)
                return numeric_loss()

            expected = _finite_difference(perturbed, holder)
            param.set_value(holder)
            np.testing.assert_allclose(got.numpy(), expected, rtol=rtol, atol=atol,
                                       err_msg=f"{mode}: gradient of {param.name}")
        expected_x = _finite_difference(numeric_loss, x)
        np.testing.assert_allclose(input_grad.numpy(), expected_x, rtol=rtol, atol=atol,
                                   err_msg=f"{mode}: gradient of the input")


def _conv_reference(x, w, b, stride, padding, dilation, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    ph, pw = padding
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pw - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    per_group = o // groups
    for oc in range(o):
        g = oc // per_group
        for i in range(oh):
            for j in range(ow):
                rows = i * stride[0] + dilation[0] * np.arange(kh)
                cols = j * stride[1] + dilation[1] * np.arange(kw)
                patch = xp[:, g * cg:(g + 1) * cg][:, :, rows][:, :, :, cols]
                out[:, oc, i, j] = np.sum(patch * w[oc], axis=(1, 2, 3))
    return out + (0 if b is None else b.reshape(1, -1, 1, 1))


def _pool_reference(x, kernel, stride, reduce):
    n, c, h, w = x.shape
    oh, ow = (h - kernel[0]) // stride[0] + 1, (w - kernel[1]) // stride[1] + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            window = x[:, :, i * stride[0]:i * stride[0] + kernel[0],
                       j * stride[1]:j * stride[1] + kernel[1]]
            out[:, :, i, j] = reduce(window, axis=(2, 3))
    return out


def _distinct(rng, shape):
    """Values far apart from each other (no ties for max pooling, no kinks near 0)."""
    values = rng.permutation(np.prod(shape)).reshape(shape).astype(np.float64)
    return (values - values.size / 2 + 0.5) / values.size * 4


# -- forward against NumPy, and gradients against finite differences ---------------------
def test_linear_forward_and_gradients():
    layer = ug.nn.Linear(4, 3, act="tanh", bias_init=ug.init.normal(), dtype="float64")
    x = np.random.default_rng(0).standard_normal((5, 4))
    expected = np.tanh(x @ layer.weight.numpy() + layer.bias.numpy())
    for _, mode in NUMPY_TARGETS:
        np.testing.assert_allclose(_run(layer, x, mode), expected, rtol=1e-12, atol=1e-14)
    check_gradients(layer, x)


@pytest.mark.parametrize("stride, padding, dilation, groups", [
    (1, 0, 1, 1),
    (2, 1, 1, 1),
    ((1, 2), (2, 1), 2, 2),
])
def test_conv2d_forward_and_gradients(stride, padding, dilation, groups):
    layer = ug.nn.Conv2D(4, 2, (3, 2), stride=stride, padding=padding, dilation=dilation,
                         groups=groups, bias_init=ug.init.normal(), dtype="float64")
    x = np.random.default_rng(1).standard_normal((2, 4, 6, 5))
    pair = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    expected = _conv_reference(x, layer.weight.numpy(), layer.bias.numpy(), pair(stride),
                               pair(padding), pair(dilation), groups)
    for _, mode in NUMPY_TARGETS:
        np.testing.assert_allclose(_run(layer, x, mode), expected, rtol=1e-10, atol=1e-12)
    check_gradients(layer, x)


def test_conv2d_act_relu_and_no_bias():
    layer = ug.nn.Conv2D(2, 3, 3, act="relu", bias=False, dtype="float64")
    assert layer.bias is None and len(layer.parameters()) == 1
    x = _distinct(np.random.default_rng(2), (1, 2, 5, 5))
    expected = np.maximum(_conv_reference(x, layer.weight.numpy(), None, (1, 1), (0, 0),
                                          (1, 1), 1), 0)
    np.testing.assert_allclose(_run(layer, x), expected, rtol=1e-10, atol=1e-12)
    check_gradients(layer, x)


@pytest.mark.parametrize("layer_class, reduce", [(ug.nn.MaxPool2D, np.max),
                                                 (ug.nn.AvgPool2D, np.mean)])
def test_pools_forward_and_gradients(layer_class, reduce):
    x = _distinct(np.random.default_rng(3), (2, 2, 6, 5))
    layer = layer_class(2, stride=(2, 1))
    expected = _pool_reference(x, (2, 2), (2, 1), reduce)
    for _, mode in NUMPY_TARGETS:
        np.testing.assert_allclose(_run(layer, x, mode), expected, rtol=1e-12, atol=1e-14)
    check_gradients(layer, x)


@pytest.mark.parametrize("layer, reference", [
    (ug.nn.ReLU(), lambda x: np.maximum(x, 0)),
    (ug.nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (ug.nn.Tanh(), np.tanh),
    (ug.nn.Softmax(), lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True)),
    (ug.nn.Flatten(), lambda x: x.reshape(len(x), -1)),
], ids=["relu", "sigmoid", "tanh", "softmax", "flatten"])
def test_parameterless_layers(layer, reference):
    x = _distinct(np.random.default_rng(4), (3, 2, 4))
    for _, mode in NUMPY_TARGETS:
        np.testing.assert_allclose(_run(layer, x, mode), reference(x), rtol=1e-12, atol=1e-14)
    check_gradients(layer, x)


def test_sequential_forward_and_gradients():
    model = ug.nn.Sequential(
        ug.nn.Conv2D(1, 2, 3, padding=1, act="tanh", dtype="float64"),
        ug.nn.AvgPool2D(2),
        ug.nn.Flatten(),
        ug.nn.Linear(8, 3, act="sigmoid", dtype="float64"),
    )
    x = np.random.default_rng(5).standard_normal((2, 1, 4, 4))
    np.testing.assert_allclose(_run(model, x, "static"), _run(model, x, "eager"), rtol=1e-12)
    check_gradients(model, x)
    assert len(model) == 4 and isinstance(model[3], ug.nn.Linear)


def test_dropout_mask_comes_from_the_generator():
    x = np.ones((4, 50), dtype=np.float32)
    layer = ug.nn.Dropout(0.3)
    for _, mode in NUMPY_TARGETS:
        ug.manual_seed(11)
        got = _run(layer, x, mode)
        keep = np.random.default_rng(11).random((4, 50)).astype(np.float32) >= 0.3
        np.testing.assert_allclose(got, np.where(keep, 1 / 0.7, 0.0), rtol=1e-6)
    layer.eval()
    np.testing.assert_array_equal(_run(layer, x, "static"), x)


def test_dropout_static_draws_a_fresh_mask_each_run():
    layer = ug.nn.Dropout(0.5)
    step = ug.function(lambda x: layer(x))
    with ug.use_backend("numpy", "static"):
        first = step(np.ones((100,), np.float32)).numpy()
        second = step(np.ones((100,), np.float32)).numpy()
    assert len(step._cache) == 1
    assert not np.array_equal(first, second)


def test_dropout_gradients_with_a_fixed_mask():
    layer = ug.nn.Dropout(0.4)
    x = np.random.default_rng(6).standard_normal((3, 5))
    check_gradients(layer, x, seed_each_call=5, modes=("eager",))
    # Static: the mask is a random input fed at run time, so seed right before the run.
    r = np.random.default_rng(7).standard_normal(x.shape)
    with ug.use_backend("numpy", "static"):
        ug.manual_seed(5)
        got = ug.grad(lambda inp: ug.sum(layer(inp) * r))(x).numpy()
    keep = np.random.default_rng(5).random(x.shape) >= 0.4
    np.testing.assert_allclose(got, np.where(keep, r / 0.6, 0.0), rtol=1e-12)


def _batch_norm_reference(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=(0, 2, 3), keepdims=True)
    var = x.var(axis=(0, 2, 3), keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma.reshape(1, -1, 1, 1) + \
        beta.reshape(1, -1, 1, 1)


def test_batch_norm_training_forward_gradients_and_running_stats():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((4, 3, 2, 3)) * 2 + 1
    layer = ug.nn.BatchNorm2D(3, dtype="float64")
    layer.weight.set_value(rng.standard_normal(3))
    layer.bias.set_value(rng.standard_normal(3))
    expected = _batch_norm_reference(x, layer.weight.numpy(), layer.bias.numpy())
    for _, mode in NUMPY_TARGETS:
        layer.running_mean.set_value(np.zeros(3))
        layer.running_var.set_value(np.ones(3))
        np.testing.assert_allclose(_run(layer, x, mode), expected, rtol=1e-10, atol=1e-12)
        n = 4 * 2 * 3
        np.testing.assert_allclose(layer.running_mean.numpy(),
                                   0.1 * x.mean(axis=(0, 2, 3)), rtol=1e-12)
        np.testing.assert_allclose(layer.running_var.numpy(),
                                   0.9 + 0.1 * x.var(axis=(0, 2, 3)) * n / (n - 1),
                                   rtol=1e-12)
    with ug.nn.collect_updates():  # keep the statistics still while differentiating
        check_gradients(layer, x, rtol=1e-5, atol=1e-7)


def test_batch_norm_eval_uses_running_stats():
    rng = np.random.default_rng(9)
    layer = ug.nn.BatchNorm2D(2, eps=1e-3, dtype="float64").eval()
    layer.running_mean.set_value([0.5, -1.0])
    layer.running_var.set_value([2.0, 0.25])
    x = rng.standard_normal((2, 2, 3, 3))
    expected = (x - np.array([0.5, -1.0]).reshape(1, 2, 1, 1)) / \
        np.sqrt(np.array([2.0, 0.25]) + 1e-3).reshape(1, 2, 1, 1)
    for _, mode in NUMPY_TARGETS:
        np.testing.assert_allclose(_run(layer, x, mode), expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(layer.running_mean.numpy(), [0.5, -1.0])  # unchanged
    check_gradients(layer, x)


def test_batch_norm_inside_grad_without_collecting_says_what_to_do():
    layer = ug.nn.BatchNorm2D(2)
    x = np.ones((2, 2, 2, 2), np.float32)

    @ug.function
    def step(x):
        return ug.value_and_grad(lambda: ug.sum(layer(x)), wrt=layer.parameters())()

    with ug.use_backend("numpy", "static"), pytest.raises(RuntimeError, match="collect_updates"):
        step(x)


# -- functional -----------------------------------------------------------------------------
def test_cross_entropy_integer_and_one_hot_labels():
    rng = np.random.default_rng(10)
    logits = rng.standard_normal((6, 4))
    labels = np.array([0, 3, 1, 1, 2, 3])
    log_p = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    per_row = -log_p[np.arange(6), labels]
    one_hot = np.eye(4)[labels]
    for _, mode in NUMPY_TARGETS:
        with ug.use_backend("numpy", mode):
            loss = ug.function(lambda a, b: F.cross_entropy(a, b))
            np.testing.assert_allclose(loss(logits, labels).numpy(), per_row.mean(), rtol=1e-12)
            np.testing.assert_allclose(loss(logits, one_hot).numpy(), per_row.mean(),
                                       rtol=1e-12)
    np.testing.assert_allclose(F.cross_entropy(logits, labels, reduction="none").numpy(),
                               per_row, rtol=1e-12)
    np.testing.assert_allclose(F.cross_entropy(logits, labels, reduction="sum").numpy(),
                               per_row.sum(), rtol=1e-12)


def test_cross_entropy_gradient_against_finite_differences():
    rng = np.random.default_rng(12)
    logits = rng.standard_normal((3, 5))
    labels = np.array([4, 0, 2])
    got = ug.grad(lambda z: F.cross_entropy(z, labels))(logits).numpy()
    expected = _finite_difference(lambda: float(F.cross_entropy(logits, labels).numpy()),
                                  logits)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("target", TARGETS)
def test_cross_entropy_labels_out_of_range_raise_one_error_everywhere(target):
    """Eager and static alike: IndexOutOfRangeError naming the label and the class count
    (eager F.cross_entropy raised a ValueError of its own, static targets this one)."""
    logits = np.zeros((3, 10), np.float32)
    loss = ug.function(lambda z, labels: F.cross_entropy(z, labels))
    for labels, bad in ((np.array([1, 12, 3]), 12), (np.array([-1, 2, 3]), -1)):
        with pytest.raises(ug.IndexOutOfRangeError,
                           match=rf"label {bad} is out of range for 10 classes"):
            run_on(target, loss, logits, labels)


def test_mse_and_accuracy():
    prediction = np.array([[1.0, 2.0], [0.5, -1.0]])
    target = np.array([[0.0, 2.0], [1.5, 1.0]])
    np.testing.assert_allclose(F.mse_loss(prediction, target).numpy(), (1 + 0 + 1 + 4) / 4)
    logits = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    assert float(F.accuracy(logits, np.array([1, 1, 1]))) == pytest.approx(2 / 3)
    assert float(F.accuracy(logits, np.eye(2)[[1, 0, 0]])) == pytest.approx(2 / 3)


# -- Module machinery -----------------------------------------------------------------------
class Net(ug.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = ug.nn.Sequential(ug.nn.Conv2D(1, 2, 3, padding=1),
                                         ug.nn.BatchNorm2D(2), ug.nn.ReLU())
        self.pool = ug.nn.MaxPool2D(2)
        self.fc1 = ug.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc1(ug.nn.functional.flatten(self.pool(self.features(x))))


def test_parameter_names_are_dotted_paths():
    net = Net()
    names = [name for name, _ in net.named_parameters()]
    assert names == ["features.0.weight", "features.0.bias", "features.1.weight",
                     "features.1.bias", "fc1.weight", "fc1.bias"]
    assert [p.name for p in net.parameters()] == names
    assert [name for name, _ in net.named_buffers()] == ["features.1.running_mean",
                                                         "features.1.running_var"]
    assert all(not b.trainable for b in net.buffers())
    assert net.features[0].path == "features.0"


def test_train_and_eval_reach_every_module():
    net = Net()
    assert all(m.training for m in net.modules())
    net.eval()
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())


def test_state_dict_round_trip():
    ug.manual_seed(1)
    source = Net()
    source.features[1].running_mean.set_value([0.3, -0.2])
    state = source.state_dict()
    assert set(state) == {name for name, _ in source.named_parameters()} | \
        {"features.1.running_mean", "features.1.running_var"}
    ug.manual_seed(2)
    target = Net()
    assert not np.array_equal(target.fc1.weight.numpy(), state["fc1.weight"])
    target.load_state_dict(state)
    for key, value in target.state_dict().items():
        np.testing.assert_array_equal(value, state[key])
    x = np.random.default_rng(0).standard_normal((2, 1, 4, 4)).astype(np.float32)
    source.eval(), target.eval()
    np.testing.assert_array_equal(_run(source, x, "static"), _run(target, x, "static"))
    state["fc1.weight"][:] = 0  # a copy: the model does not change
    assert np.any(source.fc1.weight.numpy() != 0)


def test_load_state_dict_errors_name_the_key():
    net = Net()
    state = net.state_dict()
    bad = dict(state, **{"fc1.weight": np.zeros((3, 8), np.float32)})
    with pytest.raises(ValueError, match=r"'fc1.weight' has shape \[3, 8\].*\[8, 3\]"):
        net.load_state_dict(bad)
    missing = {k: v for k, v in state.items() if k != "fc1.bias"}
    with pytest.raises(KeyError, match="missing keys: fc1.bias"):
        net.load_state_dict(missing)
    with pytest.raises(KeyError, match="unexpected keys: extra"):
        net.load_state_dict(dict(state, extra=np.zeros(1)))
    net.load_state_dict(missing, strict=False)  # partial loads are allowed when asked


def test_summary_table():
    table = Net().summary((2, 1, 4, 4), print_fn=None)
    lines = table.splitlines()
    assert lines[0] == 'Model: "Net"'
    row = next(line for line in lines if line.startswith("fc1 (Linear)"))
    assert "[2, 3]" in row and row.rstrip().endswith("27")
    assert any(line.startswith("features.0 (Conv2D)") and "[2, 2, 4, 4]" in line
               for line in lines)
    assert f"Total params: {20 + 4 + 27:,}" in table
    assert "Buffers: 4" in table


def test_setattr_before_init_is_explained():
    class Broken(ug.nn.Module):
        def __init__(self):
            self.fc = ug.nn.Linear(2, 2)

    with pytest.raises(AttributeError, match="super"):
        Broken()


# -- errors users see -----------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["eager", "static"])
def test_linear_wrong_input_width_names_layer_and_shapes(mode):
    net = Net()
    x = np.zeros((2, 1, 6, 6), np.float32)  # 6x6 images give 18 features, fc1 wants 8
    with pytest.raises(ShapeError, match=r"Linear 'fc1'.*in_features = 8.*\[2, 18\]"):
        _run(net, x, mode)


def test_conv2d_wrong_channels():
    with pytest.raises(ShapeError, match=r"Conv2D expects NCHW inputs with 3 channels.*"
                                         r"\[1, 4, 8, 8\]"):
        ug.nn.Conv2D(3, 2, 3)(np.zeros((1, 4, 8, 8), np.float32))


def test_unknown_activation():
    with pytest.raises(ValueError, match="unknown activation 'gelu'"):
        ug.nn.Linear(2, 2, act="gelu")


# -- initializers ---------------------------------------------------------------------------
@pytest.mark.parametrize("initializer, shape, mean, std", [
    (ug.init.normal(0.5, 2.0), (300, 400), 0.5, 2.0),
    (ug.init.uniform(-3.0, 1.0), (300, 400), -1.0, 4 / math.sqrt(12)),
    (ug.init.xavier_normal(), (300, 500), 0.0, math.sqrt(2 / 800)),
    (ug.init.xavier_uniform(), (300, 500), 0.0, math.sqrt(6 / 800) / math.sqrt(3)),
    (ug.init.kaiming_normal(), (64, 32, 5, 5), 0.0, math.sqrt(2 / (32 * 25))),
    (ug.init.kaiming_uniform(), (64, 32, 5, 5), 0.0, math.sqrt(2 / (32 * 25))),
    (ug.init.kaiming_normal(mode="fan_out", nonlinearity="tanh"), (400, 300), 0.0,
     5 / 3 / math.sqrt(300)),
    (ug.init.xavier_normal(), (64, 32, 5, 5), 0.0, math.sqrt(2 / (32 * 25 + 64 * 25))),
])
def test_initializer_statistics(initializer, shape, mean, std):
    values = initializer(shape).astype(np.float64)
    assert values.dtype == np.float64 and values.shape == shape
    assert abs(values.mean() - mean) < 0.03 * std
    assert values.std() == pytest.approx(std, rel=0.03)


def test_uniform_initializers_respect_their_bounds():
    bound = math.sqrt(6 / (20 + 30))
    values = ug.init.xavier_uniform()((20, 30))
    assert values.dtype == np.float32 and np.abs(values).max() <= bound
    assert np.abs(values).max() > 0.9 * bound


def test_constant_initializers():
    np.testing.assert_array_equal(ug.init.zeros()((2, 3)), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(ug.init.ones()((2,), "float64"), np.ones(2))
    np.testing.assert_array_equal(ug.init.constant(0.1)((3,)), np.full(3, 0.1, np.float32))


def test_reseeding_gives_bit_identical_weights():
    def build():
        return Net().state_dict()

    ug.manual_seed(123)
    first = build()
    ug.manual_seed(123)
    second = build()
    ug.manual_seed(124)
    third = build()
    for key in first:
        assert first[key].tobytes() == second[key].tobytes()
    assert first["fc1.weight"].tobytes() != third["fc1.weight"].tobytes()


def test_float32_weights_are_the_float64_draws_rounded():
    ug.manual_seed(5)
    single = ug.init.xavier_normal()((10, 10), "float32")
    ug.manual_seed(5)
    double = ug.init.xavier_normal()((10, 10), "float64")
    np.testing.assert_array_equal(single, double.astype(np.float32))


def test_fans():
    assert ug.init.fans((784, 10)) == (784, 10)
    assert ug.init.fans((2, 3, 3, 3)) == (27, 18)
    assert ug.init.fans((5,)) == (5, 5)


def test_copy_makes_an_independent_twin_in_another_dtype():
    net = Net().eval()
    twin = net.copy("float64")
    assert [n for n, _ in twin.named_parameters()] == [n for n, _ in net.named_parameters()]
    assert all(p.dtype == "float64" for p in [*twin.parameters(), *twin.buffers()])
    assert twin.fc1.weight is not net.fc1.weight and not twin.training
    x = np.random.default_rng(3).standard_normal((2, 1, 4, 4))
    np.testing.assert_allclose(_run(twin, x), _run(net, x.astype(np.float32)), rtol=1e-5,
                               atol=1e-6)
    twin.fc1.bias.set_value(np.ones(3))
    assert not np.any(net.fc1.bias.numpy() == 1)
