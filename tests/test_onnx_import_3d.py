"""3-D Conv, ConvTranspose, MaxPool and AveragePool through ug.onnx.load, and pool dilations
(1-D, 2-D, 3-D), on all 9 targets: single-node models built with onnx.helper, each checked
against ONNX Runtime on the same file and against a float64 NumPy reference written here
from ONNX's definitions (window taps o * stride + k * dilation after the pads, ceil_mode's
last window starting inside the image or its begin pad, the average's divisor); gradients
through a 3-D conv/pool chain against torch's float64 autograd; a small 3-D CNN exported
by torch.onnx.export against torch."""

import io
import itertools
import warnings

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from conftest import INFERENCE_TARGETS, TARGETS, run_on
from onnx import helper, numpy_helper

import unigraph as ug
import unigraph.onnx

RNG = np.random.default_rng(183)


def one_node(op, inputs, initializers=None, opset=19, **attrs):
    """A model of one `op` node: `inputs` {name: array} fed at run time, `initializers`
    {name: array} stored in the file."""
    initializers = initializers or {}
    node = helper.make_node(op, [*inputs, *initializers], ["y"], name=op.lower(), **attrs)
    infos = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
             for n, a in inputs.items()]
    graph = helper.make_graph([node], op.lower(), infos, [onnx.ValueInfoProto(name="y")],
                              [numpy_helper.from_array(a, n) for n, a in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model, full_check=True)
    return model


def floats(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# -- the float64 reference, from ONNX's definitions -----------------------------------------
def out_size(size, k, s, d, begin, end, ceil=False):
    window = (k - 1) * d + 1
    span = size + begin + end - window
    if not ceil:
        return span // s + 1
    out = -(-span // s) + 1
    return out - 1 if (out - 1) * s >= size + begin else out


def windows(xp, out, kernel, strides, dilations):
    """[N, C, *out, *kernel] taps of the padded xp: xp[..., o * s + k * d, ...]."""
    n = len(kernel)
    for axis in range(n):
        index = np.arange(out[axis])[:, None] * strides[axis] \
            + np.arange(kernel[axis])[None, :] * dilations[axis]
        xp = np.take(xp, index, axis=2 + 2 * axis)
    order = [0, 1] + [2 + 2 * a for a in range(n)] + [3 + 2 * a for a in range(n)]
    return xp.transpose(order)


def pool_reference(x, kind, kernel, strides=None, pads=None, dilations=None, ceil=False,
                   include=False):
    n = len(kernel)
    strides, dilations = strides or [1] * n, dilations or [1] * n
    pads = pads or [0] * 2 * n
    begin, end, sizes = pads[:n], pads[n:], x.shape[2:]
    out = [out_size(*a, ceil) for a in zip(sizes, kernel, strides, dilations, begin, end)]
    extra = [max(0, (o - 1) * s + (k - 1) * d + 1 - (size + b + e)) for o, s, k, d, size, b, e
             in zip(out, strides, kernel, dilations, sizes, begin, end)]
    widths = [(0, 0), (0, 0)] + [(b, e + m) for b, e, m in zip(begin, end, extra)]
    x = x.astype(np.float64)
    axes = tuple(range(-n, 0))
    if kind == "MaxPool":
        padded = np.pad(x, widths, constant_values=-np.inf)
        return windows(padded, out, kernel, strides, dilations).max(axis=axes)
    total = windows(np.pad(x, widths), out, kernel, strides, dilations).sum(axis=axes)
    counted = np.pad(np.ones(sizes), list(zip(begin, end)), constant_values=float(include))
    counted = np.pad(counted, [(0, m) for m in extra])[None, None]
    return total / windows(counted, out, kernel, strides, dilations).sum(axis=axes)


def conv_reference(x, w, bias=None, strides=None, pads=None, dilations=None, group=1):
    n = w.ndim - 2
    strides, dilations = strides or [1] * n, dilations or [1] * n
    pads = pads or [0] * 2 * n
    kernel = w.shape[2:]
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + list(zip(pads[:n], pads[n:])))
    out = [out_size(size, k, s, d, 0, 0) for size, k, s, d
           in zip(xp.shape[2:], kernel, strides, dilations)]
    taps = windows(xp, out, kernel, strides, dilations)  # [N, C, *out, *kernel]
    cg, og = w.shape[1], w.shape[0] // group
    parts = [np.tensordot(taps[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og].astype(np.float64),
                          axes=([1, *range(2 + n, 2 + 2 * n)], [1, *range(2, 2 + n)]))
             for g in range(group)]  # each [N, *out, O/group]
    y = np.moveaxis(np.concatenate(parts, axis=-1), -1, 1)
    return y if bias is None else y + bias.reshape((-1,) + (1,) * n)


def conv_transpose_reference(x, w, bias=None, strides=None, pads=None, dilations=None,
                             output_padding=None, group=1):
    """out[n, g * og + o, i * s + k * d] += x[n, g * cg + c, i] * w[g * cg + c, o, k], then
    output_padding zeros after the end, then the pads cropped off."""
    n = w.ndim - 2
    strides, dilations = strides or [1] * n, dilations or [1] * n
    pads, extra = pads or [0] * 2 * n, output_padding or [0] * n
    kernel, sizes = w.shape[2:], x.shape[2:]
    cg, og = x.shape[1] // group, w.shape[1]
    full = [(i - 1) * s + (k - 1) * d + 1 + e for i, s, k, d, e
            in zip(sizes, strides, kernel, dilations, extra)]
    out = np.zeros((x.shape[0], og * group, *full))
    x, w = x.astype(np.float64), w.astype(np.float64)
    for i in itertools.product(*map(range, sizes)):
        for k in itertools.product(*map(range, kernel)):
            at = tuple(a * s + b * d for a, b, s, d in zip(i, k, strides, dilations))
            for g in range(group):
                contribution = x[(slice(None), slice(g * cg, (g + 1) * cg)) + i] \
                    @ w[(slice(g * cg, (g + 1) * cg), slice(None)) + k]
                out[(slice(None), slice(g * og, (g + 1) * og)) + at] += contribution
    crop = tuple(slice(b, f - e) for b, e, f in zip(pads[:n], pads[n:], full))
    out = out[(slice(None), slice(None)) + crop]
    return out if bias is None else out + bias.reshape((-1,) + (1,) * n)


# -- the cases: (model, inputs, the float64 reference's output) -----------------------------
def conv_case(x, w, bias=None, ref_pads=None, **attrs):
    inits = {"w": w, **({"b": bias} if bias is not None else {})}
    ref = conv_reference(x, w, bias, attrs.get("strides"), ref_pads or attrs.get("pads"),
                         attrs.get("dilations"), attrs.get("group", 1))
    return one_node("Conv", {"x": x}, inits, **attrs), [x], ref


def conv_transpose_case(x, w, bias=None, ref_pads=None, **attrs):
    inits = {"w": w, **({"b": bias} if bias is not None else {})}
    ref = conv_transpose_reference(x, w, bias, attrs.get("strides"),
                                   ref_pads or attrs.get("pads"), attrs.get("dilations"),
                                   attrs.get("output_padding"), attrs.get("group", 1))
    return one_node("ConvTranspose", {"x": x}, inits, **attrs), [x], ref


def pool_case(op, x, ref_pads=None, **attrs):
    ref = pool_reference(x, op, attrs["kernel_shape"], attrs.get("strides"),
                         ref_pads or attrs.get("pads"), attrs.get("dilations"),
                         bool(attrs.get("ceil_mode")), bool(attrs.get("count_include_pad")))
    return one_node(op, {"x": x}, **attrs), [x], ref


def global_case(op, x):
    reduce = np.max if op == "GlobalMaxPool" else np.mean
    return one_node(op, {"x": x}), [x], reduce(x.astype(np.float64), axis=(2, 3, 4),
                                                keepdims=True)


CASES = {
    # 3-D Conv: groups, per-axis strides and dilations, asymmetric pads, bias.
    "conv3d_grouped": conv_case(
        floats(2, 4, 5, 6, 5), floats(6, 2, 3, 2, 3), floats(6), group=2,
        strides=[2, 1, 2], dilations=[1, 2, 1], pads=[1, 0, 1, 0, 1, 1]),
    # auto_pad SAME_UPPER with stride 2 over odd sizes: the odd pad cell goes after.
    "conv3d_same_upper": conv_case(
        floats(1, 3, 5, 4, 5), floats(2, 3, 3, 3, 2), auto_pad="SAME_UPPER",
        strides=[2, 2, 2], ref_pads=[1, 0, 0, 1, 1, 1]),
    # SAME_LOWER: the odd pad cell goes before (ORT refuses SAME with dilations).
    "conv3d_same_lower": conv_case(
        floats(1, 2, 4, 5, 3), floats(3, 2, 2, 2, 3), auto_pad="SAME_LOWER",
        ref_pads=[1, 1, 1, 0, 0, 1]),
    "conv3d_valid_depthwise": conv_case(
        floats(1, 3, 4, 5, 5), floats(3, 1, 2, 3, 3), floats(3), auto_pad="VALID", group=3),
    # 1-D Conv (as 2-D with a trailing size-1 dim).
    "conv1d": conv_case(floats(2, 3, 9), floats(4, 3, 3), floats(4), strides=[2],
                        dilations=[2], pads=[2, 1]),
    # 3-D ConvTranspose: groups, strides, dilations, asymmetric pads, output_padding, bias.
    "conv_transpose3d": conv_transpose_case(
        floats(2, 4, 3, 4, 3), floats(4, 2, 2, 3, 2), floats(4), group=2,
        strides=[2, 1, 2], dilations=[1, 2, 1], pads=[1, 0, 0, 0, 1, 1],
        output_padding=[1, 0, 1]),
    # SAME_UPPER: output = input * stride; total pad (k - 1) + 1 - s + ... split, odd after.
    "conv_transpose3d_same_upper": conv_transpose_case(
        floats(1, 2, 3, 2, 3), floats(2, 3, 3, 2, 2), auto_pad="SAME_UPPER",
        strides=[2, 2, 1], ref_pads=[0, 0, 0, 1, 0, 1]),
    # 3-D MaxPool: ceil_mode, asymmetric pads, per-axis strides and dilations.
    "max_pool3d_ceil": pool_case(
        "MaxPool", floats(2, 3, 6, 7, 5), kernel_shape=[2, 3, 2], strides=[2, 1, 2],
        pads=[1, 1, 0, 0, 1, 1], ceil_mode=1, dilations=[1, 1, 2]),
    "max_pool3d_same_upper": pool_case(
        "MaxPool", floats(1, 2, 5, 5, 4), kernel_shape=[3, 2, 3], strides=[2, 2, 1],
        auto_pad="SAME_UPPER", ref_pads=[1, 0, 1, 1, 1, 1]),
    # 3-D AveragePool: the divisor counts pads (count_include_pad=1) but never ceil cells.
    "avg_pool3d_include_pad_ceil": pool_case(
        "AveragePool", floats(1, 2, 5, 6, 7), kernel_shape=[3, 2, 3], strides=[2, 2, 2],
        pads=[1, 0, 1, 1, 1, 0], ceil_mode=1, count_include_pad=1),
    "avg_pool3d_exclude_pad": pool_case(
        "AveragePool", floats(2, 3, 4, 5, 6), kernel_shape=[2, 3, 3], strides=[1, 2, 2],
        pads=[1, 1, 1, 0, 1, 1]),
    "avg_pool3d_dilated": pool_case(
        "AveragePool", floats(1, 2, 7, 6, 6), kernel_shape=[2, 2, 3], strides=[2, 1, 2],
        dilations=[2, 3, 1], pads=[1, 0, 1, 1, 1, 0], count_include_pad=1),
    # Pool dilations on 2-D and 1-D pools, with ceil_mode and pads.
    "max_pool2d_dilated_ceil": pool_case(
        "MaxPool", floats(2, 3, 9, 8), kernel_shape=[3, 2], strides=[2, 2],
        dilations=[2, 3], pads=[1, 0, 1, 1], ceil_mode=1),
    "avg_pool2d_dilated_ceil": pool_case(
        "AveragePool", floats(1, 2, 9, 8), kernel_shape=[2, 3], strides=[2, 2],
        dilations=[3, 2], pads=[1, 2, 0, 1], ceil_mode=1),
    "avg_pool1d_dilated": pool_case(
        "AveragePool", floats(2, 3, 10), kernel_shape=[3], strides=[2], dilations=[2],
        pads=[1, 2], count_include_pad=1),
    "max_pool1d_dilated": pool_case(
        "MaxPool", floats(2, 3, 10), kernel_shape=[3], strides=[1], dilations=[3], pads=[2, 0]),
    "global_average_pool3d": global_case("GlobalAveragePool", floats(2, 3, 3, 4, 5)),
    "global_max_pool3d": global_case("GlobalMaxPool", floats(2, 3, 3, 4, 5)),
}


def onnxruntime_output(model, inputs):
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: x for i, x in zip(session.get_inputs(), inputs)})[0]


