"""The PaddlePaddle behaviours the Paddle backend routes around (see `unigraph.quirks`).

Listing them imports nothing; each `pin` imports paddle (through the backend, which imports
it safely), runs Paddle's own call and returns True while Paddle still behaves as written
down here. A quirk whose behaviour is a crash (threads, import order, two `while_loop`
builds) is pinned in a fresh process.
"""

from __future__ import annotations

import math
import signal
from fractions import Fraction

import numpy as np

from unigraph.quirks import Quirk, run_python

VERSIONS = "3.3.1"


def _paddle():
    from unigraph_paddle.backend import PaddleBackend

    return PaddleBackend().load()


def _leaf(paddle, values, dtype="float64"):
    leaf = paddle.to_tensor(np.array(values, dtype=dtype))
    leaf.stop_gradient = False
    return leaf


def _static_merges_signed_zero_constants() -> bool:
    from unigraph_paddle.static import StaticMode

    paddle = _paddle()
    with StaticMode(paddle):
        main = paddle.static.Program()
        with paddle.static.program_guard(main, paddle.static.Program()):
            z = paddle.static.data("z", [1], "float32")
            plus = paddle.add(z, paddle.full([], 0.0, "float32"))
            minus = paddle.add(z, paddle.full([], -0.0, "float32"))
        got = paddle.static.Executor().run(main, feed={"z": np.array([-0.0], np.float32)},
                                           fetch_list=[plus, minus])
    return not np.signbit(got[1][0])  # -0.0 + -0.0 is -0.0


def _program_scale_bias_is_one_zero() -> bool:
    from unigraph_paddle.static import StaticMode

    paddle = _paddle()
    with StaticMode(paddle):
        main = paddle.static.Program()
        with paddle.static.program_guard(main, paddle.static.Program()):
            z = paddle.static.data("z", [1], "float32")
            paddle.scale(z, 2.0, 0.0)  # a +0.0 bias first (any earlier Program may hold one)
            minus = paddle._C_ops.scale(z, paddle.full([], 2.0, "float32"), -0.0, True)
        got = paddle.static.Executor().run(main, feed={"z": np.array([-0.0], np.float32)},
                                           fetch_list=[minus])
    return not np.signbit(got[0][0])  # -0.0 * 2 + -0.0 is -0.0


def _program_where_broadcast_drops_negative_zero() -> bool:
    from unigraph_paddle.static import StaticMode

    paddle = _paddle()
    with StaticMode(paddle):
        main = paddle.static.Program()
        with paddle.static.program_guard(main, paddle.static.Program()):
            z = paddle.static.data("z", [2], "float32")
            picked = paddle.where(z == 0, z, paddle.full([1], 2.0, "float32"))
        got = paddle.static.Executor().run(main, feed={"z": np.array([-0.0, 1.0], np.float32)},
                                           fetch_list=[picked])
    return not np.signbit(got[0][0])  # where picks z's -0.0


def _program_where_of_open_dims_does_not_broadcast() -> bool:
    from unigraph_paddle.static import StaticMode

    paddle = _paddle()
    with StaticMode(paddle):
        main = paddle.static.Program()
        with paddle.static.program_guard(main, paddle.static.Program()):
            x = paddle.static.data("x", [-1], "float32")
            y = paddle.static.data("y", [-1], "float32")
            picked = paddle.where(x > y, x, y)
        try:
            paddle.static.Executor().run(
                main, feed={"x": np.zeros(2, np.float32), "y": np.ones(1, np.float32)},
                fetch_list=[picked])
        except ValueError as error:  # InvalidArgumentError: "should be same"
            return "should be same" in str(error)
    return False


def _softmax_floors_at_minus_64() -> bool:
    import paddle.nn.functional as F

    paddle = _paddle()
    got = F.softmax(paddle.to_tensor(np.array([0.0, -80.0, -np.inf]))).numpy()
    return bool(abs(got[1] - np.exp(-64.0)) < 1e-30 and got[2] == got[1])


def _float32_exp_stops_above_zero() -> bool:
    paddle = _paddle()
    # Its vectorised kernel: 8 elements or more (7 give 0 and 3.8e-44).
    got = paddle.exp(paddle.to_tensor(np.array([-np.inf, -100.0] * 4, np.float32))).numpy()
    return bool(np.all((got > 2.9e-39) & (got < 3e-39)))


def _float64_exp_stops_above_zero() -> bool:
    paddle = _paddle()
    # Its vectorised kernel: 16 elements (a 2-element tensor gives 0).
    got = paddle.exp(paddle.to_tensor(np.array([-np.inf, -800.0] * 8))).numpy()
    return bool(np.all((got > 5e-309) & (got < 6e-309)))


def _no_small_int_kernels() -> bool:
    paddle = _paddle()
    cases = [(paddle.maximum, "int16", 2), (paddle.multiply, "uint8", 2),
             (paddle.abs, "uint8", 1), (paddle.remainder, "int16", 2),
             (paddle.argmax, "int8", 1), (paddle.max, "int16", 1), (paddle.prod, "uint8", 1)]
    for fn in (paddle.tril, paddle.argsort):  # (2-D: tril needs a matrix)
        try:
            fn(paddle.to_tensor(np.ones((2, 2), "int8")))
        except RuntimeError as error:
            if "is not registered" not in str(error):
                return False
        else:
            return False
    for fn, dtype, arity in cases:
        x = paddle.to_tensor(np.array([1, 2], dtype))
        try:
            fn(*[x] * arity)
        except RuntimeError as error:
            if "is not registered" not in str(error):
                return False
        else:
            return False
    return True


def _concat_checks_unit8() -> bool:
    from unigraph_paddle.static import StaticMode

    paddle = _paddle()
    with StaticMode(paddle), paddle.static.program_guard(paddle.static.Program()):
        x = paddle.static.data("x", [2], "uint8")
        try:
            paddle.concat([x, x])
        except TypeError as error:
            return "'unit8'" in str(error)
    return False


def _assign_refuses_small_int_arrays() -> bool:
    paddle = _paddle()
    try:
        paddle.assign(np.array([1, 2], np.int16))
    except RuntimeError as error:  # eager; a Program refuses with a TypeError
        return "is not registered" in str(error)
    return False


def _detached_int16_cast_fails_to_run() -> bool:
    from unigraph_paddle.static import StaticMode

    paddle = _paddle()
    program = paddle.static.Program()
    with StaticMode(paddle), paddle.static.program_guard(program):
        x = paddle.static.data("x", [2], "float64")
        y = paddle.cast(x, "int16").detach()
        try:
            paddle.static.Executor(paddle.CPUPlace()).run(
                program, feed={"x": np.array([1.5, 2.5])}, fetch_list=[y])
        except RuntimeError as error:
            return "share_data_" in str(error)
    return False


def _py_func_refused_in_a_program() -> bool:
    from unigraph_paddle.static import StaticMode

    paddle = _paddle()
    with StaticMode(paddle), paddle.static.program_guard(paddle.static.Program()):
        x = paddle.static.data("x", [2], "float32")
        try:
            paddle.static.py_func(func=lambda a: None, x=[x], out=None)
        except TypeError as error:
            return "operator py_func" in str(error)
    return False


def _log_softmax_saturates() -> bool:
    paddle = _paddle()
    out = paddle.nn.functional.log_softmax(paddle.to_tensor([1000.0, 0.0], "float64"))
    return float(out[1]) > -100.0  # the answer is -1000


def _cross_entropy_saturates() -> bool:
    paddle = _paddle()
    logits = paddle.to_tensor([[1000.0, 0.0]], "float64")
    loss = paddle.nn.functional.cross_entropy(logits, paddle.to_tensor([1]), reduction="none")
    return float(loss.reshape([-1])[0]) < 100.0  # the answer is 1000


def _relu_of_nan_is_zero() -> bool:
    paddle = _paddle()
    return float(paddle.nn.functional.relu(paddle.to_tensor([float("nan")]))[0]) == 0.0


def _softplus_loses_small_results() -> bool:
    paddle = _paddle()
    out = paddle.nn.functional.softplus(paddle.to_tensor([-20.0, -40.0], "float32"))
    return out.numpy().tolist() == [0.0, 0.0]


def _zero_gradient_where_nan(name: str):
    def pin() -> bool:
        paddle = _paddle()
        x, y = _leaf(paddle, [float("nan")]), _leaf(paddle, [1.0])
        dx, dy = paddle.grad([getattr(paddle, name)(x, y).sum()], [x, y])
        return float(dx[0]) == 0.0 and float(dy[0]) == 0.0

    return pin


def _max_pool_drops_a_leading_nan() -> bool:
    paddle = _paddle()
    x = paddle.to_tensor([[[[float("nan"), 1.0], [1.0, 1.0]]]], "float64")
    return float(paddle.nn.functional.max_pool2d(x, 2, 1).reshape([-1])[0]) == 1.0


def _cast_to_int_passes_gradient() -> bool:
    paddle = _paddle()
    x = _leaf(paddle, [1.5, 2.5], "float32")
    back = paddle.cast(paddle.cast(x, "int32"), "float32")
    (dx,) = paddle.grad([back.sum()], [x], allow_unused=True)
    return dx is not None and dx.numpy().tolist() == [1.0, 1.0]


def _avg_pool_float64_gradient_in_float32() -> bool:
    paddle = _paddle()
    x = _leaf(paddle, np.zeros((1, 1, 3, 3)))
    (dx,) = paddle.grad([paddle.nn.functional.avg_pool2d(x, 3).sum()], [x])
    return float(dx.reshape([-1])[0]) != 1 / 9 and abs(float(dx.reshape([-1])[0]) - 1 / 9) < 1e-8


def _cpu_has_no_float16_add() -> bool:
    paddle = _paddle()
    if paddle.get_device().startswith("gpu"):
        return True  # the widening is CPU-only; on a GPU place there is nothing to pin
    half = paddle.to_tensor(np.ones(2, np.float16))
    try:
        paddle.add(half, half)
    except RuntimeError:
        return True
    return False


