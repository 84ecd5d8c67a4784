"""Real architectures through ONNX: ResNet-, VGG- and Inception-style networks written with
torch.nn here (small widths, no downloads), exported by torch.onnx.export, imported with
ug.onnx.load and run on all 9 targets, against torch itself, ONNX Runtime on the same file
and the float64 reference (the imported model's float64 copy on numpy:eager). The ResNet
also passes ug.check with gradients on every target."""

import io
import warnings

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from conftest import TARGETS, run_on
from torch import nn

import unigraph as ug
import unigraph.onnx

RNG = np.random.default_rng(18)


class BasicBlock(nn.Module):
    """ResNet-18's block: two 3x3 conv + BN, a 1x1 conv + BN shortcut where the shape
    changes."""

    def __init__(self, inputs, outputs, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.shortcut = nn.Sequential()
        if stride != 1 or inputs != outputs:
            self.shortcut = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, bias=False),
                                          nn.BatchNorm2d(outputs))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, width=8, classes=5):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(BasicBlock(width, width, 1), BasicBlock(width, width, 1),
                                    BasicBlock(width, 2 * width, 2),
                                    BasicBlock(2 * width, 2 * width, 1))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


class VGG(nn.Module):
    """Two VGG stages (conv-act-conv-act-maxpool with ceil_mode), PReLU, a classifier with
    Dropout."""

    def __init__(self, classes=4):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1),
            nn.PReLU(8), nn.MaxPool2d(2, 2, ceil_mode=True),
            nn.Conv2d(8, 12, 3, padding=1), nn.ELU(), nn.Conv2d(12, 12, 3, padding=1),
            nn.ReLU(), nn.MaxPool2d(2, 2, ceil_mode=True))
        self.classifier = nn.Sequential(nn.Linear(12 * 3 * 3, 16), nn.GELU(), nn.Dropout(0.5),
                                        nn.Linear(16, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class Inception(nn.Module):
    """GoogLeNet's stem (conv, maxpool with ceil_mode, LRN) and one Inception block: 1x1,
    1x1 -> 3x3, 1x1 -> 5x5, 3x3 maxpool -> 1x1, concatenated; then AvgPool (ceil_mode)."""

    def __init__(self, classes=3):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 5, 2, 2), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, ceil_mode=True), nn.LocalResponseNorm(5))
        self.b1 = nn.Sequential(nn.Conv2d(8, 4, 1), nn.ReLU())
        self.b2 = nn.Sequential(nn.Conv2d(8, 4, 1), nn.ReLU(), nn.Conv2d(4, 6, 3, padding=1),
                                nn.ReLU())
        self.b3 = nn.Sequential(nn.Conv2d(8, 2, 1), nn.ReLU(), nn.Conv2d(2, 4, 5, padding=2),
                                nn.ReLU())
        self.b4 = nn.Sequential(nn.MaxPool2d(3, 1, 1), nn.Conv2d(8, 4, 1), nn.ReLU())
        self.pool = nn.AvgPool2d(3, 2, ceil_mode=True)
        self.fc = nn.Linear(18 * 3 * 3, classes)

    def forward(self, x):
        x = self.stem(x)
        x = torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)
        return self.fc(torch.flatten(self.pool(x), 1))


def randomize_batch_norms(net):
    """Running statistics away from (0, 1), so a wrong BN import cannot pass."""
    for module in net.modules():
        if isinstance(module, nn.BatchNorm2d):
            size = module.num_features
            module.running_mean.copy_(torch.from_numpy(RNG.standard_normal(size) * 0.1))
            module.running_var.copy_(torch.from_numpy(RNG.uniform(0.5, 1.5, size)))
            module.weight.data.copy_(torch.from_numpy(RNG.uniform(0.5, 1.5, size)))
            module.bias.data.copy_(torch.from_numpy(RNG.standard_normal(size) * 0.1))
    return net


def exported(net, x, fold_batch_norm=True, opset=13):
    """torch.onnx.export of `net` (eval mode) on `x`, batch dim symbolic; BN folded into the
    convs (TrainingMode.EVAL) or kept as BatchNormalization nodes (PRESERVE)."""
    buffer = io.BytesIO()
    mode = torch.onnx.TrainingMode.EVAL if fold_batch_norm else torch.onnx.TrainingMode.PRESERVE
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net.eval(), (torch.from_numpy(x),), buffer, dynamo=False,
                          opset_version=opset, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, training=mode)
    model = onnx.load_from_string(buffer.getvalue())
    onnx.checker.check_model(model, full_check=True)
    return model


