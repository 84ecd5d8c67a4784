"""Recurrent layers: LSTM and GRU, with torch.nn.LSTM / torch.nn.GRU's equations, parameter
names, shapes and initialisation, so a torch model's `state_dict()` (as NumPy arrays) loads
into them as it is.

    >>> lstm = ug.nn.LSTM(8, 16, num_layers=2, batch_first=True)
    >>> out, (h, c) = lstm(x)                # x [N, T, 8] -> out [N, T, 16], h, c [2, N, 16]

The time loop is a Python loop over the T steps (unrolled in a static graph), so T must be
known while tracing; the batch may be left open by `input_spec`. Each layer multiplies the
whole sequence by its input weights once, then steps through time with the hidden weights.
"""

from __future__ import annotations

import math

from unigraph import api
from unigraph import init as initializers
from unigraph.errors import ShapeError
from unigraph.nn.module import Module
from unigraph.tensor import Tensor, tensor

__all__ = ["GRU", "LSTM"]


class _Recurrent(Module):
    """The parameters and the layer loop LSTM and GRU share; `gates` gates a step."""

    gates = 0  # (4 for LSTM: i, f, g, o; 3 for GRU: r, z, n)
    kind = ""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dtype="float32"):
        super().__init__()
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.num_layers, self.batch_first = int(num_layers), bool(batch_first)
        if self.input_size < 1 or self.hidden_size < 1 or self.num_layers < 1:
            raise ValueError(f"{self.kind}: input_size, hidden_size and num_layers must be "
                             f">= 1, got {input_size}, {hidden_size}, {num_layers}")
        self.has_bias = bool(bias)
        hidden, rows = self.hidden_size, self.gates * self.hidden_size
        bound = 1.0 / math.sqrt(hidden)  # torch's: every weight and bias U(-1/sqrt(H), 1/sqrt(H))
        for layer in range(self.num_layers):
            size = self.input_size if layer == 0 else hidden
            shapes = {f"weight_ih_l{layer}": (rows, size), f"weight_hh_l{layer}": (rows, hidden)}
            if self.has_bias:
                shapes.update({f"bias_ih_l{layer}": (rows,), f"bias_hh_l{layer}": (rows,)})
            for name, shape in shapes.items():
                self._register_new(name, initializers.parameter(
                    initializers.uniform(-bound, bound), shape, dtype, size, rows))

    def _weights(self, layer):
        w_ih = getattr(self, f"weight_ih_l{layer}")
        w_hh = getattr(self, f"weight_hh_l{layer}")
        if not self.has_bias:
            return w_ih, w_hh, None, None
        return w_ih, w_hh, getattr(self, f"bias_ih_l{layer}"), getattr(self, f"bias_hh_l{layer}")

    def _sequence(self, x):
        """x as [T, N, input_size], checked."""
        x = x if isinstance(x, Tensor) else tensor(x)
        if len(x.shape) != 3 or x.shape[2] != self.input_size:
            order = "[N, T, input_size]" if self.batch_first else "[T, N, input_size]"
            raise ShapeError(f"{self.kind}: expects an input {order} with input_size "
                             f"{self.input_size}, got shape {list(x.shape)}")
        sequence = api.transpose(x, (1, 0, 2)) if self.batch_first else x
        if sequence.shape[0] is None:
            raise ShapeError(f"{self.kind}: the sequence length (axis {int(self.batch_first)} "
                             "of the input) must be known while tracing (the time loop is "
                             "unrolled); give it a size in input_spec")
        return sequence

    def _initial(self, sequence, given, name):
        """[num_layers, N, H] zeros, or `given` checked against that shape."""
        if given is None:
            return None
        given = given if isinstance(given, Tensor) else tensor(given)
        want = (self.num_layers, sequence.shape[1], self.hidden_size)
        if len(given.shape) != 3 or any(g is not None and w is not None and g != w
                                        for g, w in zip(given.shape, want)):
            raise ShapeError(f"{self.kind}: the initial {name} must be [num_layers, N, "
                             f"hidden_size] = {list(want)}, got {list(given.shape)}")
        return given

    def _run(self, sequence, states):
        """Every layer over `sequence` [T, N, input_size], from `states` (each [num_layers,
        N, H], or None: zeros); returns (the output, in the input's order, and the final
        states, each [num_layers, N, H])."""
        # [N, H] zeros, N perhaps open: a [N, 1] slice's zeros broadcast with [1, H] zeros
        zeros = api.zeros_like(sequence[0, :, :1]) + api.zeros((1, self.hidden_size),
                                                               sequence.dtype)
        finals = []
        for layer in range(self.num_layers):
            w_ih, w_hh, b_ih, b_hh = self._weights(layer)
            inputs = api.matmul(sequence, api.transpose(w_ih))  # [T, N, gates * H], at once
            if b_ih is not None:
                inputs = inputs + b_ih
            state = [zeros if s is None else s[layer] for s in states]
            outputs = []
            for step in range(sequence.shape[0]):
                state = self._step(inputs[step], state, w_hh, b_hh)
                outputs.append(state[0])
            sequence = api.stack(outputs, axis=0)
            finals.append(state)
        output = api.transpose(sequence, (1, 0, 2)) if self.batch_first else sequence
        return output, [api.stack(list(kind), axis=0) for kind in zip(*finals)]

    def extra_repr(self):
        return (f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, "
                f"bias={self.has_bias}, batch_first={self.batch_first}")


