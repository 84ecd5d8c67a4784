"""ug.onnx.load: ONNX models built here by ONNX's helper API (an MLP, a small CNN, a model
with If and Loop) and models written by unigraph's own exporter, imported and run on all 9
targets, against ONNX Runtime on the same file and against the float64 reference (the
imported model's float64 copy on numpy:eager). Unsupported ops: one error naming them all."""

import numpy as np
import onnx
import onnxruntime
import pytest
from conftest import TARGETS, run_on
from export_cases import SmallCNN, shrink
from onnx import TensorProto, helper, numpy_helper

import unigraph as ug
import unigraph.onnx
from unigraph.onnx import OnnxImportError

RNG = np.random.default_rng(7)
FLOAT = TensorProto.FLOAT


def weights(*shape):
    return (RNG.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)


def make_model(nodes, inputs, outputs, initializers, opset=17, name="model"):
    graph = helper.make_graph(nodes, name, inputs, outputs,
                              [numpy_helper.from_array(a, n) for n, a in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def mlp():
    """MatMul + Add, Relu, Gemm (transB), Softmax: a classifier as exporters write it."""
    nodes = [helper.make_node("MatMul", ["x", "fc1.weight"], ["h"], name="fc1"),
             helper.make_node("Add", ["h", "fc1.bias"], ["h1"], name="fc1_bias"),
             helper.make_node("Relu", ["h1"], ["r"], name="relu"),
             helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["logits"], transB=1,
                              alpha=0.5, name="fc2"),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=1, name="softmax")]
    inits = {"fc1.weight": weights(6, 8), "fc1.bias": weights(8),
             "fc2.weight": weights(3, 8), "fc2.bias": weights(3)}
    return (make_model(nodes, [helper.make_tensor_value_info("x", FLOAT, ["batch", 6])],
                       [helper.make_tensor_value_info("probs", FLOAT, ["batch", 3])], inits,
                       name="mlp"),
            [RNG.standard_normal((5, 6)).astype(np.float32)])


