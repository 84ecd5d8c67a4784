"""torch:static's fused calls (`unigraph_torch.fusions`): Linear as `torch.addmm`, a mean
cross-entropy as one `F.cross_entropy`, an SGD update as one call writing the parameter in
place (`sgd_update`: the product, then `sub_`), and relu's NaN mask only with a NaN present.

On all 9 targets: an MLP trained by SGD gives a float64 NumPy reference's losses and weights
(gradients derived by hand); a value the user still holds (a parameter returned through a
cond, a transpose of it) keeps its numbers over later steps; a step that fails (a label out
of range) leaves the parameters as they were; relu'(NaN) is 0 in a trained layer. On
torch:static: which calls the generated code makes, that the update writes the parameter's
own tensor only while nothing else holds it, and that the checker's per-node values are
still the unfused ones."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on
from train_steps import cross_entropy_float64, sgd_cross_entropy_step

import unigraph as ug
from unigraph.config import Target

LR = 0.5
# float32 against float64 over three steps of a small net: a few ulps per op.
RTOL, ATOL = 1e-4, 1e-6


def _data():
    rng = np.random.default_rng(19)
    x = rng.standard_normal((8, 5)).astype(np.float32)
    y = rng.integers(0, 3, 8).astype(np.int64)
    return x, y


def _mlp():
    ug.manual_seed(0)
    return ug.nn.Sequential(ug.nn.Linear(5, 4, act="relu"), ug.nn.Linear(4, 3))


def _step(model, output=None):
    """An SGD step returning the loss (and `output(model, x)`, read before the update)."""
    also = None if output is None else lambda model, x, grads: (output(model, x),)
    return sgd_cross_entropy_step(model, LR, also)


def _reference_step(w: dict, x, y) -> float:
    """One float64 SGD step of the MLP on `w` (updated in place); returns the loss."""
    x = x.astype(np.float64)
    h = x @ w["0.weight"] + w["0.bias"]
    r = np.maximum(h, 0)
    loss, dz = cross_entropy_float64(r @ w["1.weight"] + w["1.bias"], y)
    dh = (dz @ w["1.weight"].T) * (h > 0)
    grads = {"1.weight": r.T @ dz, "1.bias": dz.sum(0), "0.weight": x.T @ dh,
             "0.bias": dh.sum(0)}
    for name, grad in grads.items():
        w[name] -= LR * grad
    return loss


def _weights(model) -> dict:
    return {name: np.array(value, np.float64) for name, value in model.state_dict().items()}


def _train(target, output=None, steps=3):
    """A fresh MLP trained `steps` SGD steps on `target` (see _step): its float64 weights
    before, each step's results as float64 arrays (read after the last step, so a value a
    step returned must have kept its numbers), its weights after."""
    x, y = _data()
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        model = _mlp()
        initial = _weights(model)
        step = _step(model, output)
        results = [step(x, y) for _ in range(steps)]
        results = [[np.array(value.numpy(), np.float64) for value in
                    (result if isinstance(result, tuple | list) else (result,))]
                   for result in results]
        return initial, results, _weights(model)


def _assert_each_step_returned_the_weight_it_read(initial, results, transform):
    """results[i][1] is transform(first layer's weight) as step i read it (float64 reference)."""
    x, y = _data()
    expected = {name: value.copy() for name, value in initial.items()}
    for index, (_, held) in enumerate(results):
        np.testing.assert_allclose(held, transform(expected["0.weight"]), rtol=RTOL, atol=ATOL,
                                   err_msg=f"step {index}")
        _reference_step(expected, x, y)


@pytest.mark.parametrize("target", TARGETS)
def test_sgd_steps_of_an_mlp_match_float64(target):
    expected, results, got = _train(target)
    x, y = _data()
    want = [_reference_step(expected, x, y) for _ in range(3)]
    np.testing.assert_allclose([losses[0] for losses in results], want, rtol=RTOL, atol=ATOL)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=RTOL, atol=ATOL,
                                   err_msg=name)


def _transposed(model, x):
    return ug.transpose(model[0].weight)


@pytest.mark.parametrize("target", TARGETS)
def test_a_held_transpose_of_a_parameter_keeps_its_numbers(target):
    initial, results, _ = _train(target, _transposed)
    _assert_each_step_returned_the_weight_it_read(initial, results, np.transpose)


