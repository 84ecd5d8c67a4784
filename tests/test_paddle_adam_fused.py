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


def _paddle_adam(paddle, dtype, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    """paddle.optimizer.Adam in dygraph for STEPS steps: per step (params, m, v, beta
    accumulators after it)."""
    params = [paddle.create_parameter(list(s), dtype) for s in SHAPES]
    for param, value in zip(params, _initial(dtype)):
        param.set_value(value)
    opt = paddle.optimizer.Adam(learning_rate=lr, beta1=betas[0], beta2=betas[1],
                                epsilon=eps, parameters=params)
    history = []
    for step in range(STEPS):
        for param, g in zip(params, _gradients(step, dtype)):
            param.grad = paddle.to_tensor(g)  # noqa: the gradient as given
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
    from unigraph_paddle.adam import eager_adam_update, eager_adam_update_

    lowering = eager_adam_update_ if in_place else eager_adam_update
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
    from unigraph_paddle.adam import eager_adam_update_

    param = paddle.to_tensor(np.ones((4, 3), np.float32))
    view = paddle.reshape(param, [12])
    m, v = paddle.zeros([4, 3]), paddle.zeros([4, 3])
    out, m_out, v_out = eager_adam_update_(
        param, paddle.ones([4, 3]), m, v, paddle.to_tensor(np.float64(0.1)),
        paddle.to_tensor(np.float64(1.0)), beta1=0.9, beta2=0.999, eps=1e-8)
    assert out is not param and m_out is m and v_out is v
    np.testing.assert_array_equal(view.numpy(), np.ones(12, np.float32))
    np.testing.assert_allclose(out.numpy(), np.full((4, 3), 0.9), rtol=1e-6)