def _float16_index_add_no_closer_than_float32_rounded() -> bool:
    # What unigraph relies on: index_add in float32, rounded to float16 once, is within 1 ulp
    # of the exact sum of repeated indices, and the float16 index_add no closer. Here (4,096
    # updates of [0.5, 1) into row 0) it adds in float16: 515 ulps off.
    paddle = _paddle()
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 1.0, (3, 4)).astype(np.float16)
    updates = rng.uniform(0.5, 1.0, (4096, 4)).astype(np.float16)
    indices = paddle.to_tensor(np.zeros(4096, np.int64))
    want = x.astype(np.float64)
    want[0] += updates.astype(np.float64).sum(0)

    def ulps(got):
        spacing = np.spacing(np.abs(want).astype(np.float16)).astype(np.float64)
        return float((np.abs(got.numpy().astype(np.float64) - want) / spacing).max())

    wide = paddle.index_add(paddle.to_tensor(x, "float32"), indices, 0,
                            paddle.to_tensor(updates, "float32"))
    rounded = ulps(paddle.cast(wide, "float16"))
    native = ulps(paddle.index_add(paddle.to_tensor(x), indices, 0, paddle.to_tensor(updates)))
    return rounded <= 1.0 and native >= rounded


def _cpu_has_no_float16_exp_grad() -> bool:
    paddle = _paddle()
    if paddle.get_device().startswith("gpu"):
        return True  # the widening is CPU-only; on a GPU place there is nothing to pin
    half = paddle.to_tensor(np.array([0.5, -1.0], np.float16), stop_gradient=False)
    out = paddle.exp(half)  # the forward kernel is there
    try:
        paddle.grad([paddle.sum(out)], [half])
    except RuntimeError as error:
        return "exp_grad" in str(error)
    return False


def _run_static(build, feed):
    """Build a Program with `build(paddle)` -> fetch list; run it once; return the results
    (or the exception it raised)."""
    paddle = _paddle()
    from unigraph_paddle.static import StaticMode

    main, startup = paddle.static.Program(), paddle.static.Program()
    with StaticMode(paddle):
        with paddle.static.program_guard(main, startup):
            fetch = build(paddle)
        executor = paddle.static.Executor(paddle.CPUPlace())
        try:
            return executor.run(main, feed=feed, fetch_list=fetch, scope=paddle.static.Scope())
        except RuntimeError as error:
            return error


def _program_has_no_float16_slice_gradient() -> bool:
    def build(paddle):
        x = paddle.static.data("x", [4], "float16")
        x.stop_gradient = False
        (grad,) = paddle.static.gradients([paddle.sum(paddle.strided_slice(
            x, [0], [1], [4], [2]))], [x])
        return [grad]

    got = _run_static(build, {"x": np.ones(4, np.float16)})
    return isinstance(got, RuntimeError) and "strided_slice_grad" in str(got)


def _loop(paddle, n, body, start):
    count = paddle.full([], 0, "int64")
    return paddle.static.nn.while_loop(lambda k, a: k < n, lambda k, a: [k + 1, body(a)],
                                       [count, start])[1]


def _if_in_while_gradient_is_zero() -> bool:
    def build(paddle):
        x = paddle.static.data("x", [2], "float64")
        x.stop_gradient = False
        branch = lambda a: paddle.static.nn.cond(paddle.sum(a) > 0, lambda: a * 2.0,  # noqa: E731
                                                 lambda: a * 3.0)
        y = _loop(paddle, 1, branch, x * 1.0)
        return paddle.static.gradients([paddle.sum(y)], [x])

    result = _run_static(build, {"x": np.array([0.5, 1.5])})
    return not isinstance(result, Exception) and result[0].tolist() == [0.0, 0.0]


def _gather_of_nothing_breaks() -> bool:
    """A Program's gather along axis 2 of a [0, 1, 3, 6] value: the reshape of it to the
    gathered shape fails (a value of other sizes, or holding no memory)."""
    def build(paddle):
        x = paddle.static.data("x", [0, 1, 3, 6], "float32")
        index = paddle.full([2], 1, "int64")
        return [paddle.reshape(paddle.gather(x, index, axis=2), [0, 1, 2, 6])]

    try:
        result = _run_static(build, {"x": np.zeros((0, 1, 3, 6), np.float32)})
    except (RuntimeError, ValueError) as error:  # InvalidArgumentError is a ValueError
        result = error
    return isinstance(result, Exception) or result[0].shape != (0, 1, 2, 6)


def _eager_reshape_of_nothing_by_a_tensor_raises() -> bool:
    """Eager paddle.reshape of a [0] tensor by the shape tensor [0] raises SystemError."""
    import paddle

    try:
        paddle.reshape(paddle.zeros([0]), paddle.to_tensor([0], "int64"))
    except SystemError:
        return True
    return False


def _reshape_zero_of_nothing_is_zero() -> bool:
    """reshape's 0, "keep this dim", of a [0, 4, 3, 5] value whose dims the Program left
    open: the dim it keeps is 0, not 4."""
    def build(paddle):
        x = paddle.static.data("x", [-1, -1, -1, -1], "float32")
        return [paddle.reshape(x, [0, 0, 3, 5])]

    result = _run_static(build, {"x": np.zeros((0, 4, 3, 5), np.float32)})
    return not isinstance(result, Exception) and result[0].shape == (0, 0, 3, 5)


def _while_frees_its_start_value() -> bool:
    def build(paddle):
        x = paddle.static.data("x", [2], "float64")
        return [x + _loop(paddle, 2, lambda a: a * 2.0, x)]

    result = _run_static(build, {"x": np.array([0.5, 1.5])})
    return isinstance(result, Exception) and "holds no memory" in str(result)


def _while_in_if(body_reads_x: bool):
    """A Program: a while loop (two steps of a * 1.5, or of a * x) in an `if` branch taken
    for x = [0.5, 1.5], and d sum / dx through it (with the fix for nested `if` backwards
    unigraph uses, `fixed_backward`)."""
    def build(paddle):
        from unigraph_paddle.backward import fixed_backward

        x = paddle.static.data("x", [2], "float64")
        x.stop_gradient = False
        step = (lambda a: a * x) if body_reads_x else (lambda a: a * 1.5)
        y = paddle.static.nn.cond(paddle.sum(x) > 0, lambda: _loop(paddle, 2, step, x * 1.0),
                                  lambda: x * 3.0)
        with fixed_backward(paddle):
            return paddle.static.gradients([paddle.sum(y)], [x])

    return build


def _run_without_collector(build, feed):
    """`_run_static` with Paddle's garbage collector off while the interpreter is made
    (FLAGS_eager_delete_tensor_gb=-1)."""
    paddle = _paddle()
    flag = "FLAGS_eager_delete_tensor_gb"
    before = paddle.get_flags([flag])
    paddle.set_flags({flag: -1.0})
    try:
        return _run_static(build, feed)
    finally:
        paddle.set_flags(before)


def _while_in_if_backward_needs_values_kept() -> bool:
    feed = {"x": np.array([0.5, 1.5])}
    freed = _run_static(_while_in_if(False), feed)
    kept = _run_without_collector(_while_in_if(False), feed)
    return (isinstance(freed, Exception) and "shouldn't be null" in str(freed)
            and not isinstance(kept, Exception) and kept[0].tolist() == [2.25, 2.25])


def _while_in_if_gradient_of_captured_value_is_wrong() -> bool:
    x = np.array([0.5, 1.5])
    result = _run_without_collector(_while_in_if(True), {"x": x})
    # y = x**3 (x times x twice): the gradient is 3 x**2 = [0.75, 6.75].
    return not isinstance(result, Exception) and not np.allclose(result[0], 3 * x**2)


def _while_in_while_start_used_again_is_wrong() -> bool:
    """A while in a while body (in an `if` of its own, as unigraph builds it) starting from a
    copy of the outer loop's variable a, which is also added to its result: twice
    a -> 1.5 a + a, so the gradient is 2.5**2 = 6.25; Paddle gives 6.5."""
    def build(paddle):
        from unigraph_paddle.backward import fixed_backward

        x = paddle.static.data("x", [2], "float64")
        x.stop_gradient = False

        def outer_body(k, a):
            start, count = paddle.assign(a), paddle.full([], 0, "int64")
            start.stop_gradient = False
            inner = paddle.static.nn.cond(
                paddle.full([], True, "bool"),
                lambda: paddle.static.nn.while_loop(
                    lambda j, b: j < 1, lambda j, b: [j + 1, b * 1.5], [count, start])[1],
                lambda: paddle.assign(start))
            inner.stop_gradient = False
            return [k + 1, inner + a]

        a0 = paddle.assign(x * 1.0)
        a0.stop_gradient = False
        y = paddle.static.nn.while_loop(lambda k, a: k < 2, outer_body,
                                        [paddle.full([], 0, "int64"), a0])[1]
        with fixed_backward(paddle):
            return paddle.static.gradients([paddle.sum(y)], [x])

    result = _run_static(build, {"x": np.array([0.5, 1.5])})
    return not isinstance(result, Exception) and result[0].tolist() == [6.5, 6.5]


def _conv_transpose_refuses_large_output_padding() -> bool:
    paddle = _paddle()
    try:
        paddle.nn.functional.conv2d_transpose(
            paddle.ones([1, 1, 4, 3]), paddle.ones([1, 1, 3, 2]), stride=[1, 2],
            dilation=[2, 2], output_padding=[1, 1])
    except ValueError as error:
        return "are inconsistent" in str(error)
    return False


def _cpu_has_no_float16_pad_or_divide() -> bool:
    paddle = _paddle()
    if paddle.get_device().startswith("gpu"):
        return True  # the widening is CPU-only; on a GPU place there is nothing to pin
    half = paddle.to_tensor(np.ones((1, 1, 2, 2), np.float16))
    for call in (lambda: paddle.nn.functional.pad(half, [1, 1, 1, 1], data_format="NCHW"),
                 lambda: paddle.divide(half, half)):
        try:
            call()
        except RuntimeError as error:
            if "is not registered" not in str(error):
                return False
        else:
            return False
    return True


