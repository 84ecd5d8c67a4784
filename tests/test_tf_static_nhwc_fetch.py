"""A conv's result as a function's output (issue 19, conv_n64 on tensorflow:static and
tensorflow:function).

tensorflow:static fetches an output that is the NCHW view of an NHWC value (what the layout
pass makes of a conv's result) as that NHWC value and hands back NumPy's transposed view of
it (`backends/unigraph_tensorflow/static.py`); tensorflow:function returns it NHWC and hands
back the same view of its buffer (`function.py`); such a graph keeps its convs NHWC
(`layout.conv_reaches_an_output`). The result is then a non-contiguous array: the first tests
check, on all 9 targets, that it behaves as any result does (values against float64 NumPy,
later ops, feeding it back, gradients, the checker, no aliasing of the caller's input); the
last ones look at the graphs of the two TF graph modes themselves.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS
from tf_graphs import graph_ops

import unigraph as ug


def _inputs(n=3, c=3, size=6, o=4, seed=19):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, c, size, size)).astype(np.float32),
            (rng.standard_normal((o, c, 3, 3)) * 0.4).astype(np.float32),
            (rng.standard_normal(o) * 0.1).astype(np.float32))


def _windows(x):
    """[N, C, H, W, 3, 3]: each output position's zero-padded 3x3 window (padding 1)."""
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    return np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))


def _conv_ref(x, w, b):
    return np.einsum("nchwij,ocij->nohw", _windows(x), w) + b.reshape(1, -1, 1, 1)


def _float64(*arrays):
    return [a.astype(np.float64) for a in arrays]


def _close(got, want, what):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=what)


@ug.function
def conv_relu(x, w, b):
    return ug.relu(ug.conv2d(x, w, b, padding=1))


# -- on all 9 targets ----------------------------------------------------------------------------


@pytest.mark.parametrize("target", TARGETS)
def test_a_conv_result_behaves_as_an_array(target):
    x, w, b = _inputs()
    want = np.maximum(_conv_ref(*_float64(x, w, b)), 0)
    layer = ug.nn.Conv2D(3, 4, 3, padding=1, act="relu")
    layer.load_state_dict({"weight": w, "bias": b})
    forward = ug.function(lambda x: layer(x))
    twice = ug.function(lambda y: y * 2.0 + ug.mean(y, axis=(0, 2, 3), keepdims=True))
    with ug.use_backend(*target.split(":")):
        y = forward(x)
        array = y.numpy()
        _close(array, want, f"conv on {target}")
        assert array.shape == (3, 4, 6, 6)
        with pytest.raises(ValueError, match="read-only"):
            array[0, 0, 0, 0] = 7.0
        _close(forward(x).numpy(), want, f"second call on {target}")
        # the result in eager ops, fed to another function, and as a plain NumPy array
        _close((y - 1.0).numpy(), want - 1.0, f"eager op on {target}")
        _close(twice(y).numpy(), want * 2 + want.mean(axis=(0, 2, 3), keepdims=True),
               f"fed back on {target}")
        _close(np.ascontiguousarray(y).reshape(3, -1), want.reshape(3, -1),
               f"reshaped on {target}")
        assert np.array_equal(y.tolist(), array)


@pytest.mark.parametrize("target", TARGETS)
def test_a_conv_output_and_its_gradients_match_float64(target):
    # value_and_grad of a weighted sum, returning the conv's result beside the loss: the
    # result is an output of the same graph as the gradients through the conv.
    x, w, b = _inputs()
    weights = np.random.default_rng(7).standard_normal((3, 4, 6, 6)).astype(np.float32)

    def loss(x, w, b):
        y = ug.relu(ug.conv2d(x, w, b, padding=1))
        return ug.sum(y * weights), y

    step = ug.function(ug.value_and_grad(loss, argnums=(0, 1, 2)))
    with ug.use_backend(*target.split(":")):
        (value, y), grads = step(x, w, b)
        got = [value.numpy(), y.numpy(), *(g.numpy() for g in grads)]
    x64, w64, b64 = _float64(x, w, b)
    pre = _conv_ref(x64, w64, b64)
    # By hand: G = weights where the relu passes; dw = sum of G times each window, db = sum
    # of G per channel, dx = each G spread back over its window through w.
    g = weights.astype(np.float64) * (pre > 0)
    dx = np.zeros((3, 3, 8, 8))
    for i in range(3):
        for j in range(3):
            dx[:, :, i:i + 6, j:j + 6] += np.einsum("nohw,oc->nchw", g, w64[:, :, i, j])
    want = [(np.maximum(pre, 0) * weights).sum(), np.maximum(pre, 0), dx[:, :, 1:7, 1:7],
            np.einsum("nohw,nchwij->ocij", g, _windows(x64)), g.sum(axis=(0, 2, 3))]
    for name, got_one, want_one in zip(["loss", "y", "dx", "dw", "db"], got, want):
        _close(got_one, want_one, f"{name} on {target}")


