"""Scalar constants and sums with a constant, on all 9 targets, bit for bit NumPy's: what
paddle:static builds with fewer ops (`unigraph_paddle.program_scalars`: one `full` op per
constant value in a Program, a constant made at a tensor's shape directly, `x + c` as
`scale(x, 1.0, bias=c)` for a non-zero c that float32 holds), and a gradient with respect to
a constant whose value the function also reaches another way."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

SIZE = 5000  # past unigraph_paddle.program_scalars.EXPAND_FROM


def _operand(dtype, size=SIZE):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(size) * 10.0 ** rng.integers(-12, 3, size)).astype(dtype)
    x[:7] = [0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1e-8]
    return x.reshape(50, -1) if size == SIZE else x


def _same(got, want):
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


# eps (float32's 1e-8), a power of two, one float32 cannot hold (float64), the two zeros,
# an infinity, and a negative value.
CONSTANTS = [1e-8, 2.0 ** -30, 0.1, 0.0, -0.0, np.inf, -3.0]


@pytest.mark.parametrize("size", [9, SIZE])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("target", TARGETS)
def test_sums_and_products_with_constants(target, dtype, size):
    x = _operand(dtype, size)

    @ug.function
    def with_constants(x):
        outs = []
        for c in CONSTANTS:
            outs += [x + c, c + x, x * c, c * x]
        return tuple(outs)

    got = run_on(target, with_constants, x)
    with np.errstate(invalid="ignore", over="ignore"):
        want = []
        for c in CONSTANTS:
            c = dtype(c)
            want += [x + c, c + x, x * c, c * x]
    if target == "tensorflow:function":  # Grappler's z + 0.0 -> z (a quirk, pinned there)
        zero = 4 * CONSTANTS.index(0.0)
        for i in (zero, zero + 1):
            got[i], want[i] = np.abs(got[i]), np.abs(want[i])
    for g, w in zip(got, want):
        _same(g, w)


@pytest.mark.parametrize("target", TARGETS)
def test_gradient_with_respect_to_a_constant_used_elsewhere(target):
    """d/dc sum(c * (x * 2)) is sum(x * 2) at c = 2: in a Program both 2s may be one `full`
    op, whose total derivative would add sum(c * x)."""
    x = np.array([1.5, -2.0, 3.0], np.float32)

    @ug.function
    def gradient(x):
        c = ug.constant(2.0, "float32")
        return ug.grad(lambda c: ug.sum(c * (x * 2.0)))(c), x * 2.0 + c

    got, other = run_on(target, gradient, x)
    _same(got, np.sum(x * np.float32(2.0)))
    _same(other, x * np.float32(2.0) + np.float32(2.0))


@pytest.mark.parametrize("target", TARGETS)
def test_constants_in_branches_and_loops(target):
    """The same constants at the top level, in both branches of a cond and in a loop body:
    each block makes its own (a value of one block is not visible in another)."""
    x = _operand(np.float32)

    @ug.function
    def blocks(x, n):
        y = x * 0.9 + 1e-8
        z = ug.cond(ug.sum(x[0, 5:6]) > 0.0, lambda: x * 0.9 + 1e-8, lambda: x * 0.5)
        _, w = ug.while_loop(lambda i, w: i < n, lambda i, w: (i + 1, w * 0.9 + 1e-8),
                             (ug.constant(0, "int64"), x))
        return y, z, w

    got = run_on(target, blocks, x, np.int64(2))
    f = np.float32
    step = x * f(0.9) + f(1e-8)
    for g, w in zip(got, [step, step, (step * f(0.9) + f(1e-8))]):
        _same(g, w)


def test_paddle_static_makes_each_constant_once():
    """The mechanism: an Adam step over four parameters holds each scalar constant's `full`
    op once (it made them once per parameter), and adds eps to the large weight's
    denominator with one `scale` op."""
    from unigraph.plugins import backends

    params = [ug.Parameter(np.ones(s, np.float32), name=f"p{i}")
              for i, s in enumerate([(80, 70), (70,), (3, 5), (4,)])]
    optimizer = ug.optim.Adam(params, lr=1e-3)

    @ug.function
    def step(*grads):
        optimizer.apply(list(grads))
        return grads[0]

    graph = step.trace(*[np.ones(p.shape, np.float32) for p in params])
    executable = backends()["paddle"].compile(graph, "static")  # held: it owns the ops
    ops = executable.program.global_block().ops
    fills = [(o.attrs()["dtype"], tuple(o.attrs()["shape"]), o.attrs()["value"])
             for o in ops if o.name() == "pd_op.full"]
    assert len(fills) == len(set(fills)), fills
    assert sum(shape == () for _, shape, _ in fills) <= 10  # 8 values, 2 dtypes; was 40
    assert [o.name() for o in ops].count("pd_op.scale") == 1


def _adam_step_executable():
    from unigraph.plugins import backends

    params = [ug.Parameter(np.linspace(-1, 1, 5600, dtype=np.float32).reshape(80, 70),
                           name="w"), ug.Parameter(np.zeros(70, np.float32), name="b")]
    optimizer = ug.optim.Adam(params, lr=1e-3)

    @ug.function
    def step(gw, gb):
        optimizer.apply([gw, gb])
        return gw * 0.5

    grads = [np.full((80, 70), 0.25, np.float32), np.full(70, -0.5, np.float32)]
    graph = step.trace(*grads)
    executable = backends()["paddle"].compile(graph, "static")
    for i, value in enumerate(graph.params):  # zeros will do: only the output is checked
        executable.set_param(i, np.zeros(value.shape, value.dtype))
    return executable, grads


def test_paddle_static_stores_full_size_constants():
    """The mechanism: the large weight's factors (beta1, 1 - beta1, beta2, 1 - beta2, and
    the output's 0.5) are persistable variables set once in the Executable's Scope, not
    `full` ops run every step; the run gives the formula's numbers."""
    executable, grads = _adam_step_executable()
    ops = executable.program.global_block().ops
    assert not [o for o in ops if o.name() == "pd_op.full" and list(o.attrs()["shape"])]
    stored = [o.attrs()["parameter_name"] for o in ops if o.name() == "builtin.parameter"
              and o.attrs()["parameter_name"].startswith("constant_")]
    assert len(stored) == 5
    for name in stored:
        assert np.asarray(executable._scope.find_var(name).get_tensor()).shape == (80, 70)
    out = executable.run([grads[0], grads[1]])
    _same(np.asarray(out[0]), grads[0] * np.float32(0.5))


def test_paddle_static_run_all_finds_the_stored_constants():
    """`run_all` (the checker's every-value run) builds its own Program on the same Scope."""
    executable, grads = _adam_step_executable()
    values = executable.run_all([grads[0], grads[1]])
    assert any(np.array_equal(np.asarray(v), grads[0] * np.float32(0.5))
               for v in values.values() if np.shape(v) == (80, 70))