def close(got, want, what, rtol=1e-4):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-5 * scale, err_msg=what)


def test_the_reference_agrees_with_onnxruntime():
    """The test's own float64 reference is ONNX's meaning: it matches ORT on every case."""
    for name, (model, inputs, want) in CASES.items():
        close(onnxruntime_output(model, inputs), want, f"{name}: ORT vs the reference")


@pytest.fixture(scope="module")
def imported():
    return {name: ug.onnx.load(model) for name, (model, _, _) in CASES.items()}


@pytest.mark.parametrize("target", TARGETS)
def test_3d_and_dilated_nodes_agree_with_onnxruntime_and_the_reference(imported, target):
    failures = []  # every case is checked, so one failure does not hide another
    for name, (model, inputs, want) in CASES.items():
        got = run_on(target, imported[name], *inputs)
        for expected, what in ((onnxruntime_output(model, inputs), "ORT"),
                               (want, "the float64 reference")):
            try:
                close(got, expected, f"{name} on {target} vs {what}")
            except AssertionError as error:
                failures.append(str(error).strip().splitlines()[:6])
    assert not failures, "\n".join("\n".join(lines) for lines in failures)


@pytest.mark.parametrize("target", INFERENCE_TARGETS)
def test_3d_and_dilated_nodes_run_on_the_inference_targets(imported, target):
    for name, (_, inputs, want) in CASES.items():
        close(run_on(target, imported[name], *inputs), want, f"{name} on {target}")


