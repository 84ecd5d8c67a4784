"""Real architectures through ONNX: ResNet-, VGG-, Inception-, AlexNet-, SqueezeNet-,
ShuffleNet- and DenseNet-style networks written with torch.nn here (small widths, no
downloads), exported by torch.onnx.export (opsets 9 to 17), imported with ug.onnx.load and
run on all 9 targets, against torch itself, ONNX Runtime on the same file and the float64
reference (the imported model's float64 copy on numpy:eager); and on the inference target
onnxruntime:static (the importer's graph re-exported by unigraph's plugin). The ResNet also
passes ug.check with gradients on every target."""

import io
import warnings

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from conftest import INFERENCE_TARGETS, TARGETS, run_on
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


class AlexNet(nn.Module):
    """AlexNet's shape: an 11x11 stride-4 conv, LRN, overlapping 3x3 stride-2 max pools, a
    grouped 5x5 conv (the two-GPU split), three 3x3 convs, a Dropout/Linear classifier."""

    def __init__(self, classes=4):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 11, 4, 2), nn.ReLU(),
            nn.LocalResponseNorm(3, alpha=1e-3, beta=0.75, k=2.0), nn.MaxPool2d(3, 2),
            nn.Conv2d(8, 12, 5, padding=2, groups=2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(12, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 12, 3, padding=1),
            nn.ReLU(), nn.MaxPool2d(3, 2))
        self.classifier = nn.Sequential(nn.Dropout(), nn.Linear(12 * 2 * 2, 16), nn.ReLU(),
                                        nn.Linear(16, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class Fire(nn.Module):
    """SqueezeNet's Fire module: a 1x1 squeeze, then 1x1 and 3x3 expands concatenated."""

    def __init__(self, inputs, squeeze, expand):
        super().__init__()
        self.squeeze = nn.Sequential(nn.Conv2d(inputs, squeeze, 1), nn.ReLU())
        self.e1 = nn.Sequential(nn.Conv2d(squeeze, expand, 1), nn.ReLU())
        self.e3 = nn.Sequential(nn.Conv2d(squeeze, expand, 3, padding=1), nn.ReLU())

    def forward(self, x):
        x = self.squeeze(x)
        return torch.cat([self.e1(x), self.e3(x)], 1)


class SqueezeNet(nn.Module):
    """SqueezeNet 1.1's shape: stem, ceil_mode max pools between Fire modules, a 1x1 conv
    classifier and a global average pool."""

    def __init__(self, classes=5):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, 2), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(8, 4, 6), Fire(12, 4, 6), nn.MaxPool2d(3, 2, ceil_mode=True), Fire(12, 6, 8))
        self.classifier = nn.Sequential(nn.Dropout(), nn.Conv2d(16, classes, 1), nn.ReLU(),
                                        nn.AdaptiveAvgPool2d(1))

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


def channel_shuffle(x, groups):
    """ShuffleNet's shuffle: (n, g, c/g, h, w) -> transpose -> (n, c, h, w), Reshapes whose
    shape comes from Shape of the input in the export."""
    n, c, h, w = x.shape
    return x.view(n, groups, c // groups, h, w).transpose(1, 2).reshape(n, c, h, w)


class ShuffleUnit(nn.Module):
    """ShuffleNet v1's unit: grouped 1x1 conv, channel shuffle, depthwise 3x3 conv, grouped
    1x1 conv; added to the input, or (stride 2) concatenated with its 3x3 average pool."""

    def __init__(self, inputs, outputs, stride, groups=2):
        super().__init__()
        self.stride, self.groups = stride, groups
        mid = outputs // 4
        out = outputs - inputs if stride == 2 else outputs
        self.g1 = nn.Sequential(nn.Conv2d(inputs, mid, 1, groups=groups, bias=False),
                                nn.BatchNorm2d(mid), nn.ReLU())
        self.dw = nn.Sequential(nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False),
                                nn.BatchNorm2d(mid))
        self.g2 = nn.Sequential(nn.Conv2d(mid, out, 1, groups=groups, bias=False),
                                nn.BatchNorm2d(out))

    def forward(self, x):
        y = self.g2(self.dw(channel_shuffle(self.g1(x), self.groups)))
        if self.stride == 2:
            return torch.relu(torch.cat([nn.functional.avg_pool2d(x, 3, 2, 1), y], 1))
        return torch.relu(x + y)


