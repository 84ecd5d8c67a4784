"""The TensorFlow behaviours the TensorFlow backend routes around (see `unigraph.quirks`).

Listing them imports nothing; each `pin` imports tensorflow through unigraph's backend (so
paddle, when installed, comes first), runs TensorFlow's own call and returns True while
TensorFlow still behaves as written down here. The one quirk that aborts the process is
pinned in a fresh process.
"""

from __future__ import annotations

import numpy as np

from unigraph.quirks import Quirk, run_python

VERSIONS = "2.21.0 (tensorflow-cpu)"


def _tf():
    from unigraph.plugins import get_backend

    return get_backend("tensorflow").load()


def _gradients(fn, *values, dtype="float64"):
    """d sum(fn(*values)) / d values, eagerly, with TF's own gradients."""
    tf = _tf()
    leaves = [tf.constant(np.asarray(v, dtype)) for v in values]
    with tf.GradientTape() as tape:
        tape.watch(leaves)
        out = tf.reduce_sum(fn(*leaves))
    return [g.numpy().tolist() for g in tape.gradient(out, leaves)]


def _conv_of_empty_batch_returns_its_input() -> bool:
    tf = _tf()
    out = tf.nn.conv2d(tf.zeros((0, 5, 5, 3)), tf.ones((3, 3, 3, 4)), strides=1,
                       padding="VALID")
    return tuple(out.shape) == (0, 5, 5, 3)  # the answer is (0, 3, 3, 4)


def _max_pool_grad_of_empty_batch_aborts() -> bool:
    code = (
        "from unigraph.plugins import get_backend\n"
        "tf = get_backend('tensorflow').load()\n"
        "@tf.function\n"
        "def grad(x):\n"
        "    with tf.GradientTape() as tape:\n"
        "        tape.watch(x)\n"
        "        y = tf.reduce_sum(tf.nn.max_pool2d(x, 2, 2, 'VALID'))\n"
        "    return tape.gradient(y, x)\n"
        "grad(tf.zeros((0, 4, 4, 1)))\n"
    )
    result = run_python(code)
    return result.returncode != 0 and b"Check failed" in result.stderr


def _dlpack_of_misaligned_buffer_aborts() -> bool:
    code = (
        "import numpy as np\n"
        "from unigraph.plugins import get_backend\n"
        "tf = get_backend('tensorflow').load()\n"
        "buffer = np.zeros(17, np.float32)\n"
        "start = next(i for i in range(17) if (buffer[i:].ctypes.data % 64) == 4)\n"
        "x = tf.experimental.dlpack.from_dlpack(buffer[start:start + 4].__dlpack__())\n"
        "print(tf.reduce_sum(x).numpy())\n"
    )
    result = run_python(code)
    return result.returncode != 0 and b"IsAligned" in result.stderr


def _no_uint8_kernel(name: str):
    def pin() -> bool:
        tf = _tf()
        try:
            getattr(tf.raw_ops, name)(x=tf.constant([1, 2], tf.uint8))
        except tf.errors.InvalidArgumentError as error:
            return "uint8 is not in the list of allowed values" in str(error)
        return False

    return pin


def _session_negates_a_reshape_of_a_negation_once() -> bool:
    """In a Session with Grappler's default rewrites, -(expand_dims(-x)) is -x."""
    tf = _tf()
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float64, [2])
        y = tf.negative(tf.expand_dims(tf.negative(x), 0))
    with tf.compat.v1.Session(graph=graph) as session:
        got = session.run(y, {x: np.array([0.5, -1.5])})
    return got.tolist() == [[-0.5, 1.5]]


def _max_pool_skips_nan() -> bool:
    tf = _tf()
    x = tf.constant([[[[np.nan], [1.0]], [[0.0], [2.0]]]])  # NHWC, one 2x2 window
    return float(tf.nn.max_pool2d(x, 2, 2, "VALID")[0, 0, 0, 0]) == 2.0


def _tie_goes_to_x(name: str):
    def pin() -> bool:
        tf = _tf()
        ties = _gradients(getattr(tf, name), [1.0], [1.0])
        nans = _gradients(getattr(tf, name), [np.nan], [1.0])
        return ties == [[1.0], [0.0]] and nans == [[0.0], [1.0]]

    return pin


def _softmax_of_inf_is_nan_and_zero() -> bool:
    tf = _tf()
    out = tf.nn.softmax(tf.constant([np.inf, 1.0], tf.float32)).numpy().tolist()
    return np.isnan(out[0]).item() and out[1] == 0.0  # the answer is [nan, nan]


def _float16_softmax_no_closer_than_float32_rounded() -> bool:
    # What unigraph relies on: the float32 Softmax rounded to float16 once is within 1 ulp,
    # and TF's float16 kernel is no closer. Here (oneDNN leaves half to Eigen on this CPU)
    # the kernel is 3.8 ulps off; a CPU whose kernel is exact makes the workaround a cast.
    tf = _tf()
    x = np.linspace(-3.0, 3.0, 8).astype(np.float16)
    exact = np.exp(x.astype(np.float64) - x.max())
    exact /= exact.sum()
    spacing = np.spacing(exact.astype(np.float16)).astype(np.float64)

    def ulps(got) -> float:
        return float((np.abs(got.numpy().astype(np.float64) - exact) / spacing).max())

    rounded = ulps(tf.cast(tf.nn.softmax(tf.constant(x, tf.float32)), tf.float16))
    return rounded <= 1.0 and ulps(tf.nn.softmax(tf.constant(x))) >= rounded


