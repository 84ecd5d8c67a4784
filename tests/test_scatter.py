"""ug.scatter / ug.scatter_add and x.at[i].set/add with a traced integer-array index (issue
14), on all 9 targets, eager and static: values against NumPy in float64 (written as loops
here, not taken from unigraph), gradients against hand-computed ones, and an index out of
range raising take's IndexOutOfRangeError. The `scatter_add` record itself (reference, VJP,
every lowering) is covered by test_consistency.py and the ONNX export tests."""

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.errors import IndexOutOfRangeError

RNG = np.random.default_rng(1414)
X = RNG.standard_normal((4, 5))
X32 = X.astype(np.float32)


def _replace(x, axis, indices, updates):
    """NumPy: the writes in order, so a repeated index keeps the last update."""
    out = np.array(x, dtype=np.float64)
    moved, source = np.moveaxis(out, axis, 0), np.moveaxis(updates, axis, 0)
    for j, i in enumerate(np.reshape(indices, -1)):
        moved[i] = source[j]
    return out


def _add(x, axis, indices, updates):
    out = np.array(x, dtype=np.float64)
    moved, source = np.moveaxis(out, axis, 0), np.moveaxis(updates, axis, 0)
    for j, i in enumerate(np.reshape(indices, -1)):
        moved[i] += source[j]
    return out


# name: (axis, reduction, indices, updates shape); updates are drawn, flattened like indices.
CASES = {
    "replace_rows_repeated": (0, "replace", [3, 1, 3, -4], (4, 5)),
    "add_rows_repeated": (0, "add", [2, 2, 0, -1, 2], (5, 5)),
    "replace_columns": (1, "replace", [4, 0, -1], (4, 3)),
    "add_columns_2d_index": (1, "add", [[0, 1], [1, 1]], (4, 4)),
    "replace_one_column": (1, "replace", [2], (4, 1)),
}


