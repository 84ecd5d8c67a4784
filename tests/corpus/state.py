"""Corpus programs about state: seeded random draws and Dropout, NumPy operands on either
side, dtype mixes and promotion, Python scalars, the memory contract, optimizer and input
errors (see tests/corpus/__init__.py). The runner seeds with `ug.manual_seed(0)` before each
target, so every target sees the same draws."""

from __future__ import annotations

import numpy as np

import unigraph as ug
from corpus import Program

X3 = np.array([0.5, -1.0, 2.0], dtype=np.float32)
W3 = np.array([1.5, 2.0, -0.5], dtype=np.float32)
M23 = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]], dtype=np.float32)
LINE = r"\S*corpus/state\.py:\d+"


def _draws(n: int, dtype="float32"):
    """The first `n` uniform draws after ug.manual_seed(0), computed by hand."""
    return np.random.default_rng(0).random(n).astype(dtype)


# -- randomness -------------------------------------------------------------------------------
def _uniform_times():
    return ug.function(lambda x: x * ug.random.uniform((3,)))


def _two_draws():
    @ug.function
    def f(x):
        a = ug.random.uniform((3,))
        b = ug.random.uniform((3,))
        return x * a - b
    return f


def _two_calls_fresh_draws():
    f = ug.function(lambda x: x + ug.random.uniform((2,)))

    def run(x):
        return f(x), f(x)  # a compiled graph draws afresh on every run
    return run


def _seeded_init():
    def run(x):
        net = ug.nn.Linear(3, 2)  # weights from the seeded generator, the same everywhere
        return ug.function(net)(x)
    return run


def _dropout(training: bool):
    def make():
        layer = ug.nn.Dropout(0.5)
        layer.train(training)
        return ug.function(lambda x: layer(x))
    return make


def _dropout_training_steps():
    def run(x, y):
        net = ug.nn.Sequential(ug.nn.Linear(3, 4, act="relu"), ug.nn.Dropout(0.5),
                               ug.nn.Linear(4, 2))
        trainer = ug.Trainer(net, ug.nn.functional.cross_entropy, ug.optim.SGD(net, lr=0.5))
        losses = [trainer.step(x, y)["loss"] for _ in range(3)]
        return np.float32(losses), [p.numpy() for p in net.parameters()]
    return run


def _draw_in_loop_body():
    @ug.function
    def f(x):
        return ug.while_loop(lambda i, s: i < 3,
                             lambda i, s: (i + 1, s + ug.random.uniform((3,))), (0, x))
    return f


def _dropout_in_cond_branch():
    layer = ug.nn.Dropout(0.5)
    return ug.function(lambda x: ug.cond(ug.sum(x) > 0, lambda: layer(x), lambda: x))


def _draws_before_the_loop():
    @ug.function
    def f(x):
        noise = ug.random.uniform((3, 3))  # one row per iteration, drawn before the loop
        return ug.while_loop(lambda i, s: i < 3,
                             lambda i, s: (i + 1, s + noise[i]), (0, x))[1]
    return f


# -- NumPy operands on either side -------------------------------------------------------------
def _numpy_left_arith():
    return ug.function(lambda x: W3 * x + W3 - W3 / (x * x + 1.0) + M23 @ ug.reshape(x, (3, 1)))


def _numpy_left_compare():
    return ug.function(lambda x: (W3 < x, W3 >= x, W3 == x, W3 != x))


def _numpy_left_grad():
    return ug.grad(ug.function(lambda x: ug.sum(W3 * x * x + np.float32(3.0) * x)))


def _numpy_scalar_left():
    return ug.function(lambda x: (np.float32(2.0) * x, np.int64(3) + x, np.float32(1.0) - x))


def _numpy_float64_promotes():
    return ug.function(lambda x: (np.ones(3) * x, x + np.ones(3)))  # float64 array: float64


