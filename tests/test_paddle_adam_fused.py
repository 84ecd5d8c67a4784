"""Adam with Paddle's own kernel (`unigraph_paddle.adam`, `ug.optim.Adam(fused=True)` on
Paddle): what `paddle.optimizer.Adam` does, bit for bit.

Paddle's optimizer keeps beta ** t as accumulators, each multiplied by beta after every step
in the parameter's dtype; unigraph keeps a float64 step count, and the lowering reads the
accumulators from a table of those products (`beta_powers`). Checked here against
`paddle.optimizer.Adam` in dygraph: the table against its accumulators, and the eager
lowerings (in place, and on copies) against its parameters and moments over several steps,
in float32 and float64."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

SHAPES = [(37, 29), (600,), (3, 5)]  # 600: a 512-element chunk of the kernel, and a tail
STEPS = 12


def _paddle():
    from unigraph.plugins import backends

    backends()["paddle"].load()  # the ordered framework import
    import paddle

    return paddle


def _initial(dtype):
    rng = np.random.default_rng(3)
    return [rng.standard_normal(s).astype(dtype) for s in SHAPES]


def _gradients(step, dtype):
    rng = np.random.default_rng(200 + step)
    # Magnitudes over several decades: every rounding shows.
    return [(rng.standard_normal(s) * 10.0 ** rng.integers(-4, 2, s)).astype(dtype)
            for s in SHAPES]


def _paddle_adam(paddle, dtype, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, lr_from=None):
    """paddle.optimizer.Adam in dygraph for STEPS steps: per step (params, m, v, beta
    accumulators after it). lr_from: (step, lr) from which on the learning rate is lr."""
    params = [paddle.create_parameter(list(s), dtype) for s in SHAPES]
    for param, value in zip(params, _initial(dtype)):
        param.set_value(value)
    opt = paddle.optimizer.Adam(learning_rate=lr, beta1=betas[0], beta2=betas[1],
                                epsilon=eps, parameters=params)
    history = []
    for step in range(STEPS):
        if lr_from is not None and step == lr_from[0]:
            opt.set_lr(lr_from[1])
        for param, g in zip(params, _gradients(step, dtype)):
            param.grad = paddle.to_tensor(g)
        opt.step()
        opt.clear_grad()

        def state(name):
            return [np.array(opt._accumulators[name][p.name]) for p in params]

        history.append(([p.numpy() for p in params], state("moment1"), state("moment2"),
                        state("beta1_pow_acc")[0], state("beta2_pow_acc")[0]))
    return history


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_beta_powers_are_paddles_accumulators(dtype):
    """After step t Paddle's accumulators hold the power for step t + 1: the table's entry
    t. In float32 they differ from beta ** t rounded once from t = 2 on."""
    paddle = _paddle()
    from unigraph_paddle.adam import beta_powers

    history = _paddle_adam(paddle, dtype)
    table1, table2 = beta_powers(0.9, dtype), beta_powers(0.999, dtype)
    for t, (*_, beta1_pow, beta2_pow) in enumerate(history, start=1):
        assert beta1_pow.dtype == dtype and beta1_pow.shape == (1,)
        assert beta1_pow[0] == table1[t] and beta2_pow[0] == table2[t], t
    if dtype == "float32":
        assert table1[1] != np.float32(0.9 ** 2)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_beta_power_tables_end_where_later_powers_change_nothing(dtype):
    from unigraph_paddle.adam import LONGEST, beta_power, beta_powers, complete

    kind = np.dtype(dtype).type
    for beta in (0.9, 0.999):
        table = beta_powers(beta, dtype)
        assert complete(table) and kind(1) - table[-2] != kind(1)  # the first such power
        assert beta_power(beta, dtype, 1e9) == table[-1]
    # Closer to 1 than LONGEST steps reach: beyond the table, beta ** t rounded once.
    table = beta_powers(0.99999, dtype)
    assert table.size == LONGEST and not complete(table)
    assert beta_power(0.99999, dtype, LONGEST + 10.0) == kind(0.99999 ** (LONGEST + 10.0))
    assert beta_power(0.99999, dtype, 5.0) == table[4]


@pytest.mark.parametrize("in_place", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_eager_lowerings_are_paddle_adam(dtype, in_place):
    """The `adam_update_` / `adam_update` lowerings on paddle:eager, fed as the optimizer
    feeds them (lr and t float64 0-d), give paddle.optimizer.Adam's parameters and moments
    bit for bit at every step; the in-place one writes the tensors it is given, the other
    never writes its inputs."""
    paddle = _paddle()
    from unigraph_paddle.adam import adam_update, adam_update_

    lowering = adam_update_ if in_place else adam_update
    history = _paddle_adam(paddle, dtype)
    params = [paddle.to_tensor(a) for a in _initial(dtype)]
    ms = [paddle.zeros(list(s), dtype) for s in SHAPES]
    vs = [paddle.zeros(list(s), dtype) for s in SHAPES]
    lr = paddle.to_tensor(np.float64(1e-3))
    for step, (want_params, want_ms, want_vs, *_) in enumerate(history):
        t = paddle.to_tensor(np.float64(step + 1))
        for i, g in enumerate(_gradients(step, dtype)):
            before = params[i].numpy().copy()
            out = lowering(params[i], paddle.to_tensor(g), ms[i], vs[i], lr, t,
                           beta1=0.9, beta2=0.999, eps=1e-8)
            assert (out[0] is params[i]) == in_place
            if not in_place:
                assert np.array_equal(params[i].numpy(), before)
            params[i], ms[i], vs[i] = out
        for got, want in zip((params, ms, vs), (want_params, want_ms, want_vs)):
            for a, b in zip(got, want):
                assert a.numpy().dtype == dtype
                np.testing.assert_array_equal(a.numpy(), b, err_msg=f"step {step + 1}")


def test_eager_in_place_lowering_copies_what_else_sees_the_memory():
    """A parameter that a view shares is updated into a copy: the view keeps its values."""
    paddle = _paddle()
    from unigraph_paddle.adam import adam_update_

    param = paddle.to_tensor(np.ones((4, 3), np.float32))
    view = paddle.reshape(param, [12])
    m, v = paddle.zeros([4, 3]), paddle.zeros([4, 3])
    out, m_out, v_out = adam_update_(
        param, paddle.ones([4, 3]), m, v, paddle.to_tensor(np.float64(0.1)),
        paddle.to_tensor(np.float64(1.0)), beta1=0.9, beta2=0.999, eps=1e-8)
    assert out is not param and m_out is m and v_out is v
    np.testing.assert_array_equal(view.numpy(), np.ones(12, np.float32))
    np.testing.assert_allclose(out.numpy(), np.full((4, 3), 0.9), rtol=1e-6)


# -- ug.optim.Adam(fused=True) on the Paddle targets ------------------------------------------
PADDLE_TARGETS = ["paddle:eager", "paddle:static"]


def _fused_steps(target, dtype, probe=None):
    """ug.optim.Adam(fused=True) for STEPS steps on `target`: per step (params, m, v)."""
    import unigraph as ug
    from unigraph.config import Target

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        params = [ug.Parameter(p, name=f"p{i}") for i, p in enumerate(_initial(dtype))]
        optimizer = ug.optim.Adam(params, lr=1e-3, fused=True)

        @ug.function
        def apply(*grads):
            optimizer.apply(list(grads))
            return ug.tensor(0.0)

        history = []
        for step in range(STEPS):
            apply(*_gradients(step, dtype))
            state = optimizer.state_dict()
            history.append(([p.numpy().copy() for p in params],
                            [state[f"p{i}.m"] for i in range(len(SHAPES))],
                            [state[f"p{i}.v"] for i in range(len(SHAPES))]))
            assert all(state[f"p{i}.step"] == step + 1 for i in range(len(SHAPES)))
        if probe is not None:
            probe(apply)
    return history


# Other targets against Paddle's numbers: float32's budget (rtol, atol), except v, which
# Paddle's kernel makes 1.3e-5 smaller, relatively: it weighs g * g by 1 - float32(beta2)
# (0.00099998713), the formula by float32(1 - beta2).
_CLOSE = {"float32": {"p": (1e-5, 1e-6), "m": (1e-5, 1e-6), "v": (3e-5, 1e-6)},
          "float64": {"p": (1e-10, 1e-12), "m": (1e-10, 1e-12), "v": (1e-10, 1e-12)}}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("target", TARGETS)
def test_fused_adam_is_paddle_adam(target, dtype):
    """Parameters and moments after every step: on paddle:eager and paddle:static
    paddle.optimizer.Adam's, bit for bit; on the other targets (their own kernels, or the
    formula) within the budget of those."""
    paddle = _paddle()
    want = _paddle_adam(paddle, dtype)
    got = _fused_steps(target, dtype)
    for step, (got_step, want_step) in enumerate(zip(got, want), start=1):
        for name, got_values, want_values in zip(("p", "m", "v"), got_step, want_step):
            for i, (a, b) in enumerate(zip(got_values, want_values)):
                assert a.dtype == dtype
                where = f"step {step}, {name}{i}"
                if target in PADDLE_TARGETS:
                    np.testing.assert_array_equal(a, b, err_msg=where)
                else:
                    rtol, atol = _CLOSE[dtype][name]
                    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=where)


def _program_ops(graph) -> list:
    from unigraph.plugins import backends

    program = backends()["paddle"].compile(graph, "static").program
    return [op.name() for op in program.global_block().ops]


def test_static_update_writes_the_variables_themselves():
    """In a training step the kernel writes each parameter's and moment's own variable: one
    `adam_` a parameter and no copy; the scalars and the tables are made once."""
    import unigraph as ug

    _paddle()
    with ug.use_backend("paddle", "static"):
        params = [ug.Parameter(p, name=f"p{i}") for i, p in enumerate(_initial("float32"))]
        optimizer = ug.optim.Adam(params, lr=1e-3, fused=True)

        def apply(*grads):
            optimizer.apply(list(grads))
            return ug.tensor(0.0)

        graph = ug.function(apply).trace(*_gradients(0, "float32"))
    assert [node.op for node in graph.nodes].count("adam_update") == len(SHAPES)
    ops = _program_ops(graph)
    assert ops.count("pd_op.adam_") == len(SHAPES) and "pd_op.assign" not in ops
    # no copy of the kernel's variables onto themselves: only the step counts' (made in
    # their own buffers by `add_`, read again by the index)
    assert ops.count("pd_op.assign_out_") == len(SHAPES)
    # per parameter: the index (searchsorted) and the two powers (gather)
    assert ops.count("pd_op.searchsorted") == len(SHAPES)
    assert ops.count("pd_op.gather") == 2 * len(SHAPES)
    assert ops.count("pd_op.cast") == 1  # the learning rate's, once
    assert ops.count("pd_op.full") <= 8


def _update_graph(old_read_after: bool, t_value: float = 1.0, new_read_after: bool = False):
    """An `adam_update` node of params (p, m, v) whose outputs are their updates, at step
    t_value; with old_read_after, a later node reads p's old value (the output); with
    new_read_after, p's new value (the output)."""
    from unigraph.ir import Graph, Node, Value

    shape = SHAPES[0]
    p, g, m, v = (Value(shape, "float32") for _ in range(4))
    lr, t, p_new, m_new, v_new = (Value((), "float64"), Value((), "float64"),
                                  *(Value(shape, "float32") for _ in range(3)))
    two, doubled = Value((), "float32"), Value(shape, "float32")
    attrs = {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8}
    nodes = [Node("constant", [], [lr], {"value": np.float64(1e-3)}),
             Node("constant", [], [t], {"value": np.float64(t_value)}),
             Node("adam_update", [p, g, m, v, lr, t], [p_new, m_new, v_new], attrs)]
    outputs = []
    if old_read_after or new_read_after:
        nodes += [Node("constant", [], [two], {"value": np.float32(2.0)}),
                  Node("mul", [p_new if new_read_after else p, two], [doubled])]
        outputs = [doubled]
    return Graph("step", [g], [p, m, v], nodes, outputs,
                 [(p, p_new), (m, m_new), (v, v_new)]).verify()