def _float16_ulps(got, exact) -> float:
    spacing = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64)
    return float((np.abs(got.numpy().astype(np.float64) - exact) / spacing).max())


def _float16_sums_no_closer_than_float32_rounded() -> bool:
    # What unigraph relies on: Sum, Mean, Cumsum and Prod in float32, rounded to float16
    # once, are within 1 ulp of the exact result, and TF's float16 kernels are no closer.
    # Here (4,096 terms of [0.5, 1) down axis 0) they add in float16: all three 516 ulps off
    # (5.8 for Sum over [4096, 8]); Prod of 4,096 factors within 2% of 1, 144. A kernel that
    # accumulates in float32 makes the workaround two casts.
    tf = _tf()
    terms = np.random.default_rng(0).uniform(0.5, 1.0, (4096, 4)).astype(np.float16)
    factors = np.random.default_rng(0).uniform(0.98, 1.02, (4096, 4)).astype(np.float16)
    for op, x, exact in ((tf.reduce_sum, terms, lambda w: w.sum(0)),
                         (tf.reduce_mean, terms, lambda w: w.mean(0)),
                         (tf.cumsum, terms, lambda w: np.cumsum(w, 0)),
                         (tf.reduce_prod, factors, lambda w: w.prod(0))):
        want = exact(x.astype(np.float64))
        rounded = _float16_ulps(tf.cast(op(tf.constant(x, tf.float32), axis=0), tf.float16),
                                want)
        if rounded > 1.0 or _float16_ulps(op(tf.constant(x), axis=0), want) < rounded:
            return False
    return True


def _float16_einsum_no_closer_than_float32_rounded() -> bool:
    # What unigraph relies on: tf.einsum in float32, rounded to float16 once, is within 1 ulp
    # of the exact contraction, and the float16 einsum no closer. Here a [8, 4096] x [6, 4096]
    # contraction of [0.5, 1) is 4.4 ulps off (tf.matmul of the same float16 operands: 0.5).
    tf = _tf()
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(0.5, 1.0, (n, 4096)).astype(np.float16) for n in (8, 6))
    want = np.einsum("ik,jk->ij", a.astype(np.float64), b.astype(np.float64))
    wide = tf.einsum("ik,jk->ij", tf.constant(a, tf.float32), tf.constant(b, tf.float32))
    rounded = _float16_ulps(tf.cast(wide, tf.float16), want)
    native = _float16_ulps(tf.einsum("ik,jk->ij", tf.constant(a), tf.constant(b)), want)
    return rounded <= 1.0 and native >= rounded


def _float16_avg_pool_no_closer_than_float32_rounded() -> bool:
    # What unigraph relies on: AvgPool in float32, rounded to float16 once, is within 1 ulp
    # of the exact mean, and the float16 AvgPool no closer. Here (8 x 8 windows of [0.5, 1))
    # it sums in float16: 5.1 ulps off.
    tf = _tf()
    x = np.random.default_rng(0).uniform(0.5, 1.0, (4, 64, 64, 8)).astype(np.float16)
    want = x.astype(np.float64).reshape(4, 8, 8, 8, 8, 8).mean(axis=(2, 4))
    wide = tf.nn.avg_pool2d(tf.constant(x, tf.float32), 8, 8, "VALID")
    rounded = _float16_ulps(tf.cast(wide, tf.float16), want)
    native = _float16_ulps(tf.nn.avg_pool2d(tf.constant(x), 8, 8, "VALID"), want)
    return rounded <= 1.0 and native >= rounded


def _float16_broadcast_gradient_no_closer_than_float32_rounded() -> bool:
    # What unigraph relies on: the gradient of a bias b in (x + b) * w taken in float32,
    # rounded to float16 once, is within 1 ulp of the exact column sums of w, and TF's float16
    # gradient (a float16 Sum of the cotangent) no closer. Here (x [4096, 4], w of [0.5, 1))
    # it adds in float16: 518 ulps off.
    tf = _tf()
    rng = np.random.default_rng(0)
    x, w = (rng.uniform(0.5, 1.0, (4096, 4)).astype(np.float16) for _ in range(2))
    b = rng.uniform(0.5, 1.0, (4,)).astype(np.float16)
    want = w.astype(np.float64).sum(0)

    def bias_gradient(dtype):
        leaf = tf.constant(b, dtype)
        with tf.GradientTape() as tape:
            tape.watch(leaf)
            out = tf.reduce_sum((tf.constant(x, dtype) + leaf) * tf.constant(w, dtype))
        return tf.cast(tape.gradient(out, leaf), tf.float16)

    rounded = _float16_ulps(bias_gradient(tf.float32), want)
    return rounded <= 1.0 and _float16_ulps(bias_gradient(tf.float16), want) >= rounded