# -- dtype mixes ---------------------------------------------------------------------------------
def _promotion():
    @ug.function
    def f(i, x):
        return (i + 2, i + 1.5, x + 2, i * x, i / 2, ug.mean(i), ug.cast(i, "int32") + i,
                (x > 0) + 1, x * True)
    return f


def _python_scalar_arguments():
    return ug.function(lambda a, b, flag: (a * 2.0, b * 2, ug.logical_not(flag)))


def _half_precision_mix():
    return ug.function(lambda x: ug.cast(x, "float16") * x)  # float16 * float32 -> float32


def _int32_and_int64():
    return ug.function(lambda a, b: (a + b, a * 3, b - a))


# -- memory contract --------------------------------------------------------------------------
def _caller_array_reused():
    def run(x):
        buffer = np.array([1.0, 2.0, 3.0], dtype=np.float32)
        weight = ug.tensor(buffer)
        shaped = ug.reshape(buffer, (3, 1))
        buffer[:] = 100.0  # a later write must not reach either tensor
        return ug.function(lambda x: x * weight + ug.reshape(shaped, (3,)))(x)
    return run


def _numpy_result_is_read_only():
    def run(x):
        out = ug.function(lambda x: x * 2.0)(x)
        refused = False
        try:
            out.numpy()[0] = 99.0
        except ValueError:
            refused = True
        copy = np.array(out)  # a writable copy: writing to it changes nothing else
        copy[1] = 99.0
        return out, refused
    return run


def _parameter_numpy_after_training():
    def run(x):
        w = ug.Parameter(np.ones(3, np.float32), name="w")
        optimizer = ug.optim.SGD([w], lr=0.25)

        @ug.function
        def step(x):
            loss, grads = ug.value_and_grad(lambda: ug.sum(w * x), wrt=[w])()
            optimizer.apply(grads)
            return loss

        step(x)
        snapshot = w.numpy()
        state = {"w": w.numpy().copy()}
        state["w"][:] = -5.0
        step(x)
        return snapshot, w.numpy()
    return run


# -- errors in the user's terms ----------------------------------------------------------------
def _text_input():
    return ug.function(lambda x: x + ug.tensor(["a"]))


def _ragged_input():
    return ug.function(lambda x: x + ug.tensor([[1.0, 2.0], [3.0]]))


def _huge_int():
    return ug.function(lambda i, x: (x + 2**70, i + 2**70))  # float32 takes it; int64 cannot


def _item_of_vector():
    return ug.function(lambda x: x * (x * 2.0).item())


def _lr_string():
    def run(x):
        w = ug.Parameter(np.ones(3, np.float32))
        return ug.optim.SGD([w], lr="0.1")
    return run


def _lr_nan():
    def run(x):
        w = ug.Parameter(np.ones(3, np.float32))
        return ug.optim.Adam([w], lr=float("nan"))
    return run


def _unknown_dtype():
    return ug.function(lambda x: ug.cast(x, "flaot32"))