def cnn():
    """Conv (grouped, asymmetric pads), BatchNormalization, Relu, MaxPool, AveragePool
    (padded, count_include_pad=0), Transpose, Concat, Identity, Constant, Shape folded into
    Reshape, Flatten, Gemm, LogSoftmax."""
    shape_const = numpy_helper.from_array(np.array([0, -1], np.int64), "shape_value")
    nodes = [
        helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["c1"], name="conv1",
                         pads=[1, 0, 2, 1], strides=[1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn.scale", "bn.bias", "bn.mean",
                                                "bn.var"], ["n1"], name="bn", epsilon=1e-3),
        helper.make_node("Relu", ["n1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "conv2.weight"], ["c2"], name="conv2", group=2,
                         pads=[1, 1, 1, 1], dilations=[1, 1]),
        helper.make_node("MaxPool", ["c2"], ["m"], name="maxpool", kernel_shape=[2, 2],
                         strides=[2, 1]),
        helper.make_node("AveragePool", ["c2"], ["a"], name="avgpool", kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Transpose", ["a"], ["at"], name="swap_hw", perm=[0, 1, 3, 2]),
        helper.make_node("Concat", ["m", "at"], ["cat"], name="concat", axis=1),
        helper.make_node("Identity", ["cat"], ["cat_id"], name="identity"),
        helper.make_node("Constant", [], ["shape_c"], name="shape_const", value=shape_const),
        helper.make_node("Reshape", ["cat_id", "shape_c"], ["flat"], name="reshape"),
        helper.make_node("Shape", ["flat"], ["flat_shape"], name="shape"),
        helper.make_node("Reshape", ["flat", "flat_shape"], ["flat2"], name="reshape_again"),
        helper.make_node("Flatten", ["flat2"], ["flat3"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat3", "fc.weight", "fc.bias"], ["logits"], name="fc",
                         transB=1),
        helper.make_node("LogSoftmax", ["logits"], ["out"], name="log_softmax", axis=1),
    ]
    inits = {"conv1.weight": weights(4, 2, 3, 3), "conv1.bias": weights(4),
             "bn.scale": 1 + weights(4), "bn.bias": weights(4), "bn.mean": weights(4),
             "bn.var": np.abs(weights(4)) + 0.5, "conv2.weight": weights(4, 2, 3, 3),
             "fc.weight": weights(5, 8 * 3 * 4), "fc.bias": weights(5)}
    return (make_model(nodes, [helper.make_tensor_value_info("x", FLOAT, [2, 2, 6, 6])],
                       [helper.make_tensor_value_info("out", FLOAT, [2, 5])], inits, name="cnn"),
            [RNG.standard_normal((2, 2, 6, 6)).astype(np.float32)])


def control_flow():
    """If on the input's sum (each branch reads outer values) and a Loop halving a vector
    while its norm is above 1, with a trip-count limit."""
    info = helper.make_tensor_value_info
    then = helper.make_graph([helper.make_node("Tanh", ["x"], ["t"], name="then_tanh")],
                             "then", [], [info("t", FLOAT, [4])])
    other = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["e"], name="else_mul")],
                              "else", [], [info("e", FLOAT, [4])])
    body = helper.make_graph(
        [helper.make_node("Mul", ["v_in", "half"], ["v_out"], name="halve"),
         helper.make_node("Mul", ["v_out", "v_out"], ["sq"], name="square"),
         helper.make_node("ReduceSum", ["sq"], ["norm2"], name="norm", keepdims=0),
         helper.make_node("Greater", ["norm2", "one"], ["keep"], name="above")],
        "body", [info("i", TensorProto.INT64, []), info("c", TensorProto.BOOL, []),
                 info("v_in", FLOAT, [4])],
        [info("keep", TensorProto.BOOL, []), info("v_out", FLOAT, [4])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["total"], name="total", keepdims=0),
             helper.make_node("Greater", ["total", "zero"], ["positive"], name="positive"),
             helper.make_node("If", ["positive"], ["branch"], name="branch", then_branch=then,
                              else_branch=other),
             helper.make_node("Loop", ["limit", "start", "x"], ["shrunk"], name="shrink",
                              body=body),
             helper.make_node("Add", ["branch", "shrunk"], ["y"], name="sum")]
    inits = {"two": np.float32(2.0).reshape(()), "half": np.float32(0.5).reshape(()),
             "one": np.float32(1.0).reshape(()), "zero": np.float32(0.0).reshape(()),
             "limit": np.array(20, np.int64), "start": np.array(True)}
    model = make_model(nodes, [info("x", FLOAT, [4])], [info("y", FLOAT, [4])], inits,
                       name="control")
    x = (RNG.standard_normal(4) * 5).astype(np.float32)
    return model, [x]


def exported_cnn():
    ug.manual_seed(11)
    images = RNG.standard_normal((2, 2, 6, 6)).astype(np.float32)
    return ug.onnx.to_model(SmallCNN().eval(), images), [images]


def exported_shrink():
    args = [(RNG.standard_normal(3) * 8).astype(np.float32), np.float32(0.5)]
    return ug.onnx.to_model(shrink, *args), args


MODELS = {"mlp": mlp(), "cnn": cnn(), "control_flow": control_flow(),
          "exported_cnn": exported_cnn(), "exported_shrink": exported_shrink()}


def onnxruntime_outputs(model, inputs) -> list:
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: np.asarray(x) for i, x in
                              zip(session.get_inputs(), inputs)})


def as_list(out) -> list:
    return out if isinstance(out, list) else [out]


def reference(model, inputs) -> list:
    """The float64 reference: the imported model's float64 copy on float64 inputs."""
    wide = [x.astype(np.float64) if np.asarray(x).dtype.kind == "f" else x for x in inputs]
    return as_list(run_on("numpy:eager", model.copy("float64"), *wide))


def assert_close(got, want, what):
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"{what}: shape {g.shape}, expected {w.shape}"
        scale = max(1.0, float(np.max(np.abs(w)))) if w.size else 1.0
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-4,
                                   atol=1e-5 * scale, err_msg=what)


@pytest.fixture(scope="module")
def imported():
    return {name: ug.onnx.load(model) for name, (model, _) in MODELS.items()}


