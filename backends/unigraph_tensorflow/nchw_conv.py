"""conv2d straight on NCHW images, where TensorFlow's oneDNN kernels take that layout.

TF's own CPU Conv2D takes NHWC only, so `images.conv2d` transposes the image in, the filter
to HWIO and the result back: three Transposes around two ops, and TF's Transpose is slow on
small images (a [1, 3, 32, 32] image costs several times a Relu over the whole result). With
oneDNN (TF's default on x86 CPUs with AVX-512, or `ug.set_tuned(True)`) Conv2D and BiasAdd run
NCHW directly, and in a graph Grappler fuses them with a following Relu into one
`_FusedConv2D`, as it does for an idiomatic NHWC user's conv. The values are bit for bit the
NHWC route's (the same oneDNN kernels; checked by tests/test_tensorflow_nchw_conv.py).

Eagerly a conv with a bias runs as one `_FusedConv2D` (Conv2D + BiasAdd), the op Grappler
makes of the pair in a graph: a separate BiasAdd pass over an NCHW result costs about a third
of the conv ([64, 16, 32, 32]: 1.10 ms fused against 1.50 ms). `_FusedConv2D` is an internal
op with no Python wrapper, run through `execute.quick_execute` (private TF API). Its values
are the pair's bit for bit (tests/test_tensorflow_eager_fast_paths.py, on random data);
`fused_supported()` checks once per process that the op runs here and computes the conv, on
integer data whose sums are exact in any order.

Only for forward convs: oneDNN's Conv2DBackpropInput refuses NCHW when eager ("only supports
NHWC"), so a conv that may be differentiated keeps the NHWC route (and `_FusedConv2D` has no
gradient). Also only float32, groups 1, dilation 1 and a batch known to be non-empty; and
only where `supported()` found the kernels, once per process (TF without oneDNN has no NCHW
Conv2D on CPU).

This module imports tensorflow: `lowerings.py` and `layout.py` import it, after paddle.
"""

from __future__ import annotations

import weakref

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context, execute

from unigraph_tensorflow import images
from unigraph_tensorflow.taping import may_be_differentiated

raw = tf.raw_ops


def usable(x, w, *, stride, padding, dilation, groups) -> bool:
    """Whether this conv is one the NCHW kernels take (the probe covers these)."""
    batch = x.shape[0]
    return (x.dtype == tf.float32 and w.dtype == tf.float32 and groups == 1
            and tuple(dilation) == (1, 1) and batch is not None and batch > 0
            and x.shape.rank == 4 and not images.may_have_one_strided_output(
                tuple(x.shape[2:]), tuple(w.shape[2:]), stride, padding, dilation))


def conv2d_nchw(x, f, bias, *, stride, padding):
    """Conv2D (+ BiasAdd) of the NCHW image `x` by the HWIO filter `f`, NCHW out."""
    (sh, sw), (ph, pw) = stride, padding
    out = raw.Conv2D(input=x, filter=f, strides=(1, 1, sh, sw), padding="EXPLICIT",
                     explicit_paddings=(0, 0, 0, 0, ph, ph, pw, pw), data_format="NCHW")
    if bias is not None:
        out = raw.BiasAdd(value=out, bias=bias, data_format="NCHW")
    return out


_FLOAT32 = tf.float32.as_datatype_enum


def fused_conv2d_nchw(x, f, bias, *, stride, padding):
    """Eagerly, Conv2D + BiasAdd of the NCHW image `x` by the HWIO filter `f` as one
    `_FusedConv2D` (float32; no gradient: forward convs only), NCHW out."""
    (sh, sw), (ph, pw) = stride, padding
    attrs = ("T", _FLOAT32, "TArgs", (_FLOAT32,), "num_args", 1, "num_host_args", 0,
             "strides", (1, 1, sh, sw), "padding", "EXPLICIT",
             "explicit_paddings", (0, 0, 0, 0, ph, ph, pw, pw), "data_format", "NCHW",
             "dilations", (1, 1, 1, 1), "use_cudnn_on_gpu", True, "fused_ops", (b"BiasAdd",),
             "epsilon", 0.0001, "leakyrelu_alpha", 0.2, "filter_format", "HWIO")
    return execute.quick_execute("_FusedConv2D", 1, [x, f, bias], attrs,
                                 context.context())[0]


