"""Elementwise unary ops (sqrt, exp, log, neg, abs) written into a dead operand's array by
numpy:static's generated plan (`codegen`: `np.sqrt(x, out=x)` where x is an intermediate
read by nothing else, as in Adam's `sqrt(v_hat) + eps`): the same numbers bit for bit as the
op records, and no array that a feed, an output or a second reader holds is written. Checked
on all 9 targets against NumPy by hand."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.ir import Graph, Node, Value
from unigraph.reference import Plan, codegen


@ug.function
def unary_chain(x, y):
    """Each unary op reads an intermediate made by an elementwise op; `kept` is read twice
    and is an output, `x` and `y` are feeds: none of those may be written."""
    kept = x * y
    a = ug.sqrt(kept + 1.0)  # kept + 1.0 dies here: written in place
    b = ug.exp(ug.neg(a))  # neg(a) into a, exp into it
    c = ug.log(ug.abs(kept - y) + 2.0)  # kept read a second time
    d = ug.sqrt(x)  # a feed: never written
    return a * 0.0 + b + c + d, kept


def _by_hand(x, y):
    kept = x * y
    a = np.sqrt(kept + np.float32(1.0))
    b = np.exp(np.negative(a))
    c = np.log(np.abs(kept - y) + np.float32(2.0))
    d = np.sqrt(x)
    return a * np.float32(0.0) + b + c + d, kept


@pytest.mark.parametrize("target", TARGETS)
def test_unary_ops_on_dead_intermediates_give_the_reference_numbers(target):
    rng = np.random.default_rng(5)
    x = rng.uniform(0.1, 1.0, (6, 5)).astype(np.float32)
    y = rng.uniform(-0.9, 2.0, (6, 5)).astype(np.float32)  # kept + 1 > 0
    x_before, y_before = x.copy(), y.copy()
    want = _by_hand(x, y)
    for _ in range(3):  # the plan's steps, then its generated code
        got = run_on(target, unary_chain, x, y)
        for one, other in zip(got, want):
            assert one.dtype == other.dtype
            if target.startswith("numpy:"):
                np.testing.assert_array_equal(one, other)
            else:
                np.testing.assert_allclose(one, other, rtol=2e-6, atol=1e-6)
    np.testing.assert_array_equal(x, x_before)
    np.testing.assert_array_equal(y, y_before)


def _adam_like() -> Graph:
    """v, sqrt(v / scale) + eps and sqrt(v): the quotient dies at its sqrt, v is a feed and
    an output."""
    v, scale, q, r, eps, out, root = (Value((3, 4), "float32") for _ in range(7))
    scale, eps = Value((3, 4), "float32"), Value((), "float32")
    return Graph("adam_like", inputs=[v, scale], outputs=[v, out, root], nodes=[
        Node("div", [v, scale], [q]),
        Node("sqrt", [q], [r]),
        Node("constant", [], [eps], {"value": np.asarray(1e-8, np.float32)}),
        Node("add", [r, eps], [out]),
        Node("sqrt", [v], [root])])


def test_the_generated_code_writes_sqrt_into_its_dead_operand_only():
    """The plan's code writes `sqrt` into the quotient it reads and `+ eps` into sqrt's
    result, and neither into the feed that is also an output."""
    graph = _adam_like()
    graph.verify()
    plan = Plan(graph)
    seen: list = []

    def keep_source(source, *args):
        seen.append(source)
        return compile(source, *args)

    codegen.compile = keep_source
    try:
        run = codegen.generate(plan, frozenset())
    finally:
        del codegen.compile
    assert run is not None
    q, r = (plan.slots[node.outputs[0].id] for node in graph.nodes[:2])
    assert f"(p1_v{q}, out=p1_v{q})" in seen[-1]
    assert f"(p1_v{r}, " in seen[-1] and f"out=p1_v{r})" in seen[-1]
    rng = np.random.default_rng(2)
    v = np.abs(rng.standard_normal((3, 4))).astype(np.float32)
    scale = (rng.random((3, 4)) + 0.5).astype(np.float32)
    v_before = v.copy()
    env = plan.template.copy()
    env[plan.input_slots[0]], env[plan.input_slots[1]] = v, scale
    values = run(env)
    got = [values[slot] for slot in plan.output_slots]
    np.testing.assert_array_equal(v, v_before)
    np.testing.assert_array_equal(got[0], v_before)
    np.testing.assert_array_equal(got[1], np.sqrt(v / scale) + np.float32(1e-8))
    np.testing.assert_array_equal(got[2], np.sqrt(v))
    # the steps (the ops' records, no code) give the same bits
    env, _ = plan.forward([v, scale], False)
    for mine, theirs in zip(got, plan.outputs_of(env)):
        assert mine.tobytes() == theirs.tobytes()


@ug.function
def bias_correction(t, x):
    """Adam's pattern: a float64 scalar made by operators, cast to x's float32."""
    correction = ug.cast(1.0 - (t + 1.0) * 0.1, "float32")
    return x / correction, correction


@pytest.mark.parametrize("target", TARGETS)
def test_a_float_scalar_cast_gives_the_arrays_cast(target):
    """numpy:static casts an operator's float64 scalar with the scalar's own `astype`
    (`codegen._scalar_cast`): the same float32 as the record's array cast, on every target."""
    x = np.linspace(-2.0, 2.0, 6, dtype=np.float32)
    for t in (np.float64(0.3), np.float64(1.0 / 3.0)):
        want_correction = np.asarray(1.0 - (t + 1.0) * 0.1).astype(np.float32)
        for _ in range(3):  # the plan's steps, then its generated code
            got, correction = run_on(target, bias_correction, np.asarray(t), x)
            assert correction.dtype == np.float32 and correction.shape == ()
            assert correction.tobytes() == want_correction.tobytes()
            np.testing.assert_array_equal(got, x / want_correction)