@pytest.mark.parametrize("target", TARGETS)
def test_imported_models_agree_with_onnxruntime_and_the_reference(imported, target):
    for name, (model, inputs) in MODELS.items():
        got = as_list(run_on(target, imported[name], *inputs))
        assert_close(got, onnxruntime_outputs(model, inputs), f"{name} on {target} vs ORT")
        assert_close(got, reference(imported[name], inputs), f"{name} on {target} vs float64")


def test_the_reference_takes_each_branch_and_loop_count():
    """The control-flow model on inputs that take both branches and 0, some and the limit
    of iterations, against ONNX Runtime."""
    model, _ = MODELS["control_flow"]
    loaded = ug.onnx.load(model)
    for x in ([0.1, 0.2, -0.1, 0.3], [-3.0, -4.0, 1.0, 0.5], [1e8, 1e8, 1e8, 1e8]):
        x = np.array(x, np.float32)
        assert_close(as_list(run_on("numpy:static", loaded, x)),
                     onnxruntime_outputs(model, [x]), f"control flow at {x}")


def test_initializers_are_parameters_named_as_in_the_file(tmp_path):
    model, _ = MODELS["mlp"]
    path = tmp_path / "mlp.onnx"
    onnx.save_model(model, str(path))
    loaded = ug.onnx.load(path)
    params = dict(loaded.named_parameters())
    assert sorted(params) == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]
    for tensor in model.graph.initializer:
        assert isinstance(params[tensor.name], ug.Parameter)
        np.testing.assert_array_equal(params[tensor.name].numpy(),
                                      numpy_helper.to_array(tensor))


