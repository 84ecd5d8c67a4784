"""Convolutions on TensorFlow's NCHW oneDNN kernels (`backends/unigraph_tensorflow/nchw_conv.py`,
issue 19 item 5), and the Session's prepared run (`static.py`).

The programs run on all 9 targets against float64 NumPy written here: a forward conv + bias
+ relu (the benchmark's conv_n1), a strided one without bias, a conv read by a pool (which
keeps the NHWC layout pass), and the gradient of a conv (which keeps the NHWC route, since
oneDNN's backward takes NHWC only). The last tests look at how TF ran them: which route,
which ops the graph holds, one prepared Session callable.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on
from conv_reference import conv2d_reference
from tf_graphs import graph_ops

import unigraph as ug

TF_TARGETS = ("tensorflow:eager", "tensorflow:static", "tensorflow:function")
TF_GRAPH_TARGETS = ("tensorflow:static", "tensorflow:function")


def _inputs(n=2, c=3, size=9, o=5, seed=5):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, c, size, size)).astype(np.float32),
            (rng.standard_normal((o, c, 3, 3)) * 0.3).astype(np.float32),
            (rng.standard_normal(o) * 0.1).astype(np.float32))


@ug.function
def conv_relu(x, w, b):
    return ug.relu(ug.conv2d(x, w, b, padding=1))


@ug.function
def strided_conv(x, w):
    return ug.conv2d(x, w, stride=2, padding=1)


@ug.function
def conv_pool(x, w, b):
    return ug.max_pool2d(ug.relu(ug.conv2d(x, w, b, padding=1)), 2)


@pytest.mark.parametrize("target", TARGETS)
def test_forward_convs_match_float64(target):
    x, w, b = _inputs()
    expected = np.maximum(conv2d_reference(x, w, b, 1, 1), 0)
    np.testing.assert_allclose(run_on(target, conv_relu, x, w, b), expected, rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(run_on(target, strided_conv, x, w),
                               conv2d_reference(x, w, None, 2, 1), rtol=1e-5, atol=1e-5)
    # A layer, as a user writes it: its weight is the same tensor call after call (the
    # eager filter cache), then a new one (a cached filter must not be reused).
    layer = ug.nn.Conv2D(3, 5, 3, padding=1, act="relu")
    layer.load_state_dict({"weight": w, "bias": b})
    forward = ug.function(lambda x: layer(x))
    for _ in range(2):
        np.testing.assert_allclose(run_on(target, forward, x), expected, rtol=1e-5, atol=1e-5)
    layer.load_state_dict({"weight": -w, "bias": b})
    np.testing.assert_allclose(run_on(target, forward, x),
                               np.maximum(conv2d_reference(x, -w, b, 1, 1), 0), rtol=1e-5,
                               atol=1e-5)


@ug.function
def convs_in_control_flow(x, w, b, w3, b3, p):
    # A conv in each branch of a cond and in a loop body: TF builds those as functions
    # (If, While), whose bodies must get the NCHW kernels too.
    branch = ug.cond(p > 0, lambda: ug.relu(ug.conv2d(x, w, b, padding=1)),
                     lambda: ug.conv2d(x, -w, b, padding=1))
    looped = ug.while_loop(lambda i, y: i < 2,
                           lambda i, y: (i + 1, ug.conv2d(y, w3, b3, padding=1)), (0, x))[1]
    return branch, looped


@pytest.mark.parametrize("target", TARGETS)
def test_convs_in_a_cond_and_a_loop_match_float64(target):
    x, w, b = _inputs(size=6)
    w3, b3 = w[:3] * 0.5, b[:3]
    once = conv2d_reference(conv2d_reference(x, w3, b3, 1, 1), w3, b3, 1, 1)
    for p, branch in ((1.0, np.maximum(conv2d_reference(x, w, b, 1, 1), 0)),
                      (-1.0, conv2d_reference(x, -w, b, 1, 1))):
        got = run_on(target, convs_in_control_flow, x, w, b, w3, b3, np.float32(p))
        np.testing.assert_allclose(got[0], branch, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got[1], once, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_conv_read_by_a_pool_matches_float64(target):
    x, w, b = _inputs(size=8)
    relu = np.maximum(conv2d_reference(x, w, b, 1, 1), 0)
    expected = relu.reshape(2, 5, 4, 2, 4, 2).max(axis=(3, 5))
    np.testing.assert_allclose(run_on(target, conv_pool, x, w, b), expected, rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_gradient_of_a_conv_matches_float64(target):
    # d/dw sum(conv(x, w) * g) = sum over windows of g * window: the float64 conv of the
    # image's channels by g, written out here.
    x, w, b = _inputs(n=1, size=6)
    g = np.random.default_rng(7).standard_normal((1, 5, 6, 6)).astype(np.float32)

    def loss(x, w, b):
        return ug.sum(ug.conv2d(x, w, b, padding=1) * g)

    grad_w, grad_b = run_on(target, ug.function(ug.grad(loss, argnums=(1, 2))), x, w, b)
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    expected_w = np.zeros(w.shape)
    for i in range(3):
        for j in range(3):
            expected_w[:, :, i, j] = np.einsum("nchw,nohw->oc", padded[:, :, i:i + 6, j:j + 6],
                                               g.astype(np.float64))
    np.testing.assert_allclose(grad_w, expected_w, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(grad_b, g.astype(np.float64).sum(axis=(0, 2, 3)), rtol=1e-5,
                               atol=1e-5)


# -- how TensorFlow ran them ---------------------------------------------------------------------


def _tf_modules():
    from unigraph.plugins import get_backend

    get_backend("tensorflow").load()  # imports tensorflow after paddle
    from unigraph_tensorflow import images, nchw_conv

    return images, nchw_conv


def test_the_probe_matches_the_kernels_this_tensorflow_has():
    """supported() says whether NCHW Conv2D runs here; where it says yes, it does, and where
    it says no, TF refuses it (TF without oneDNN)."""
    _, nchw_conv = _tf_modules()
    import tensorflow as tf

    x = tf.ones((1, 1, 2, 2))
    try:
        out = nchw_conv.conv2d_nchw(x, tf.ones((1, 1, 1, 1)), None, stride=(1, 1),
                                    padding=(0, 0)).numpy()
    except tf.errors.OpError:
        out = None
    assert nchw_conv.supported() == (out is not None and np.array_equal(out, np.ones(x.shape)))


@pytest.mark.parametrize("target", TF_TARGETS)
def test_a_forward_conv_runs_nchw_where_tensorflow_can(target, monkeypatch):
    """Where supported(), conv + bias + relu runs with no activation transpose (eager: no
    call to the NHWC route); elsewhere it takes the NHWC route. The graph modes keep the NHWC
    kernels for this conv, whose result is an output (returned NHWC,
    tests/test_tf_static_nhwc_fetch.py): one Conv2D in NHWC, and only the image's and the
    filter's Transposes. Its values are checked on all 9 targets above."""
    images, nchw_conv = _tf_modules()
    x, w, b = _inputs()
    nhwc_calls = []
    route = images.conv2d
    monkeypatch.setattr(images, "conv2d", lambda *a, **k: nhwc_calls.append(1) or route(*a, **k))
    if target == "tensorflow:eager":
        run_on(target, conv_relu, x, w, b)
        assert len(nhwc_calls) == (0 if nchw_conv.supported() else 1)
        return
    ops = graph_ops(target, conv_relu, x, w, b)
    (conv,) = [op for op in ops if op.type == "Conv2D"]
    transposes = [op for op in ops if op.type == "Transpose"]
    # Its result is fetched NHWC (tests/test_tf_static_nhwc_fetch.py): NHWC kernels, and
    # only the image's and the filter's transposes run.
    assert conv.get_attr("data_format") == b"NHWC"
    assert len(transposes) == 2