def _float16_gather_gradient_no_closer_than_float32_rounded() -> bool:
    # What unigraph relies on: the gradient of tf.gather taken in float32, rounded to
    # float16 once, is within 1 ulp of the exact sum over repeated indices, and TF's float16
    # one (an IndexedSlices made dense by UnsortedSegmentSum) no closer. Here (row 0 picked
    # 4,096 times, cotangents of [0.5, 1)) it adds in float16: 515 ulps off.
    tf = _tf()
    rng = np.random.default_rng(0)
    x, w = rng.uniform(0.5, 1.0, (3, 4)), rng.uniform(0.5, 1.0, (4096, 4)).astype(np.float16)
    indices = np.zeros(4096, np.int64)
    want = np.zeros((3, 4))
    want[0] = w.astype(np.float64).sum(0)

    def gradient(dtype):
        leaf = tf.constant(x.astype(np.float16), dtype)
        with tf.GradientTape() as tape:
            tape.watch(leaf)
            out = tf.reduce_sum(tf.gather(leaf, indices) * tf.constant(w, dtype))
        return tf.cast(tf.convert_to_tensor(tape.gradient(out, leaf)), tf.float16)

    rounded = _float16_ulps(gradient(tf.float32), want)
    return rounded <= 1.0 and _float16_ulps(gradient(tf.float16), want) >= rounded


def _float16_scatter_add_no_closer_than_float32_rounded() -> bool:
    # What unigraph relies on: tensor_scatter_nd_add in float32, rounded to float16 once, is
    # within 1 ulp of the exact sum of repeated indices, and the float16 one no closer. Here
    # (4,096 updates of [0.5, 1) into row 0) it adds in float16: 515 ulps off.
    tf = _tf()
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 1.0, (3, 4)).astype(np.float16)
    updates = rng.uniform(0.5, 1.0, (4096, 4)).astype(np.float16)
    indices = np.zeros((4096, 1), np.int64)
    want = x.astype(np.float64)
    want[0] += updates.astype(np.float64).sum(0)
    wide = tf.tensor_scatter_nd_add(tf.constant(x, tf.float32), indices,
                                    tf.constant(updates, tf.float32))
    rounded = _float16_ulps(tf.cast(wide, tf.float16), want)
    native = _float16_ulps(tf.tensor_scatter_nd_add(tf.constant(x), indices,
                                                    tf.constant(updates)), want)
    return rounded <= 1.0 and native >= rounded


def _float16_floor_divide_floors_the_rounded_quotient() -> bool:
    # Each float16 quotient here rounds up onto the next integer (14.515625 / 0.60498046875
    # is 23.9935..., 24.0 in float16): TF floors that, float32 FloorDiv floors the exact one.
    tf = _tf()
    a = np.array([14.516, -20.0, 6.844, -18.66], np.float16)
    b = np.array([0.605, 0.645, 1.369, 1.865], np.float16)
    exact = [23.0, -32.0, 4.0, -11.0]
    native = tf.math.floordiv(tf.constant(a), tf.constant(b)).numpy().tolist()
    wide = tf.math.floordiv(tf.constant(a, tf.float32), tf.constant(b, tf.float32))
    return native == np.floor(a / b).tolist() and wide.numpy().tolist() == exact


def _matmul_plus_row_fails_in_a_function() -> bool:
    tf = _tf()

    @tf.function
    def fn(a, b, c):
        return tf.matmul(tf.transpose(a), b) + c

    try:
        fn(tf.ones((3, 2)), tf.ones((3, 4)), tf.ones((1, 4)))
    except tf.errors.InvalidArgumentError as error:
        return "bias must be 1-dimensional" in str(error)
    return False


def _matmul_plus_higher_rank_loses_dims_in_a_function() -> bool:
    tf = _tf()
    fn = tf.function(lambda a, b, c: tf.raw_ops.AddV2(x=tf.raw_ops.MatMul(a=a, b=b), y=c))
    out = fn(tf.ones((1, 2)), tf.ones((2, 3)), tf.ones((1, 1, 3)))
    return out.shape.rank == 2  # the broadcast is [1, 1, 3]


def _conv_bias_plus_broadcast_constant_fails_in_a_function() -> bool:
    tf = _tf()
    raw = tf.raw_ops
    fn = tf.function(lambda x, f, b: raw.AddV2(
        x=raw.BiasAdd(value=raw.Conv2D(input=x, filter=f, strides=[1, 1, 1, 1],
                                       padding="VALID"), bias=b),
        y=tf.constant(np.ones((1, 1, 2, 1), np.float32))))
    try:
        fn(tf.ones((1, 2, 2, 2)), tf.ones((1, 1, 2, 2)), tf.ones((2,)))
    except tf.errors.InvalidArgumentError:  # "Must provide as many biases as ..."
        return True
    return False


def _argmax_skips_nan() -> bool:
    tf = _tf()
    return int(tf.argmax(tf.constant([1.0, np.nan, 0.5]))) == 0  # the answer is 1


def _less_takes_no_bool() -> bool:
    tf = _tf()
    try:
        tf.raw_ops.Less(x=tf.constant([False]), y=tf.constant([True]))
    except tf.errors.NotFoundError:  # no kernel registered for bool
        return True
    except tf.errors.InvalidArgumentError:
        return True
    return False


def _conv_gradient_refuses(groups: int = 1, dilations: int = 1):
    def pin() -> bool:
        tf = _tf()
        # A [2, 2, 2, 2] filter over 2 * groups input channels: TF infers the groups.
        try:
            _gradients(lambda x, f: tf.nn.conv2d(x, f, strides=1, padding="VALID",
                                                 dilations=dilations),
                       np.ones((1, 5, 5, 2 * groups)), np.ones((2, 2, 2, 2)))
        except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError):
            return True
        return False

    return pin