def images(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def build():
    torch.manual_seed(0)
    resnet = randomize_batch_norms(ResNet()).eval()
    x16 = images(2, 3, 16, 16)
    vgg, inception = VGG().eval(), Inception().eval()
    x12, x24 = images(2, 3, 12, 12), images(2, 3, 24, 24)
    return {
        "resnet_folded": (resnet, exported(resnet, x16), x16),
        "resnet_batch_norm": (resnet, exported(resnet, x16, fold_batch_norm=False, opset=17),
                              x16),
        "vgg": (vgg, exported(vgg, x12, opset=11), x12),
        "inception": (inception, exported(inception, x24, opset=9), x24),
    }


MODELS = build()


def close(got, want, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5 * scale, err_msg=what)


@pytest.fixture(scope="module")
def expected():
    """(torch's output, ORT's output, the float64 reference) per model."""
    out = {}
    for name, (net, model, x) in MODELS.items():
        with torch.no_grad():
            native = net(torch.from_numpy(x)).numpy()
        session = onnxruntime.InferenceSession(model.SerializeToString(),
                                               providers=["CPUExecutionProvider"])
        loaded = ug.onnx.load(model)
        wide = run_on("numpy:eager", loaded.copy("float64"), x.astype(np.float64))
        out[name] = (loaded, native, session.run(None, {"x": x})[0], wide)
    return out


def test_the_exports_use_the_ops_they_are_meant_to_cover():
    ops = {name: {n.op_type for n in model.graph.node} for name, (_, model, _) in MODELS.items()}
    assert "BatchNormalization" not in ops["resnet_folded"]
    assert "BatchNormalization" in ops["resnet_batch_norm"]
    assert {"PRelu", "Elu", "MaxPool", "Gemm"} <= ops["vgg"]
    assert {"Concat", "AveragePool", "Pad"} <= ops["inception"]
    pools = [n for n in MODELS["vgg"][1].graph.node if n.op_type == "MaxPool"]
    assert all(a.i == 1 for n in pools for a in n.attribute if a.name == "ceil_mode")
    # LocalResponseNorm at opset 9: a 3-D AveragePool over channels.
    assert any(len(a.ints) == 3 for n in MODELS["inception"][1].graph.node
               if n.op_type == "AveragePool" for a in n.attribute if a.name == "kernel_shape")


@pytest.mark.parametrize("target", TARGETS)
def test_architectures_agree_with_torch_onnxruntime_and_the_reference(expected, target):
    """(The ResNet with BatchNormalization nodes runs on every target in the check below.)"""
    for name, (loaded, native, ort, wide) in expected.items():
        if name == "resnet_batch_norm" and not target.startswith("numpy"):
            continue
        x = MODELS[name][2]
        got = run_on(target, loaded, x)
        close(got, native, f"{name} on {target} vs torch")
        close(got, ort, f"{name} on {target} vs ORT")
        close(got, wide, f"{name} on {target} vs float64")


def test_the_symbolic_batch_dim_takes_any_batch(expected):
    """The batch dim is a dim_param in the file: the model runs on other batch sizes too."""
    loaded, *_ = expected["resnet_folded"]
    assert loaded.input_shapes == [(None, 3, 16, 16)]
    session = onnxruntime.InferenceSession(MODELS["resnet_folded"][1].SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    for batch in (1, 3):
        x = images(batch, 3, 16, 16)
        close(run_on("torch:static", loaded, x), session.run(None, {"x": x})[0],
              f"batch {batch}")


def test_resnet_passes_check_with_gradients_on_every_target(expected):
    """Outputs and every parameter's gradient (through 10 convs, BN kept) against the
    float64 reference, within the budgets derived from each op's accumulation length."""
    loaded, *_ = expected["resnet_batch_norm"]
    report = ug.check(loaded, MODELS["resnet_batch_norm"][2], targets=",".join(TARGETS))
    report.assert_ok()
    assert all(target in str(report) for target in TARGETS)