_probed: list = []  # [bool] once `supported()` has run
_fused_probed: list = []  # [bool] once `fused_supported()` has run


def supported() -> bool:
    """Whether this process's TF runs NCHW Conv2D and BiasAdd on CPU, eagerly and in a
    graph, with the values a hand computation gives. Probed once, from an eager context (a
    lowering asks only when eager; the graph executables ask before they build); asked
    first while a graph is being built, it says no and probes later."""
    if not _probed:
        if not tf.executing_eagerly():
            return False
        _probed.append(_probe())
    return _probed[0]


def fused_supported() -> bool:
    """Whether this process's TF runs an eager NCHW `_FusedConv2D` with a BiasAdd on CPU,
    with the hand-computed values (and `supported()`). Probed once, eagerly."""
    if not _fused_probed:
        if not (tf.executing_eagerly() and supported()):
            return False
        x, f, bias, expected = _probe_case()
        try:
            out = fused_conv2d_nchw(tf.constant(x), tf.constant(f), tf.constant(bias),
                                    stride=(1, 1), padding=(1, 1)).numpy()
        except (tf.errors.OpError, ValueError, TypeError):  # no such op or kernel here
            out = None
        _fused_probed.append(out is not None and np.array_equal(out, expected))
    return _fused_probed[0]


def _probe_case():
    """(x, filter, bias, expected) of a small NCHW conv, its result computed by hand."""
    x = np.arange(18, dtype=np.float32).reshape(1, 2, 3, 3)
    f = np.ones((3, 3, 2, 1), np.float32)
    bias = np.full((1,), 0.5, np.float32)
    # Each output is the sum of its zero-padded 3x3 window over both channels, plus 0.5.
    padded = np.pad(x[0].sum(axis=0), 1)
    expected = np.array([[[[padded[i:i + 3, j:j + 3].sum() + 0.5 for j in range(3)]
                           for i in range(3)]]], np.float32)
    return x, f, bias, expected


def _probe() -> bool:
    x, f, bias, expected = _probe_case()
    try:
        eager = conv2d_nchw(tf.constant(x), tf.constant(f), tf.constant(bias), stride=(1, 1),
                            padding=(1, 1)).numpy()
        graph = tf.Graph()
        with graph.as_default():
            image = tf.compat.v1.placeholder(tf.float32, x.shape)
            out = conv2d_nchw(image, f, bias, stride=(1, 1), padding=(1, 1))
        with tf.compat.v1.Session(graph=graph) as session:
            built = session.run(out, {image: x})
    except (tf.errors.OpError, ValueError):  # no NCHW kernel: TF without oneDNN
        return False
    return np.array_equal(eager, expected) and np.array_equal(built, expected)


# id(weight) -> (weak reference to the weight, its HWIO filter): an eager conv layer's weight
# is the same tensor call after call, so its filter is transposed once, not at every call.
_filters: dict = {}


def eager_filter(w):
    """The HWIO filter of the eager weight `w`, transposed once per weight tensor."""
    key = id(w)
    held = _filters.get(key)
    if held is not None and held[0]() is w:
        return held[1]
    f = raw.Transpose(x=w, perm=images.TO_HWIO)
    try:
        ref = weakref.ref(w, lambda _, key=key: _filters.pop(key, None))
    except TypeError:  # not weakly referable: no caching
        return f
    _filters[key] = (ref, f)
    return f


def conv2d(x, w, bias=None, **attrs):
    """The eager conv2d lowering: NCHW kernels for a forward conv they take (with a bias: one
    fused op), else the NHWC route of `images.conv2d` (graphs, gradients, other dtypes,
    grouped or dilated convs).

    >>> y = conv2d(x, w, b, stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    """
    if (tf.executing_eagerly() and not may_be_differentiated() and usable(x, w, **attrs)
            and supported()):
        route = conv2d_nchw if bias is None or not fused_supported() else fused_conv2d_nchw
        return route(x, eager_filter(w), bias, stride=attrs["stride"], padding=attrs["padding"])
    return images.conv2d(x, w, bias, **attrs)
