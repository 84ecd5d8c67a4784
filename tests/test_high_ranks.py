"""Every op the random-program tester generates, at ranks 1 to 7 (argmax to 8), on all 9
targets.

A program that runs on one target runs on all: TensorFlow's CPU kernels refuse some high
ranks (oneDNN's Softmax above 5, a broadcast of more than 5 merged dims, ArgMax above 7;
`backends/unigraph_tensorflow/ranks.py` routes around them) and raised TF's own error where
the other targets ran. Shapes here alternate 2 and 3, and broadcast partners alternate 1 and
the full size, so no two adjacent dims merge and each rank is the rank a kernel sees. Each
case runs forward and its gradient against the float64 reference (numpy:eager on float64
inputs).

Paddle (3.3.1) has its own limits: it refuses argmax and a strided slice above rank 6 (its
own errors), and its max/min backward over several (not all) axes of a rank 5 or 6 tensor is
wrong (it reads garbage: paddle.max(x, axis=[0, 2, 4]).backward() on a [2, 3, 2, 3, 2] x);
`backends/unigraph_paddle/ranks.py` routes around them.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

RANKS = range(1, 8)
RANKS_OF = {"argmax": range(1, 9)}  # TF's ArgMax stops at 7


def full(rank: int) -> tuple:
    return tuple(2 + i % 2 for i in range(rank))


def ones_at_odd(rank: int) -> tuple:
    return tuple(1 if i % 2 else 2 for i in range(rank))


def ones_at_even(rank: int) -> tuple:
    return tuple(3 if i % 2 else 1 for i in range(rank))


def _last(x) -> int:
    return len(x.shape) - 1


def softmaxes(x):
    axes = sorted({0, len(x.shape) // 2, _last(x)})
    return ([ug.softmax(x, axis=a) for a in axes] + [ug.softmax(x, axis=-1)]
            + [ug.log_softmax(x, axis=a) for a in axes])


def broadcasting(x, y):
    return [x + y, x * y, x - y, x / (y * y + 0.5), ug.maximum(x, y), ug.minimum(x, y),
            ug.where(x > y, x, 2.0 * y), ug.add(x, y), ug.sub(y, x), ug.mul(y, x)]


def with_scalars(x):
    return [x + 0.5, x * 2.0, -1.5 - x, x / 0.25, 3.0 / (x * x + 1.0), ug.maximum(x, 0.5),
            ug.minimum(x, -1.5), x - 3.0]


def unary(x):
    return [ug.tanh(x), ug.sigmoid(x), -x, ug.relu(x), ug.abs(x), abs(x), ug.exp(x),
            ug.log(x * x + 0.5), ug.sqrt(ug.sigmoid(x) + 0.1), x ** 2,
            ug.pow(ug.sigmoid(x) + 0.5, x), ug.neg(x)]


def casts(x):
    return [ug.cast(ug.cast(x * 4.0, "int32"), x.dtype), ug.cast(x > 0.25, x.dtype) * x,
            ug.cast(ug.cast(x * 3.0, "int64"), x.dtype) + x]


def reductions(*ops):
    def reduce(x):
        rank = len(x.shape)
        alternate = tuple(range(0, rank, 2))
        out = []
        for op in ops:
            out += [op(x, axis=alternate, keepdims=False), op(x, axis=alternate, keepdims=True),
                    op(x), op(x, axis=-1, keepdims=True)]
            if rank > 1:
                out.append(op(x, axis=tuple(range(1, rank, 2)), keepdims=True))
        return out

    return reduce


def argmaxes(x):
    axis = len(x.shape) // 2
    indices = ug.argmax(x, axis=axis)
    # the argmax of the reduced slices indexes x along that axis, as the tester's take does
    rows = ug.reshape(x, (-1, x.shape[-1]))[:2]
    return [indices, ug.argmax(x, axis=0), ug.argmax(x, axis=-1),
            ug.take(x, ug.argmax(rows, axis=1), axis=_last(x))]


def shapes(x):
    rank = len(x.shape)
    size = int(np.prod(x.shape))
    out = [ug.reshape(x, (size,)), x.reshape(-1), ug.reshape(x, (-1,) + x.shape[1:]),
           ug.transpose(x, tuple(range(rank))[::-1]), x.T, ug.expand_dims(x, rank // 2),
           ug.squeeze(ug.expand_dims(x, 0)), ug.take(x, np.array([1, 0, 1]), axis=_last(x)),
           ug.concat([x, x * 2.0], axis=rank // 2), ug.stack([x, -x], axis=rank // 2)]
    if rank > 1:
        out.append(ug.transpose(x, (1, 0) + tuple(range(2, rank))))
    return out


def slices(x):
    rank = len(x.shape)
    steps = tuple(slice(None, None, 2) if i % 2 else slice(1, 2) for i in range(rank))
    mixed = tuple(-1 if i == 0 else slice(None) for i in range(rank))
    return [x[steps], x[mixed], x[None, ..., None], x[..., 1:]]


def broadcast_tos(x):
    # x of `ones_at_odd` shape: to the full shape, and to one more leading dim
    target = full(len(x.shape))
    return [ug.broadcast_to(x, target), ug.broadcast_to(x, (2,) + target)]


def matmuls(x, w):
    return [ug.matmul(x, w), x @ w]


CASES = {
    # name: (fn, input shapes of a rank)
    "softmax": (softmaxes, lambda r: [full(r)]),
    "broadcasting": (broadcasting, lambda r: [ones_at_odd(r), ones_at_even(r)]),
    "same_shape": (broadcasting, lambda r: [full(r), full(r)]),
    "scalars": (with_scalars, lambda r: [full(r)]),
    "unary": (unary, lambda r: [full(r)]),
    "casts": (casts, lambda r: [full(r)]),
    "sum_mean": (reductions(ug.sum, ug.mean), lambda r: [full(r)]),
    "max_min": (reductions(ug.max, ug.min), lambda r: [full(r)]),
    "prod": (reductions(ug.prod), lambda r: [full(r)]),
    "argmax": (argmaxes, lambda r: [full(r)]),
    "shapes": (shapes, lambda r: [full(r)]),
    "slices": (slices, lambda r: [full(r)]),
    "broadcast_to": (broadcast_tos, lambda r: [ones_at_odd(r)]),
    "matmul": (matmuls, lambda r: [full(max(r, 2)), (full(max(r, 2))[-1], 2)]),
}

def _inputs(shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    # away from the kinks and ties of relu, abs, max, argmax, casts: float32 rounding must
    # not change which side a value falls on
    return [(rng.choice([-1.0, 1.0], s) * rng.uniform(0.3, 1.2, s)
             + rng.integers(-2, 3, s) * 0.37).astype(dtype) for s in shapes]


def _program(fn, input_spec=None):
    """fn's outputs, and the gradient of a weighted sum of its float outputs."""

    def loss(*xs):
        total = 0.0
        for k, out in enumerate(fn(*xs)):
            if out.dtype in ("float32", "float64"):
                total = total + ug.sum(out * (0.5 + 0.25 * k))
        return total

    def program(*xs):
        grads = ug.grad(loss, argnums=tuple(range(len(xs))))(*xs)
        return (*fn(*xs), *grads)

    return ug.function(program, input_spec=input_spec)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("target", TARGETS)