@pytest.mark.parametrize("feed", ["arrays", "tensors"])
@pytest.mark.parametrize("target", TARGETS)
def test_a_failed_step_leaves_the_parameters_as_they_were(target, feed):
    # "tensors": on torch:static, torch tensors of the graph's types take
    # TorchExecutable.run's direct path, which translates the error the same way.
    x, y = _data()
    bad = y.copy()
    bad[3] = 7  # 3 classes
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        if feed == "tensors":
            x, y, bad = ug.tensor(x), ug.tensor(y), ug.tensor(bad)
        model = _mlp()
        step = _step(model)
        step(x, y)
        before = _weights(model)
        with pytest.raises(ug.IndexOutOfRangeError):
            step(x, bad)
        after = _weights(model)
        step(x, y)  # and training goes on from there
        final = _weights(model)
    expected = {name: value.copy() for name, value in before.items()}
    _reference_step(expected, *_data())
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
        np.testing.assert_allclose(final[name], expected[name], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("target", TARGETS)
def test_relu_gradient_at_nan_is_zero_in_a_trained_layer(target):
    # A NaN weight makes a column of h = x @ w NaN: relu'(NaN) = 0, so that column gets no
    # gradient (torch's own relu would pass it: [1.5, 1.0] there).
    x = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    w = np.array([[np.nan, -1.0], [1.0, 1.0]], np.float32)

    def grads(x, w):
        return ug.grad(lambda w: ug.sum(ug.relu(ug.matmul(x, w))))(w)

    # h = [[NaN, -3], [NaN, 2.5]]: relu' = [[0, 0], [0, 1]]; dw = x.T @ relu'.
    want = np.array([[0.0, 0.5], [0.0, 3.0]])
    np.testing.assert_array_equal(run_on(target, ug.function(grads), x, w), want)


# -- torch:static's generated code --------------------------------------------------------


def _executable(step):
    return next(iter(step._cache.values())).executable


def test_the_generated_run_makes_the_fused_calls():
    x, y = _data()
    with ug.use_backend("torch", "static"):
        step = _step(_mlp())
        step(x, y)
        executable = _executable(step)
    run_source, every_source = executable.source.split("\n\n\n")
    for call in ("op_addmm(", "op_cross_entropy_mean(", "op_sgd_update("):
        assert call in run_source and call not in every_source, call
    for call in ("op_matmul(", "op_sparse_softmax_cross_entropy(", "op_mean(", "op_sub("):
        assert call in every_source and call not in run_source, call
    # The checker's values are every node's, the fused ones' included.
    graph = executable.graph
    values = executable.run_all([x, y])
    matmuls = [n.outputs[0].id for n in _nodes(graph) if n.op == "matmul"]
    assert matmuls and all(i in values for i in matmuls if i in _top_ids(graph))


def _nodes(graph):
    for node in graph.nodes:
        yield node
        for sub in node.subgraphs.values():
            yield from _nodes(sub)


def _top_ids(graph):
    return {out.id for node in graph.nodes for out in node.outputs}


def test_the_update_writes_the_parameter_only_while_nothing_else_holds_it():
    import weakref

    import torch

    x, y = _data()
    with ug.use_backend("torch", "static"):
        model = _mlp()
        step = _step(model)
        step(x, y)
        executable = _executable(step)
        index = next(i for i, p in enumerate(executable.graph.params)
                     if tuple(p.shape) == (5, 4))
        stored = weakref.ref(executable.params[index])  # a weak reference holds nothing
        step(x, y)
        assert executable.params[index] is stored()  # written in place
        view = stored().t()  # someone else holds its memory: a new tensor, the view unchanged
        kept = view.clone()
        step(x, y)
        assert executable.params[index] is not stored()
        assert torch.equal(view, kept)
        held = executable.params[index]  # so does a second reference to the tensor
        kept = held.clone()
        step(x, y)
        assert executable.params[index] is not held and torch.equal(held, kept)
        del view, held
        stored = weakref.ref(executable.params[index])
        step(x, y)
        assert executable.params[index] is stored()
        assert executable.params[index].stride() == (1, 5)  # still column-major


def test_relu_masks_only_with_a_nan_present():
    import torch
    from unigraph_torch.lowerings import relu

    x = torch.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    assert type(relu(x).grad_fn).__name__ == "ReluBackward0"
    x = torch.tensor([-1.0, float("nan"), 2.0], requires_grad=True)
    out = relu(x)
    out.sum().backward()
    assert torch.isnan(out[1]) and x.grad.tolist() == [0.0, 0.0, 1.0]


def test_a_parameter_returned_through_a_cond_keeps_its_numbers():
    # In the generated code the cond's result is one more name for the parameter's tensor
    # (`t1, = p0,`), not a view: the update must see it and make a new tensor.
    def through_cond(model, x):
        weight = model[0].weight
        return ug.cond(ug.sum(x) > -1e30, lambda: weight, lambda: weight * 2)

    initial, results, _ = _train("torch:static", through_cond)
    _assert_each_step_returned_the_weight_it_read(initial, results, lambda weight: weight)