def test_unsupported_ops_are_all_listed_in_one_error():
    info = helper.make_tensor_value_info
    inner = helper.make_graph([helper.make_node("Det", ["x"], ["h"], name="inner_det")],
                              "then", [], [info("h", FLOAT, [3])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["n"], name="inner_neg")],
                              "else", [], [info("n", FLOAT, [3])])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="ok"),
             helper.make_node("GridSample", ["r", "r"], ["g"], name="grid"),
             helper.make_node("Bernoulli", ["r"], ["c"], name="coin"),
             helper.make_node("If", ["flag"], ["y"], name="branch", then_branch=inner,
                              else_branch=other)]
    graph = helper.make_graph(nodes, "bad", [info("x", FLOAT, [3]),
                                             info("flag", TensorProto.BOOL, [])],
                              [info("y", FLOAT, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(OnnxImportError, match=r"3 node\(s\) .*\(Bernoulli, Det, GridSample\): "
                                              r"GridSample \(grid\), Bernoulli \(coin\), "
                                              r"Det \(inner_det\)"):
        ug.onnx.load(model)


def test_ug_check_passes_with_gradients_on_every_target():
    """The imported parameters are trainable: ug.check compares outputs and the gradients
    of every parameter on every target against the float64 reference."""
    model, inputs = MODELS["mlp"]
    report = ug.check(ug.onnx.load(model), *inputs, targets=",".join(TARGETS))
    report.assert_ok()
    assert all(target in str(report) for target in TARGETS)


# -- single-node models for the importers added for real architectures ---------------------
INT64 = TensorProto.INT64


def one_node(op, inputs, initializers=None, opset=17, outputs=1, **attrs):
    """A model of one `op` node: `inputs` {name: array} fed at run time, `initializers`
    {name: array} stored in the file; the output types are left to inference."""
    initializers = initializers or {}
    names = [*inputs, *initializers]
    outs = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op, names, outs, name=op.lower(), **attrs)
    infos = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
             for n, a in inputs.items()]
    graph = helper.make_graph([node], op.lower(), infos,
                              [onnx.ValueInfoProto(name=n) for n in outs],
                              [numpy_helper.from_array(a, n) for n, a in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model, full_check=True)
    return model, list(inputs.values())


def images(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def scan_loop():
    """A Loop of 4 trips whose body carries v -> 0.5 v + 1 and emits two scan outputs per
    trip (v's sum and v * i), the condition passed through an Identity."""
    info = helper.make_tensor_value_info
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"], name="keep_going"),
         helper.make_node("Mul", ["v_in", "half"], ["h"], name="halve"),
         helper.make_node("Add", ["h", "one"], ["v_out"], name="shift"),
         helper.make_node("ReduceSum", ["v_out"], ["s"], name="total", keepdims=0),
         helper.make_node("Cast", ["i"], ["fi"], name="as_float", to=FLOAT),
         helper.make_node("Mul", ["v_in", "fi"], ["scaled"], name="scale")],
        "body", [info("i", INT64, []), info("c", TensorProto.BOOL, []), info("v_in", FLOAT, [3])],
        [info("c_out", TensorProto.BOOL, []), info("v_out", FLOAT, [3]), info("s", FLOAT, []),
         info("scaled", FLOAT, [3])])
    nodes = [helper.make_node("Loop", ["trips", "", "x"], ["last", "sums", "rows"], name="loop",
                              body=body)]
    inits = {"trips": np.array(4, np.int64), "half": np.float32(0.5).reshape(()),
             "one": np.float32(1.0).reshape(())}
    model = make_model(nodes, [info("x", FLOAT, [3])],
                       [info("last", FLOAT, [3]), info("sums", FLOAT, [4]),
                        info("rows", FLOAT, [4, 3])], inits, name="scan_loop")
    return model, [images(3)]


def sparse_cross_entropy():
    """unigraph's own exporter writes sparse_softmax_cross_entropy with GatherElements."""
    def loss(logits, labels):
        return ug.mean(ug.sparse_softmax_cross_entropy(logits, labels))

    args = [images(4, 5), np.array([0, 4, 2, 1], np.int64)]
    return ug.onnx.to_model(loss, *args), args


NODE_CASES = {
    "prelu": one_node("PRelu", {"x": images(2, 3, 4, 4)}, {"slope": images(3, 1, 1)}),
    "elu": one_node("Elu", {"x": images(3, 4)}, alpha=0.7),
    "selu": one_node("Selu", {"x": images(3, 4)}, alpha=1.5, gamma=1.2),
    "gelu": one_node("Gelu", {"x": images(3, 4)}, opset=20),
    "gelu_tanh": one_node("Gelu", {"x": images(3, 4)}, opset=20, approximate="tanh"),
    "lrn": one_node("LRN", {"x": images(2, 5, 3, 3)}, size=3, alpha=1e-2, beta=0.75, bias=2.0),
    "split_input": one_node("Split", {"x": images(2, 6)}, {"sizes": np.array([2, 1, 3])},
                            outputs=3, axis=1),
    "split_attribute": one_node("Split", {"x": images(6, 2)}, opset=11, outputs=2,
                                split=[4, 2]),
    "split_equal": one_node("Split", {"x": images(2, 6)}, outputs=3, axis=-1),
    "split_num_outputs": one_node("Split", {"x": images(7, 2)}, opset=18, outputs=3,
                                  num_outputs=3),
    "pad_constant": one_node("Pad", {"x": images(2, 3)},
                             {"pads": np.array([1, 0, 0, 2]), "value": np.float32(1.5)}),
    "pad_reflect": one_node("Pad", {"x": images(1, 2, 4, 4)},
                            {"pads": np.array([0, 0, 1, 2, 0, 0, 3, 1])}, mode="reflect"),
    "pad_edge_crop": one_node("Pad", {"x": images(3, 4)}, {"pads": np.array([2, -1, -1, 1])},
                              mode="edge"),
    "pad_axes": one_node("Pad", {"x": images(2, 3, 4)}, {"pads": np.array([1, 2, 0, 1]),
                         "value": np.float32(-2.0), "axes": np.array([2, 0])}, opset=18),
    "max_pool_ceil": one_node("MaxPool", {"x": images(1, 2, 6, 7)}, kernel_shape=[3, 3],
                              strides=[2, 2], ceil_mode=1),
    "max_pool_ceil_pads": one_node("MaxPool", {"x": images(1, 2, 5, 5)}, kernel_shape=[2, 2],
                                   strides=[2, 2], pads=[1, 0, 1, 0], ceil_mode=1),
    "avg_pool_ceil": one_node("AveragePool", {"x": images(1, 2, 6, 7)}, kernel_shape=[3, 3],
                              strides=[2, 2], ceil_mode=1),
    "avg_pool_ceil_include_pad": one_node("AveragePool", {"x": images(1, 2, 5, 6)},
                                          kernel_shape=[3, 2], strides=[2, 2],
                                          pads=[1, 1, 1, 0], ceil_mode=1, count_include_pad=1),
    "gather_elements": one_node("GatherElements", {"x": images(3, 4),
                                "index": np.array([[0, -1], [2, 1], [3, 3]])}, axis=1),
    "gather_elements_axis0": one_node("GatherElements", {"x": images(3, 2, 2)},
                                      {"index": np.array([[[2, 0]], [[-3, 1]]])}, axis=0),
    "conv_transpose": one_node("ConvTranspose", {"x": images(2, 4, 3, 3)},
                               {"w": images(4, 1, 3, 3), "b": images(2)}, strides=[2, 2],
                               pads=[1, 0, 0, 1], output_padding=[1, 1], group=2),
    "conv_transpose_output_shape": one_node("ConvTranspose", {"x": images(1, 2, 3, 4)},
                                            {"w": images(2, 3, 2, 3)}, strides=[3, 2],
                                            dilations=[1, 2], output_shape=[7, 8],
                                            auto_pad="SAME_UPPER"),
    "conv_transpose_1d": one_node("ConvTranspose", {"x": images(2, 3, 5)},
                                  {"w": images(3, 2, 3)}, strides=[2], pads=[0, 1]),
    "scan_loop": scan_loop(),
    "sparse_cross_entropy": sparse_cross_entropy(),
}


@pytest.fixture(scope="module")
def imported_nodes():
    return {name: ug.onnx.load(model) for name, (model, _) in NODE_CASES.items()}


@pytest.mark.parametrize("target", TARGETS)
def test_new_importers_agree_with_onnxruntime_and_the_reference(imported_nodes, target):
    for name, (model, inputs) in NODE_CASES.items():
        got = as_list(run_on(target, imported_nodes[name], *inputs))
        assert_close(got, onnxruntime_outputs(model, inputs), f"{name} on {target} vs ORT")
        assert_close(got, reference(imported_nodes[name], inputs),
                     f"{name} on {target} vs float64")


def batch_norm_mlp():
    """Batch dim "batch" in the file: Gemm, BatchNormalization, Relu, Softmax (every node
    takes an unknown batch)."""
    info = helper.make_tensor_value_info
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["h"], name="fc", transB=1),
             helper.make_node("BatchNormalization", ["h", "s", "o", "m", "v"], ["n"],
                              name="bn"),
             helper.make_node("Relu", ["n"], ["r"], name="relu"),
             helper.make_node("Softmax", ["r"], ["y"], name="softmax", axis=1)]
    inits = {"w": weights(4, 6), "b": weights(4), "s": 1 + weights(4), "o": weights(4),
             "m": weights(4), "v": np.abs(weights(4)) + 0.5}
    return make_model(nodes, [info("x", FLOAT, ["batch", 6])],
                      [info("y", FLOAT, ["batch", 4])], inits, name="bn_mlp")