@pytest.mark.parametrize("target", TARGETS)
def test_a_tensorflow_static_result_feeds_every_target(target):
    # The transposed view tensorflow:static returns, used where another target is current:
    # in an eager op, in a @ug.function, differentiated.
    x, w, b = _inputs()
    with ug.use_backend("tensorflow", "static"):
        y = conv_relu(x, w, b)
    want = np.maximum(_conv_ref(*_float64(x, w, b)), 0)
    per_channel = ug.function(lambda y: ug.sum(y * y, axis=(0, 2, 3)))
    with ug.use_backend(*target.split(":")):
        _close((y * 2.0).numpy(), want * 2, f"eager op on {target}")
        _close(per_channel(y).numpy(), (want * want).sum(axis=(0, 2, 3)),
               f"function on {target}")
        _close(ug.grad(lambda y: ug.sum(y * y))(y).numpy(), 2 * want, f"grad on {target}")


@pytest.mark.parametrize("target", TARGETS)
def test_the_checker_passes_a_conv(target):
    x, w, b = _inputs(n=2, size=5)
    report = ug.check(lambda x, w, b: ug.relu(ug.conv2d(x, w, b, padding=1)), x, w, b,
                      targets=target)
    report.assert_ok()


@pytest.mark.parametrize("target", TARGETS)
def test_an_output_transposed_from_an_input_does_not_alias_it(target):
    # Transpose(x, (0, 3, 1, 2)) of a fed input is such a view too: fetched as the fed
    # array itself, its view must still be a copy of the caller's array.
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    want = x.transpose(0, 3, 1, 2).copy()
    fn = ug.function(lambda x: (ug.transpose(x, (0, 3, 1, 2)), x + 1.0))
    with ug.use_backend(*target.split(":")):
        moved, _ = fn(x)
        x[...] = -1.0
        assert np.array_equal(moved.numpy(), want)


# -- the graphs of tensorflow:static and tensorflow:function -------------------------------------

GRAPH_MODES = ("static", "function")


def _compiled(mode, fn, *args):
    from unigraph.plugins import get_backend

    return get_backend("tensorflow").compile(ug.function(fn).trace(*args), mode)


def _activation_transposes(mode, fn, *args) -> list:
    import tensorflow as tf

    return [op for op in graph_ops(f"tensorflow:{mode}", fn, *args) if op.type == "Transpose"
            and tuple(tf.get_static_value(op.inputs[1]).tolist()) in {(0, 2, 3, 1),
                                                                     (0, 3, 1, 2)}]


@pytest.mark.parametrize("mode", GRAPH_MODES)
def test_a_conv_output_is_fetched_nhwc(mode):
    """A property of the TF graph modes (results: all 9 targets above): conv + bias + relu
    runs NHWC with one transpose, the image's in; the output is fetched (returned) NHWC and
    handed back as NumPy's NCHW view of it."""
    x, w, b = _inputs()
    executable = _compiled(mode, conv_relu, x, w, b)
    (fetched,) = executable.native_outputs
    assert fetched.op.type != "Transpose" and tuple(fetched.shape) == (3, 6, 6, 4)
    assert len(_activation_transposes(mode, conv_relu, x, w, b)) == 1
    (out,) = executable.run([x, w, b])
    assert out.shape == (3, 4, 6, 6) and out.base is not None and not out.flags.c_contiguous
    assert out.base.shape == (3, 6, 6, 4)
    _close(out, np.maximum(_conv_ref(*_float64(x, w, b)), 0), "fetched NHWC")


@pytest.mark.parametrize("mode", GRAPH_MODES)
def test_only_views_are_fetched_nhwc(mode):
    # A flattened conv result (the view read by a reshape) and a reduction over channels
    # are fetched as they are, next to the conv's own result.
    x, w, b = _inputs()

    def program(x, w, b):
        h = ug.conv2d(x, w, b, padding=1)
        return ug.reshape(h, (3, -1)), ug.sum(h, axis=1), h

    executable = _compiled(mode, program, x, w, b)
    shapes = [tuple(t.shape) for t in executable.native_outputs]
    assert shapes == [(3, 144), (3, 6, 6), (3, 6, 6, 4)]
    flat, summed, h = executable.run([x, w, b])
    want = _conv_ref(*_float64(x, w, b))
    # (tensorflow:function: the outputs that are no views stay TF tensors)
    assert np.asarray(flat).flags.c_contiguous and not h.flags.c_contiguous
    _close(flat, want.reshape(3, -1), "flat")
    _close(summed, want.sum(axis=1), "summed")
    _close(h, want, "h")


@pytest.mark.parametrize("mode", GRAPH_MODES)
def test_a_conv_read_only_through_a_reshape_keeps_the_nchw_kernels(mode):
    """Where TF runs NCHW convs (nchw_conv.supported()) a conv whose result reaches no
    output as a view keeps them: no activation transpose at all."""
    from unigraph_tensorflow import nchw_conv

    x, w, b = _inputs()

    def flat(x, w, b):
        return ug.reshape(ug.relu(ug.conv2d(x, w, b, padding=1)), (3, -1))

    (conv,) = [op for op in graph_ops(f"tensorflow:{mode}", flat, x, w, b)
               if op.type == "Conv2D"]
    nchw = nchw_conv.supported()
    assert conv.get_attr("data_format") == (b"NCHW" if nchw else b"NHWC")
    assert len(_activation_transposes(mode, flat, x, w, b)) == (0 if nchw else 2)