# -- gradients through a 3-D chain, against torch's float64 autograd ------------------------
def chain():
    """Conv (grouped, strided, dilated, asymmetric pads) -> MaxPool (ceil_mode, pads) ->
    ConvTranspose (strided, output_padding) -> AveragePool (pads not counted), all 3-D."""
    w1, b1, w2 = floats(4, 1, 2, 3, 2), floats(4), floats(4, 3, 2, 2, 3)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c"], group=2, strides=[1, 2, 1],
                         dilations=[2, 1, 1], pads=[1, 1, 0, 0, 1, 1]),
        helper.make_node("MaxPool", ["c"], ["m"], kernel_shape=[2, 2, 3], strides=[2, 1, 2],
                         pads=[1, 0, 1, 1, 0, 1], ceil_mode=1),
        helper.make_node("ConvTranspose", ["m", "w2"], ["t"], strides=[2, 1, 2],
                         output_padding=[1, 0, 0], pads=[0, 1, 1, 0, 0, 1]),
        helper.make_node("AveragePool", ["t"], ["y"], kernel_shape=[3, 2, 2],
                         strides=[2, 2, 1], pads=[1, 0, 1, 1, 0, 1]),
    ]
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                       [2, 2, 6, 7, 5])],
        [onnx.ValueInfoProto(name="y")],
        [numpy_helper.from_array(a, n) for n, a in (("w1", w1), ("b1", b1), ("w2", w2))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model, full_check=True)
    return model, {"w1": w1, "b1": b1, "w2": w2}