def padded_pool():
    """A batch dim "N" and an asymmetric MaxPool, which pads with -inf blocks made from the
    input's shape (`ug.pad` of an open dim, one side of width 0): traced once too."""
    node = helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2],
                            pads=[0, 0, 1, 1])
    info = helper.make_tensor_value_info
    return make_model([node], [info("x", FLOAT, ["N", 1, 3, 3])],
                      [info("y", FLOAT, ["N", 1, 3, 3])], {}, name="padded_pool")


def reflected_batch():
    """A batch dim "N" that a Pad reflects along (each width must be below the size, known
    only at run time): traced per batch size instead."""
    node = helper.make_node("Pad", ["x", "pads"], ["y"], name="reflect", mode="reflect")
    info = helper.make_tensor_value_info
    return make_model([node], [info("x", FLOAT, ["N", 3])], [info("y", FLOAT, ["M", 3])],
                      {"pads": np.array([1, 0, 1, 0], np.int64)}, name="reflected_batch")


@pytest.mark.parametrize("target", TARGETS)
def test_a_symbolic_batch_dim_is_traced_once_where_every_node_allows(target, monkeypatch):
    from unigraph.onnx.load import ImportContext

    traced = []
    walk = ImportContext.walk

    def recording(self, graph):
        if graph.input and graph.input[0].name in self.env:
            traced.append((graph.name, tuple(self.env[graph.input[0].name].shape)))
        return walk(self, graph)

    monkeypatch.setattr(ImportContext, "walk", recording)
    sources = {"bn_mlp": (batch_norm_mlp(), (6,)), "padded_pool": (padded_pool(), (1, 3, 3)),
               "reflected_batch": (reflected_batch(), (3,))}
    models = {name: ug.onnx.load(model) for name, (model, _) in sources.items()}
    assert models["bn_mlp"].input_shapes == [(None, 6)]
    for batch in (2, 5):
        for name, (model, rest) in sources.items():
            x = RNG.standard_normal((batch, *rest)).astype(np.float32)
            got = as_list(run_on(target, models[name], x))
            assert_close(got, onnxruntime_outputs(model, [x]), f"{name} batch {batch}")
    for name in ("bn_mlp", "padded_pool"):
        mine = [shape[0] for graph, shape in traced if graph == name]
        if target.endswith(":eager"):
            assert mine == [2, 5], name
        else:  # one graph for every batch size
            assert mine == [None], name
    reflected = [shape[0] for graph, shape in traced if graph == "reflected_batch"]
    assert reflected[-2:] == [2, 5]  # the fallback: one trace per size