def _conv_transpose_refuses_dilation() -> bool:
    tf = _tf()
    x, f = tf.ones((1, 3, 3, 1), tf.float64), tf.ones((2, 2, 1, 1), tf.float64)
    try:
        tf.nn.conv2d_transpose(x, f, [1, 5, 5, 1], strides=1, padding="VALID", dilations=2)
    except tf.errors.InvalidArgumentError as error:
        return "do not yet support dilation rates larger than 1" in str(error)
    return False


def _pair_quirk(name: str) -> Quirk:
    return Quirk(
        op=name, framework="tensorflow", versions=VERSIONS,
        behaviour=f"tf.{name}'s gradient gives a tie all to x, and a NaN pair all to y",
        workaround="tf.custom_gradient with the op's rule (winner takes it, a tie splits "
                   "0.5/0.5, a NaN result passes NaN to both); built only where an op may be "
                   "differentiated (graphs, or under eager_grad's tape)",
        pin=_tie_goes_to_x(name),
    )


def _refuses(error_class: str, text: str, fn):
    """A pin: True while fn(tf) raises TF's `error_class` with `text` in its message."""

    def pin() -> bool:
        tf = _tf()
        try:
            fn(tf)
        except getattr(tf.errors, error_class) as error:
            return text in str(error)
        return False

    return pin


def _function_drops_adding_zero() -> bool:
    tf = _tf()
    out = tf.function(lambda z: z + tf.constant(0.0))(tf.constant([-0.0]))
    return bool(np.signbit(out.numpy())[0])  # -0.0 + 0.0 is +0.0


def _function_turns_zero_minus_into_neg() -> bool:
    tf = _tf()
    out = tf.function(lambda x: tf.constant(0.0) - x)(tf.constant([0.0]))
    return bool(np.signbit(out.numpy())[0])  # 0.0 - 0.0 is +0.0


def _function_divides_by_a_constant_as_a_reciprocal_product() -> bool:
    tf = _tf()
    x = (np.arange(1, 200, dtype=np.float32) * np.float32(0.337)).astype(np.float32)
    out = tf.function(lambda a: a / tf.constant(np.float32(11.0)))(tf.constant(x))
    exact = x / np.float32(11.0)  # correctly rounded, as RealDiv's kernel
    return not np.array_equal(out.numpy(), exact) and np.array_equal(
        out.numpy(), x * (np.float32(1.0) / np.float32(11.0)))


def _strided_slice_truncates_a_large_end() -> bool:
    tf = _tf()
    out = tf.strided_slice(tf.ones((2, 3)), [0, 0], [2**63 - 1, 1], [1, 1])
    return tuple(out.shape) != (2, 1)  # (1, 1): the end was read as int32 (-1)


def _conv_with_one_strided_output_reads_garbage() -> bool:
    tf = _tf()
    rng = np.random.default_rng(7)
    x = rng.normal(size=(2, 4, 4, 1)).astype(np.float32)  # NHWC
    f = rng.normal(size=(1, 3, 1, 2)).astype(np.float32)  # HWIO: one output column
    want = tf.nn.conv2d(x, f, strides=1, padding="VALID").numpy()[:, :, :1]
    # uninitialised memory: any of a few runs far from the stride-1 conv's first column
    return any(not np.allclose(tf.nn.conv2d(x, f, strides=(1, 1, 2, 1), padding="VALID")
                               .numpy(), want, atol=1e-4) for _ in range(5))


def _float_floor_div_is_floor_of_quotient() -> bool:
    tf = _tf()
    got = tf.raw_ops.FloorDiv(x=tf.constant([np.inf, -1.0]), y=tf.constant([1.0, np.inf]))
    return bool(np.isposinf(got.numpy()[0]) and got.numpy()[1] == 0.0)  # NumPy: nan, -1


def _float64_erf_is_nan_at_infinity() -> bool:
    tf = _tf()
    got = tf.raw_ops.Erf(x=tf.constant([np.inf, -np.inf, 1e300, 1.0], tf.float64)).numpy()
    return bool(np.isnan(got[:3]).all() and abs(got[3] - 0.8427007929497149) < 1e-15)


def _stable_argsort_misorders_around_nan() -> bool:
    tf = _tf()
    x = np.array([3.0, np.nan, 1.0, 3.0, -np.inf, 1.0, np.nan, 0.0], np.float32)
    got = tf.argsort(x, stable=True).numpy()
    return bool((got != np.argsort(x, kind="stable")).any())


def _top_k_misorders_around_nan() -> bool:
    tf = _tf()
    x = np.array([3.0, np.nan, 1.0, 3.0, -np.inf, 1.0, np.nan, 0.0], np.float32)
    got = tf.math.top_k(x, len(x)).indices.numpy()
    stable = len(x) - 1 - np.argsort(x[::-1], kind="stable")[::-1]
    return bool((got != stable).any())


def _float16_apply_adam_of_a_zero_gradient_is_nan() -> bool:
    tf = _tf()
    half = tf.float16
    param = tf.Variable(tf.constant([0.5, 0.75], half))
    m, v = tf.Variable(tf.zeros(2, half)), tf.Variable(tf.zeros(2, half))
    zero = tf.zeros((), half)
    tf.raw_ops.ResourceApplyAdam(
        var=param.handle, m=m.handle, v=v.handle, beta1_power=zero, beta2_power=zero,
        lr=tf.constant(0.01, half), beta1=tf.constant(0.9, half), beta2=tf.constant(0.999, half),
        epsilon=tf.constant(1e-8, half), grad=tf.constant([1.0, 0.0], half))
    got = param.numpy()
    return bool(np.isnan(got[1])) and not bool(np.isnan(got[0]))