def _gather_from_an_empty_axis_checks_nothing() -> bool:
    paddle = _paddle()
    empty, index = paddle.zeros([0, 3]), paddle.to_tensor([0])
    read = list(paddle.gather(empty, index, axis=0).shape) == [1, 3]  # no error
    try:
        paddle.index_select(empty, index, axis=0)
    except ValueError as error:  # what index_checks.translate_run_error reads
        refused = "OP(index_select) expected >= 0 and < 0, but got 0" in str(error)
    else:
        refused = False
    return read and refused


def _gather_wraps_negative_indices() -> bool:
    paddle = _paddle()
    x = paddle.to_tensor(np.array([1.0, 2.0, 3.0]))
    wrapped = float(paddle.gather(x, paddle.to_tensor([-1]))[0]) == 3.0
    along = float(paddle.take_along_axis(x, paddle.to_tensor([-1]), axis=0)[0]) == 3.0
    try:
        paddle.gather(x, paddle.to_tensor([-4]))
    except IndexError as error:  # what index_checks.translate_run_error reads
        refused = "greater than or equal to -3, but received index element which is -4" in str(
            error)
    else:
        refused = False
    return wrapped and along and refused


def _cond_passes_operand_zeroes_other_gradients() -> bool:
    def build(paddle):
        x = paddle.static.data("x", [2], "float64")
        x.stop_gradient = False
        _, twice = paddle.static.nn.cond(paddle.sum(x) > 0, lambda: [x, x * 2.0],
                                         lambda: [x * 3.0, x * 4.0])
        return paddle.static.gradients([paddle.sum(twice)], [x])

    result = _run_static(build, {"x": np.array([0.5, 1.5])})
    return not isinstance(result, Exception) and result[0].tolist() == [0.0, 0.0]  # not 2


def _cond_result_stop_gradient_from_then_branch() -> bool:
    paddle = _paddle()
    from unigraph_paddle.static import StaticMode

    main = paddle.static.Program()  # held: its values die with it
    with StaticMode(paddle), paddle.static.program_guard(main):
        x = paddle.static.data("x", [], "float32")
        x.stop_gradient = False
        y = paddle.static.nn.cond(x < 0, lambda: paddle.full([], 1.0), lambda: x * 3.0)
        return y.stop_gradient  # the else branch's x * 3.0 needs a gradient


def _cond_empty_result_has_no_memory() -> bool:
    def build(paddle):
        x = paddle.static.data("x", [], "float32")
        empty = paddle.static.nn.cond(x > 0, lambda: paddle.zeros([0, 3]) + x,
                                      lambda: paddle.zeros([0, 3]) - x)
        return [empty]

    result = _run_static(build, {"x": np.array(1.0, np.float32)})
    return not isinstance(result, Exception) and result[0] is None


def _cond_result_read_in_its_branch_gets_one_cotangent() -> bool:
    def build(paddle):
        x = paddle.static.data("x", [3], "float32")
        x.stop_gradient = False

        def then():
            v = x * x
            return v, v * 2.0  # d/dx of v + 0.5 * (v * 2.0) is 4x

        a, b = paddle.static.nn.cond(paddle.sum(x) > 0, then,
                                     lambda: (paddle.tanh(x), paddle.sin(x)))
        return paddle.static.gradients([a + 0.5 * b], [x])

    x = np.array([0.5, 1.0, 1.5], np.float32)
    result = _run_static(build, {"x": x})
    return not isinstance(result, Exception) and np.allclose(result[0], 2 * x)  # v's alone


def _while_result_read_in_its_body_gets_one_cotangent() -> bool:
    def build(paddle):
        x = paddle.static.data("x", [3], "float32")
        x.stop_gradient = False

        def body(k, a, b):
            v = a * 1.1
            return [k + 1, v, v * 0.5 + b]

        count = paddle.full([], 0, "int64")
        _, a, b = paddle.static.nn.while_loop(lambda k, a, b: k < 3, body,
                                              [count, x * 1.0, x * 2.0])
        return paddle.static.gradients([a + b], [x])

    result = _run_static(build, {"x": np.array([0.5, 1.0, 1.5], np.float32)})
    # 3 trips: a = 1.331 x, b = 2 x + 0.55 (1 + 1.1 + 1.21) x; d(a + b)/dx = 5.1515
    return not isinstance(result, Exception) and not np.allclose(result[0], 5.1515)


def _einsum_gradient_in_a_block_fails() -> bool:
    def build(paddle):
        x = paddle.static.data("x", [2, 3], "float32")
        y = paddle.static.data("y", [3, 2], "float32")
        x.stop_gradient = y.stop_gradient = False
        z = paddle.static.nn.cond(paddle.sum(x) > -100.0,
                                  lambda: paddle.einsum("ij,jk->ik", x, y), lambda: x[:, :2])
        return paddle.static.gradients([z], [x, y])

    result = _run_static(build, {"x": np.ones((2, 3), np.float32),
                                 "y": np.ones((3, 2), np.float32)})
    return isinstance(result, Exception) and "shouldn't be null" in str(result)


def _cond_empty_operand_gradient_has_no_memory() -> bool:
    def build(paddle):
        x = paddle.static.data("x", [], "float32")
        e = paddle.static.data("e", [0, 4], "float32")
        x.stop_gradient = e.stop_gradient = False
        v = e * 2.0  # made before the `if`, read in a branch
        y = paddle.static.nn.cond(x > 0, lambda: x * 3.0, lambda: x + paddle.sum(v))
        return paddle.static.gradients([y], [x, e])

    result = _run_static(build, {"x": np.array(1.0, np.float32),
                                 "e": np.zeros((0, 4), np.float32)})
    return isinstance(result, Exception) and "holds no memory" in str(result)


def _while_results_differentiable_only_from_starts() -> bool:
    paddle = _paddle()
    from unigraph_paddle.static import StaticMode

    main = paddle.static.Program()  # held: its values die with it
    with StaticMode(paddle), paddle.static.program_guard(main):
        x = paddle.static.data("x", [2], "float64")
        x.stop_gradient = False
        # The body multiplies by the captured x; the start is a constant.
        y = _loop(paddle, 2, lambda a: a * x, paddle.full([2], 1.0, "float64"))
        (dx,) = paddle.static.gradients([paddle.sum(y)], [x])
        return y.stop_gradient and dx is None


def _two_loops_capturing_a_value_double_its_gradient() -> bool:
    def build(paddle):
        x = paddle.static.data("x", [2], "float64")
        x.stop_gradient = False
        v = paddle.tanh(x)  # captured by both loops, and used once more below
        y = v * 1.0
        for _ in range(2):
            y = _loop(paddle, 2, lambda a: v * a, paddle.assign(y))
            y.stop_gradient = False
        return paddle.static.gradients([paddle.sum(y) + paddle.sum(v * 3.0)], [x])

    x = np.array([0.3, -0.5])
    result = _run_static(build, {"x": x})
    t = np.tanh(x)
    right = (5 * t**4 + 3.0) * (1 - t**2)  # y = t**5
    doubled = right + 3.0 * (1 - t**2)
    return not isinstance(result, Exception) and np.allclose(result[0], doubled, rtol=1e-12)


def _while_gradient_of_a_captured_value_without_one_raises() -> bool:
    def build(paddle):
        x = paddle.static.data("x", [2], "float64")
        y = paddle.static.data("y", [2, 2], "float64")
        x.stop_gradient = y.stop_gradient = False
        r = paddle.cast(paddle.cast(x * 4.0, "int32").detach(), "float64")  # no gradient
        z = _loop(paddle, 1, lambda a: a * r, paddle.assign(x))
        # r + y broadcasts r: the add's vjp gives r a None gradient.
        return paddle.static.gradients([paddle.sum(z * 2.0) + paddle.sum(r + y)], [x, y])

    try:
        _run_static(build, {"x": np.array([0.5, 1.5]), "y": np.ones((2, 2))})
    except TypeError as error:
        return "call_vjp" in str(error)
    return False


def _matmul_grad_fails_on_batch_ranks() -> bool:
    paddle = _paddle()
    a, b = _leaf(paddle, np.ones((2, 1, 3, 4))), _leaf(paddle, np.ones((3, 4, 2)))
    try:
        paddle.grad([paddle.matmul(a, b).sum()], [a, b])
    except ValueError as error:
        return "dimension size should be equal" in str(error)
    return False


def _matmul_grad_fails_on_empty_constant() -> bool:
    paddle = _paddle()
    a = _leaf(paddle, np.ones((3, 1)))
    try:
        paddle.grad([paddle.matmul(paddle.zeros([0, 2, 3], "float64"), a).sum()], [a])
    except ValueError as error:
        return "shall not be nullptr" in str(error)
    return False


def _stack_grad_of_empty_operands_segfaults() -> bool:
    return _killed_by(signal.SIGSEGV,
                      "import paddle\n"
                      "a, b = paddle.zeros([0, 3]), paddle.zeros([0, 3])\n"
                      "b.stop_gradient = False\n"
                      "paddle.stack([a, b]).sum().backward()\n")


def _prod_grad_is_nan_at_a_zero() -> bool:
    paddle = _paddle()
    x = _leaf(paddle, np.array([2.0, 0.0, 3.0]))
    (grad,) = paddle.grad([paddle.prod(x)], [x])
    return bool(np.isnan(grad.numpy()[1]))  # the product of the others: 6


def _argmax_skips_nan() -> bool:
    paddle = _paddle()
    x = paddle.to_tensor([1.0, float("nan"), 2.0])
    return int(paddle.argmax(x)) == 2  # NumPy: 1


