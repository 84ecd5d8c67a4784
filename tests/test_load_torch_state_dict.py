"""`model.load_state_dict(torch_model.state_dict(), layout="torch")` ports a torch model's
weights to the same model written with ug.nn (module names matching): a Linear's weight is
transposed, BatchNorm's num_batches_tracked left out, the rest (conv, norm, embedding,
recurrent) taken as torch stores it. Checked on every target against torch's own output.
torch tensors given without layout="torch" are refused: a square Linear weight would load
transposed, silently."""

import numpy as np
import pytest
import torch
from conftest import TARGETS, run_on

import unigraph as ug

nn = ug.nn


class TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.embed = torch.nn.Embedding(5, 16)
        self.head = torch.nn.Sequential(torch.nn.Linear(64, 16), torch.nn.ReLU(),
                                        torch.nn.Linear(16, 16), torch.nn.LayerNorm(16),
                                        torch.nn.Linear(16, 3))

    def forward(self, x, token):
        x = torch.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        return self.head(x.flatten(1) + self.embed(token).repeat(1, 4))


class OurNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(1, 4, 3, padding=1, dtype="float64")
        self.bn = nn.BatchNorm2D(4, dtype="float64")
        self.embed = nn.Embedding(5, 16, dtype="float64")
        self.head = nn.Sequential(nn.Linear(64, 16, dtype="float64"), nn.ReLU(),
                                  nn.Linear(16, 16, dtype="float64"),
                                  nn.LayerNorm(16, dtype="float64"),
                                  nn.Linear(16, 3, dtype="float64"))

    def forward(self, x, token):
        x = nn.functional.max_pool2d(ug.relu(self.bn(self.conv(x))), 2, 2)
        return self.head(ug.flatten(x, 1) + ug.tile(self.embed(token), (1, 4)))


def _trained_torch_net():
    torch.manual_seed(0)
    native = TorchNet().double()
    with torch.no_grad():  # running statistics away from 0 / 1, as after training
        native.bn.running_mean.uniform_(-0.5, 0.5)
        native.bn.running_var.uniform_(0.5, 2.0)
    return native.eval()


X = np.random.default_rng(0).normal(size=(2, 1, 8, 8))
TOKENS = np.array([1, 4])


@pytest.mark.parametrize("target", TARGETS)
def test_a_torch_state_dict_gives_torchs_output(target):
    native = _trained_torch_net()
    want = native(torch.tensor(X), torch.tensor(TOKENS)).detach().numpy()
    ours = OurNet()
    ours.load_state_dict(native.state_dict(), layout="torch")
    ours.eval()
    got = run_on(target, ug.function(lambda x, t: ours(x, t)), X, TOKENS)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
def test_a_state_dict_in_torch_layout_loads_into_torch(target):
    """The other way: a model trained with unigraph, deployed with torch.nn."""
    ug.manual_seed(3)
    ours = OurNet()
    rng = np.random.default_rng(1)
    ours.bn.load_state_dict({**ours.bn.state_dict(), "running_mean": rng.uniform(-1, 1, 4),
                             "running_var": rng.uniform(0.5, 2.0, 4)})
    ours.eval()
    with ug.use_backend(*target.split(":")):  # two SGD steps on this target
        step = ug.optim.SGD(ours.parameters(), lr=0.1)
        for _ in range(2):
            loss, grads = ug.value_and_grad(
                lambda: ug.sum(ours(X, TOKENS) ** 2), wrt=ours.parameters())()
            step.apply(grads)
    want = run_on("numpy:eager", lambda x, t: ours(x, t), X, TOKENS)
    native = TorchNet().double().eval()
    state = ours.state_dict(layout="torch")
    native.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    got = native(torch.tensor(X), torch.tensor(TOKENS)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_torch_tensors_need_the_torch_layout():
    ours = OurNet()
    before = ours.state_dict()
    with pytest.raises(ValueError, match="is a torch tensor; pass layout='torch'"):
        ours.load_state_dict(_trained_torch_net().state_dict())
    for key, value in ours.state_dict().items():  # nothing loaded
        np.testing.assert_array_equal(value, before[key])
    with pytest.raises(ValueError, match="layout must be one of"):
        ours.load_state_dict(before, layout="keras")


def test_arrays_in_torch_layout_load_too():
    """A torch state_dict saved as NumPy arrays (e.g. with safetensors) loads the same way."""
    native = _trained_torch_net()
    arrays = {k: v.numpy() for k, v in native.state_dict().items()}
    ours = OurNet()
    ours.load_state_dict(arrays, layout="torch")
    np.testing.assert_array_equal(ours.head[2].weight.numpy(), arrays["head.2.weight"].T)
    np.testing.assert_array_equal(ours.bn.running_var.numpy(), arrays["bn.running_var"])