@pytest.mark.parametrize("read_after", [None, "old", "new"])
def test_static_update_copies_where_the_old_values_are_read_later(read_after):
    """Where a later node reads the parameter's old value, the kernel writes copies (and
    the variables are assigned at the end): the later node sees the old value. Otherwise
    it writes the variables, and only a new value read later (p's) is copied onto itself
    at the end (keeping Paddle's inplace pass off its buffer). The update is the same
    every way (paddle.optimizer.Adam's first step)."""
    from unigraph.plugins import backends

    paddle = _paddle()
    graph = _update_graph(read_after == "old", new_read_after=read_after == "new")
    executable = backends()["paddle"].compile(graph, "static")
    ops = [op.name() for op in executable.program.global_block().ops]
    assert ops.count("pd_op.assign") == (3 if read_after == "old" else 0)
    assert ops.count("pd_op.assign_out_") == {None: 0, "old": 3, "new": 1}[read_after]
    initial = _initial("float32")[0]
    for index, value in enumerate([initial, np.zeros_like(initial), np.zeros_like(initial)]):
        executable.set_param(index, value)
    gradient = _gradients(0, "float32")[0]
    outputs = executable.run([gradient])
    want_p, want_m, want_v = (state[0] for state in _paddle_adam(paddle, "float32")[0][:3])
    if read_after:
        np.testing.assert_array_equal(
            outputs[0], (initial if read_after == "old" else want_p) * np.float32(2.0))
    for index, want in enumerate([want_p, want_m, want_v]):
        np.testing.assert_array_equal(executable.get_param(index), want)


