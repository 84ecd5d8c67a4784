"""ug.take (and so ug.flip, x[..., [i]]) of a value with no elements, and ug.ensure_shape
naming some dims of a value with no elements and leaving others open, on all 9 targets
and onnxruntime:static: the shape eager gives, and gradients of that shape.

Found by the random tester, seed 12104 (`--max-depth 0`), on paddle:static: a Program's
gather of a value with no elements gave a value of other sizes (or one holding no memory),
so the reshape after it raised a raw InvalidArgumentError / PreconditionNotMetError (a
`flip` of an empty conv2d result; a `tile` of an empty conv_transpose2d result whose
batch was open); and
`ensure_shape(x, (0, None, 3, 3))` of an empty value whose dims were all open gave a
[0, 0, 3, 3] value, silently (reshape's 0, "keep this dim", is 0 in every dim of a tensor
with no elements).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, INFERENCE_TARGETS

import unigraph as ug
from unigraph.config import Target

EMPTY = np.zeros((0, 1, 3, 6), np.float32)
W = np.linspace(-1.0, 1.0, 9, dtype=np.float32).reshape(1, 1, 3, 3)
OPEN4 = ug.Spec((None, None, None, None), "float32")
OPEN_BATCH = ug.Spec((None, 1, 3, 6), "float32")


def take_inner(x):
    return ug.take(x, np.array([2, 0, 1]), axis=2) * 2.0


def flip_all(x):
    return ug.flip(x, axis=None) + 1.0


def conv_then_flip(x):
    return ug.flip(ug.conv2d(x, W, stride=(2, 2), padding=(1, 1), dilation=(2, 1)), axis=None)


def index_last(x):
    return x[..., [1, 1]] * x[..., [0, -1]]


def ensure_some(x):
    return ug.ensure_shape(x, (0, None, 3, 6)) * 3.0


def ensure_then_cast(x):
    return ug.cast(ug.ensure_shape(ug.tanh(x), (0, None, None, 6)), "uint8")


CASES = {  # name: (function, input_spec or None)
    "take": (take_inner, None), "flip": (flip_all, None), "conv, flip": (conv_then_flip, None),
    "x[..., [i]]": (index_last, None), "take, dims open": (take_inner, [OPEN4]),
    "flip, dims open": (flip_all, [OPEN4]), "take, batch open": (take_inner, [OPEN_BATCH]),
    "x[..., [i]], batch open": (index_last, [OPEN_BATCH]),
    "ensure_shape, dims open": (ensure_some, [OPEN4]),
    "ensure_shape, cast": (ensure_then_cast, [OPEN4]),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_value_with_no_elements_keeps_eagers_shape(target, name):
    fn, spec = CASES[name]
    with ug.use_backend("numpy", "eager"):
        want = fn(ug.tensor(EMPTY)).numpy()
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        got = ug.function(fn, input_spec=spec)(EMPTY).numpy()
        assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
        if target in INFERENCE_TARGETS or got.dtype == np.uint8:
            return
        grad = ug.function(ug.grad(lambda x: ug.sum(fn(x))), input_spec=spec)(EMPTY)
        assert grad.numpy().shape == EMPTY.shape, grad.numpy().shape