def torch_chain(x, w1, b1, w2):
    """The same chain in torch: pads that torch takes only symmetric are explicit F.pads."""
    import torch.nn.functional as F

    # F.pad's widths run from the last axis: (W before, W after, H ..., D ...).
    c = F.conv3d(F.pad(x, (0, 1, 1, 1, 1, 0)), w1, b1, stride=(1, 2, 1), dilation=(2, 1, 1),
                 groups=2)
    m = F.max_pool3d(c, (2, 2, 3), (2, 1, 2), padding=(1, 0, 1), ceil_mode=True)
    t = F.conv_transpose3d(m, w2, stride=(2, 1, 2), output_padding=(1, 0, 0))
    t = t[:, :, :, 1:, 1:t.shape[4] - 1]  # ConvTranspose pads [0, 1, 1, 0, 0, 1]
    # AveragePool pads [1, 0, 1, 1, 0, 1], not counted: a sum over zero pads / a count.
    pad = (1, 1, 0, 0, 1, 1)
    total = F.avg_pool3d(F.pad(t, pad), (3, 2, 2), (2, 2, 1), divisor_override=1)
    count = F.avg_pool3d(F.pad(torch.ones_like(t), pad), (3, 2, 2), (2, 2, 1),
                         divisor_override=1)
    return total / count


def test_the_torch_chain_is_the_onnx_chain():
    model, weights = chain()
    x = floats(2, 2, 6, 7, 5)
    want = torch_chain(*(torch.from_numpy(a).double() for a in (x, *weights.values())))
    close(onnxruntime_output(model, [x]), want.numpy(), "ORT vs torch float64")