@pytest.mark.parametrize("target", TARGETS)
def test_an_op_error_names_the_onnx_node(target):
    """A file whose MatMul gets operands of shapes that do not fit (the file declares what
    the op cannot do): the error names the ONNX node, not just the line that called it."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"], name="fc_matmul"),
         helper.make_node("Relu", ["h"], ["y"], name="act")],
        "misfit", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(np.ones((5, 3), np.float32), "W")])
    model = ug.onnx.load(helper.make_model(graph,
                                           opset_imports=[helper.make_opsetid("", 17)]))
    with pytest.raises(ug.ShapeError, match=r"inner dimensions.*ONNX graph 'misfit': node "
                                            r"'fc_matmul' \(MatMul\)"):
        run_on(target, model, np.ones((2, 6), np.float32))


def symbolic_slices():
    """Slices of a symbolic dim "N" counted from its end (x[-2:, 1:-1]) and strided from
    both ends (x[1:-1:2]): the bounds are resolved when the program runs."""
    info, big = helper.make_tensor_value_info, np.iinfo(np.int64).max
    ints = {"s1": [-2, 1], "e1": [big, -1], "a1": [0, 1], "s2": [1], "e2": [-1], "a2": [0],
            "st2": [2]}
    nodes = [helper.make_node("Slice", ["x", "s1", "e1", "a1"], ["tail"], name="tail"),
             helper.make_node("Slice", ["x", "s2", "e2", "a2", "st2"], ["mid"], name="mid"),
             helper.make_node("Relu", ["tail"], ["y"], name="relu")]
    inits = {name: np.array(value, np.int64) for name, value in ints.items()}
    return make_model(nodes, [info("x", FLOAT, ["N", 5])],
                      [info("y", FLOAT, [None, 3]), info("mid", FLOAT, [None, 5])], inits,
                      name="symbolic_slices")


@pytest.mark.parametrize("target", TARGETS)
def test_a_slice_of_a_symbolic_dim_is_traced_once(target, monkeypatch):
    """Each batch size agrees with ONNX Runtime (also 1 and 2 rows, where x[-2:] and
    x[1:-1:2] clamp or come out empty), and a static target traces one graph for them all
    (a Slice used to need the dim's size, so such a model was traced per size)."""
    from unigraph.onnx.load import ImportContext

    traced = []
    walk = ImportContext.walk
    monkeypatch.setattr(ImportContext, "walk", lambda self, graph: (
        traced.append(tuple(self.env["x"].shape)), walk(self, graph))[1])
    onnx_model = symbolic_slices()
    model = ug.onnx.load(onnx_model)
    for batch in (6, 1, 2, 5):
        x = RNG.standard_normal((batch, 5)).astype(np.float32)
        got = as_list(run_on(target, model, x))
        assert_close(got, onnxruntime_outputs(onnx_model, [x]), f"batch {batch}")
    assert traced == ([(6, 5), (1, 5), (2, 5), (5, 5)] if target.endswith(":eager")
                      else [(None, 5)])
