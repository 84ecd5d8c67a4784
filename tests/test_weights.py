"""Weight files: safetensors, checked on load, never half-loaded."""

import numpy as np
import pytest

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
