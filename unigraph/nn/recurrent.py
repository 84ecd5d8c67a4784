"""Recurrent layers: LSTM and GRU, with torch.nn.LSTM / torch.nn.GRU's equations, parameter
names, shapes and initialisation, so a torch model's `state_dict()` (as NumPy arrays) loads
into them as it is.

    >>> lstm = ug.nn.LSTM(8, 16, num_layers=2, batch_first=True)
    >>> out, (h, c) = lstm(x)                # x [N, T, 8] -> out [N, T, 16], h, c [2, N, 16]
    >>> gru = ug.nn.GRU(8, 16, bidirectional=True)
    >>> out, h = gru(x)                      # x [T, N, 8] -> out [T, N, 32], h [2, N, 16]

The time loop is a Python loop over the T steps (unrolled in a static graph), so T must be
known while tracing; the batch may be left open by `input_spec`. Each layer multiplies the
whole sequence by its input weights once, then steps through time with the hidden weights;
with `bidirectional=True` a second set of weights (torch's `_reverse` names) steps from the
last time step to the first, and the layer's output is both directions' outputs concatenated.
"""

from __future__ import annotations

import math

from unigraph import api
from unigraph import init as initializers
from unigraph.errors import ShapeError
from unigraph.nn import functional as F
from unigraph.nn.module import Module
from unigraph.tensor import Tensor, tensor

__all__ = ["GRU", "LSTM"]


class _Recurrent(Module):
    """The parameters and the layer loop LSTM and GRU share; `gates` gates a step."""

    gates = 0  # (4 for LSTM: i, f, g, o; 3 for GRU: r, z, n)
    kind = ""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, dtype="float32", proj_size=0):
        super().__init__()
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.num_layers, self.batch_first = int(num_layers), bool(batch_first)
        if self.input_size < 1 or self.hidden_size < 1 or self.num_layers < 1:
            raise ValueError(f"{self.kind}: input_size, hidden_size and num_layers must be "
                             f">= 1, got {input_size}, {hidden_size}, {num_layers}")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{self.kind}: dropout must lie in [0, 1], got {dropout}")
        self.has_bias, self.dropout = bool(bias), float(dropout)
        self.bidirectional = bool(bidirectional)
        self.directions = 2 if self.bidirectional else 1
        self.proj_size = int(proj_size)
        if not 0 <= self.proj_size < self.hidden_size:
            raise ValueError(f"{self.kind}: proj_size must be 0 (no projection) or lie in "
                             f"[1, hidden_size) = [1, {self.hidden_size}), got {proj_size}")
        hidden, rows = self.hidden_size, self.gates * self.hidden_size
        out = self.proj_size or hidden  # the size of h (and of each direction's output)
        bound = 1.0 / math.sqrt(hidden)  # torch's: every weight and bias U(-1/sqrt(H), 1/sqrt(H))
        # torch's order: per layer, the forward direction's weights, then the `_reverse` ones
        for layer in range(self.num_layers):
            size = self.input_size if layer == 0 else out * self.directions
            for suffix in self._suffixes():
                shapes = {f"weight_ih_l{layer}{suffix}": (rows, size),
                          f"weight_hh_l{layer}{suffix}": (rows, out)}
                if self.has_bias:
                    shapes.update({f"bias_ih_l{layer}{suffix}": (rows,),
                                   f"bias_hh_l{layer}{suffix}": (rows,)})
                if self.proj_size:
                    shapes[f"weight_hr_l{layer}{suffix}"] = (self.proj_size, hidden)
                for name, shape in shapes.items():
                    self._register_new(name, initializers.parameter(
                        initializers.uniform(-bound, bound), shape, dtype, size, rows))

    def _suffixes(self):
        return ("", "_reverse") if self.bidirectional else ("",)

    def _weights(self, layer, suffix=""):
        """(weight_ih, weight_hh, bias_ih, bias_hh, weight_hr) of a layer's direction, None
        for those it lacks."""
        def named(name, present=True):
            return getattr(self, f"{name}_l{layer}{suffix}") if present else None
        return (named("weight_ih"), named("weight_hh"), named("bias_ih", self.has_bias),
                named("bias_hh", self.has_bias), named("weight_hr", self.proj_size > 0))

    def _state_sizes(self):
        """The last dim of each state (h first)."""
        return (self.hidden_size,)

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
        """[num_layers * directions, N, size] zeros (size: proj_size for a projected h0,
        else hidden_size), or `given` checked against that shape."""
        if given is None:
            return None
        given = given if isinstance(given, Tensor) else tensor(given)
        projected = self.proj_size > 0 and name == "h0"
        size = self.proj_size if projected else self.hidden_size
        want = (self.num_layers * self.directions, sequence.shape[1], size)
        if len(given.shape) != 3 or any(g is not None and w is not None and g != w
                                        for g, w in zip(given.shape, want)):
            layers = "num_layers * 2" if self.bidirectional else "num_layers"
            width = "proj_size" if projected else "hidden_size"
            raise ShapeError(f"{self.kind}: the initial {name} must be [{layers}, N, "
                             f"{width}] = {list(want)}, got {list(given.shape)}")
        return given

    def _run(self, sequence, states):
        """Every layer over `sequence` [T, N, input_size], from `states` (each [num_layers *
        directions, N, H], or None: zeros); returns (the output, in the input's order, and
        the final states, each [num_layers * directions, N, H], torch's order: layer by
        layer, the forward direction first)."""
        # [N, size] zeros, N perhaps open: a [N, 1] slice's zeros broadcast with [1, size]
        # (one tensor per size: h and c share theirs but under proj_size)
        column = api.zeros_like(sequence[0, :, :1])
        by_size = {size: column + api.zeros((1, size), sequence.dtype)
                   for size in set(self._state_sizes())}
        zeros = [by_size[size] for size in self._state_sizes()]
        steps = range(sequence.shape[0])
        finals = []
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0.0 and self.training:
                # torch drops each layer's output but the last's (and only in training)
                sequence = F.dropout(sequence, self.dropout, True)
            directions = []
            for index, suffix in enumerate(self._suffixes()):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, suffix)
                inputs = api.matmul(sequence, api.transpose(w_ih))  # [T, N, gates * H]
                if b_ih is not None:
                    inputs = inputs + b_ih
                position = layer * self.directions + index
                state = [zero if s is None else s[position] for s, zero in zip(states, zeros)]
                outputs = [None] * len(steps)
                for step in (reversed(steps) if suffix else steps):
                    state = self._step(inputs[step], state, w_hh, b_hh, w_hr)
                    outputs[step] = state[0]
                directions.append(api.stack(outputs, axis=0))
                finals.append(state)
            sequence = (api.concat(directions, axis=2) if len(directions) > 1
                        else directions[0])
        output = api.transpose(sequence, (1, 0, 2)) if self.batch_first else sequence
        return output, [api.stack(list(kind), axis=0) for kind in zip(*finals)]

    def extra_repr(self):
        return (f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, "
                f"bias={self.has_bias}, batch_first={self.batch_first}, "
                f"dropout={self.dropout}, bidirectional={self.bidirectional}"
                + (f", proj_size={self.proj_size}" if self.proj_size else ""))


