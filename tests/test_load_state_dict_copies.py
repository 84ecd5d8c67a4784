"""`load_state_dict` and `Parameter.set_value` copy each array once (an array already of the
parameter's dtype is not converted first), on one walk of the modules, and keep what they
did before: every dtype and byte order converted, a parameter shared by two layers and a
buffer loaded, the same errors. The loaded model runs on all 9 targets against a float64
forward written out by hand."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug


class Shared(ug.nn.Module):
    """Two Linear layers with one weight, and a buffer added to the result."""

    def __init__(self):
        super().__init__()
        self.first = ug.nn.Linear(3, 3, act="relu")
        self.second = ug.nn.Linear(3, 3)
        self.second.weight = self.first.weight
        self.register_buffer("offset", np.zeros(3, np.float32))

    def forward(self, x):
        return self.second(self.first(x)) + self.offset


def _state():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((3, 3))
    return {
        "first.weight": np.asfortranarray(w).astype(">f4"),  # big-endian, column-major
        "first.bias": rng.standard_normal(3),  # float64: converted to the layer's float32
        "second.bias": rng.standard_normal(3).astype(np.float32),
        "offset": rng.standard_normal(3).astype(np.float32),
    }


def _forward64(state, x):
    w = state["first.weight"].astype(np.float64)
    h = np.maximum(x @ w + state["first.bias"].astype(np.float64), 0)
    return h @ w + state["second.bias"] + state["offset"]


def test_every_key_once_parameters_then_buffers():
    assert list(Shared().state_dict()) == ["first.weight", "first.bias", "second.bias",
                                            "offset"]


@pytest.mark.parametrize("target", TARGETS)
def test_loaded_values_are_private_converted_copies(target):
    state = _state()
    x = np.random.default_rng(6).standard_normal((4, 3)).astype(np.float32)
    want = _forward64(state, x.astype(np.float64))
    model = Shared()
    model.load_state_dict(state)
    for array in state.values():
        array[...] = 0  # the caller's arrays: the model copied them
    got = run_on(target, ug.function(model), x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for param in model.parameters() + model.buffers():
        host = param._host()
        assert host.dtype == np.float32 and host.dtype.isnative
        assert not any(np.shares_memory(host, array) for array in state.values())


def test_set_value_copies_an_array_of_its_dtype_once_and_refuses_as_before():
    param = ug.Parameter(np.zeros((2, 2), np.float32), name="w")
    value = np.arange(4, dtype=np.float32).reshape(2, 2)
    param.set_value(value)
    value[0, 0] = 9
    np.testing.assert_array_equal(param.numpy(), [[0, 1], [2, 3]])
    with pytest.raises(ValueError, match=r"parameter 'w' has shape \[2, 2\]; cannot set a "
                                         r"value of shape \[3\]"):
        param.set_value(np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="uint32 data is not supported"):
        param.set_value(np.zeros((2, 2), np.uint32))
    with pytest.raises(ValueError, match=r"load_state_dict into Shared: 'first.bias' has shape"
                                         r" \[2\] in the state dict but \[3\] in the model"):
        Shared().load_state_dict({**_state(), "first.bias": np.zeros(2)})
    with pytest.raises(KeyError, match="missing keys: offset; unexpected keys: other"):
        state = _state()
        state["other"] = state.pop("offset")
        Shared().load_state_dict(state)