def _max_min_grad_unwritten_at_ranks_5_and_6() -> bool:
    """d sum(max(x, axes)) / dx (and min's) over several, not all, axes of a rank 5 or 6 x
    (distinct values: one 1 per reduced slice) is not that one-hot array, eagerly and in a
    Program; at rank 4 and 7 it is."""
    paddle = _paddle()

    def case(rank, axes):
        x = np.arange(math.prod(2 + i % 2 for i in range(rank)), dtype=np.float64)
        x = x.reshape([2 + i % 2 for i in range(rank)])
        right = {name: (x == fn(x, axis=axes, keepdims=True)).astype(np.float64)
                 for name, fn in (("max", np.max), ("min", np.min))}
        return x, list(axes), right

    def eager(x, axes, name):
        leaf = _leaf(paddle, x)
        (dx,) = paddle.grad([getattr(paddle, name)(leaf, axis=axes).sum()], [leaf])
        return dx.numpy()

    def program(x, axes, name):
        def build(paddle):
            leaf = paddle.static.data("x", list(x.shape), "float64")
            leaf.stop_gradient = False
            return paddle.static.gradients([getattr(paddle, name)(leaf, axis=axes).sum()],
                                           [leaf])

        result = _run_static(build, {"x": x})
        return result if isinstance(result, Exception) else result[0]

    for rank, axes, wrong in ((5, (0, 2, 4), True), (6, (1, 2), True), (4, (0, 2), False),
                              (7, (0, 2, 4), False)):
        x, axes, right = case(rank, axes)
        for name in ("max", "min"):
            for run in (eager, program):
                got = run(x, axes, name)
                if isinstance(got, Exception) or np.array_equal(got, right[name]) == wrong:
                    return False
    return True


def _argmax_refuses_rank_7() -> bool:
    paddle = _paddle()
    x = paddle.to_tensor(np.zeros([2] * 7))
    paddle.argmax(paddle.to_tensor(np.zeros([2] * 6)), axis=3)  # rank 6 runs
    try:
        paddle.argmax(x, axis=3)
    except ValueError as error:
        return "ranks are greater than 6" in str(error)
    return False


def _strided_slice_refuses_rank_7() -> bool:
    paddle = _paddle()
    paddle.strided_slice(paddle.to_tensor(np.zeros([2] * 6)), [0], [1], [2], [1])  # rank 6 runs
    try:
        paddle.strided_slice(paddle.to_tensor(np.zeros([2] * 7)), [0], [1], [2], [1])
    except ValueError as error:
        return "input should be less than 7" in str(error)
    return False


def _crashes(code: str) -> bool:
    return run_python(code).returncode != 0


def _killed_by(signal_number: int, code: str) -> bool:
    """True when `code`, run in a fresh Python, is killed by that signal (an exception or a
    missing module is not the pinned crash)."""
    return run_python(code).returncode == -signal_number


_STATIC_LOOP = (
    "import numpy as np, paddle\n"
    "paddle.enable_static()\n"
    "main = paddle.static.Program()\n"
    "with paddle.static.program_guard(main, paddle.static.Program()):\n"
    "    x = paddle.static.data('x', [2], 'float32')\n"
    "    x.stop_gradient = False\n"
    "    k = paddle.full([], 0, 'int64')\n"
    "    y = paddle.static.nn.while_loop(lambda k, *a: k < 2, body, [k, x * 2.0, x])[1]\n"
    "    fetch = [y] + paddle.static.gradients([paddle.sum(y)], [x])\n"
    "exe = paddle.static.Executor(paddle.CPUPlace())\n"
    "exe.run(main, feed={'x': np.ones(2, np.float32)}, fetch_list=fetch)\n"
)


def _while_yielding_a_pass_through_breaks() -> bool:
    # The body yields the third loop variable (which it passes through unchanged) as the
    # second one's next value. Paddle reads freed memory there: the process is killed by
    # SIGSEGV or, where the allocator left the memory as it was (seen here with glibc's tcache
    # off; a CI machine did not segfault), the gradient comes back None and the fetch raises.
    ran = run_python("body = lambda k, a, c: [k + 1, c, c]\n" + _STATIC_LOOP)
    lost_gradient = ran.returncode == 1 and b"received NoneType" in ran.stderr
    return ran.returncode == -signal.SIGSEGV or lost_gradient


def _while_backward_reading_nothing_aborts() -> bool:
    # No gradient op of the body reads a forward value (an assign); the forward alone runs.
    return _killed_by(signal.SIGABRT,
                      "body = lambda k, a, c: [k + 1, paddle.assign(a), c]\n" + _STATIC_LOOP)


def _dygraph_threads_crash() -> bool:
    # A race: it crashed in each of many tries here, but give it three.
    return any(_dygraph_threads_crash_once() for _ in range(3))


def _dygraph_threads_crash_once() -> bool:
    return _crashes(
        "import threading, numpy as np, paddle\n"
        "x = paddle.to_tensor(np.random.default_rng(0).standard_normal((16, 16)))\n"
        "def work():\n"
        "    for _ in range(300):\n"
        "        a = x.detach(); a.stop_gradient = False\n"
        "        paddle.grad([paddle.tanh(paddle.matmul(a, a)).sum()], [a])\n"
        "threads = [threading.Thread(target=work) for _ in range(6)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
    )


def _paddle_after_tensorflow_crashes() -> bool:
    import importlib.util

    if importlib.util.find_spec("tensorflow") is None:
        return True  # nothing to pin without tensorflow; the guard costs nothing
    return _crashes("import tensorflow, paddle")


def _rounded_once(exact, dtype) -> np.floating:
    """The `dtype` number nearest the Fraction `exact`, ties to even (float(exact) is the
    nearest float64; a float32 made from it may be one step off)."""
    kind = np.dtype(dtype).type
    near = kind(float(exact))
    steps = [np.nextafter(near, kind(-np.inf)), near, np.nextafter(near, kind(np.inf))]
    bits = np.uint32 if kind is np.float32 else np.uint64
    return min(steps, key=lambda v: (abs(Fraction(float(v)) - exact), int(v.view(bits)) & 1))


def _sgd_kernel_results(paddle, p, lr, g) -> list:
    """Paddle's `_C_ops.sgd_(p, lr, g)` run in dygraph and in a Program: p after each."""
    eager = paddle.to_tensor(p.copy())
    paddle._C_ops.sgd_(eager, paddle.to_tensor(lr), paddle.to_tensor(g), None, False)

    def build(paddle):
        names = ("p", [p.size]), ("lr", []), ("g", [p.size])
        param, rate, grad = (paddle.static.data(n, shape, str(p.dtype)) for n, shape in names)
        paddle._C_ops.sgd_(param, rate, grad, None, False)
        return [param]

    static = _run_static(build, {"p": p.copy(), "lr": lr, "g": g})
    return [eager.numpy(), None if isinstance(static, Exception) else static[0]]


def _sgd_rounds_once_and_as_mul_sub_on_multiples_of_8() -> bool:
    """A float32 p of a multiple of 8 elements: bit for bit mul then sub (what unigraph's
    `sgd_` relies on); any other p: every element rounded once, all as an FMA or all as mul
    then sub (which of the two depends on the CPU's kernel)."""
    paddle = _paddle()
    rng = np.random.default_rng(8)
    for dtype, size in ((np.float32, 64), (np.float32, 10), (np.float32, 100),
                        (np.float64, 64)):
        p, g = (rng.standard_normal(size).astype(dtype) for _ in range(2))
        lr = np.array(0.37, dtype)
        mul_then_sub = p - lr * g
        fma = np.array([_rounded_once(Fraction(float(a)) - Fraction(float(lr)) * Fraction(
            float(b)), dtype) for a, b in zip(p, g)])
        if np.array_equal(mul_then_sub, fma):
            return False  # the data would not tell the two roundings apart
        allowed = ((mul_then_sub,) if dtype == np.float32 and size % 8 == 0
                   else (fma, mul_then_sub))
        for got in _sgd_kernel_results(paddle, p, lr, g):
            if got is None or not any(np.array_equal(got, want) for want in allowed):
                return False
    return True


def _second_order_error(fn) -> str:
    """What paddle.static.gradients raises in a Program for the gradient of
    sum(g * g), g the gradient of sum(fn(x)); '' when it builds."""
    from unigraph_paddle.static import StaticMode

    paddle = _paddle()
    with StaticMode(paddle), paddle.static.program_guard(paddle.static.Program()):
        x = paddle.static.data("x", [2, 3], "float64")
        x.stop_gradient = False
        try:
            (g,) = paddle.static.gradients([paddle.sum(fn(paddle, x))], [x])
            paddle.static.gradients([paddle.sum(g * g)], [x])
        except ValueError as error:
            return str(error)
    return ""


_X = [[0.1, -0.4, 0.3], [1.0, 0.5, -2.0]]


def _eager_second_order(fn):
    """The same second gradient in dygraph (create_graph), as NumPy."""
    paddle = _paddle()
    x = _leaf(paddle, _X)
    (g,) = paddle.grad([paddle.sum(fn(paddle, x))], [x], create_graph=True)
    (gg,) = paddle.grad([paddle.sum(g * g)], [x])
    return gg.numpy()


def _exp(paddle, x):
    return paddle.exp(x)


def _take_squares(paddle, x):
    return paddle.take_along_axis(x * x, paddle.ones([2, 1], "int64"), axis=1)


def _fused_cross_entropy(paddle, x):
    labels = paddle.ones([2, 1], "int64")
    return paddle._C_ops.cross_entropy_with_softmax(x, labels, False, True, True, -100, 1)[1]


def _program_has_no_second_order_exp_or_take() -> bool:
    x = np.array(_X)
    # d/dx sum((e**x)**2) = 2 e**(2x); d/dx sum((2 x[:, 1])**2) = 8 x in column 1.
    take = np.zeros_like(x)
    take[:, 1] = 8 * x[:, 1]
    return ("'pd_op.exp_grad' has no grad op" in _second_order_error(_exp)
            and "'pd_op.take_along_axis_grad' has no grad op" in _second_order_error(
                _take_squares)
            and np.allclose(_eager_second_order(_exp), 2 * np.exp(2 * x), rtol=1e-12)
            and np.allclose(_eager_second_order(_take_squares), take, rtol=1e-12))


def _cubed_by_a_loop(paddle, x):
    """x ** 3 as a while loop that multiplies by x twice."""
    i = paddle.full([], 0, "int64")
    _, v = paddle.static.nn.while_loop(lambda i, v: i < 2, lambda i, v: (i + 1, v * x),
                                       [i, x])
    return v


