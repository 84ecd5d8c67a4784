"""ug.nn.LSTM and ug.nn.GRU on every target: torch.nn.LSTM / GRU's equations and parameter
layout, so a torch state_dict loads as it is. Outputs and final states are checked against
a NumPy recurrence written here, and (the porting promise) against torch's own layers with
the same weights; gradients of the input and of every parameter against torch's autograd."""

import numpy as np
import pytest
import torch
from conftest import TARGETS, run_on

import unigraph as ug


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def numpy_lstm(x, weights, layers, hidden):
    """x [T, N, in]; weights: the state_dict; returns (output, h_n, c_n)."""
    h_n, c_n = [], []
    for k in range(layers):
        w_ih, w_hh = weights[f"weight_ih_l{k}"], weights[f"weight_hh_l{k}"]
        b = weights[f"bias_ih_l{k}"] + weights[f"bias_hh_l{k}"]
        h = np.zeros((x.shape[1], hidden))
        c = np.zeros((x.shape[1], hidden))
        outputs = []
        for step in x:
            i, f, g, o = np.split(step @ w_ih.T + h @ w_hh.T + b, 4, axis=1)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
            outputs.append(h)
        x = np.stack(outputs)
        h_n.append(h)
        c_n.append(c)
    return x, np.stack(h_n), np.stack(c_n)


def numpy_gru(x, weights, layers, hidden):
    h_n = []
    for k in range(layers):
        w_ih, w_hh = weights[f"weight_ih_l{k}"], weights[f"weight_hh_l{k}"]
        b_ih, b_hh = weights[f"bias_ih_l{k}"], weights[f"bias_hh_l{k}"]
        h = np.zeros((x.shape[1], hidden))
        outputs = []
        for step in x:
            x_r, x_z, x_n = np.split(step @ w_ih.T + b_ih, 3, axis=1)
            h_r, h_z, h_hn = np.split(h @ w_hh.T + b_hh, 3, axis=1)
            r, z = _sigmoid(x_r + h_r), _sigmoid(x_z + h_z)
            h = (1 - z) * np.tanh(x_n + r * h_hn) + z * h
            outputs.append(h)
        x = np.stack(outputs)
        h_n.append(h)
    return x, np.stack(h_n)


X = np.random.default_rng(3).normal(size=(5, 2, 3))  # [T, N, in]


def _layers(kind, batch_first=False, layers=2):
    ug.manual_seed(11)
    ours = getattr(ug.nn, kind)(3, 4, num_layers=layers, batch_first=batch_first,
                                dtype="float64")
    return ours, {name: p.numpy() for name, p in ours.named_parameters()}


@pytest.mark.parametrize("batch_first", [False, True], ids=["time_first", "batch_first"])
@pytest.mark.parametrize("target", TARGETS)
def test_lstm_against_a_numpy_recurrence(target, batch_first):
    lstm, weights = _layers("LSTM", batch_first)
    x = X.transpose(1, 0, 2) if batch_first else X
    got, h, c = run_on(target, ug.function(lambda v: (lambda o, s: (o, *s))(*lstm(v))), x)
    want, want_h, want_c = numpy_lstm(X, weights, 2, 4)
    np.testing.assert_allclose(got, want.transpose(1, 0, 2) if batch_first else want,
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(h, want_h, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(c, want_c, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("target", TARGETS)
def test_gru_against_a_numpy_recurrence(target):
    gru, weights = _layers("GRU")
    got, h = run_on(target, ug.function(lambda v: gru(v)), X)
    want, want_h = numpy_gru(X, weights, 2, 4)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(h, want_h, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("target", TARGETS)
def test_a_torch_state_dict_loads_and_gives_torchs_results_and_gradients(target, kind):
    torch.manual_seed(0)
    native = getattr(torch.nn, kind)(3, 4, num_layers=2).double()
    ours = getattr(ug.nn, kind)(3, 4, num_layers=2, dtype="float64")
    ours.load_state_dict({k: v.detach().numpy() for k, v in native.state_dict().items()})
    r = np.random.default_rng(5).normal(size=(5, 2, 4))

    x = torch.tensor(X, requires_grad=True)
    loss = (native(x)[0] * torch.tensor(r)).sum()
    loss.backward()
    names = [name for name, _ in native.named_parameters()]
    want = [x.grad.numpy()] + [p.grad.numpy() for _, p in native.named_parameters()]

    params = [dict(ours.named_parameters())[name] for name in names]

    def both(v):
        def loss_of():
            return ug.sum(ours(v)[0] * r)
        value, grads = ug.value_and_grad(loss_of, wrt=params)()
        return [value, ug.grad(lambda u: ug.sum(ours(u)[0] * r))(v), *grads]

    got = run_on(target, ug.function(both), X)
    np.testing.assert_allclose(got[0], loss.item(), rtol=1e-12)
    for name, g, w in zip(["x", *names], got[1:], want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("target", TARGETS)
def test_an_open_batch_and_given_initial_states(target):
    lstm, weights = _layers("LSTM", layers=1)
    h0 = np.full((1, 2, 4), 0.5)
    c0 = np.full((1, 2, 4), -0.25)
    f = ug.function(lambda v, a, b: lstm(v, (a, b))[0],
                    input_spec=[ug.Spec((5, None, 3), "float64"),
                                ug.Spec((1, None, 4), "float64"),
                                ug.Spec((1, None, 4), "float64")])
    got = run_on(target, f, X, h0, c0)
    # one step of the recurrence from (h0, c0), the rest as numpy_lstm
    w_ih, w_hh = weights["weight_ih_l0"], weights["weight_hh_l0"]
    b = weights["bias_ih_l0"] + weights["bias_hh_l0"]
    h, c, want = h0[0], c0[0], []
    for step in X:
        i, f_, g, o = np.split(step @ w_ih.T + h @ w_hh.T + b, 4, axis=1)
        c = _sigmoid(f_) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        want.append(h)
    np.testing.assert_allclose(got, np.stack(want), rtol=1e-12, atol=1e-14)


def test_bad_inputs_name_the_shape_and_the_fix():
    lstm = ug.nn.LSTM(3, 4)
    with pytest.raises(ug.ShapeError, match=r"expects an input \[T, N, input_size\] with "
                                            r"input_size 3, got shape \[5, 2, 7\]"):
        lstm(np.zeros((5, 2, 7), np.float32))
    with pytest.raises(ug.ShapeError, match=r"initial h0 must be \[num_layers, N, "
                                            r"hidden_size\] = \[1, 2, 4\], got \[2, 2, 4\]"):
        lstm(np.zeros((5, 2, 3), np.float32), (np.zeros((2, 2, 4), np.float32),
                                               np.zeros((1, 2, 4), np.float32)))
    with pytest.raises(ug.ShapeError, match="sequence length .* must be known while tracing"):
        with ug.use_backend("numpy", "static"):
            ug.function(lambda v: lstm(v)[0],
                        input_spec=[ug.Spec((None, 2, 3), "float32")])(
                np.zeros((5, 2, 3), np.float32))
    with pytest.raises(ValueError, match="must be >= 1"):
        ug.nn.GRU(3, 0)