@pytest.mark.parametrize("target", TF_TARGETS)
def test_a_differentiated_or_pooled_conv_keeps_the_nhwc_route(target):
    """oneDNN's NCHW backward is refused eagerly, and a pool would transpose the conv's
    result: there the convs stay NHWC, whatever the TF."""
    _, nchw_conv = _tf_modules()
    x, w, b = _inputs(n=1, size=6)

    def loss(x, w, b):
        return ug.sum(ug.conv2d(x, w, b, padding=1))

    if target == "tensorflow:eager":
        calls = []
        route = nchw_conv.conv2d_nchw
        try:
            nchw_conv.conv2d_nchw = lambda *a, **k: calls.append(1) or route(*a, **k)
            run_on(target, ug.function(ug.grad(loss, argnums=(1,))), x, w, b)
        finally:
            nchw_conv.conv2d_nchw = route
        assert calls == []
        return
    for fn in (ug.grad(loss, argnums=(1,)), conv_pool):
        # (the weight's gradient needs no forward Conv2D: its Conv2DBackpropFilter is run)
        formats = {op.get_attr("data_format") for op in graph_ops(target, fn, x, w, b)
                   if op.type.startswith("Conv2D")}
        assert formats == {b"NHWC"}


def test_a_session_run_is_one_prepared_callable(monkeypatch):
    """tensorflow:static runs its graph through the callable made once from the Session
    (no Session.run, which sorts out fetches and feeds at every call)."""
    from unigraph.plugins import get_backend

    x, w, b = _inputs()
    executable = get_backend("tensorflow").compile(conv_relu.trace(x, w, b), "static")
    monkeypatch.setattr(executable._session, "run", None)  # calling it would raise
    for _ in range(2):
        (out,) = executable.run([x, w, b])
        np.testing.assert_allclose(out, np.maximum(conv2d_reference(x, w, b, 1, 1), 0),
                                   rtol=1e-5, atol=1e-5)