class LSTM(_Recurrent):
    """torch.nn.LSTM's long short-term memory, gates i, f, g, o:

        i, f, o = sigmoid(x W_i* + b_i* + h W_h* + b_h*), g = tanh(...)
        c' = f * c + i * g;  h' = o * tanh(c')

    `forward(x, state=None)`: x [T, N, input_size] ([N, T, input_size] with batch_first);
    state (h0, c0), each [num_layers * D, N, hidden_size] (zeros when None; D is 2 with
    bidirectional, else 1). Returns (output [T, N, D * hidden_size] (or batch first),
    (h_n, c_n)). Parameters, per layer k: weight_ih_lk [4H, in], weight_hh_lk [4H, H],
    bias_ih_lk and bias_hh_lk [4H] (in is input_size for k = 0, else D * H), and with
    bidirectional the same four named ..._lk_reverse. `dropout` drops each layer's output
    but the last's in training mode, with unigraph's generator (as ug.nn.Dropout).
    `proj_size` P > 0 (torch's LSTM with projections, P < hidden_size): h' = (o * tanh(c'))
    W_hr, so h, h0, h_n and each direction's output are P wide (c stays H), weight_hh_lk is
    [4H, P], a later layer reads D * P, and each direction adds weight_hr_lk [P, H].
    """

    gates, kind = 4, "LSTM"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, dtype="float32"):
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, dtype, proj_size)

    def forward(self, x, state=None):
        h0, c0 = (None, None) if state is None else state
        sequence = self._sequence(x)
        output, (h, c) = self._run(sequence, (self._initial(sequence, h0, "h0"),
                                              self._initial(sequence, c0, "c0")))
        return output, (h, c)

    def _state_sizes(self):
        return (self.proj_size or self.hidden_size, self.hidden_size)

    def _step(self, inputs, state, w_hh, b_hh, w_hr):
        h, c = state
        gates = inputs + api.matmul(h, api.transpose(w_hh))
        if b_hh is not None:
            gates = gates + b_hh
        i, f, g, o = api.split(gates, 4, axis=1)
        c = api.sigmoid(f) * c + api.sigmoid(i) * api.tanh(g)
        h = api.sigmoid(o) * api.tanh(c)
        if w_hr is not None:
            h = api.matmul(h, api.transpose(w_hr))
        return [h, c]


class GRU(_Recurrent):
    """torch.nn.GRU's gated recurrent unit, gates r, z, n:

        r, z = sigmoid(x W_i* + b_i* + h W_h* + b_h*)
        n = tanh(x W_in + b_in + r * (h W_hn + b_hn));  h' = (1 - z) * n + z * h

    `forward(x, h0=None)`: x as LSTM's; h0 [num_layers * D, N, hidden_size] (zeros when
    None). Returns (output, h_n). Parameters, bidirectional and dropout as LSTM's, with 3H
    rows.
    """

    gates, kind = 3, "GRU"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, dtype="float32"):
        # torch.nn.GRU's keywords: no proj_size
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, dtype)

    def forward(self, x, h0=None):
        sequence = self._sequence(x)
        output, (h,) = self._run(sequence, (self._initial(sequence, h0, "h0"),))
        return output, h

    def _step(self, inputs, state, w_hh, b_hh, w_hr):
        (h,) = state
        hidden = api.matmul(h, api.transpose(w_hh))
        if b_hh is not None:
            hidden = hidden + b_hh
        x_r, x_z, x_n = api.split(inputs, 3, axis=1)
        h_r, h_z, h_n = api.split(hidden, 3, axis=1)
        r, z = api.sigmoid(x_r + h_r), api.sigmoid(x_z + h_z)
        n = api.tanh(x_n + r * h_n)
        return [(1.0 - z) * n + z * h]