PROGRAMS = [
    Program("uniform_times_input", _uniform_times, (X3,), expect=X3 * _draws(3)),
    Program("two_draws_in_order", _two_draws, (X3,),
            expect=X3 * _draws(6)[:3] - _draws(6)[3:]),
    Program("fresh_draws_per_call", _two_calls_fresh_draws, (np.zeros(2, np.float32),),
            expect=(_draws(4)[:2], _draws(4)[2:])),
    Program("seeded_linear_init", _seeded_init, (X3[None],)),
    Program("dropout_train_mask", _dropout(True), (np.ones(6, np.float32),),
            expect=np.where(_draws(6) >= 0.5, 2.0, 0.0).astype(np.float32)),
    Program("dropout_eval_identity", _dropout(False), (X3,), expect=X3),
    Program("dropout_training_steps", _dropout_training_steps,
            (np.stack([X3, W3, -X3]), np.array([0, 1, 1], dtype=np.int64)), rtol=1e-4,
            atol=1e-5),
    Program("random_in_while_body_is_refused", _draw_in_loop_body, (X3,),
            raises=ug.TracingError, match=rf"random draw at {LINE} is inside a while_loop body"),
    Program("dropout_in_cond_branch_is_refused", _dropout_in_cond_branch, (X3,),
            raises=ug.TracingError, match=rf"inside a cond branch \(the cond at {LINE}\)"),
    Program("draws_before_the_loop", _draws_before_the_loop, (X3,),
            expect=X3 + _draws(9).reshape(3, 3).sum(axis=0), rtol=1e-5),
    Program("numpy_left_arithmetic", _numpy_left_arith, (X3,),
            expect=(W3 * X3 + W3 - W3 / (X3 * X3 + 1.0))[None] + (M23 @ X3)[:, None]),
    Program("numpy_left_comparisons", _numpy_left_compare, (X3,),
            expect=(W3 < X3, W3 >= X3, W3 == X3, W3 != X3)),
    Program("numpy_left_gradient", _numpy_left_grad, (X3,), expect=2.0 * W3 * X3 + 3.0),
    Program("numpy_scalar_left", _numpy_scalar_left, (X3,),
            expect=(2.0 * X3, 3.0 + X3, 1.0 - X3)),
    Program("numpy_float64_array_promotes", _numpy_float64_promotes, (X3,),
            expect=(X3.astype(np.float64), X3.astype(np.float64) + 1.0)),
    Program("promotion_rules", _promotion, (np.array([1, 2, 4]), X3),
            expect=(np.array([3, 4, 6]), np.array([2.5, 3.5, 5.5]), X3 + 2,
                    np.array([1, 2, 4]) * X3.astype(np.float64), np.array([0.5, 1.0, 2.0]),
                    np.float64(7 / 3), np.array([2, 4, 8]), np.array([2, 1, 2]), X3)),
    Program("python_scalar_arguments", _python_scalar_arguments, (1.5, 3, True),
            expect=(np.float32(3.0), np.int64(6), False)),
    Program("float16_times_float32", _half_precision_mix, (X3,), expect=X3 * X3, rtol=1e-3),
    Program("int32_with_int64", _int32_and_int64,
            (np.array([1, 2], np.int32), np.array([10, 20], np.int64)),
            expect=(np.array([11, 22]), np.array([3, 6], np.int32), np.array([9, 18]))),
    Program("caller_array_reused_after_tensor", _caller_array_reused, (X3,),
            expect=X3 * np.array([1, 2, 3]) + np.array([1, 2, 3])),
    Program("numpy_result_is_read_only", _numpy_result_is_read_only, (X3,),
            expect=(2.0 * X3, True)),
    Program("parameter_snapshot_after_training", _parameter_numpy_after_training, (X3,),
            expect=(1.0 - 0.25 * X3, 1.0 - 0.5 * X3)),
    Program("text_input", _text_input, (X3,), raises=TypeError,
            match=rf"ug\.tensor at {LINE}: 'a' at index \[0\] is text"),
    Program("ragged_input", _ragged_input, (X3,), raises=ValueError,
            match=rf"{LINE}: the nested lists are ragged"),
    Program("int_beyond_int64", _huge_int, (np.array([1, 2]), X3), raises=OverflowError,
            match=rf"integer 1180591620717411303424 at {LINE} does not fit in int64"),
    Program("item_of_a_vector", _item_of_vector, (X3,), raises=ValueError,
            match=rf"`\.item\(\)` at {LINE} on a tensor of shape \[3\]"),
    Program("lr_as_string", _lr_string, (X3,), raises=TypeError,
            match=r"SGD: lr must be a number, got '0\.1' \(str\); write lr=0\.1"),
    Program("lr_nan", _lr_nan, (X3,), raises=ValueError, match=r"Adam: lr=nan is not a finite"),
    Program("misspelt_dtype", _unknown_dtype, (X3,), raises=TypeError,
            match=r"dtype 'flaot32' does not exist; did you mean 'float32'"),
]
