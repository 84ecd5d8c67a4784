"""paddle:eager's faster kernels (issue 19) keep every answer: cross-entropy through
Paddle's fused kernel where it floors nothing (composed elsewhere, and under a nested
gradient, which the fused kernel cannot differentiate twice), relu without its NaN guard
where the input holds no NaN, and a 0-d float times a tensor by Paddle's `scale` kernel.

Results are checked on all 9 targets against float64 NumPy or hand-computed values; which
Paddle kernel ran, on paddle:eager."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
import unigraph.nn.functional as F
from unigraph.config import Target
from unigraph.errors import UnigraphError

# Ordinary rows, one confidently right (loss ~5e-5) and one confidently wrong: the fused
# kernel's range. Their largest spread (x - max) is -13.
ORDINARY = np.array([[0.3, -1.2, 2.0, 0.7, -0.1],
                     [10.0, 0.0, -0.5, 1.0, 0.25],
                     [-3.0, 2.5, 0.0, -1.0, 1.5],
                     [0.0, 0.0, 0.0, 0.0, 0.0]], np.float32)
# Row 1 is 62 below its max (the fused kernel would still be exact: -64 is its floor), row
# 2 is 70 below (floored there); one NaN row and one +inf row (NaN, as the record says).
EDGES = np.array([[0.5, -62.0, 1.0, 0.0, 0.0],
                  [1.0, 0.0, -70.0, 0.5, 0.0],
                  [0.0, np.nan, 1.0, 0.0, 0.0],
                  [0.0, np.inf, 1.0, 0.0, 0.0]], np.float32)


def _reference(logits, labels):
    """Per-row losses and the gradient of their mean, float64."""
    x = logits.astype(np.float64)
    with np.errstate(invalid="ignore"):
        shifted = x - x.max(axis=1, keepdims=True)
        total = np.exp(shifted).sum(axis=1, keepdims=True)
        losses = np.log(total)[:, 0] - shifted[np.arange(len(x)), labels]
        grad = (np.exp(shifted) / total - np.eye(x.shape[1])[labels]) / len(x)
    return losses, grad


def _losses_and_grad(logits, labels):
    losses = ug.sparse_softmax_cross_entropy(logits, labels)
    grad = ug.grad(lambda z: ug.mean(ug.sparse_softmax_cross_entropy(z, labels)))(logits)
    return losses, grad


@pytest.mark.parametrize("labels_dtype", [np.int64, np.int32])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("target", TARGETS)
def test_cross_entropy_on_ordinary_logits(target, dtype, labels_dtype):
    labels = np.array([2, 1, 4, 3], labels_dtype)
    losses, grad = run_on(target, ug.function(_losses_and_grad), ORDINARY.astype(dtype),
                          labels)
    want_losses, want_grad = _reference(ORDINARY, labels)
    # One rounding of the probability: ~6e-8 in float32 (the 5e-5 loss of row 1).
    atol = 1e-7 if dtype == np.float32 else 1e-15
    np.testing.assert_allclose(losses, want_losses, rtol=1e-6, atol=atol)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=atol)


@pytest.mark.parametrize("target", TARGETS)
def test_cross_entropy_near_and_past_the_fused_floor(target):
    labels = np.array([1, 2, 0, 1], np.int64)
    losses, grad = run_on(target, ug.function(_losses_and_grad), EDGES, labels)
    want_losses, want_grad = _reference(EDGES, labels)
    np.testing.assert_allclose(losses[:2], want_losses[:2], rtol=1e-6)  # 62.x and 70.x
    assert np.isnan(losses[2:]).all()
    # Relative, entry by entry: e**-62 / 4 and e**-70 / 4 must be themselves, not floored.
    np.testing.assert_allclose(grad[:2], want_grad[:2], rtol=2e-5, atol=0)
    assert np.isnan(grad[2:]).all()


@pytest.mark.parametrize("target", TARGETS)
def test_second_derivative_of_cross_entropy(target):
    """d/dz sum(r * grad(mean loss)(z)) = (p * r - p * (p . r)) / N per row (the softmax
    Jacobian times r), float64 by hand."""
    labels = np.array([2, 1, 4, 3], np.int64)
    r = np.linspace(-1.0, 1.0, ORDINARY.size).reshape(ORDINARY.shape).astype(np.float32)

    def mean_loss(z):
        return ug.mean(F.cross_entropy(z, labels))

    @ug.function
    def second(z):
        return ug.grad(lambda v: ug.sum(ug.grad(mean_loss)(v) * r))(z)

    if target.startswith("numpy:"):  # documented: its VJP rules are not differentiable ops
        with pytest.raises(UnigraphError, match="second order"):
            run_on(target, second, ORDINARY)
        return
    if target == "paddle:static":  # Paddle's Program backward: exp_grad has no gradient
        with pytest.raises(UnigraphError, match=r"second order\) \(.*test_paddle_eager_"):
            run_on(target, second, ORDINARY)
        return
    x = ORDINARY.astype(np.float64)
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    want = (p * r - p * (p * r).sum(axis=1, keepdims=True)) / len(x)
    np.testing.assert_allclose(run_on(target, second, ORDINARY), want, rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("target", TARGETS)
def test_relu_without_nan_and_with_an_infinite_sum(target):
    # Row 0 sums to a finite value, row 1 to +inf (float32 overflow), no NaN anywhere.
    x = np.array([[-1.5, 0.0, 2.5, -0.0], [3e38, 3e38, -1.0, 1.0]], np.float32)

    @ug.function
    def relu_and_grad(x):
        return ug.relu(x), ug.grad(lambda v: ug.sum(ug.relu(v) * 2.0))(x)

    for rows in (x[:1], x):
        value, grad = run_on(target, relu_and_grad, rows)
        np.testing.assert_array_equal(value, np.maximum(rows, 0))
        np.testing.assert_array_equal(grad, np.where(rows > 0, 2.0, 0.0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("target", TARGETS)
def test_scalar_times_tensor_is_the_exact_product(target, dtype):
    # Normal products only: TensorFlow's kernels flush subnormal results to zero.
    x = np.array([1.5, -0.0, 0.0, np.nan, np.inf, -np.inf, 3.0, -7.25e-3], dtype)

    @ug.function
    def products(s, x):
        return s * x, x * s

    for s in (0.1, -0.5, -0.0, 1e-30):
        scalar = np.asarray(s, dtype)
        with np.errstate(invalid="ignore"):
            want = scalar * x
        for got in run_on(target, products, scalar, x):
            assert got.dtype == dtype
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("target", TARGETS)
def test_gradient_of_a_scalar_factor(target):
    x = np.array([1.0, -2.0, 4.5], np.float32)

    @ug.function
    def grads(s, x):
        return ug.grad(lambda s, x: ug.sum(s * x), argnums=(0, 1))(s, x)

    ds, dx = run_on(target, grads, np.float32(0.5), x)
    np.testing.assert_allclose(ds, x.sum())
    np.testing.assert_allclose(dx, [0.5, 0.5, 0.5])


# -- Paddle mechanisms -----------------------------------------------------------------------
class _Spy:
    """Stands in for `paddle._C_ops` in the lowerings module, counting the calls by name."""

    def __init__(self, ops, names):
        self._ops, self.calls = ops, {name: 0 for name in names}

    def __getattr__(self, name):
        op = getattr(self._ops, name)
        if name not in self.calls:
            return op

        def counted(*args):
            self.calls[name] += 1
            return op(*args)

        return counted


@pytest.fixture
def spy(monkeypatch):
    import unigraph_paddle.lowerings as lowerings

    spy = _Spy(lowerings._C_ops, ("cross_entropy_with_softmax", "log", "scale", "relu",
                                  "isnan"))
    monkeypatch.setattr(lowerings, "_C_ops", spy)
    return spy


def test_paddle_eager_kernels_taken(spy):
    labels = np.array([2, 1, 4, 3])
    with ug.use_backend("paddle", "eager"):
        ug.grad(lambda z: ug.mean(ug.sparse_softmax_cross_entropy(z, labels)))(
            ug.tensor(ORDINARY))
        assert (spy.calls["cross_entropy_with_softmax"], spy.calls["log"]) == (1, 0)
        ug.sparse_softmax_cross_entropy(ug.tensor(EDGES[:2]), labels[:2])
        assert (spy.calls["cross_entropy_with_softmax"], spy.calls["log"]) == (2, 1)
        ug.relu(ug.tensor(ORDINARY))
        assert (spy.calls["relu"], spy.calls["isnan"]) == (1, 0)
        ug.relu(ug.tensor(EDGES))
        assert (spy.calls["relu"], spy.calls["isnan"]) == (2, 1)
        ug.tensor(np.float32(0.5)) * ug.tensor(ORDINARY)
        assert spy.calls["scale"] == 1


def test_paddle_eager_nested_gradient_composes_cross_entropy(spy):
    labels = np.array([2, 1, 4, 3])

    def mean_loss(z):
        return ug.mean(ug.sparse_softmax_cross_entropy(z, labels))

    with ug.use_backend("paddle", "eager"):
        ug.grad(lambda v: ug.sum(ug.grad(mean_loss)(v)))(ug.tensor(ORDINARY))
    assert spy.calls["cross_entropy_with_softmax"] == 0
    assert spy.calls["log"] == 1


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "less", "equal"])
def test_paddle_eager_direct_kernels_and_the_widened_dtypes(op):
    """The eager entries call the `_C_ops` kernel for float32/64 and int32/64 (bit for bit
    the `paddle.*` function's answer) and widen float16 and int8 as before (NumPy's
    numbers: one rounding, wrapping)."""
    import paddle
    from unigraph_paddle.lowerings import LOWERINGS

    _paddle_backend_loaded()
    fn = LOWERINGS[op]
    numpy_op = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
                "less": np.less, "equal": np.equal}[op]
    native = {"add": paddle.add, "sub": paddle.subtract, "mul": paddle.multiply,
              "div": paddle.divide, "less": paddle.less_than, "equal": paddle.equal}[op]
    x = np.array([1.5, -2.25, 100.0, 3.0], np.float32)
    y = np.array([0.5, 3.0, 120.0, 3.0], np.float32)
    for dtype in (np.float32, np.float64, np.int32, np.int64, np.float16, np.int8):
        if op == "div" and np.dtype(dtype).kind == "i":
            continue  # the frontend divides ints as floats
        a, b = x.astype(dtype), y.astype(dtype)
        got = fn(paddle.to_tensor(a), paddle.to_tensor(b)).numpy()
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(got, numpy_op(a, b))
        if dtype not in (np.float16, np.int8):
            want = native(paddle.to_tensor(a), paddle.to_tensor(b)).numpy()
            np.testing.assert_array_equal(got, want)


def _paddle_backend_loaded():
    from unigraph.plugins import backends

    backends()["paddle"].load()


# -- SGD steps round as mul then sub ---------------------------------------------------------
def _sgd_case(dtype):
    rng = np.random.default_rng(11)
    starts = [rng.standard_normal(n).astype(dtype) for n in (64, 100)]
    grads = [rng.standard_normal(n).astype(dtype) for n in (64, 100)]
    params = [ug.Parameter(p.copy(), name=f"p{i}") for i, p in enumerate(starts)]
    optimizer = ug.optim.SGD(params, lr=0.37)

    @ug.function
    def step(g0, g1):
        optimizer.apply([g0, g1])
        return g0

    lr = np.asarray(0.37, np.float64).astype(dtype)
    return step, params, grads, [p - lr * g for p, g in zip(starts, grads)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("target", TARGETS)
def test_sgd_step_rounds_as_mul_then_sub(target, dtype):
    """One SGD step of a parameter of 64 elements and one of 100: bit for bit p - lr * g
    rounded twice, as the IR says, on every target (Paddle's sgd_ kernel and torch's
    addcmul_ round as an FMA: see the sgd quirk record and backends/unigraph_torch/fusions.py)."""
    step, params, grads, want = _sgd_case(dtype)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        step(*grads)
        for param, value in zip(params, want):
            np.testing.assert_array_equal(param.numpy(), value)


@pytest.mark.parametrize("size, dtype, op", [(64, "float32", "pd_op.sgd_"),
                                              (100, "float32", "pd_op.multiply"),
                                              (64, "float64", "pd_op.multiply")])
def test_paddle_static_sgd_update_ops(size, dtype, op):
    params = [ug.Parameter(np.zeros(size, dtype), name="p")]
    optimizer = ug.optim.SGD(params, lr=0.5)

    @ug.function
    def step(g):
        optimizer.apply([g])
        return g

    graph = step.trace(np.ones(size, dtype))
    from unigraph.plugins import backends

    executable = backends()["paddle"].compile(graph, "static")
    ops = executable.program.global_block().ops
    names = [o.name() for o in ops]
    assert op in names
    # At most lr * g (no `scale`: its -0.0 bias may be +0.0 in a Program, see updates.py),
    # no copy back.
    assert "pd_op.scale" not in names
    products = [list(o.result(0).shape) for o in ops if o.name() == "pd_op.multiply"]
    assert products == ([] if op == "pd_op.sgd_" else [[size]])
    assert "pd_op.assign_out_" not in names


# -- exp: the floor mask only where a value lies below it ------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("target", TARGETS)
def test_exp_with_and_without_values_below_the_floor(target, dtype):
    """exp and its gradient, float64 by hand: exp(-inf) and exp(-800) are 0 (Paddle's
    vectorised exp floors them), a NaN stays NaN; 8+ elements, Paddle's vector path."""
    ordinary = np.array([0.0, -1.5, 2.0, -50.0, 3.25, -20.0, 1.0, -7.0, 0.5], dtype)
    below = np.array([0.0, -np.inf, 2.0, -800.0, 3.25, -20.0, np.nan, -7.0, 0.5], dtype)

    @ug.function
    def value_and_grad(x):
        return ug.exp(x), ug.grad(lambda v: ug.sum(ug.exp(v) * 2.0))(x)

    for x in (ordinary, below):
        value, grad = run_on(target, value_and_grad, x)
        with np.errstate(invalid="ignore"):
            want = np.exp(x.astype(np.float64))
        rtol = 1e-6 if dtype == np.float32 else 1e-14
        np.testing.assert_allclose(value, want, rtol=rtol, atol=0)
        np.testing.assert_allclose(grad, 2 * want, rtol=rtol, atol=0)


