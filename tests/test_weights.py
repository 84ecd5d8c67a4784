"""Weight files: safetensors, checked on load, never half-loaded."""

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.weights import WeightFileError, check_fits, metadata


def test_save_and_load_round_trip_exactly(tmp_path):
    arrays = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "i": np.array([1, 2], np.int64),
              "h": np.array([0.5], np.float16), "t": ug.tensor([1.0, 2.0])}
    path = tmp_path / "w.safetensors"
    ug.save(arrays, path)
    loaded = ug.load(path)
    assert sorted(loaded) == sorted(arrays)
    for name, value in arrays.items():
        expected = np.asarray(value)
        assert loaded[name].dtype == expected.dtype
        np.testing.assert_array_equal(loaded[name], expected)
        assert loaded[name].flags.writeable
    assert metadata(path)["format"] == "unigraph"


def test_the_file_holds_no_pickle(tmp_path):
    path = tmp_path / "w.safetensors"
    ug.save({"w": np.ones(3, np.float32)}, path)
    assert b"\x80\x04" not in path.read_bytes()[:16]  # not a pickle stream
    header_length = int.from_bytes(path.read_bytes()[:8], "little")
    assert b'"w"' in path.read_bytes()[8:8 + header_length]  # a JSON header names the tensor


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_a_damaged_file_is_a_clear_error(tmp_path, damage):
    path = tmp_path / "w.safetensors"
    ug.save({"w": np.ones((4, 4), np.float32)}, path)
    data = path.read_bytes()
    path.write_bytes({"truncate": data[:-7], "garbage": b"not a weight file",
                      "empty": b""}[damage])
    with pytest.raises(WeightFileError, match="not a readable safetensors weight file"):
        ug.load(path)


def test_a_missing_file_names_the_path(tmp_path):
    with pytest.raises(WeightFileError, match="no weight file at .*nosuch"):
        ug.load(tmp_path / "nosuch.safetensors")


def test_check_fits_lists_every_difference():
    expected = {"a": ((2,), "float32"), "b": ((3,), "float32"), "c": ((1,), "int64")}
    arrays = {"a": np.zeros(2, np.float64), "b": np.zeros(4, np.float32), "d": np.zeros(1)}
    with pytest.raises(WeightFileError) as error:
        check_fits(expected, arrays, "model.safetensors")
    text = str(error.value)
    for part in ("missing: c", "not in the model: d", "a: dtype float64 in the file, float32",
                 "b: shape [4] in the file, [3] in the model", "nothing was loaded"):
        assert part in text


class Small(ug.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = ug.nn.Linear(4, 3)
        self.bn = ug.nn.BatchNorm2D(2)  # buffers (running statistics) travel too
        self.scale = ug.nn.Parameter(np.float32(2.0), name="scale")

    def forward(self, x):
        return self.fc(x) * self.scale


@pytest.mark.parametrize("target", TARGETS)
def test_module_save_then_load_on_every_target(tmp_path, target):
    """Train on the target, save, load into a fresh model: the same outputs everywhere."""
    ug.manual_seed(0)
    trained = Small()
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    opt = ug.optim.SGD(trained.parameters(), lr=0.1)

    @ug.function
    def step(x):
        loss, grads = ug.value_and_grad(lambda: ug.sum(trained(x) ** 2), wrt=opt.params)()
        opt.apply(grads)
        return loss

    with ug.use_backend(*target.split(":")):
        step(x)
        expected = np.array(trained(x).numpy())
    path = tmp_path / "small.safetensors"
    trained.save(path)
    ug.manual_seed(1)
    fresh = Small()
    assert not np.allclose(fresh.fc.weight.numpy(), trained.fc.weight.numpy())
    fresh.load(path)
    for (name, a), (_, b) in zip(sorted(trained.state_dict().items()),
                                 sorted(fresh.state_dict().items())):
        np.testing.assert_array_equal(a, b, err_msg=name)
    with ug.use_backend(*target.split(":")):
        np.testing.assert_allclose(fresh(x).numpy(), expected, rtol=1e-6)


def test_module_load_refuses_a_mismatch_and_loads_nothing(tmp_path):
    ug.manual_seed(0)
    model = Small()
    arrays = model.state_dict()
    arrays["fc.weight"] = arrays["fc.weight"].astype(np.float64)
    arrays["fc.bias"] = np.zeros(5, np.float32)
    del arrays["scale"]
    arrays["extra"] = np.zeros(1, np.float32)
    path = tmp_path / "bad.safetensors"
    ug.save(arrays, path)
    before = model.state_dict()
    with pytest.raises(WeightFileError) as error:
        model.load(path)
    for part in ("missing: scale", "not in the model: extra", "fc.weight: dtype float64",
                 "fc.bias: shape [5] in the file, [3] in the model"):
        assert part in str(error.value)
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)


def test_module_load_of_a_damaged_file_keeps_the_weights(tmp_path):
    ug.manual_seed(0)
    model = Small()
    path = tmp_path / "m.safetensors"
    model.save(path)
    path.write_bytes(path.read_bytes()[:-10])
    before = model.state_dict()
    with pytest.raises(WeightFileError, match="truncated or corrupted"):
        model.load(path)
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)