QUIRKS = [
    Quirk(
        op="adam_update", framework="tensorflow", versions=VERSIONS,
        behaviour="ResourceApplyAdam on float16 variables runs in float16, where an epsilon "
                  "of 1e-8 is 0: an entry whose gradient is 0 becomes 0 / 0 = NaN",
        workaround="a float16 adam_update is the formula in float32, p, m and v each "
                   "rounded to float16 once, assigned (adam.written_by_adam leaves it out)",
        pin=_float16_apply_adam_of_a_zero_gradient_is_nan,
    ),
    Quirk(
        op="conv2d", framework="tensorflow", versions=VERSIONS,
        behaviour="tf.nn.conv2d on an empty batch (N = 0) returns its input [0, H, W, C] "
                  "while its static shape says [0, OH, OW, O]",
        workaround="zeros of the true shape when the batch is empty (a tf.cond when it is "
                   "known only at run time): images.nonempty_batch",
        pin=_conv_of_empty_batch_returns_its_input,
    ),
    Quirk(
        op="max_pool2d", framework="tensorflow", versions=VERSIONS,
        behaviour="in a graph, oneDNN's MaxPoolGrad on an empty batch aborts the process "
                  "(Check failed: dtype() == expected_dtype)",
        workaround="pools of an empty batch are zeros of the true shape, so no pool "
                   "gradient kernel runs: images.nonempty_batch",
        pin=_max_pool_grad_of_empty_batch_aborts,
    ),
    Quirk(
        op="max_pool2d", framework="tensorflow", versions=VERSIONS,
        behaviour="tf.nn.max_pool2d skips NaN ([[nan, 1], [0, 2]] pools to 2)",
        workaround="NaN where the window holds one (a second pool over isnan(x)); the "
                   "gradient goes to the window's first NaN by a MaxPoolGrad over that mask "
                   "(tf.custom_gradient): images.first_maximum_pool",
        pin=_max_pool_skips_nan,
    ),
    _pair_quirk("maximum"),
    _pair_quirk("minimum"),
    Quirk(
        op="softmax", framework="tensorflow", versions=VERSIONS,
        behaviour="float32 tf.nn.softmax([inf, 1]) is [nan, 0] and softmax([1, nan]) is "
                  "[0, nan]; the op's exp(x - max) / sum(...) is NaN across such a row",
        workaround="softmax(x) + (max - max): adds NaN to a row whose max is not finite, "
                   "exactly 0 elsewhere",
        pin=_softmax_of_inf_is_nan_and_zero,
    ),
    Quirk(
        op="softmax", framework="tensorflow", versions=VERSIONS,
        behaviour="the CPU Softmax of float16 is no closer than the float32 one rounded, and "
                  "where oneDNN leaves half to Eigen (this CPU) ulps off: "
                  "softmax(linspace(-3, 3, 8)) by up to 3.8 ulps, an expanded float16 "
                  "attention (an ONNX node case) by 2, past ONNX's rtol 1e-3",
        workaround="float16 softmax runs in float32, rounded to float16 once (within 1 ulp, as "
                   "torch's)",
        pin=_float16_softmax_no_closer_than_float32_rounded,
    ),
    Quirk(
        op="sum (mean, cumsum, prod)", framework="tensorflow", versions=VERSIONS,
        behaviour="float16 Sum, Mean, Cumsum and Prod are no closer than the float32 ones "
                  "rounded, and on this CPU accumulate in float16: 4,096 terms of [0.5, 1) "
                  "down axis 0 are 516 ulps off, the Prod of 4,096 factors within 2% of 1 "
                  "144, past the checker's budget; Mean overflows: mean([65504, 65504, 1, 1]) "
                  "is inf, not 32752",
        workaround="float16 sum, mean, cumsum and prod run in float32, rounded to float16 once "
                   "(lowerings.in_float32; within 1 ulp, as torch, Paddle and onnxruntime)",
        pin=_float16_sums_no_closer_than_float32_rounded,
    ),
    Quirk(
        op="einsum", framework="tensorflow", versions=VERSIONS,
        behaviour="float16 tf.einsum is no closer than the float32 one rounded, and on this CPU "
                  "accumulates in float16: [8, 4096] x [6, 4096] of [0.5, 1) is 4.4 ulps off "
                  "(tf.matmul of the same operands 0.5)",
        workaround="float16 einsum runs in float32, rounded to float16 once "
                   "(lowerings.in_float32; within 1 ulp, as the other targets)",
        pin=_float16_einsum_no_closer_than_float32_rounded,
    ),
    Quirk(
        op="avg_pool2d", framework="tensorflow", versions=VERSIONS,
        behaviour="float16 AvgPool is no closer than the float32 one rounded, and on this CPU "
                  "sums in float16: 8 x 8 windows of [0.5, 1) are 5.1 ulps off",
        workaround="float16 avg_pool2d runs in float32, rounded to float16 once "
                   "(images.avg_pool2d_nhwc; within 1 ulp, as torch, Paddle and onnxruntime)",
        pin=_float16_avg_pool_no_closer_than_float32_rounded,
    ),
    Quirk(
        op="add (sub, mul, div, where)", framework="tensorflow", versions=VERSIONS,
        behaviour="the float16 gradient of an operand that broadcast (a bias) is no closer than "
                  "the float32 one rounded, and on this CPU sums the cotangent in float16: a "
                  "[4] bias added to [4096, 4] rows gets a gradient 518 ulps off, past the "
                  "checker's budget",
        workaround="float16 add, sub, mul, div and where of operands of different shapes run "
                   "in float32, rounded to float16 once, where a gradient may be taken "
                   "(lowerings.broadcast_in_float32: the same values; the gradient within 1 "
                   "ulp, as torch and Paddle)",
        pin=_float16_broadcast_gradient_no_closer_than_float32_rounded,
    ),
    Quirk(
        op="take", framework="tensorflow", versions=VERSIONS,
        behaviour="the float16 gradient of tf.gather is no closer than the float32 one "
                  "rounded, and on this CPU sums repeated indices in float16 (its "
                  "IndexedSlices made dense by UnsortedSegmentSum): a row picked 4,096 times "
                  "gets a gradient 515 ulps off, past the checker's budget",
        workaround="float16 take, where a gradient may be taken, has a gradient that sums in "
                   "float32, rounded to float16 once (lowerings._gather_summed_in_float32; "
                   "within 1 ulp, as torch and Paddle)",
        pin=_float16_gather_gradient_no_closer_than_float32_rounded,
    ),
    Quirk(
        op="scatter_add", framework="tensorflow", versions=VERSIONS,
        behaviour="float16 TensorScatterAdd is no closer than the float32 one rounded, and on "
                  "this CPU adds repeated indices in float16: 4,096 updates of [0.5, 1) into "
                  "one row are 515 ulps off, past the checker's budget",
        workaround="float16 scatter_add runs in float32, rounded to float16 once "
                   "(lowerings.in_float32; within 1 ulp, as torch and onnxruntime)",
        pin=_float16_scatter_add_no_closer_than_float32_rounded,
    ),
    Quirk(
        op="floor_divide", framework="tensorflow", versions=VERSIONS,
        behaviour="float16 FloorDiv floors the quotient rounded to float16: 14.516 // 0.605 "
                  "is 24 (the exact quotient is 23.99)",
        workaround="float16 floor_divide runs in float32, rounded to float16 once "
                   "(lowerings.in_float32)",
        pin=_float16_floor_divide_floors_the_rounded_quotient,
    ),
    Quirk(
        op="add", framework="tensorflow", versions=VERSIONS,
        behaviour="in a tf.function, matmul(transpose(a), b) + c with c of shape [1, N] "
                  "fails: Grappler fuses it into MatMul + BiasAdd, whose kernel refuses the "
                  "2-D bias ('bias must be 1-dimensional')",
        workaround="in graph modes a [1, N] row added to a MatMul goes in reshaped to [N] "
                   "(lowerings.add_in_graph)",
        pin=_matmul_plus_row_fails_in_a_function,
    ),
    Quirk(
        op="add", framework="tensorflow", versions=VERSIONS,
        behaviour="in a tf.function, MatMul(a, b) + c with c of more than 2 dims, its leading "
                  "ones 1 ([1, 1, N]), gives a [M, N] result where the broadcast is [1, M, N]: "
                  "Grappler fuses it into MatMul + BiasAdd, which keeps the product's dims",
        workaround="in graph modes the product goes in expanded to c's rank (ExpandDims), "
                   "which is not fused (lowerings.add_in_graph)",
        pin=_matmul_plus_higher_rank_loses_dims_in_a_function,
    ),
    Quirk(
        op="add", framework="tensorflow", versions=VERSIONS,
        behaviour="in a tf.function, conv2d(x, f) + bias (a BiasAdd) + c with c a constant of "
                  "the sum's rank that broadcasts ([1, 1, W, 1]) fails when it runs: Grappler "
                  "fuses the three into _FusedConv2D, whose kernel takes c for a bias ('Must "
                  "provide as many biases as the last dimension of the input tensor'); with "
                  "oneDNN's NCHW conv, an added value that broadcasts fails to build the kernel",
        workaround="in graph modes a BiasAdd plus a value of another shape runs one rank up "
                   "(ExpandDims of both, Squeeze of the sum), which is not fused "
                   "(lowerings.add_in_graph)",
        pin=_conv_bias_plus_broadcast_constant_fails_in_a_function,
    ),
    Quirk(
        op="argmax", framework="tensorflow", versions=VERSIONS,
        behaviour="tf.argmax skips NaN ([1, nan, 0.5] -> 0)",
        workaround="where a slice holds a NaN, the index of its first NaN (ArgMax over IsNan)",
        pin=_argmax_skips_nan,
    ),
    Quirk(
        op="less (less_equal, greater, greater_equal)", framework="tensorflow",
        versions=VERSIONS,
        behaviour="no Less/Greater kernel for bool",
        workaround="bools compared as int8 (False < True holds there too)",
        pin=_less_takes_no_bool,
    ),
    Quirk(
        op="conv2d", framework="tensorflow", versions=VERSIONS,
        behaviour="the float64 CPU Conv2D gradient kernels refuse dilations (the forward "
                  "runs; float32 goes through oneDNN, which takes them)",
        workaround="stride 1: tf.nn.convolution (SpaceToBatchND route); strided: the filter "
                   "dilated with zeros (images.dilate_filter)",
        pin=_conv_gradient_refuses(dilations=2),
    ),
    Quirk(
        op="conv2d", framework="tensorflow", versions=VERSIONS,
        behaviour="the float64 CPU Conv2D gradient kernels refuse grouped filters (the "
                  "forward runs; float32 goes through oneDNN, which takes them)",
        workaround="one conv per group: split the channels, concat the outputs",
        pin=_conv_gradient_refuses(groups=2),
    ),
    Quirk(
        op="from_dlpack (ug.from_native, ug.from_dlpack)", framework="tensorflow",
        versions=VERSIONS,
        behaviour="tf.experimental.dlpack.from_dlpack takes a buffer not aligned to 64 "
                  "bytes, and the first kernel that reads it aborts the process "
                  "(Check failed: IsAligned())",
        workaround="a misaligned buffer is copied (tf.convert_to_tensor) instead of shared",
        pin=_dlpack_of_misaligned_buffer_aborts,
    ),
    Quirk(
        op="neg", framework="tensorflow", versions=VERSIONS,
        behaviour="no Neg kernel for uint8",
        workaround="negated in int32 and cast back (wraps modulo 256 as NumPy's negative; "
                   "not 0 - x, which Grappler turns back into Neg)",
        pin=_no_uint8_kernel("Neg"),
    ),
    Quirk(
        op="neg (Grappler)", framework="tensorflow", versions=VERSIONS,
        behaviour="in a tf.compat.v1 Session, Grappler's arithmetic optimizer rewrites "
                  "-(expand_dims(-x)) and -(reshape(-x)) to -x, silently; TF's own gradients "
                  "make that pattern too (d/dc of a - reshape(-c)); tf.function's is right",
        workaround="tensorflow:static's Session runs with Grappler's arithmetic optimizer off "
                   "(static.session_config; tests/test_neg_through_reshape.py)",
        pin=_session_negates_a_reshape_of_a_negation_once,
    ),
    Quirk(
        op="abs", framework="tensorflow", versions=VERSIONS,
        behaviour="no Abs kernel for uint8",
        workaround="the value itself (an unsigned value is its own absolute value)",
        pin=_no_uint8_kernel("Abs"),
    ),
    Quirk(
        op="conv_transpose2d", framework="tensorflow", versions=VERSIONS,
        behaviour="the float64 CPU Conv2DBackpropInput (tf.nn.conv2d_transpose) refuses "
                  "dilations ('Current CPU implementations do not yet support dilation rates "
                  "larger than 1')",
        workaround="the filter dilated with zeros (images.dilate_filter), then a transposed "
                   "conv without dilations",
        pin=_conv_transpose_refuses_dilation,
    ),
    Quirk(
        op="add", framework="tensorflow", versions=VERSIONS,
        behaviour="in a tf.function, Grappler rewrites x + 0.0 (a constant zero) to x, so "
                  "-0.0 + 0.0 gives -0.0 where IEEE arithmetic gives +0.0",
        workaround="no Const for a program's constants: tensorflow:function captures them "
                   "(function.captured_constant), tensorflow:static holds each in a "
                   "PlaceholderWithDefault never fed (static.held_constant; "
                   "tests/test_eager_fast_paths.py)",
        pin=_function_drops_adding_zero,
    ),
    Quirk(
        op="div", framework="tensorflow", versions=VERSIONS,
        behaviour="in a tf.function (and a Session's graph of more than a few nodes), "
                  "Grappler's constant folding rewrites x / c (c a Const) to x * (1 / c), which "
                  "is not correctly rounded: x / 11.0 differed from RealDiv's result in the "
                  "last bit in 75 of 199 float32 elements",
        workaround="no Const for a program's constants: tensorflow:function captures them "
                   "(function.captured_constant: eager tensors, inputs of the function), "
                   "tensorflow:static holds each in a PlaceholderWithDefault never fed "
                   "(static.held_constant), so RealDiv runs (tests/test_divide_by_a_constant.py)",
        pin=_function_divides_by_a_constant_as_a_reciprocal_product,
    ),
    Quirk(
        op="sub", framework="tensorflow", versions=VERSIONS,
        behaviour="in a tf.function, Grappler rewrites 0.0 - x (a constant zero) to Neg(x), so "
                  "0.0 - 0.0 gives -0.0 where IEEE arithmetic gives +0.0",
        workaround="no Const for a program's constants: tensorflow:function captures them "
                   "(function.captured_constant), tensorflow:static holds each in a "
                   "PlaceholderWithDefault never fed (static.held_constant)",
        pin=_function_turns_zero_minus_into_neg,
    ),
    Quirk(
        op="softmax", framework="tensorflow", versions=VERSIONS,
        behaviour="tf.nn.softmax of a float32 (float16) tensor of rank > 5 fails, eagerly and "
                  "in graphs: oneDNN's Softmax takes ranks 1 to 5 ('Input dims must be <= 5 "
                  "and >=1'); float64 runs at any rank",
        workaround="above rank 5 (not float64), the softmax of a [before, n] or [before, n, "
                   "after] view, reshaped back (ranks.on_a_view)",
        pin=_refuses("AbortedError", "Input dims must be <= 5",
                     lambda tf: tf.nn.softmax(tf.ones((2,) * 6))),
    ),
    Quirk(
        op="add (every broadcasting binary op), broadcast_to, max/min/prod/sum/mean "
           "gradients",
        framework="tensorflow", versions=VERSIONS,
        behaviour="a broadcast of more than 5 dims once adjacent dims that broadcast alike "
                  "are merged is refused ('Broadcast between [2,1,2,1,2,1] and [1,3,1,3,1,3] "
                  "is not supported yet'): binary ops, BroadcastTo, and TF's gradients of "
                  "Max/Min/Prod (and eagerly of Sum/Mean)",
        workaround="the operands broadcast one axis at a time, each step a 3-D BroadcastTo "
                   "(ranks.broadcast_in_steps), where TF would refuse: graphs from the static "
                   "shapes (where a dim is open, if TF may refuse for some size of it, the "
                   "dim read at run time), eagerly after TF's kernel refused; the reductions' "
                   "gradients are TF's formulas, broadcast in steps (tf.custom_gradient)",
        pin=_refuses("UnimplementedError", "is not supported yet",
                     lambda tf: tf.ones((2, 1, 2, 1, 2, 1)) + tf.ones((1, 3, 1, 3, 1, 3))),
    ),
    Quirk(
        op="argmax", framework="tensorflow", versions=VERSIONS,
        behaviour="tf.argmax of a tensor of rank > 7 fails ('Argmax and Argmin only support "
                  "up to 7 input dimensions')",
        workaround="above rank 7, the argmax of a [before, n, after] view, reshaped back "
                   "(ranks.on_a_view)",
        pin=_refuses("InvalidArgumentError", "only support up to 7 input dimensions",
                     lambda tf: tf.argmax(tf.ones((2,) * 8), axis=0)),
    ),
    Quirk(
        op="slice (strided_slice end)", framework="tensorflow", versions=VERSIONS,
        behaviour="tf.strided_slice given ends as Python ints reads them as int32 when one "
                  "fits, so an end of 2**63 - 1 (slicing to the end) wraps: "
                  "strided_slice(ones((2, 3)), [0, 0], [2**63 - 1, 1], [1, 1]) has shape "
                  "(1, 1), not (2, 1)",
        workaround="an end of TO_END (a dim of unknown size sliced to its end) is given "
                   "by end_mask, the end itself left 0",
        pin=_strided_slice_truncates_a_large_end,
    ),
    Quirk(
        op="conv2d", framework="tensorflow", versions=VERSIONS,
        behaviour="the CPU Conv2D of float32 with a stride above 1 along an axis that has one "
                  "output gives values of uninitialised memory (stride (1, 2), one output "
                  "column, one input channel, a batch of 2: 1e24 where 0.3 is right), "
                  "eagerly and in graphs, forward and gradient",
        workaround="stride 1 along such an axis, then its first output: the same window "
                   "(images.convolve; where that axis is open in the trace, a tf.cond on "
                   "its output count when the graph runs); conv_transpose2d, whose gradient "
                   "is such a conv where its input has one cell along a strided axis, "
                   "spreads that cell with stride 1 (images.conv_transpose2d)",
        pin=_conv_with_one_strided_output_reads_garbage,
    ),
    Quirk(
        op="floor_divide", framework="tensorflow", versions=VERSIONS,
        behaviour="float FloorDiv is floor(x / y): inf // 1.0 is inf and -1.0 // inf is 0.0, "
                  "where NumPy (and Python) give nan and -1.0",
        workaround="floats follow NumPy's npy_divmod: fmod (TruncateMod), (x - fmod) / y, "
                   "one less where the signs differ, floor, the zero quotient signed as x / y, "
                   "x / y where y is 0; float16 through float32 (lowerings.floor_divide; "
                   "tests/test_special_values.py)",
        pin=_float_floor_div_is_floor_of_quotient,
    ),
    Quirk(
        op="erf", framework="tensorflow", versions=VERSIONS,
        behaviour="float64 Erf is NaN at +-inf and at large |x| (1e300), where erf is +-1",
        workaround="float64: where(|x| > 6, sign(x), Erf(x)); erf(6) rounds to 1 in float64 "
                   "and its gradient there is 0 either way (lowerings.erf)",
        pin=_float64_erf_is_nan_at_infinity,
    ),
    Quirk(
        op="argsort", framework="tensorflow", versions=VERSIONS,
        behaviour="tf.argsort(stable=True) of floats holding a NaN misorders the other "
                  "values too: [3, nan, 1, 3, -inf, 1, nan, 0] is put in the order [-inf, 1, 3, "
                  "nan, 1, 3, nan, 0]",
        workaround="sorted with NaN read as 0, then that order sorted stably by 'is NaN' "
                   "(NaN last, the rest in place: lowerings.argsort)",
        pin=_stable_argsort_misorders_around_nan,
    ),
    Quirk(
        op="topk", framework="tensorflow", versions=VERSIONS,
        behaviour="tf.math.top_k of floats holding a NaN misorders them: [3, nan, 1, 3, -inf, "
                  "1, nan, 0] comes as indices 0, 1, 3, 2, 5, 4, 6, 7 (NaN neither first nor "
                  "last); it has no smallest-first form",
        workaround="floats, and largest=False: the first k of the stable argsort (of x "
                   "reversed along the axis, reversed back, for largest); ints largest first: "
                   "tf.math.top_k (lowerings.topk)",
        pin=_top_k_misorders_around_nan,
    ),
]