def _program_cannot_differentiate_a_loop_gradient() -> bool:
    """A Program's gradient of the gradient of sum(x ** 3) computed by a while loop raises
    Paddle's DataType error (`static.LOOP_GRADIENT_ERROR`); dygraph differentiates the same
    products twice: d/dx sum((3 x**2)**2) = 36 x**3."""
    from unigraph_paddle.static import LOOP_GRADIENT_ERROR

    paddle = _paddle()
    x = _leaf(paddle, _X)
    v = x
    for _ in range(2):
        v = v * x
    (g,) = paddle.grad([paddle.sum(v)], [x], create_graph=True)
    (gg,) = paddle.grad([paddle.sum(g * g)], [x])
    return (LOOP_GRADIENT_ERROR in _second_order_error(_cubed_by_a_loop)
            and np.allclose(gg.numpy(), 36 * np.array(_X) ** 3, rtol=1e-12))


def _einsum_gradient_misses_an_added_operand() -> bool:
    """In a Program, d/dw of sum(einsum(v, w)) + sum(v - 1) (v = 1.5 x) is wrong; with a
    copy of v given to einsum it is sum over a of v[a] (einsum('aij,aik->jk', v, ones))."""
    from unigraph_paddle.static import StaticMode

    paddle = _paddle()
    x0 = np.array(_X)[:, None, :]  # (2, 1, 3)
    w0 = np.arange(9.0).reshape(3, 3) / 9.0

    def gradient(copy):
        with StaticMode(paddle), paddle.static.program_guard(paddle.static.Program(),
                                                             paddle.static.Program()):
            x = paddle.static.data("x", [2, 1, 3], "float64")
            w = paddle.static.data("w", [3, 3], "float64")
            x.stop_gradient = w.stop_gradient = False
            v = x * 1.5
            product = paddle.einsum("aij,jk->aik", paddle.assign(v) if copy else v, w)
            loss = paddle.sum(product) + paddle.sum(v - paddle.ones([1, 1, 1], "float64"))
            (gw,) = paddle.static.gradients([loss], [w])
            exe = paddle.static.Executor(paddle.CPUPlace())
            return exe.run(feed={"x": x0, "w": w0}, fetch_list=[gw])[0]

    expected = np.einsum("aij,aik->jk", 1.5 * x0, np.ones((2, 1, 3)))
    return (not np.allclose(gradient(False), expected, rtol=1e-12)
            and np.allclose(gradient(True), expected, rtol=1e-12))


def _fused_cross_entropy_has_no_second_order() -> bool:
    try:
        _eager_second_order(_fused_cross_entropy)
    except RuntimeError as error:
        eager = "cross_entropy_with_softmax_grad doesn't have any grad op" in str(error)
    else:
        eager = False
    static = _second_order_error(_fused_cross_entropy)
    return eager and "'pd_op.cross_entropy_with_softmax_grad' has no grad op" in static


def _gradient_wrt_an_assigned_array_counts_one_use() -> bool:
    """d/dx sum(x * x) in a Program, x = paddle.assign(array): x (one use counted), not 2x;
    of a copy of x, 2x."""
    x = np.array([1.0, -3.0], np.float32)

    def build(paddle, copied):
        value = paddle.assign(x)
        if copied:
            value = paddle.assign(value)
        value.stop_gradient = False
        return paddle.static.gradients([paddle.sum(value * value)], [value])

    (direct,) = _run_static(lambda paddle: build(paddle, False), {})
    (copied,) = _run_static(lambda paddle: build(paddle, True), {})
    return np.array_equal(direct, x) and np.array_equal(copied, 2 * x)


def _pair_quirk(name: str) -> Quirk:
    return Quirk(
        op=name, framework="paddle", versions=VERSIONS,
        behaviour=f"paddle.{name} propagates NaN but its backward gives both inputs 0 where "
                  "the result is NaN",
        workaround="where(isnan(x) | isnan(y), s * s, out) with s = x + y there and 0 "
                   "elsewhere: the same NaN value, gradient NaN to both inputs there, as the "
                   "op's rule says (s is 0 elsewhere: 0 * 2s was NaN at an infinite x + y)",
        pin=_zero_gradient_where_nan(name),
    )


def _neg_of_plus_zero_is_plus_zero() -> bool:
    paddle = _paddle()
    got = paddle.neg(paddle.to_tensor(np.zeros(4, np.float32))).numpy()
    return not np.signbit(got).any()  # IEEE: -(+0.0) is -0.0


def _float32_sqrt_of_inf_is_nan() -> bool:
    paddle = _paddle()
    # 16 elements: the vectorised kernel (Eigen's x * rsqrt(x)) runs; float64 is exact.
    x = np.array([np.inf, -0.0, 4.0, 2.0] * 4, np.float32)
    got = paddle.sqrt(paddle.to_tensor(x)).numpy()
    exact = paddle.sqrt(paddle.to_tensor(x.astype(np.float64))).numpy()
    return bool(np.isnan(got[0]) and not np.signbit(got[1]) and np.isposinf(exact[0])
                and np.signbit(exact[1]))


def _abs_gradient_is_nan_at_infinity() -> bool:
    paddle = _paddle()
    leaf = _leaf(paddle, [np.inf, -np.inf, 2.0])
    (grad,) = paddle.grad([paddle.sum(paddle.abs(leaf))], [leaf])
    return bool(np.isnan(grad.numpy()[:2]).all() and grad.numpy()[2] == 1.0)



def _topk_misorders_ties() -> bool:
    paddle = _paddle()
    x = np.array([3, 1, 3, 0, -1, 1, 3, 0, 2, 2, 5, -7, 3, 3])
    got = paddle.topk(paddle.to_tensor(x), len(x))[1].numpy()
    stable = len(x) - 1 - np.argsort(x[::-1], kind="stable")[::-1]
    return bool((got != stable).any())