class ShuffleNet(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.units = nn.Sequential(ShuffleUnit(8, 16, 2), ShuffleUnit(16, 16, 1),
                                   ShuffleUnit(16, 32, 2))
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        return self.fc(self.units(self.stem(x)).mean((2, 3)))


class DenseLayer(nn.Module):
    """DenseNet-BC's layer: BN-ReLU-1x1 conv-BN-ReLU-3x3 conv, concatenated to its input
    (BN before the conv: no folding, BatchNormalization nodes stay)."""

    def __init__(self, inputs, growth):
        super().__init__()
        self.body = nn.Sequential(
            nn.BatchNorm2d(inputs), nn.ReLU(), nn.Conv2d(inputs, 2 * growth, 1, bias=False),
            nn.BatchNorm2d(2 * growth), nn.ReLU(),
            nn.Conv2d(2 * growth, growth, 3, padding=1, bias=False))

    def forward(self, x):
        return torch.cat([x, self.body(x)], 1)


class DenseNet(nn.Module):
    """Two dense blocks of three layers, a transition (BN-ReLU-1x1 conv-2x2 average pool)
    between them, BN-ReLU-global average pool-Linear at the end."""

    def __init__(self, growth=4, classes=3):
        super().__init__()
        channels, layers = 8, [nn.Conv2d(3, 8, 3, padding=1, bias=False)]
        for block in range(2):
            for _ in range(3):
                layers.append(DenseLayer(channels, growth))
                channels += growth
            if block == 0:
                layers += [nn.BatchNorm2d(channels), nn.ReLU(),
                           nn.Conv2d(channels, channels // 2, 1, bias=False), nn.AvgPool2d(2)]
                channels //= 2
        layers += [nn.BatchNorm2d(channels), nn.ReLU(), nn.AdaptiveAvgPool2d(1)]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(channels, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


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
    alexnet, squeezenet = AlexNet().eval(), SqueezeNet().eval()
    shufflenet = randomize_batch_norms(ShuffleNet()).eval()
    densenet = randomize_batch_norms(DenseNet()).eval()
    x95, x32 = images(2, 3, 95, 95), images(2, 3, 32, 32)
    return {
        "resnet_folded": (resnet, exported(resnet, x16), x16),
        "resnet_batch_norm": (resnet, exported(resnet, x16, fold_batch_norm=False, opset=17),
                              x16),
        "vgg": (vgg, exported(vgg, x12, opset=11), x12),
        "inception": (inception, exported(inception, x24, opset=9), x24),
        "alexnet": (alexnet, exported(alexnet, x95, opset=9), x95),
        "squeezenet": (squeezenet, exported(squeezenet, x32, opset=11), x32),
        "shufflenet": (shufflenet, exported(shufflenet, x32, opset=13), x32),
        "densenet": (densenet, exported(densenet, x12, fold_batch_norm=False, opset=17), x12),
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
    convs = {name: [attributes(n) for n in model.graph.node if n.op_type == "Conv"]
             for name, (_, model, _) in MODELS.items()}
    assert {"Conv", "MaxPool", "AveragePool", "Gemm"} <= ops["alexnet"]
    assert {"kernel_shape": [11, 11], "strides": [4, 4]}.items() <= convs["alexnet"][0].items()
    assert any(conv.get("group") == 2 for conv in convs["alexnet"])
    assert all(attributes(n)["kernel_shape"] == [3, 3] and attributes(n)["strides"] == [2, 2]
               for n in MODELS["alexnet"][1].graph.node if n.op_type == "MaxPool")  # overlap
    assert {"Concat", "GlobalAveragePool", "MaxPool"} <= ops["squeezenet"]
    assert {"Reshape", "Transpose", "Shape", "Concat", "AveragePool"} <= ops["shufflenet"]
    groups = {conv.get("group", 1) for conv in convs["shufflenet"]}
    assert {2, 4, 8} <= groups  # grouped 1x1 convs and depthwise 3x3 convs (4 and 8 wide)
    assert "BatchNormalization" not in ops["shufflenet"]  # folded into the convs
    assert {"BatchNormalization", "Concat", "AveragePool", "GlobalAveragePool"} <= ops[
        "densenet"]


def attributes(node) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


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


@pytest.mark.parametrize("target", INFERENCE_TARGETS)
def test_architectures_run_on_the_inference_targets(expected, target):
    """The importer's graph of every model, re-exported by the onnxruntime plugin and run
    there, agrees with torch, ONNX Runtime on the original file and the float64 reference."""
    for name, (loaded, native, ort, wide) in expected.items():
        got = run_on(target, loaded, MODELS[name][2])
        close(got, native, f"{name} on {target} vs torch")
        close(got, ort, f"{name} on {target} vs ORT")
        close(got, wide, f"{name} on {target} vs float64")


def test_the_shuffle_takes_any_batch_through_its_shape_subgraph(expected):
    """ShuffleNet's Reshapes take their shape from Shape(x) at run time: another batch size
    still runs (traced per size) and agrees with ONNX Runtime."""
    loaded, *_ = expected["shufflenet"]
    session = onnxruntime.InferenceSession(MODELS["shufflenet"][1].SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    x = images(3, 3, 32, 32)
    close(run_on("paddle:static", loaded, x), session.run(None, {"x": x})[0], "batch 3")