@pytest.mark.parametrize("target", TARGETS)
def test_gradients_through_3d_convs_and_pools_match_torch(target):
    model, weights = chain()
    x = floats(2, 2, 6, 7, 5)
    leaves = [torch.from_numpy(a).double().requires_grad_() for a in (x, *weights.values())]
    out = torch_chain(*leaves)
    cotangent = RNG.standard_normal(tuple(out.shape))
    (out * torch.from_numpy(cotangent)).sum().backward()
    imported = ug.onnx.load(model)
    weight = cotangent.astype(np.float32)
    params = imported.parameters()
    assert sorted(p.name for p in params) == sorted(weights)

    def loss(x):
        return ug.sum(imported(x) * weight)

    got_x = run_on(target, ug.grad(loss), x)
    got_params = run_on(target, ug.grad(lambda: loss(x), wrt=params))
    close(got_x, leaves[0].grad.numpy(), f"d/dx on {target}", rtol=2e-4)
    expected = dict(zip(weights, leaves[1:]))
    for param, got in zip(params, got_params):
        close(got, expected[param.name].grad.numpy(), f"d/d{param.name} on {target}",
              rtol=2e-4)


# -- a small 3-D CNN exported by torch -----------------------------------------------------
class SmallCNN3D(torch.nn.Module):
    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.features = nn.Sequential(
            nn.Conv3d(2, 6, 3, padding=1), nn.BatchNorm3d(6), nn.ReLU(),
            nn.MaxPool3d(2, ceil_mode=True),
            nn.Conv3d(6, 8, (2, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1), groups=2),
            nn.BatchNorm3d(8), nn.ReLU(),
            nn.AvgPool3d(2, stride=(1, 2, 2), padding=1, count_include_pad=False))
        self.head = nn.Linear(8 * 3 * 2 * 2, 3)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


@pytest.fixture(scope="module")
def exported_cnn():
    torch.manual_seed(3)
    net = SmallCNN3D().eval()
    for module in net.modules():
        if isinstance(module, torch.nn.BatchNorm3d):
            size = module.num_features
            module.running_mean.copy_(torch.from_numpy(RNG.standard_normal(size) * 0.1))
            module.running_var.copy_(torch.from_numpy(RNG.uniform(0.5, 2.0, size)))
            module.weight.data.copy_(torch.from_numpy(RNG.uniform(0.5, 1.5, size)))
            module.bias.data.copy_(torch.from_numpy(RNG.standard_normal(size) * 0.1))
    x = floats(2, 2, 5, 7, 6)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.from_numpy(x),), buffer, dynamo=False, opset_version=13,
                          input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
                          training=torch.onnx.TrainingMode.PRESERVE)
    model = onnx.load_from_string(buffer.getvalue())
    onnx.checker.check_model(model, full_check=True)
    types = {node.op_type for node in model.graph.node}
    assert {"Conv", "BatchNormalization", "Relu", "MaxPool", "AveragePool"} <= types
    with torch.no_grad():
        want = net(torch.from_numpy(x)).numpy()
    return ug.onnx.load(model), model, x, want


@pytest.mark.parametrize("target", TARGETS + INFERENCE_TARGETS)
def test_a_torch_exported_3d_cnn_agrees_with_torch(exported_cnn, target):
    imported, model, x, want = exported_cnn
    close(onnxruntime_output(model, [x]), want, "ORT vs torch")
    close(run_on(target, imported, x), want, f"3-D CNN on {target} vs torch", rtol=2e-4)
    close(run_on(target, imported, x[:1]), want[:1], f"batch 1 on {target} vs torch",
          rtol=2e-4)


def test_ug_check_passes_on_the_3d_cnn_with_gradients(exported_cnn):
    """ug.check compares the outputs and every parameter's gradient on every target with
    the float64 reference, within budgets derived from the conv fan-in (here the 2-D conv's
    kd * C / groups * kh * kw, the 3-D conv's own)."""
    imported, _, x, _ = exported_cnn
    report = ug.check(imported, x, targets=",".join(TARGETS))
    report.assert_ok()
    assert all(target in str(report) for target in TARGETS)


@pytest.mark.parametrize("target", TARGETS)
def test_a_3d_conv_whose_depth_and_batch_are_symbolic_runs_for_each_size(target):
    """The 3-D composition needs the depth at trace time: static targets trace per size."""
    w = floats(3, 2, 2, 2, 2)
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv3d_1", pads=[1] * 6)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                    ["batch", 2, "depth", 4, 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w")])
    model = ug.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    for shape in ((1, 2, 3, 4, 4), (2, 2, 5, 4, 4)):
        x = floats(*shape)
        close(run_on(target, model, x), conv_reference(x, w, pads=[1] * 6),
              f"depth {shape[2]} on {target}")