def test_paddle_eager_exp_masks_only_below_the_floor(monkeypatch):
    import unigraph_paddle.lowerings as lowerings

    spy = _Spy(lowerings._C_ops, ("exp", "cast"))
    monkeypatch.setattr(lowerings, "_C_ops", spy)
    with ug.use_backend("paddle", "eager"):
        ug.exp(ug.tensor(np.linspace(-50.0, 5.0, 9, dtype=np.float32)))
        assert (spy.calls["exp"], spy.calls["cast"]) == (1, 0)
        ug.exp(ug.tensor(np.linspace(-500.0, 5.0, 9, dtype=np.float32)))
        assert (spy.calls["exp"], spy.calls["cast"]) == (2, 1)


def test_paddle_eager_momentum_scales_its_slot_in_place(monkeypatch):
    """v <- v * mu + g from the second step on: `scale_` (bit for bit the product) on the
    slot's own tensor; the numbers are float64's within rounding."""
    import unigraph_paddle.lowerings as lowerings

    spy = _Spy(lowerings._C_ops, ("scale_", "multiply_"))
    monkeypatch.setattr(lowerings, "_C_ops", spy)
    rng = np.random.default_rng(5)
    p0 = rng.standard_normal(40).astype(np.float32)
    grads = [rng.standard_normal(40).astype(np.float32) for _ in range(3)]
    param = ug.Parameter(p0.copy(), name="p")
    optimizer = ug.optim.Momentum([param], lr=0.1, momentum=0.9)
    with ug.use_backend("paddle", "eager"):
        for g in grads:
            optimizer.apply([ug.tensor(g)])
        got = param.numpy()
    assert spy.calls["scale_"] >= 2 and spy.calls["multiply_"] == 0
    p, v = p0.astype(np.float64), np.zeros(40)
    for g in grads:
        v = 0.9 * v + g
        p = p - 0.1 * v
    np.testing.assert_allclose(got, p, rtol=1e-6, atol=1e-6)
