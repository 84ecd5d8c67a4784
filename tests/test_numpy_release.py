"""numpy:static's generated code frees a dead intermediate array where the step walk drops
it (`del` after its last reader: `codegen._Writer.release`, `grad_codegen._release`), not
when the function returns: a chain of large values holds two of them at a time, and the
allocator can hand a freed buffer to the next array of its size. The numbers stay the
steps' bit for bit; a training step gives the same numbers on all 9 targets."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.ir import Graph, Node, Value
from unigraph.reference import Plan, codegen

SIZE = 250_000  # float64: 2 MB a value


def _squares() -> Graph:
    """x * 2, then three squares: each value read twice (by its square), so none is written
    in place; each is dead once the next is made."""
    x, a, b, c, d = (Value((SIZE,), "float64") for _ in range(5))
    return Graph("squares", inputs=[x], outputs=[d], nodes=[
        Node("add", [x, x], [a]), Node("mul", [a, a], [b]), Node("mul", [b, b], [c]),
        Node("mul", [c, c], [d])])


def test_a_dead_intermediate_is_freed_after_its_last_reader():
    graph = _squares()
    graph.verify()
    plan = Plan(graph)
    x = np.linspace(0.0, 1.0, SIZE)
    run = codegen.generate(plan, frozenset())
    assert run is not None
    env = plan.template.copy()
    env[plan.input_slots[0]] = x
    run(list(env))  # (any first-call allocations out of the measurement)
    tracemalloc.start()
    try:
        values = run(env)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    got = values[plan.output_slots[0]]
    # a, b, c and d all alive at the return: 4 arrays; freed as they die: at most 2 + slack
    assert peak < 2.5 * x.nbytes, peak / x.nbytes
    env, _ = plan.forward([x], False)
    assert got.tobytes() == plan.outputs_of(env)[0].tobytes()


def _mlp_adam_step():
    model = ug.nn.Sequential(ug.nn.Linear(6, 8, act="relu"), ug.nn.Linear(8, 3))
    rng = np.random.default_rng(4)
    model.load_state_dict({
        "0.weight": rng.standard_normal((6, 8)).astype(np.float32),
        "0.bias": rng.standard_normal(8).astype(np.float32),
        "1.weight": rng.standard_normal((8, 3)).astype(np.float32),
        "1.bias": rng.standard_normal(3).astype(np.float32)})
    optimizer = ug.optim.Adam(model.parameters(), lr=1e-2)

    @ug.function
    def train_step(x, y):
        loss, grads = ug.value_and_grad(
            lambda: ug.nn.functional.cross_entropy(model(x), y), wrt=optimizer.params)()
        optimizer.apply(grads)
        return loss

    return model, train_step


def _losses_and_weights(target):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    y = rng.integers(0, 3, 5)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        model, step = _mlp_adam_step()
        losses = [float(np.asarray(step(x, y).numpy())) for _ in range(4)]
        weights = [np.asarray(p.numpy()) for p in model.parameters()]
    return losses, weights


@pytest.mark.parametrize("target", TARGETS)
def test_a_training_step_gives_the_same_numbers_on_every_target(target):
    """Four Adam steps of a small MLP (the plan's steps on the first call, its generated
    code with the releases from the second): the losses and weights numpy:eager gives."""
    want_losses, want_weights = _losses_and_weights("numpy:eager")
    losses, weights = _losses_and_weights(target)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    for got, want in zip(weights, want_weights):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@ug.function
def product_gradient(x, w):
    return ug.grad(lambda x, w: ug.sum(x * w), argnums=(0, 1))(x, w)


@pytest.mark.parametrize("results", ["short", "long", "tuple"])
def test_a_rule_giving_fewer_or_more_results_than_inputs(results):
    """The generated gradient takes a rule's results as the step walk's zip does: the first
    as many as the op has inputs, the missing ones None (no gradient for that input)."""
    from unigraph.reference.grad_codegen import generate
    from unigraph.reference.plan import GradStep

    x = np.array([[0.5, -1.5], [2.0, 0.25]], np.float32)
    w = np.array([[1.5, -0.5], [-2.0, 0.75]], np.float32)
    plan = Plan(product_gradient.trace(x, w))
    (step,) = [s for s in plan.steps if type(s) is GradStep]
    (mul,) = [s for s in step.fn.steps if s.op.name == "mul"]
    rule = mul.vjp

    def changed(g, inputs, out, **attrs):
        dx, dw = rule(g, inputs, out, **attrs)
        return {"short": [dx], "long": [dx, dw, dx], "tuple": (dx, dw)}[results]

    mul.vjp = changed
    walked = step.run([x, w])
    generated = generate(step)
    assert generated is not None
    got = generated([x, w])
    np.testing.assert_array_equal(got[-2], w)  # d/dx sum(x * w) (after the outputs)
    for one, other in zip(walked, got):
        assert one.dtype == other.dtype
        np.testing.assert_array_equal(one, other)
    np.testing.assert_array_equal(got[-1], x if results != "short" else np.zeros_like(w))
