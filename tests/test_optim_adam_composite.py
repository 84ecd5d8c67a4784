"""Adam's eager update as one backend call (`Backend.composites["adam_update"]`, torch's in
`unigraph_torch.fusions`): the lowering calls of `Adam._update_in_place` made in one
function, so the same numbers. Checked on all 9 targets: training with the composite gives
bit for bit the parameters and moments of training without it (on targets without one the
two runs are the same path); where a backend has it, it ran and wrote p, m and v in their
own tensors; and a value the user holds (a reshape of the parameter or of a moment, the
parameter's NumPy array) keeps its numbers through the next steps."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS
from optim_reference import least_squares_data

import unigraph as ug
from unigraph.config import Target

STEPS = 4
# The eager targets whose backend makes Adam's update in one call.
COMPOSITE = {"torch:eager"}


def _setup():
    x, y, w, b = least_squares_data(seed=5, rows=7)
    params = [ug.Parameter(w, name="w"), ug.Parameter(b, name="b")]
    optimizer = ug.optim.Adam(params, lr=0.05)

    def loss_fn():
        r = ug.matmul(ug.tensor(x), params[0]) + params[1] - ug.tensor(y)
        return ug.sum(r * r) / float(len(x))

    @ug.function
    def step():
        loss, grads = ug.value_and_grad(loss_fn, wrt=optimizer.params)()
        optimizer.step(grads)
        return loss

    return params, optimizer, step


class CompositeCounter:
    """Wraps the current backend's "adam_update" composite (if any): counts the calls that
    wrote p, m and v into the tensors they were given, and those that declined (None).
    `remove=True` removes it instead: every update takes the lowering calls."""

    def __init__(self, monkeypatch, remove=False):
        from unigraph.dispatch import current_backend

        backend = current_backend()
        backend.load()
        self.written = self.declined = 0
        table = backend.composites
        if not table or "adam_update" not in table:
            return
        if remove:
            monkeypatch.delitem(table, "adam_update")
            return
        original = table["adam_update"]

        def counted(param, m, v, *rest):
            out = original(param, m, v, *rest)
            if out is None:
                self.declined += 1
            else:
                assert out[0] is param and out[1] is m and out[2] is v
                self.written += 1
            return out

        monkeypatch.setitem(table, "adam_update", counted)


def _train(target, monkeypatch, remove):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        params, optimizer, step = _setup()
        counter = CompositeCounter(monkeypatch, remove)
        losses = [float(np.asarray(step())) for _ in range(STEPS)]
        values = [p.numpy().copy() for p in params]
        state = optimizer.state_dict()
    monkeypatch.undo()
    return losses, values, state, (counter.written, counter.declined)


@pytest.mark.parametrize("target", TARGETS)
def test_composite_gives_the_lowering_calls_numbers(target, monkeypatch):
    losses, values, state, counts = _train(target, monkeypatch, remove=False)
    same_losses, same_values, same_state, _ = _train(target, monkeypatch, remove=True)
    assert losses == same_losses
    for got, same in zip(values, same_values):
        np.testing.assert_array_equal(got, same)
    assert state.keys() == same_state.keys()
    for key in state:
        np.testing.assert_array_equal(state[key], same_state[key], err_msg=key)
    # The first step makes the moments (the op-by-op path); every later one, per parameter,
    # is the composite's where the backend has it.
    assert counts == ((2 * (STEPS - 1), 0) if target in COMPOSITE else (0, 0))


def _held_param_reshape(params, optimizer):
    return ug.reshape(params[0], [-1])


def _held_moment_reshape(params, optimizer):
    return ug.reshape(optimizer.state(params[0], "m"), [-1])


def _held_param_numpy(params, optimizer):
    return params[0].numpy()


HOLDERS = [_held_param_reshape, _held_moment_reshape, _held_param_numpy]


@pytest.mark.parametrize("hold", HOLDERS, ids=lambda f: f.__name__[len("_held_"):])
@pytest.mark.parametrize("target", TARGETS)
def test_values_the_user_holds_keep_their_numbers(target, hold, monkeypatch):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        params, optimizer, step = _setup()
        counter = CompositeCounter(monkeypatch)
        step()
        step()
        held = hold(params, optimizer)
        before = np.array(np.asarray(held.numpy() if hasattr(held, "numpy") else held))
        step()
        step()
        after = np.asarray(held.numpy() if hasattr(held, "numpy") else held)
        np.testing.assert_array_equal(after, before)
        # The parameter moved on: the held value is not what it reads now.
        assert not np.array_equal(params[0].numpy().reshape(-1), before.reshape(-1)) or \
            hold is _held_moment_reshape
        if target in COMPOSITE:
            assert counter.written >= 2  # the second step's, before the value was taken
    monkeypatch.undo()


def test_torch_composite_declines_where_memory_is_shared():
    """Called directly: with a view of p, m or v alive, or autograd tracking the gradient,
    torch's composite writes nothing and returns None (the caller's lowerings then decide per
    call); else it writes the three tensors it was given, as the lowering calls would."""
    torch = pytest.importorskip("torch")
    from unigraph_torch.fusions import adam_update

    rng = np.random.default_rng(3)

    def operands():
        p, m, v, g = (torch.from_numpy(rng.standard_normal((3, 4)).astype(np.float32))
                      for _ in range(4))
        v = v.abs()
        scalars = [torch.tensor(x, dtype=torch.float32)
                   for x in (0.05, 0.19, 0.0199, 0.9, 0.1, 0.999, 0.001, 1e-8)]
        return [p, m, v, g, *scalars]

    for shared in range(3):
        args = operands()
        view = args[shared].view(-1)  # noqa: F841 (held: the storage has two users)
        before = [x.clone() for x in args[:3]]
        assert adam_update(*args) is None
        for x, y in zip(args[:3], before):
            assert torch.equal(x, y)
    args = operands()
    args[3].requires_grad_(True)
    assert adam_update(*args) is None
    args = operands()
    p, m, v, g, lr, c1, c2, b1, one_minus_b1, b2, one_minus_b2, eps = [x.clone() for x in args]
    want_m = m * b1 + g * one_minus_b1
    want_v = v * b2 + (g * g) * one_minus_b2
    want_p = p - ((want_m / c1) * lr) / (torch.sqrt(want_v / c2) + eps)
    written = adam_update(*args)
    assert written is not None and all(x is y for x, y in zip(written, args[:3]))
    for got, want in zip(written, (want_p, want_m, want_v)):
        assert torch.equal(got, want)
