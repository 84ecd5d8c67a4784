"""ug.nn.LSTM / GRU with bidirectional=True (and dropout between layers) on every target,
against torch.nn.LSTM / GRU with the same weights, loaded with layout="torch": the output
(both directions concatenated), h_n / c_n [num_layers * 2, N, H], and the gradient of the
input, of the initial states and of every parameter (the `_reverse` ones included). Also
LSTM's proj_size (weight_hr, a P-wide h)."""

import numpy as np
import pytest
import torch
from conftest import TARGETS, run_on

import unigraph as ug

# (num_layers, batch_first, N, given initial states)
CASES = {
    "one_layer_time_first": (1, False, 2, False),
    "two_layers_batch_first_n1": (2, True, 1, False),
    "two_layers_initial_states": (2, False, 3, True),
}


def _pair(kind, layers, batch_first, dropout=0.0, bidirectional=True, **projection):
    torch.manual_seed(1)
    native = getattr(torch.nn, kind)(3, 4, num_layers=layers, batch_first=batch_first,
                                     bidirectional=bidirectional, dropout=dropout,
                                     **projection).double()
    ours = getattr(ug.nn, kind)(3, 4, num_layers=layers, batch_first=batch_first,
                                bidirectional=bidirectional, dropout=dropout, dtype="float64",
                                **projection)
    ours.load_state_dict(native.state_dict(), layout="torch")
    return native, ours


def _torch_results(native, kind, x, states, r):
    """(loss, output, final states..., gradients of x, of the states, of every parameter)."""
    x = torch.tensor(x, requires_grad=True)
    states = [torch.tensor(s, requires_grad=True) for s in states]
    given = None if not states else (tuple(states) if kind == "LSTM" else states[0])
    output, finals = native(x, given)
    finals = list(finals) if kind == "LSTM" else [finals]
    loss = (output * torch.tensor(r)).sum() + sum((f * (k + 2)).sum()
                                                  for k, f in enumerate(finals))
    loss.backward()
    grads = [x.grad] + [s.grad for s in states] + [p.grad for _, p in native.named_parameters()]
    return [t.detach().numpy() for t in [loss, output, *finals, *grads]]


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("target", TARGETS)
def test_bidirectional_gives_torchs_outputs_states_and_gradients(target, case, kind):
    _check_against_torch(target, kind, *CASES[case])


# (num_layers, batch_first, N, given initial states, bidirectional, proj_size)
PROJECTED = {
    "bidirectional_two_layers_initial_states": (2, False, 2, True, True, 2),
    "one_layer_batch_first_n1": (1, True, 1, False, False, 3),
}


@pytest.mark.parametrize("case", list(PROJECTED))
@pytest.mark.parametrize("target", TARGETS)
def test_lstm_proj_size_gives_torchs_outputs_states_and_gradients(target, case):
    _check_against_torch(target, "LSTM", *PROJECTED[case])


def _check_against_torch(target, kind, layers, batch_first, n, with_states,
                         bidirectional=True, proj_size=0):
    projection = {"proj_size": proj_size} if proj_size else {}
    native, ours = _pair(kind, layers, batch_first, bidirectional=bidirectional, **projection)
    directions = 2 if bidirectional else 1
    width = proj_size or 4  # of h and of each direction's output
    rng = np.random.default_rng(7)
    x = rng.normal(size=(n, 5, 3) if batch_first else (5, n, 3))
    r = rng.normal(size=(n, 5, directions * width) if batch_first
                   else (5, n, directions * width))
    count = 2 if kind == "LSTM" else 1
    sizes = [width, 4][:count]
    states = ([rng.normal(size=(layers * directions, n, size)) for size in sizes]
              if with_states else [])
    want = _torch_results(native, kind, x, states, r)
    names = [name for name, _ in native.named_parameters()]
    params = [dict(ours.named_parameters())[name] for name in names]

    def forward(v, *given):
        given = None if not given else (tuple(given) if kind == "LSTM" else given[0])
        output, finals = ours(v, given)
        finals = list(finals) if kind == "LSTM" else [finals]
        loss = ug.sum(output * r)
        for k, f in enumerate(finals):
            loss = loss + ug.sum(f * (k + 2))
        return loss, output, finals

    def everything(v, *given):
        loss, output, finals = forward(v, *given)
        inputs = ug.grad(lambda u, *g: forward(u, *g)[0], argnums=tuple(range(1 + len(given))))(
            v, *given)
        inputs = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
        weights = ug.grad(lambda: forward(v, *given)[0], wrt=params)()
        return [loss, output, *finals, *inputs, *weights]

    got = run_on(target, ug.function(everything), x, *states)
    labels = (["loss", "output"] + [f"final{k}" for k in range(count)] + ["x"]
              + [f"state{k}" for k in range(len(states))] + names)
    assert len(got) == len(want) == len(labels)
    assert any(name.endswith("_reverse") for name in names) == bidirectional
    assert any(name.startswith("weight_hr") for name in names) == bool(proj_size)
    for label, g, w in zip(labels, got, want):
        assert np.shape(g) == np.shape(w), label
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=label)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("target", TARGETS)
def test_dropout_between_layers_as_torch(target, kind):
    """dropout=1.0 in training mode zeroes the second layer's input on both sides (torch
    too, with no randomness left); eval mode ignores dropout=0.5, as torch's eval does."""
    rng = np.random.default_rng(9)
    x = rng.normal(size=(4, 2, 3))
    for p, training in ((1.0, True), (0.5, False)):
        native, ours = _pair(kind, 2, False, dropout=p)
        native.train(training)
        ours.train(training)
        output, finals = native(torch.tensor(x))
        finals = list(finals) if kind == "LSTM" else [finals]
        want = [t.detach().numpy() for t in [output, *finals]]
        got = _run_layer(target, kind, ours, x)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def _run_layer(target, kind, layer, x):
    """[output, h_n] (GRU) or [output, h_n, c_n] (LSTM) of `layer` on `target`."""
    def flat(v):
        output, finals = layer(v)
        return (output, *finals) if kind == "LSTM" else (output, finals)
    return run_on(target, ug.function(flat), x)


def test_dropout_and_proj_size_errors_name_the_fix():
    with pytest.raises(ValueError, match=r"dropout must lie in \[0, 1\], got 1.5"):
        ug.nn.GRU(3, 4, num_layers=2, dropout=1.5)
    with pytest.raises(ValueError, match=r"proj_size must be 0 \(no projection\) or lie in "
                                         r"\[1, hidden_size\) = \[1, 4\), got 4"):
        ug.nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(TypeError, match="proj_size"):
        ug.nn.GRU(3, 4, proj_size=2)
    projected = ug.nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(ug.ShapeError, match=r"initial h0 must be \[num_layers, N, "
                                            r"proj_size\] = \[1, 2, 2\], got \[1, 2, 4\]"):
        projected(np.zeros((5, 2, 3), np.float32), (np.zeros((1, 2, 4), np.float32),
                                                    np.zeros((1, 2, 4), np.float32)))
    lstm = ug.nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    with pytest.raises(ug.ShapeError, match=r"initial h0 must be \[num_layers \* 2, N, "
                                            r"hidden_size\] = \[4, 2, 4\], got \[2, 2, 4\]"):
        lstm(np.zeros((5, 2, 3), np.float32), (np.zeros((2, 2, 4), np.float32),
                                               np.zeros((4, 2, 4), np.float32)))