def test_static_update_copied_to_another_parameter():
    """q <- p's new value beside p's fused update: p is written in place, q gets a copy."""
    from unigraph.ir import Graph, Value
    from unigraph.plugins import backends

    paddle = _paddle()
    base = _update_graph(False)
    p_new = base.updates[0][1]
    q = Value(p_new.shape, "float32")
    graph = Graph("step", base.inputs, [*base.params, q], base.nodes, base.outputs,
                  [*base.updates, (q, p_new)]).verify()
    executable = backends()["paddle"].compile(graph, "static")
    initial = _initial("float32")[0]
    for index, value in enumerate([initial, np.zeros_like(initial), np.zeros_like(initial),
                                   np.zeros_like(initial)]):
        executable.set_param(index, value)
    executable.run([_gradients(0, "float32")[0]])
    want_p = _paddle_adam(paddle, "float32")[0][0][0]
    np.testing.assert_array_equal(executable.get_param(0), want_p)
    np.testing.assert_array_equal(executable.get_param(3), want_p)


@pytest.mark.parametrize("t", [np.nan, 0.0, -3.0, np.inf, -np.inf, 1e30, -1e30, 20000.0, 0.5,
                               164.5, 165.0, 17321.0, 17322.0])
def test_step_counts_out_of_range_read_the_tables_ends(t):
    """A step count no training makes (loaded from elsewhere): finite below 1 the first
    step's powers, NaN, infinite or past the table its last ones (not an index outside the
    table), the same on paddle:eager and paddle:static; within the table its own."""
    from unigraph_paddle.adam import adam_update

    from unigraph.plugins import backends

    paddle = _paddle()
    initial, gradient = _initial("float32")[0], _gradients(0, "float32")[0]
    state = [initial, np.full_like(initial, 0.5), np.full_like(initial, 0.25)]
    executable = backends()["paddle"].compile(_update_graph(False, t), "static")
    for index, value in enumerate(state):
        executable.set_param(index, value)
    executable.run([gradient])
    eager = adam_update(*(paddle.to_tensor(x) for x in (state[0], gradient, *state[1:])),
                              paddle.to_tensor(np.float64(1e-3)), paddle.to_tensor(np.float64(t)),
                              beta1=0.9, beta2=0.999, eps=1e-8)
    for index, got in enumerate(eager):
        assert np.isfinite(got.numpy()).all()
        np.testing.assert_array_equal(executable.get_param(index), got.numpy())