QUIRKS = [
    Quirk(
        op="log_softmax", framework="paddle", versions=VERSIONS,
        behaviour="F.log_softmax saturates: [1000, 0] -> [0, -64] (float32 and float64)",
        workaround="composed as (x - max) - log(sum(exp(x - max))), the max detached",
        pin=_log_softmax_saturates,
    ),
    Quirk(
        op="sparse_softmax_cross_entropy", framework="paddle", versions=VERSIONS,
        behaviour="F.cross_entropy saturates: logits [[1000, 0]], label 1 -> 64, not 1000",
        workaround="minus the composed log_softmax taken at the label (take_along_axis)",
        pin=_cross_entropy_saturates,
    ),
    Quirk(
        op="relu", framework="paddle", versions=VERSIONS,
        behaviour="F.relu(NaN) is 0",
        workaround="where(isnan(x), NaN, relu(x)); the NaN is a constant, so the gradient "
                   "there stays 0",
        pin=_relu_of_nan_is_zero,
    ),
    Quirk(
        op="softplus", framework="paddle", versions=VERSIONS,
        behaviour="F.softplus is log(1 + exp(x)) as written: float32 softplus(-20) and "
                  "softplus(-40) are 0, not 2.1e-9 and 4.2e-18 (float64 from -37 down)",
        workaround="where(x > 0, x, 0) + log1p(exp(-|x|)), -|x| as where(x > 0, -x, x) "
                   "(gradient sigmoid(x), 0.5 at 0), exp as lowerings.exp "
                   "(tests/test_special_values.py)",
        pin=_softplus_loses_small_results,
    ),
    _pair_quirk("maximum"),
    _pair_quirk("minimum"),
    Quirk(
        op="max_pool2d", framework="paddle", versions=VERSIONS,
        behaviour="F.max_pool2d drops a NaN in some window positions ([[nan, 1], [1, 1]] "
                  "pools to 1)",
        workaround="pool x with NaN read as +inf (and +inf as the largest finite) for the "
                   "first maximum's position only (return_mask), then gather x there",
        pin=_max_pool_drops_a_leading_nan,
    ),
    Quirk(
        op="cast", framework="paddle", versions=VERSIONS,
        behaviour="paddle.cast's backward passes the gradient through a float -> int cast "
                  "(cast(cast(x, int32), float32) has gradient 1)",
        workaround="the int result of a float -> int cast is detached (gradient 0)",
        pin=_cast_to_int_passes_gradient,
    ),
    Quirk(
        op="avg_pool2d", framework="paddle", versions=VERSIONS,
        behaviour="F.avg_pool2d's float64 backward scales by a float32 1/(kh*kw) "
                  "(0.1111111119 for a 3x3 window)",
        workaround="in float64, window sums by a depthwise conv2d with a kernel of ones, "
                   "divided by kh*kw in float64",
        pin=_avg_pool_float64_gradient_in_float32,
    ),
    Quirk(
        op="scatter_add", framework="paddle", versions=VERSIONS,
        behaviour="float16 index_add is no closer than the float32 one rounded, and on this "
                  "CPU adds repeated indices in float16: 4,096 updates of [0.5, 1) into one "
                  "row are 515 ulps off, past the checker's budget",
        workaround="float16 scatter_add runs in float32, rounded to float16 once "
                   "(lowerings.scatter_add; within 1 ulp, as torch and onnxruntime)",
        pin=_float16_index_add_no_closer_than_float32_rounded,
    ),
    Quirk(
        op="add (and the other ops in lowerings.CPU_HALF_MISSING)", framework="paddle",
        versions=VERSIONS,
        behaviour="no float16 CPU kernel for most ops",
        workaround="on a CPU place those entries compute in float32 and round back once "
                   "(lowerings.widen_half); tests/test_backend_paddle.py pins each op",
        pin=_cpu_has_no_float16_add,
    ),
    Quirk(
        op="exp, log (lowerings.CPU_HALF_GRAD_MISSING)", framework="paddle",
        versions=VERSIONS,
        behaviour="float16 exp and log have CPU forward kernels but no backward ones "
                  "(exp_grad, log_grad): their gradient raised RuntimeError on paddle:eager "
                  "and TypeError on paddle:static (selu and losses through them too)",
        workaround="on a CPU place a float16 exp or log computes in float32 and rounds back "
                   "once, so its backward is float32's (lowerings.widen_half_for_grad); "
                   "tests/test_backend_paddle.py pins each op",
        pin=_cpu_has_no_float16_exp_grad,
    ),
    Quirk(
        op="slice", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: a Program has no CPU float16 strided_slice_grad kernel: the "
                  "gradient of any float16 slice (x[1:], x[::2]) raised RuntimeError "
                  "('kernel output args (0) defs should equal op outputs (1)'); dygraph "
                  "computes it",
        workaround="in a Program a float16 slice runs in float32 (exact) and is cast back "
                   "(lowerings.slice_; tests/test_float16_slice_gradients.py)",
        pin=_program_has_no_float16_slice_gradient,
    ),
    Quirk(
        op="cond", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: the backward of an `if` nested in a `while` body (or in "
                  "another `if` branch) reads the first iteration's cotangent and yields "
                  "zeros for the values its branches capture: gradient 0 or wrong",
        workaround="unigraph_paddle.backward.fixed_backward wraps Paddle's "
                   "append_backward_ops during paddle.static.gradients: passes the enclosing "
                   "block-argument map down and yields the gradients of the original values",
        pin=_if_in_while_gradient_is_zero,
    ),
    Quirk(
        op="while_loop", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: a while op takes over the buffers of its starting values; "
                  "a later read of one fails ('Tensor holds no memory')",
        workaround="every loop starts from copies (paddle.assign)",
        pin=_while_frees_its_start_value,
    ),
    Quirk(
        op="while_loop", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: the backward of a while op nested in an `if` branch or a "
                  "`while` body fails at run time ('DenseTensor shouldn't be null': the "
                  "garbage collector frees the loop's inputs before the enclosing block's "
                  "backward reads them); with the collector off it runs",
        workaround="such a loop is built inside an always-taken `if` of its own, its "
                   "operands (start copies, captured values) made in the enclosing block, "
                   "which the `if` does not collect from (ProgramBuilder.in_own_block); the "
                   "collector stays on (off, the gradients are wrong: next record)",
        pin=_while_in_if_backward_needs_values_kept,
    ),
    Quirk(
        op="while_loop", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static with the garbage collector off "
                  "(FLAGS_eager_delete_tensor_gb=-1): a while body's results keep their "
                  "buffers from one step to the next, so the values its backward stacked "
                  "for a step are overwritten by the next step's, and gradients are wrong "
                  "(a loop in an `if` branch, x = [0.5, 1.5], two steps of a * x from x: "
                  "[0.5, 9] where 3x**2 is [0.75, 6.75])",
        workaround="the collector stays on; a differentiated loop nested in a branch or "
                   "loop is built with ProgramBuilder.in_own_block instead",
        pin=_while_in_if_gradient_of_captured_value_is_wrong,
    ),
    Quirk(
        op="while_loop", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: the gradient through a while op nested in another while "
                  "op's body is wrong when a value it starts from also reaches the result "
                  "another way (a -> inner(a) + a, twice: 6.5 where 2.5**2 is 6.25), or "
                  "when it reads the outer loop's variable (a value that changes from one "
                  "outer step to the next); unigraph also refuses one starting from a value "
                  "the outer loop captures (the random-program tester found it wrong)",
        workaround="refused at build time with the inner loop's line "
                   "(ProgramBuilder.check_loop_in_loop, BackendError); a nested loop that "
                   "reads only values the outer loop captures computes; paddle:eager runs "
                   "all of them",
        pin=_while_in_while_start_used_again_is_wrong,
    ),
    Quirk(
        op="while_loop", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: a while body that yields one loop variable as another's "
                  "next value, while passing the first through unchanged (a captured value "
                  "the body returns as it is), reads freed memory when the loop is built "
                  "(PyWhileOp::OptimizeUpdate): a segfault, or a gradient of None",
        workaround="a body result that is another slot's loop variable is copied "
                   "(paddle.assign) before the yield",
        pin=_while_yielding_a_pass_through_breaks,
    ),
    Quirk(
        op="while_loop", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: when no gradient op of a while body reads a forward value "
                  "(a body of assign, transpose or constants), paddle.static.gradients "
                  "aborts the process ('Destroyed a op_result that is still in use by "
                  "cf.has_elements')",
        workaround="unigraph_paddle.backward.fixed_backward keeps the body's value stack "
                   "while the backward loop's has_elements reads it (while_prune_check)",
        pin=_while_backward_reading_nothing_aborts,
    ),
    Quirk(
        op="while_loop", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: a while op's results count as differentiable only if "
                  "the loop variables it starts from do; a captured value that needs a "
                  "gradient does not count, and the backward is pruned (gradient None)",
        workaround="inside a grad function, when anything in the loop needs a gradient, "
                   "every floating carried value starts from a differentiable copy",
        pin=_while_results_differentiable_only_from_starts,
    ),
    Quirk(
        op="while_loop", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: when two while ops capture one value that is also used "
                  "elsewhere, the gradient of that other use is counted twice (each while "
                  "backward starts its captured-value gradient from the gradient so far)",
        workaround="inside a grad function each loop captures its own copy (paddle.assign) "
                   "of a value that needs a gradient",
        pin=_two_loops_capturing_a_value_double_its_gradient,
    ),
    Quirk(
        op="while_loop", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: the backward of a while op whose body reads a value of "
                  "stop_gradient (a cast from an int) that a broadcasting add uses again "
                  "outside fails while it is built (TypeError: call_vjp(): incompatible "
                  "function arguments): the add's vjp gives the value a None gradient, passed "
                  "on to the while's vjp",
        workaround="the while's vjp gets zeros for a None gradient (backward.fixed_backward)",
        pin=_while_gradient_of_a_captured_value_without_one_raises,
    ),
    Quirk(
        op="cond", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: when an `if` branch returns one of its operands "
                  "unchanged, the gradient of the other results with respect to that "
                  "operand is 0",
        workaround="a branch result that is an operand is copied (paddle.assign)",
        pin=_cond_passes_operand_zeroes_other_gradients,
    ),
    Quirk(
        op="cond", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: an `if` result is differentiable only if the then-branch "
                  "result is (a then-branch constant or int cast makes the else branch's "
                  "gradient 0)",
        workaround="the result is marked differentiable (stop_gradient = False) when either "
                   "branch's result is",
        pin=_cond_result_stop_gradient_from_then_branch,
    ),
    Quirk(
        op="cond", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: a zero-size result of an `if` op has no memory: fetched "
                  "as None, read by a later run as shape (0,)",
        workaround="a zero-size result of known shape is made outside the `if` as zeros "
                   "(its value is its shape and dtype; its gradient is empty)",
        pin=_cond_empty_result_has_no_memory,
    ),
    Quirk(
        op="cond", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: the gradient an `if` op gives a zero-size value it reads "
                  "has no memory: the backward of the op that made the value fails "
                  "('Tensor holds no memory')",
        workaround="a zero-size operand of known shape is read in the branches as zeros of "
                   "its shape made outside the `if` (its gradient is empty)",
        pin=_cond_empty_operand_gradient_has_no_memory,
    ),
    Quirk(
        op="cond", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: an `if` op's backward gives a branch's result that another "
                  "op of the branch reads, or that is two results, one result's cotangent "
                  "only: (v, v * 2.0) or (v, v) gets a wrong gradient, silently",
        workaround="such a result is copied (paddle.assign), as one of the branch's operands "
                   "handed back unchanged is",
        pin=_cond_result_read_in_its_branch_gets_one_cotangent,
    ),
    Quirk(
        op="while_loop", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: a while op's backward gives a body result that another op "
                  "of the body reads, or that is two results, one result's cotangent only: "
                  "a wrong gradient, silently",
        workaround="such a body result is copied (paddle.assign)",
        pin=_while_result_read_in_its_body_gets_one_cotangent,
    ),
    Quirk(
        op="einsum", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: the gradient of an einsum in an `if` branch or a while "
                  "body fails when the Program runs ('DenseTensor shouldn't be null')",
        workaround="there einsum is the product of its operands broadcast to all its "
                   "letters, summed over the contracted ones (float operands, no letter "
                   "twice in one operand)",
        pin=_einsum_gradient_in_a_block_fails,
    ),
    Quirk(
        op="matmul", framework="paddle", versions=VERSIONS,
        behaviour="matmul_grad fails when both operands have batch dims of different "
                  "ranks ([2, 1, 3, 4] @ [3, 4, 2]: 'Input dimension size should be equal "
                  "to 2')",
        workaround="the operand of lower rank gets leading size-1 dims first",
        pin=_matmul_grad_fails_on_batch_ranks,
    ),
    Quirk(
        op="matmul", framework="paddle", versions=VERSIONS,
        behaviour="matmul_grad fails on a zero-size operand with no memory (a constant, an "
                  "empty `if` result): 'Required tensor shall not be nullptr', eager and static",
        workaround="with a zero-size operand the product is made as zeros of its shape "
                   "(every gradient is zero or empty)",
        pin=_matmul_grad_fails_on_empty_constant,
    ),
    Quirk(
        op="prod", framework="paddle", versions=VERSIONS,
        behaviour="prod_grad divides the product by each element: the gradient at a zero is "
                  "NaN (0/0) where it is the product of the others ([2, 0, 3]: [0, nan, 0], "
                  "not [0, 6, 0]), eager and static",
        workaround="a product over one element is that element (prod_grad of [0] is NaN "
                   "too); a slice holding a zero is multiplied out by multiplies on a 2-D "
                   "[kept, reduced] view (pairwise halves), the others by Paddle's prod, each side "
                   "seeing 1 in place of the other's elements; eagerly only where x takes a "
                   "gradient and holds a zero. Where a reduced dim is unknown until the run "
                   "(input_spec), with no size: z * nz, nz Paddle's prod with 1 in place of "
                   "the zeros, z the product of the zeros picked by their count (1; the zero "
                   "itself, as the largest of the zeros and -1s by topk; with two or more, a "
                   "zero of their signs, gradient 0); there, in a slice holding a zero and an "
                   "inf or NaN, a gradient may be NaN where NumPy's is 0 (at the inf: Paddle's "
                   "prod_grad divides, as in a slice with no zero on every route) or 0 where "
                   "it is NaN. The where operands have one shape: a Program's where "
                   "broadcasts by adding zeros, which made a -0.0 factor +0.0 (the product's "
                   "sign)",
        pin=_prod_grad_is_nan_at_a_zero,
    ),
    Quirk(
        op="stack", framework="paddle", versions=VERSIONS,
        behaviour="the eager backward of paddle.stack of zero-size operands segfaults when one "
                  "of them takes no gradient (stop_gradient: a constant, an input not "
                  "differentiated); paddle:static's is right",
        workaround="zero-size operands stack to zeros of the result's shape, with no backward "
                   "(every gradient is empty)",
        pin=_stack_grad_of_empty_operands_segfaults,
    ),
    Quirk(
        op="take (no elements)", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: paddle.gather of a value with no elements (a batch of 0) "
                  "gives a value of other sizes, or one holding no memory, which a reshape "
                  "after it refuses (InvalidArgumentError, PreconditionNotMetError); eager is "
                  "right",
        workaround="take of a Program value with a 0 among its known dims is zeros of the "
                   "result's shape (x's gradient is empty); the indices are still checked, "
                   "by a gather of the axis's row numbers",
        pin=_gather_of_nothing_breaks,
    ),
    Quirk(
        op="take (empty result, eager)", framework="paddle", versions=VERSIONS,
        behaviour="paddle:eager: paddle.reshape of a [0] tensor by a shape tensor ([0]) "
                  "raises SystemError (\"<built-in function reshape> returned a result "
                  "with an exception set\")",
        workaround="an eager take with no elements in its result is zeros of the result's "
                   "shape (nothing else to hold), not a reshape of the gather",
        pin=_eager_reshape_of_nothing_by_a_tensor_raises,
    ),
    Quirk(
        op="ensure_shape", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: reshape's 0, \"keep this dim\", of a value with no "
                  "elements is a size 0 in every dim it keeps ([0, 4, 3, 5] with the "
                  "Program's dims open, reshaped to [0, 0, 3, 5], is [0, 0, 3, 5])",
        workaround="ensure_shape gives the Program's value the sizes it names and, for a "
                   "dim it leaves open, the run-time size (paddle.shape), not 0",
        pin=_reshape_zero_of_nothing_is_zero,
    ),
    Quirk(
        op="argmax", framework="paddle", versions=VERSIONS,
        behaviour="paddle.argmax skips NaN ([1, nan, 2] -> 2; NumPy counts NaN as the "
                  "maximum: 1)",
        workaround="where any NaN lies along the axis, the index of the first NaN "
                   "(argmax of isnan)",
        pin=_argmax_skips_nan,
    ),
    Quirk(
        op="argmax", framework="paddle", versions=VERSIONS,
        behaviour="paddle.argmax refuses a tensor of rank > 6, eagerly and in a Program "
                  "(\"argmax operator doesn't supports tensors whose ranks are greater than "
                  "6\")",
        workaround="above rank 6, the argmax of a [before, n] or [before, n, after] view, "
                   "reshaped back (ranks.on_a_view)",
        pin=_argmax_refuses_rank_7,
    ),
    Quirk(
        op="slice", framework="paddle", versions=VERSIONS,
        behaviour="paddle.strided_slice refuses a tensor of rank > 6, eagerly and in a "
                  "Program, whichever axes it slices ('The dimension of StridedSlice "
                  "operator's input should be less than 7')",
        workaround="above rank 6, one axis at a time, each a strided slice of the middle axis "
                   "of a [before, n, after] view (ranks.strided_slice; an open dim read "
                   "when the Program runs); axes taken whole are skipped",
        pin=_strided_slice_refuses_rank_7,
    ),
    Quirk(
        op="max, min", framework="paddle", versions=VERSIONS,
        behaviour="the backward of paddle.max and paddle.min (amax, amin too) over several "
                  "but not all axes of a rank 5 or 6 tensor never writes the gradient: it is "
                  "uninitialised memory (paddle.max(x, axis=[0, 2, 4]) on a [2, 3, 2, 3, 2] "
                  "x, adjacent axes or keepdim too), eagerly and in a Program, silently; one "
                  "axis, all axes, ranks 1-4 and 7-8 are right, as are sum, mean and prod",
        workaround="in that case, the max or min of a [kept, reduced] view (the reduced axes "
                   "transposed last), reshaped back (ranks.max_or_min): the same values, the "
                   "gradient of a 2-D max",
        pin=_max_min_grad_unwritten_at_ranks_5_and_6,
    ),
    Quirk(
        op="(every eager op)", framework="paddle", versions=VERSIONS,
        behaviour="dygraph is not thread-safe: two threads running ops segfault the process",
        workaround="paddle:eager holds one process-wide lock around each eager call "
                   "(backend.EAGER_LOCK)",
        pin=_dygraph_threads_crash,
    ),
    Quirk(
        op="(import)", framework="paddle", versions=VERSIONS + " with tensorflow 2.21",
        behaviour="importing paddle after tensorflow segfaults the process",
        workaround="the TF backend imports paddle first; loading the Paddle backend after "
                   "the user imported tensorflow is refused with a BackendError",
        pin=_paddle_after_tensorflow_crashes,
    ),
    Quirk(
        op="add, sub, mul, neg, abs, maximum, minimum, where, mod, floor_divide, sum, max, "
           "min, prod, cumsum, argmax, argsort, take, tril, triu (int8, uint8, int16)",
        framework="paddle", versions=VERSIONS,
        behaviour="most CPU kernels are missing for int8, uint8 or int16 (e.g. maximum "
                  "int16, multiply uint8, abs uint8, remainder int16, argmax int8, tril "
                  "int8, argsort int8: "
                  "'kernel ... is not registered')",
        workaround="computed in int32 and cast back, which wraps modulo 2**bits as NumPy "
                   "does (unigraph_paddle.lowerings.widen_small_ints)",
        pin=_no_small_int_kernels,
    ),
    Quirk(
        op="concat (stack)", framework="paddle", versions=VERSIONS,
        behaviour="static paddle.concat refuses uint8: its dtype check lists 'unit8' (sic)",
        workaround="small ints are concatenated in int32 and cast back",
        pin=_concat_checks_unit8,
    ),
    Quirk(
        op="constant", framework="paddle", versions=VERSIONS,
        behaviour="paddle.assign takes no int8, uint8 or int16 NumPy array in a Program "
                  "(TypeError), nor int16 eagerly (no assign_value kernel)",
        workaround="assigned as int32 and cast",
        pin=_assign_refuses_small_int_arrays,
    ),
    Quirk(
        op="cast (float to int8, uint8, int16)", framework="paddle", versions=VERSIONS,
        behaviour="in a Program, detaching an int16 cast result (so no gradient flows "
                  "through it, as the record says) fails to run: no share_data_ kernel",
        workaround="cast to int32, detached there, then to the small int",
        pin=_detached_int16_cast_fails_to_run,
    ),
    Quirk(
        op="stop_gradient", framework="paddle", versions=VERSIONS,
        behaviour="in a Program, Value.detach() of an int16 value fails to run: no int16 "
                  "share_data_ kernel (the cast quirk's pin)",
        workaround="an int or bool x has no gradient to stop: the lowering returns it as it "
                   "is and detaches floats only",
        pin=_detached_int16_cast_fails_to_run,
    ),
    Quirk(
        op="print", framework="paddle", versions=VERSIONS,
        behaviour="a Program (PIR) refuses paddle.static.py_func, so no Python callback can "
                  "format a print at run time",
        workaround="paddle:static prints with paddle.static.Print (Paddle's text: '- "
                   "message:' and '- data:' lines) of a detached copy (Print would also "
                   "print the gradient), the result depending on it; of a Python print in "
                   "converted code, each value's message is the text before it",
        pin=_py_func_refused_in_a_program,
    ),
    Quirk(
        op="conv_transpose2d", framework="paddle", versions=VERSIONS,
        behaviour="F.conv2d_transpose refuses output_padding >= stride, which the op allows "
                  "below the dilation ('Output_height and padding(padding_up, padding_down) "
                  "are inconsistent')",
        workaround="that case computes the uncropped output (no padding, no output_padding), "
                   "adds output_padding rows and columns of zeros at the end (F.pad), crops "
                   "the padding off both sides, then adds the bias",
        pin=_conv_transpose_refuses_large_output_padding,
    ),
    Quirk(
        op="avg_pool2d", framework="paddle", versions=VERSIONS,
        behaviour="no float16 CPU kernel for F.pad (pad3d) nor paddle.divide",
        workaround="float16 pads in float32 and casts back (exact: the fill is 0 or -inf); a "
                   "float16 avg_pool2d whose divisor is not the constant kh*kw (padding left "
                   "out, ceil-mode cells) runs wholly in float32, rounded back once",
        pin=_cpu_has_no_float16_pad_or_divide,
    ),
    Quirk(
        op="take (sparse_softmax_cross_entropy)", framework="paddle", versions=VERSIONS,
        behaviour="paddle.gather and paddle.take_along_axis wrap a negative index (-1 reads "
                  "the last); below -n they refuse, printing the value",
        workaround="paddle:eager checks the indices first; in a Program each negative index i "
                   "becomes i - n, which the gather refuses, and "
                   "index_checks.translate_run_error turns that into IndexOutOfRangeError",
        pin=_gather_wraps_negative_indices,
    ),
    Quirk(
        op="take", framework="paddle", versions=VERSIONS,
        behaviour="paddle.gather from an axis of size 0 refuses no index: gathering [0] from "
                  "a [0, 3] tensor gives a [1, 3] row of whatever memory held, eagerly and in "
                  "a Program (where a dim left open by input_spec can be 0 at run time)",
        workaround="paddle:eager checks the indices first; in a Program, a take along an axis "
                   "of unknown size (or of a value with any dim of unknown size: a batch of 0 at "
                   "run time) is paddle.index_select, which refuses it ('expected >= 0 "
                   "and < 0, but got 0'), and index_checks.translate_run_error turns that "
                   "into IndexOutOfRangeError (tests/test_open_dim_slices.py)",
        pin=_gather_from_an_empty_axis_checks_nothing,
    ),
    Quirk(
        op="constant", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static: a Program holding the constants 0.0 and -0.0 runs both as "
                  "+0.0 (z + full(-0.0) next to z + full(0.0) gives +0.0 for z = -0.0)",
        workaround="paddle:static makes a -0.0 constant as the product of the smallest "
                   "subnormals of opposite signs, never as a -0.0 attribute "
                   "(program_scalars; tests/test_eager_fast_paths.py, "
                   "tests/test_program_scalars.py), and an array constant holding -0.0 as "
                   "the array with +0.0 there times one of 1s and -1s "
                   "(lowerings._with_negative_zeros; "
                   "tests/test_signed_zeros_where_constants.py)",
        pin=_static_merges_signed_zero_constants,
    ),
    Quirk(
        op="scale (bias -0.0)", framework="paddle", versions=VERSIONS,
        behaviour="in a Program, scale's bias is an IR float attribute, and the IR keeps one "
                  "attribute for 0.0 and -0.0, the first made in the process: after any "
                  "paddle.scale(x, s) (bias 0.0), scale(x, s, bias=-0.0) adds +0.0, which "
                  "turns a -0.0 product into +0.0; a -0.0 made first would turn later 0.0 "
                  "biases, the user's own included, into -0.0",
        workaround="paddle:static emits scale only with a non-zero bias (x + c: "
                   "program_scalars): a Program's lr * g in an update is multiply "
                   "(updates.py; tests/test_signed_zero_products.py); paddle:eager keeps "
                   "scale with bias -0.0 (dygraph passes the bias as a number)",
        pin=_program_scale_bias_is_one_zero,
    ),
    Quirk(
        op="where", framework="paddle", versions=VERSIONS,
        behaviour="in a Program, paddle.where broadcasts operands of different shapes by "
                  "adding zeros to each, which turns a selected -0.0 into +0.0: "
                  "where(z == 0, z, 2.0) at z = -0.0 gives +0.0 (dygraph keeps -0.0)",
        workaround="paddle:static broadcasts the operands itself (bools as int32), "
                   "subtracting the zeros (x - 0.0 is x), before paddle.where of one shape "
                   "(lowerings.where; tests/test_signed_zeros_where_constants.py)",
        pin=_program_where_broadcast_drops_negative_zero,
    ),
    Quirk(
        op="where", framework="paddle", versions=VERSIONS,
        behaviour="in a Program, paddle.where broadcasts only operands whose traced shapes "
                  "differ: of x and y both [-1] (dims left open), run with 2 and 1 "
                  "elements, it raises InvalidArgumentError (\"should be same\")",
        workaround="paddle:static broadcasts the operands itself, as above, whenever a dim "
                   "is open (lowerings.where; tests/test_open_dim_where.py)",
        pin=_program_where_of_open_dims_does_not_broadcast,
    ),
    Quirk(
        op="softmax", framework="paddle", versions=VERSIONS,
        behaviour="F.softmax floors x - max at -64: softmax([0, -80, -inf]) gives 1.2e-28 "
                  "for e**-80 (1.8e-35) and for the -inf (0), float32 and float64",
        workaround="composed as the record says: exp(x - max) / sum, the max detached "
                   "(lowerings.softmax)",
        pin=_softmax_floors_at_minus_64,
    ),
    Quirk(
        op="exp", framework="paddle", versions=VERSIONS,
        behaviour="float64 paddle.exp never goes below 5.56e-309: exp(-inf) and exp(-800) "
                  "are 5.6e-309, not 0",
        workaround="0 below -745.2, where even the smallest subnormal rounds to 0 "
                   "(lowerings.exp); between -745.2 and -708.4 the floor stays (off by "
                   "under 1e-308)",
        pin=_float64_exp_stops_above_zero,
    ),
    Quirk(
        op="exp", framework="paddle", versions=VERSIONS,
        behaviour="float32 paddle.exp of 8 elements or more never goes below 2.94e-39 "
                  "(a subnormal): exp(-inf) and exp(-100) are 2.9e-39, not 0 and 3.7e-44, so "
                  "a -inf logit got a gradient of 3.7e-40 in softmax and cross-entropy",
        workaround="0 below -103.98, where even the smallest subnormal rounds to 0 "
                   "(lowerings.exp, also in log_softmax and cross-entropy); between -103.98 "
                   "and -88.72 the floor stays (off by under 3e-39)",
        pin=_float32_exp_stops_above_zero,
    ),
    Quirk(
        op="sgd update (p - lr * g)", framework="paddle", versions=VERSIONS + " (x86-64 CPU)",
        behaviour="`_C_ops.sgd_` (Paddle's SGD kernel, dygraph and Program) rounds "
                  "p - lr * g as mul, then sub, where p is float32 with a multiple of 8 "
                  "elements; any other p (a 10-element float32 bias, any float64 p) is "
                  "rounded once, as an FMA, on some x86-64 CPUs (the machines it was first "
                  "recorded on) and as mul then sub on others (an AMD EPYC with AVX-512): "
                  "the last bit of an update depends on the machine",
        workaround="`sgd_` only in a Program and only on a float32 p of a multiple of 8 "
                   "elements (updates.py); every other update runs the product (paddle:eager: "
                   "scale with bias -0.0; a Program: multiply, see the scale record) then "
                   "subtract_ in place: bit for bit mul then sub, as the IR says "
                   "(tests/test_paddle_eager_kernels.py)",
        pin=_sgd_rounds_once_and_as_mul_sub_on_multiples_of_8,
    ),
    Quirk(
        op="exp, take (softmax, log_softmax, cross-entropy)", framework="paddle",
        versions=VERSIONS,
        behaviour="paddle:static (PIR): no gradient of a gradient through exp or "
                  "take_along_axis: paddle.static.gradients raises \"op 'pd_op.exp_grad' "
                  "has no grad op\" (take_along_axis_grad likewise); dygraph has both",
        workaround="paddle:static raises BackendError naming the grad's line, the op and "
                   "the way out (paddle:eager, torch or tensorflow; `static._no_second_order`); "
                   "paddle:eager differentiates them twice",
        pin=_program_has_no_second_order_exp_or_take,
    ),
    Quirk(
        op="einsum (gradient)", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static (PIR): the gradient of paddle.einsum with respect to one "
                  "operand is wrong, silently, where the other operand is also the first "
                  "operand of an add or subtract (v - mean(v), as in var and std)",
        workaround="paddle:static's einsum lowering gives paddle.einsum copies of its "
                   "operands (paddle.assign); paddle:eager is right as it is",
        pin=_einsum_gradient_misses_an_added_operand,
    ),
    Quirk(
        op="while_loop (second order)", framework="paddle", versions=VERSIONS,
        behaviour="paddle:static (PIR): no gradient of a gradient through a while loop: "
                  "paddle.static.gradients of a while loop's gradient raises \"Currently, we "
                  "can only get phi::DataType from DenseTensorType ...\" (x ** 3 by two "
                  "multiplications in paddle.static.nn.while_loop)",
        workaround="paddle:static raises BackendError naming the outer grad's line, the "
                   "loop's and the way out (paddle:eager, torch or tensorflow; "
                   "`static._no_second_order`); paddle:eager differentiates a loop twice",
        pin=_program_cannot_differentiate_a_loop_gradient,
    ),
    Quirk(
        op="sparse_softmax_cross_entropy", framework="paddle", versions=VERSIONS,
        behaviour="the fused cross_entropy_with_softmax (F.cross_entropy's kernel) has no "
                  "second derivative: dygraph refuses paddle.grad(create_graph=True) through "
                  "it, a Program the gradient of its gradient",
        workaround="paddle:eager runs the fused kernel only outside a nested gradient "
                   "(`lowerings._fused_cross_entropy` reads GRAD_DEPTH); inside one, and "
                   "always in a Program, cross-entropy is composed of exp and "
                   "take_along_axis (paddle:static: see the exp, take record)",
        pin=_fused_cross_entropy_has_no_second_order,
    ),
    Quirk(
        op="grad (of a constant array)", framework="paddle", versions=VERSIONS,
        behaviour="in a Program, the gradient with respect to the result of "
                  "paddle.assign(array) (a constant of more than one element) counts only "
                  "one of its uses: d/dx sum(x * x) gives x, not 2x; of a copy, or of a fed "
                  "input, the right 2x",
        workaround="paddle:static differentiates a copy of such an operand "
                   "(`static.ProgramBuilder.lower_grad`, `_made_by_assign_value`): "
                   "ug.grad(f)(ug.tensor([...])) inside a @ug.function gives every target's "
                   "numbers (tests/test_grad_list_arguments.py)",
        pin=_gradient_wrt_an_assigned_array_counts_one_use,
    ),
    Quirk(
        op="neg", framework="paddle", versions=VERSIONS,
        behaviour="paddle.neg of a float is a scale with a +0.0 bias: -(+0.0) is +0.0",
        workaround="floats are multiplied by a full_like of -1 (lowerings.neg); ints keep "
                   "paddle.neg",
        pin=_neg_of_plus_zero_is_plus_zero,
    ),
    Quirk(
        op="sqrt", framework="paddle", versions=VERSIONS,
        behaviour="the float32 CPU sqrt of a tensor of several elements is NaN at +inf and "
                  "+0.0 at -0.0 (x * rsqrt(x)); float64's is right",
        workaround="float32 (and float16, widened to it) sqrt runs in float64 and is rounded "
                   "once, which is correctly rounded (lowerings.exact_sqrt); Adam's in-place "
                   "sqrt_ keeps the float32 kernel (its v is finite)",
        pin=_float32_sqrt_of_inf_is_nan,
    ),
    Quirk(
        op="abs", framework="paddle", versions=VERSIONS,
        behaviour="paddle.abs's backward is NaN at +-inf, where sign(x) is +-1",
        workaround="infinities go through x times a constant +-1 (a where on x > 0; "
                   "paddle.sign's backward is inf * 0 there), the rest through abs of x with "
                   "the infinities masked out (lowerings.absolute)",
        pin=_abs_gradient_is_nan_at_infinity,
    ),
    Quirk(
        op="topk", framework="paddle", versions=VERSIONS,
        behaviour="paddle.topk orders equal values by no rule of their index: the 3s of "
                  "[3, 1, 3, 0, -1, 1, 3, 0, 2, 2, 5, -7, 3, 3] come as indices 0, 2, 13, 12, "
                  "6 (largest=False too)",
        workaround="the first k of paddle.argsort(descending=largest, stable=True): ties in "
                   "index order, NaN first when largest (lowerings.topk)",
        pin=_topk_misorders_ties,
    ),
]
