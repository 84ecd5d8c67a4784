"""The NumPy backend's in-place lowerings (`sub_`, `add_`, `mul_`, `div_`, `sqrt_`, used by
the eager optimizers): they write into their first operand only when it owns its writeable
memory, the other operand has its dtype and its shape (or is 0-d), and no gradient tape is
recording; otherwise they run the op record (`sub`, ...), the allocating path. Written in
place, the numbers are the allocating ufunc's, bit for bit. The 9-target
behaviour (which lowerings an optimizer step runs, the same numbers as the allocating path)
is in test_optim_slots_in_place.py and test_optim_in_place.py."""

from __future__ import annotations

import numpy as np
import pytest
from unigraph_numpy.backend import IN_PLACE

from unigraph.ops import OPS
from unigraph.reference.eager import eager_grad

UFUNCS = {"sub_": np.subtract, "add_": np.add, "mul_": np.multiply, "div_": np.divide,
          "sqrt_": np.sqrt}


def _operands(name, x, y):
    return (x,) if name == "sqrt_" else (x, y)


def _expected(name, x, y):
    return UFUNCS[name](*_operands(name, x.copy(), y))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("same_shape", [True, False])
@pytest.mark.parametrize("name", list(IN_PLACE))
def test_an_owned_array_is_written_with_the_ufuncs_numbers(name, same_shape, dtype):
    rng = np.random.default_rng(3)
    x = rng.uniform(0.5, 2.0, (4, 3)).astype(dtype)
    y = (rng.uniform(0.5, 2.0, (4, 3)) if same_shape else np.array(0.7)).astype(dtype)
    want = _expected(name, x, y)
    out = IN_PLACE[name](*_operands(name, x, y))
    assert out is x
    np.testing.assert_array_equal(out, want)
    assert out.dtype == want.dtype


def _view(x, y):
    return x[:, :2], y[:, :2]


def _read_only(x, y):
    x.flags.writeable = False
    return x, y


def _other_dtype(x, y):
    return x, y.astype(np.float64)


def _broadcast_row(x, y):
    return x, y[:1]


def _int_division(x, y):
    return (x * 4).astype(np.int64), np.full(x.shape, 3, np.int64)


REFUSED = {"a view": _view, "a read-only array": _read_only, "another dtype": _other_dtype,
           "a broadcast row": _broadcast_row, "integers (div_, sqrt_)": _int_division}


# add_, mul_, sub_ write integers in place (the same dtype either way); sqrt_ has no
# second operand to differ.
REFUSALS = [(name, case) for name in IN_PLACE for case in REFUSED
            if not (case.startswith("integers") and name not in ("div_", "sqrt_"))
            and not (name == "sqrt_" and case in ("another dtype", "a broadcast row"))]


@pytest.mark.parametrize(("name", "case"), REFUSALS)
def test_otherwise_a_new_array_with_the_same_numbers(name, case):
    rng = np.random.default_rng(4)
    base = rng.uniform(0.5, 2.0, (4, 3)).astype(np.float32)
    x, y = REFUSED[case](base, rng.uniform(0.5, 2.0, (4, 3)).astype(np.float32))
    before = base.copy()
    want = OPS[name[:-1]].reference(*_operands(name, x.copy(), y))  # the op: a new array
    out = IN_PLACE[name](*_operands(name, x, y))
    assert out is not x
    np.testing.assert_array_equal(out, want)
    assert out.dtype == want.dtype
    np.testing.assert_array_equal(base, before)  # nothing written


@pytest.mark.parametrize("name", list(IN_PLACE))
def test_never_inside_a_gradient_tape(name):
    """The tape keeps the values it recorded: an in-place write under it would change one."""
    x = np.full((2, 2), 4.0, np.float32)
    y = np.full((2, 2), 2.0, np.float32)
    held = {}

    def fn(w):
        owned = np.array(x)  # owns its memory, dtype and shape match: only the tape refuses
        held["out"], held["owned"] = IN_PLACE[name](*_operands(name, owned, y)), owned
        return [(w * 1.0).sum()]

    eager_grad(fn, [np.ones(2, np.float32)])
    assert held["out"] is not held["owned"]
    np.testing.assert_array_equal(held["owned"], x)
    np.testing.assert_array_equal(held["out"], _expected(name, x, y))