@pytest.mark.parametrize("first, second", [PADDLE_TARGETS, PADDLE_TARGETS[::-1]])
def test_fused_adam_resumes_on_the_other_target_as_paddle_adam(first, second):
    """Half the steps on one Paddle target, the state saved (the step counts, not Paddle's
    accumulators) and loaded on the other, which changes the learning rate after one step:
    the parameters of paddle.optimizer.Adam run throughout, with `set_lr` at that step."""
    import unigraph as ug
    from unigraph.config import Target

    paddle = _paddle()
    half = STEPS // 2
    want = _paddle_adam(paddle, "float32", lr_from=(half + 1, 5e-4))[-1][0]
    weights, state = [p.copy() for p in _initial("float32")], None
    for target, steps in ((first, range(half)), (second, range(half, STEPS))):
        t = Target.parse(target)
        with ug.use_backend(t.backend, t.mode):
            params = [ug.Parameter(w, name=f"p{i}") for i, w in enumerate(weights)]
            optimizer = ug.optim.Adam(params, lr=1e-3, fused=True)
            if state is not None:
                optimizer.load_state_dict(state)

            @ug.function
            def apply(*grads, optimizer=optimizer):
                optimizer.apply(list(grads))
                return ug.tensor(0.0)

            for step in steps:
                if step == half + 1:
                    optimizer.lr = 5e-4
                apply(*_gradients(step, "float32"))
            weights, state = [p.numpy().copy() for p in params], optimizer.state_dict()
    assert state["p0.step"] == STEPS
    for got, expected in zip(weights, want):
        np.testing.assert_array_equal(got, expected)