def test_high_ranks_run_and_agree_with_float64(target, case):
    fn, make_shapes = CASES[case]
    program = _program(fn)
    for rank in RANKS_OF.get(case, RANKS):
        inputs = _inputs(make_shapes(rank), np.float32, seed=rank)
        expected = run_on("numpy:eager", program, *(x.astype(np.float64) for x in inputs))
        got = run_on(target, program, *inputs)
        assert len(got) == len(expected)
        for k, (g, e) in enumerate(zip(got, expected)):
            assert g.shape == e.shape, (rank, k)
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{case} at rank {rank}, result {k}")


# The cases whose ops `unigraph_tensorflow.ranks` routes, with dim 0 left open
# (`input_spec` None): the routes read that dim at run time (a tf.shape element), and must
# work for every size it takes, 1 included (a dim of size 1 merges its neighbours in TF's
# broadcasts, or drops out).
OPEN_CASES = ("softmax", "broadcasting", "same_shape", "sum_mean", "max_min", "prod", "argmax",
              "broadcast_to")


def open_argmaxes(x):
    # argmaxes without its take, whose rows slice the open dim; a float result for the grad
    return [ug.argmax(x, axis=len(x.shape) // 2), ug.argmax(x, axis=0, keepdims=True),
            ug.argmax(x, axis=-1), x * 2.0]


OPEN_FNS = {"argmax": open_argmaxes}


@pytest.mark.parametrize("case", OPEN_CASES)
@pytest.mark.parametrize("target", TARGETS)
def test_high_ranks_with_a_dim_unknown_until_the_run(target, case):
    fn, make_shapes = CASES[case]
    fn = OPEN_FNS.get(case, fn)
    reference = _program(fn)
    for rank in [r for r in RANKS_OF.get(case, RANKS) if r >= 5]:
        open_batch = _program(fn, [ug.Spec((None, *s[1:]), "float32") for s in make_shapes(rank)])
        for batch in (None, 1):  # the shapes as they are, then dim 0 of size 1
            shapes = [s if batch is None else (batch, *s[1:]) for s in make_shapes(rank)]
            inputs = _inputs(shapes, np.float32, seed=rank)
            expected = run_on("numpy:eager", reference, *(x.astype(np.float64) for x in inputs))
            got = run_on(target, open_batch, *inputs)
            assert len(got) == len(expected)
            for k, (g, e) in enumerate(zip(got, expected)):
                assert g.shape == e.shape, (rank, batch, k)
                np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5,
                                           err_msg=f"{case} at rank {rank}, dim 0 of "
                                                   f"{batch or 'its size'}, result {k}")