def _case(name):
    axis, reduction, indices, shape = CASES[name]
    indices = np.asarray(indices, dtype=np.int64)
    updates = RNG.standard_normal(shape)
    size = X.shape[axis]
    flat = np.where(indices < 0, indices + size, indices).reshape(-1)
    expect = (_replace if reduction == "replace" else _add)(X, axis, flat, updates)
    updates = updates.reshape(X.shape[:axis] + indices.shape + X.shape[axis + 1:])
    return axis, reduction, indices, updates, expect


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("target", TARGETS)
def test_scatter_with_traced_indices_matches_numpy(target, name):
    axis, reduction, indices, updates, expect = _case(name)
    fn = ug.function(lambda x, i, u: ug.scatter(x, i, u, axis=axis, reduction=reduction))
    got = run_on(target, fn, X32, indices, updates.astype(np.float32))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expect, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_scatter_gradients(target):
    """replace: x keeps g where nothing was written; an update gets g at its position unless
    a later update to the same position replaced it. add: x gets g, every update g at its
    position."""
    w = RNG.standard_normal(X.shape)
    indices = np.array([3, 1, 3])
    updates = RNG.standard_normal((3, 5))

    def loss(x, u):
        return ug.sum((ug.scatter(x, indices, u) + 2.0 * ug.scatter_add(x, indices, u)) * w)

    dx, du = run_on(target, ug.function(ug.grad(loss, argnums=(0, 1))), X, updates)
    want_dx = w * np.array([1, 0, 1, 0])[:, None] + 2.0 * w
    want_du = np.stack([np.zeros(5), w[1], w[3]]) + 2.0 * w[indices]
    np.testing.assert_allclose(dx, want_dx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(du, want_du, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
def test_at_with_a_traced_int_array(target):
    """x.at[i] with i a traced int tensor: set keeps the last of repeated rows, add sums
    them; x.at[:, i] writes columns; a scalar value broadcasts; gradients reach x and v."""
    rows, cols = np.array([0, 2, 0]), np.array([4, -5])
    value = RNG.standard_normal((3, 5))

    def fn(x, i, j, v):
        return x.at[i].set(v), x.at[i].add(v), x.at[:, j].set(7.0), x.at[:, j].add(1.0)

    got = run_on(target, ug.function(fn), X, rows, cols, value)
    np.testing.assert_allclose(got[0], _replace(X, 0, rows, value), rtol=1e-12)
    np.testing.assert_allclose(got[1], _add(X, 0, rows, value), rtol=1e-12)
    np.testing.assert_allclose(got[2], _replace(X, 1, [4, 0], np.full((4, 2), 7.0)), rtol=1e-12)
    np.testing.assert_allclose(got[3], _add(X, 1, [4, 0], np.ones((4, 2))), rtol=1e-12)

    def loss(x, v, i):
        return ug.sum(x.at[i].set(v) * X)

    dx, dv = run_on(target, ug.function(ug.grad(loss, argnums=(0, 1))), X, value, rows)
    np.testing.assert_allclose(dx, X * np.array([0, 1, 0, 1])[:, None], rtol=1e-12)
    np.testing.assert_allclose(dv, np.stack([np.zeros(5), X[2], X[0]]), rtol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
def test_scatter_keeps_int_and_bool_dtypes(target):
    x = np.array([[1, 2], [3, 4]], dtype=np.int32)
    fn = ug.function(lambda x, i: (ug.scatter_add(x, i, 10), ug.scatter(x > 2, i, True)))
    added, flags = run_on(target, fn, x, np.array([1, 1]))
    np.testing.assert_array_equal(added, [[1, 2], [23, 24]])
    assert added.dtype == np.int32
    np.testing.assert_array_equal(flags, [[False, False], [True, True]])


@pytest.mark.parametrize("target", TARGETS)
def test_scatter_index_out_of_range_is_takes_error(target):
    fn = ug.function(lambda x, i: ug.scatter(x, i, 0.0))
    for bad in (4, -5):
        with pytest.raises(IndexOutOfRangeError, match=f"index {bad} is out of range for "
                                                        "size 4") as caught:
            run_on(target, fn, X32, np.array([0, bad]))
        assert "test_scatter.py" in str(caught.value)


def test_scatter_refuses_a_bad_reduction_and_float_indices():
    with pytest.raises(ValueError, match="reduction='max'.*'replace' or 'add'"):
        ug.scatter(X, [0], 1.0, reduction="max")
    with pytest.raises(IndexError, match="are float32: index with ints"):
        ug.scatter(X, ug.tensor([0.0]), 1.0)


def test_help_shows_the_scatter_add_record():
    from unigraph.ops import OPS

    assert OPS["scatter_add"].doc in ug.scatter_add.__doc__
    assert "ug.scatter(" in ug.scatter.__doc__


@pytest.mark.parametrize("opset", [13, 18])
def test_scatter_exports_to_onnx(opset):
    """ScatterND with reduction "add" from opset 16; below it, the one-hot matmul route."""
    import onnxruntime


    indices = np.array([4, 0, 4, -1])
    updates = RNG.standard_normal((4, 4))
    fn = ug.function(lambda x, i, u: (ug.scatter(x, i, u, axis=1),
                                      ug.scatter_add(x, i, u, axis=1)))
    model = ug.onnx.to_model(fn, X, indices, updates, opset=opset)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    feeds = {i.name: v for i, v in zip(session.get_inputs(), (X, indices, updates))}
    replaced, added = session.run(None, feeds)
    np.testing.assert_allclose(replaced, _replace(X, 1, [4, 0, 4, 4], updates), rtol=1e-12)
    np.testing.assert_allclose(added, _add(X, 1, [4, 0, 4, 4], updates), rtol=1e-12)


@pytest.mark.parametrize("axis", [0, 1], ids=["along the open axis", "along another"])
@pytest.mark.parametrize("opset", [13, 18])
def test_scatter_of_an_open_dim_exports_to_onnx(opset, axis):
    """With x's rows left open by input_spec: ScatterND takes the run's shapes, and below
    opset 16 the one-hot rows are a Range over the run's size (np.arange(None) before)."""
    import onnxruntime

    indices = np.array([1, 0, 1, -1])
    updates = RNG.standard_normal((4, 5) if axis == 0 else (4, 4))
    fn = ug.function(lambda x, i, u: (ug.scatter(x, i, u, axis=axis),
                                      ug.scatter_add(x, i, u, axis=axis)))
    spec = [ug.Spec((None, 5), "float64"), ug.Spec((4,), "int64"),
            ug.Spec(updates.shape, "float64")]
    model = ug.onnx.to_model(fn, X, indices, updates, opset=opset, input_spec=spec)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    positions = [1, 0, 1, 3 if axis == 0 else 4]
    feeds = {i.name: v for i, v in zip(session.get_inputs(), (X, indices, updates))}
    replaced, added = session.run(None, feeds)
    np.testing.assert_allclose(replaced, _replace(X, axis, positions, updates), rtol=1e-12)
    np.testing.assert_allclose(added, _add(X, axis, positions, updates), rtol=1e-12)