def test_the_lowering_in_a_program_not_built_by_unigraph():
    """The table's entry called in a plain Program (no `ProgramBuilder`: its constants and
    tables made where asked): the numbers of the eager call; the inputs unchanged."""
    from unigraph_paddle.adam import adam_update
    from unigraph_paddle.static import StaticMode

    paddle = _paddle()
    initial, gradient = _initial("float32")[0], _gradients(0, "float32")[0]
    arrays = [initial, gradient, np.full_like(initial, 0.5), np.full_like(initial, 0.25)]
    scalars = {"lr": np.float64(1e-3), "t": np.float64(3.0)}
    attrs = {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8}
    main, startup = paddle.static.Program(), paddle.static.Program()
    with StaticMode(paddle), paddle.static.program_guard(main, startup):
        feeds = [paddle.static.data(f"x{i}", list(a.shape), "float32")
                 for i, a in enumerate(arrays)]
        feeds += [paddle.static.data(name, [], "float64") for name in scalars]
        outs = adam_update(*feeds, **attrs)
        got = paddle.static.Executor(paddle.CPUPlace()).run(
            main, feed={**{f"x{i}": a for i, a in enumerate(arrays)}, **scalars},
            fetch_list=[*outs, feeds[0]])
    eager = adam_update(*(paddle.to_tensor(a) for a in [*arrays, *scalars.values()]), **attrs)
    for a, b in zip(got, eager):
        np.testing.assert_array_equal(a, b.numpy())
    np.testing.assert_array_equal(got[3], initial)