class LSTM(_Recurrent):
    """torch.nn.LSTM's long short-term memory (unidirectional), gates i, f, g, o:

        i, f, o = sigmoid(x W_i* + b_i* + h W_h* + b_h*), g = tanh(...)
        c' = f * c + i * g;  h' = o * tanh(c')

    `forward(x, state=None)`: x [T, N, input_size] ([N, T, input_size] with batch_first);
    state (h0, c0), each [num_layers, N, hidden_size] (zeros when None). Returns
    (output [T, N, hidden_size] (or batch first), (h_n, c_n)). Parameters, per layer k:
    weight_ih_lk [4H, in], weight_hh_lk [4H, H], bias_ih_lk and bias_hh_lk [4H].
    """

    gates, kind = 4, "LSTM"

    def forward(self, x, state=None):
        h0, c0 = (None, None) if state is None else state
        sequence = self._sequence(x)
        output, (h, c) = self._run(sequence, (self._initial(sequence, h0, "h0"),
                                              self._initial(sequence, c0, "c0")))
        return output, (h, c)

    def _step(self, inputs, state, w_hh, b_hh):
        h, c = state
        gates = inputs + api.matmul(h, api.transpose(w_hh))
        if b_hh is not None:
            gates = gates + b_hh
        i, f, g, o = api.split(gates, 4, axis=1)
        c = api.sigmoid(f) * c + api.sigmoid(i) * api.tanh(g)
        return [api.sigmoid(o) * api.tanh(c), c]


class GRU(_Recurrent):
    """torch.nn.GRU's gated recurrent unit (unidirectional), gates r, z, n:

        r, z = sigmoid(x W_i* + b_i* + h W_h* + b_h*)
        n = tanh(x W_in + b_in + r * (h W_hn + b_hn));  h' = (1 - z) * n + z * h

    `forward(x, h0=None)`: x as LSTM's; h0 [num_layers, N, hidden_size] (zeros when None).
    Returns (output, h_n). Parameters as LSTM's with 3H rows.
    """

    gates, kind = 3, "GRU"

    def forward(self, x, h0=None):
        sequence = self._sequence(x)
        output, (h,) = self._run(sequence, (self._initial(sequence, h0, "h0"),))
        return output, h

    def _step(self, inputs, state, w_hh, b_hh):
        (h,) = state
        hidden = api.matmul(h, api.transpose(w_hh))
        if b_hh is not None:
            hidden = hidden + b_hh
        x_r, x_z, x_n = api.split(inputs, 3, axis=1)
        h_r, h_z, h_n = api.split(hidden, 3, axis=1)
        r, z = api.sigmoid(x_r + h_r), api.sigmoid(x_z + h_z)
        n = api.tanh(x_n + r * h_n)
        return [(1.0 - z) * n + z * h]
