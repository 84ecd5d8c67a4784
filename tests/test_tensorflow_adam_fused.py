"""Adam with TensorFlow's own kernel in the graph modes (`unigraph_tensorflow.adam`,
`ug.optim.Adam(fused=True)` on tensorflow:static and tensorflow:function).

Where nothing but a compiled step's updates reads what its `adam_update` writes, the step runs
`ResourceApplyAdam` on the variables (one op, no assigns); where something else reads a new
value (the new parameter), the node is the formula in TF ops. Either way
the values are the documented formula's, within float32 rounding; and on every target a step
that also returns a moment agrees with the float64 formula."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.in_place import lowers
from unigraph.ops.updates import ADAM_UPDATE
from unigraph.plugins import get_backend

SHAPE = (37, 29)
ATTRS = {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8}


def _update_graph(t_value: float, read_after: str | None):
    """An `adam_update` node of params (p, m, v) whose outputs are their updates, at step
    t_value; read_after "old" / "new": the graph also returns 2 * p's old / new value."""
    from unigraph.ir import Graph, Node, Value

    p, g, m, v = (Value(SHAPE, "float32") for _ in range(4))
    lr, t, p_new, m_new, v_new = (Value((), "float64"), Value((), "float64"),
                                  *(Value(SHAPE, "float32") for _ in range(3)))
    two, doubled = Value((), "float32"), Value(SHAPE, "float32")
    nodes = [Node("constant", [], [lr], {"value": np.float64(1e-3)}),
             Node("constant", [], [t], {"value": np.float64(t_value)}),
             Node("adam_update", [p, g, m, v, lr, t], [p_new, m_new, v_new], dict(ATTRS))]
    outputs = []
    if read_after:
        nodes += [Node("constant", [], [two], {"value": np.float32(2.0)}),
                  Node("mul", [p_new if read_after == "new" else p, two], [doubled])]
        outputs = [doubled]
    return Graph("step", [g], [p, m, v], nodes, outputs,
                 [(p, p_new), (m, m_new), (v, v_new)]).verify()


def _native_op_types(executable, mode):
    graph = executable.native_graph if mode == "static" else executable.concrete.graph
    return [op.type for op in graph.get_operations()]


@pytest.mark.parametrize("read_after", [None, "old", "new"])
@pytest.mark.parametrize("mode", ["static", "function"])
def test_graph_modes_apply_tf_adam_kernel_where_nothing_else_reads(mode, read_after):
    """3 steps: ResourceApplyAdam writes the variables (no assigns) where only the updates
    read the node's values (a read of the old parameter keeps its value: TF's kernel copies
    a buffer a read still holds); where the new parameter is read too, the formula's ops
    and assigns. The parameter and moments are the formula's (float32, op by op) after each
    step, and the value read is the old or the new one, as the graph says."""
    rng = np.random.default_rng(5)
    p, m, v = rng.standard_normal(SHAPE).astype(np.float32), *(np.zeros(SHAPE, np.float32),) * 2
    backend = get_backend("tensorflow", mode)
    executables = [backend.compile(_update_graph(t, read_after), mode) for t in (1.0, 2.0, 3.0)]
    types = _native_op_types(executables[0], mode)
    fused = read_after != "new"
    assert types.count("ResourceApplyAdam") == (1 if fused else 0)
    # (static: and each variable's initializer, an assign from its value's placeholder)
    assert types.count("AssignVariableOp") == (3 if mode == "static" else 0) + (0 if fused else 3)
    for step, executable in enumerate(executables):
        for index, value in enumerate((p, m, v)):
            executable.set_param(index, value)
        g = (rng.standard_normal(SHAPE) * 10.0 ** rng.integers(-4, 2, SHAPE)).astype(np.float32)
        outputs = executable.run([g])
        want = ADAM_UPDATE.reference(p, g, m, v, np.float64(1e-3), np.float64(step + 1),
                                     **ATTRS)
        if read_after:
            read = want[0] if read_after == "new" else p
            np.testing.assert_allclose(outputs[0], read * np.float32(2.0), rtol=1e-5)
        p, m, v = (executable.get_param(index) for index in range(3))
        # TF's kernel weighs g * g by 1 - float32(beta2), the formula by float32(1 - beta2):
        # v is 1.3e-5 smaller, relatively; m + (g - m) * (1 - beta1) is off by an ulp of m
        # and g where they nearly cancel.
        for name, got, expected, rtol in zip("pmv", (p, m, v), want, (1e-5, 1e-5, 3e-5)):
            np.testing.assert_allclose(got, expected, rtol=rtol, atol=1e-6 * np.abs(g).max(),
                                       err_msg=f"{name} after step {step + 1}")


@pytest.mark.parametrize("target", TARGETS)
def test_a_fused_step_that_returns_a_moment_agrees_with_the_formula(target):
    """A compiled (or eager) fused step that also returns the first moment it wrote: on TF's
    graph modes the update stays the formula in TF ops (the moment is read); everywhere
    the parameter and the returned moment agree with the float64 formula."""
    t = Target.parse(target)
    rng = np.random.default_rng(7)
    initial = rng.standard_normal((6, 5)).astype(np.float32)
    grads = [rng.standard_normal((6, 5)).astype(np.float32) for _ in range(3)]
    with ug.use_backend(t.backend, t.mode):
        param = ug.Parameter(initial, name="w")
        optimizer = ug.optim.Adam([param], lr=1e-2, fused=True)

        @ug.function
        def apply(g):
            optimizer.apply([g])
            return optimizer.state(param, "m") * 1.0

        moments = [apply(g).numpy().astype(np.float64) for g in grads]
        got = param.numpy().astype(np.float64)
    p, m, v = initial.astype(np.float64), np.zeros((6, 5)), np.zeros((6, 5))
    for step, g in enumerate(grads):
        p, m, v = ADAM_UPDATE.reference(p, g.astype(np.float64), m, v, np.float64(1e-2),
                                        np.float64(step + 1), **ATTRS)
        np.testing.assert_allclose(moments[step], m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, p, rtol=1e-5, atol=1e-6)
    if t.backend == "tensorflow":
        assert lowers(get_backend(t.backend, t.mode), "adam_update", t.mode) == \
            (t.mode != "eager")
