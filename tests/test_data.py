"""ug.data: mini-batches, the bundled digits, and MNIST IDX files (small ones the tests
write), with the errors for missing and malformed files."""

from __future__ import annotations

import numpy as np
import pytest

import unigraph as ug
from unigraph.data import read_idx, write_idx


# -- batches --------------------------------------------------------------------------------
def test_batches_cover_every_row_in_order():
    x, y = np.arange(10).reshape(10, 1), np.arange(10)
    batches = ug.data.batches(x, y, batch_size=4)
    assert len(batches) == 3
    sizes = [len(bx) for bx, _ in batches]
    assert sizes == [4, 4, 2]
    np.testing.assert_array_equal(np.concatenate([by for _, by in batches]), y)
    assert len(ug.data.batches(x, y, 4, drop_last=True)) == 2
    assert [len(b) for b, _ in ug.data.batches(x, y, 4, drop_last=True)] == [4, 4]


def test_shuffled_batches_are_reproducible_and_change_per_epoch():
    x, y = np.arange(20).reshape(20, 1), np.arange(20)

    def epochs(batches, count=2):
        return [np.concatenate([by for _, by in batches]) for _ in range(count)]

    first = epochs(ug.data.batches(x, y, 6, shuffle=True, seed=3))
    again = epochs(ug.data.batches(x, y, 6, shuffle=True, seed=3))
    other = epochs(ug.data.batches(x, y, 6, shuffle=True, seed=4))
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], first[1])  # a new order each epoch
    assert not np.array_equal(first[0], other[0])
    assert sorted(first[0]) == list(range(20))
    for bx, by in ug.data.batches(x, y, 6, shuffle=True, seed=3):
        np.testing.assert_array_equal(bx[:, 0], by)  # rows stay paired


def test_batches_is_also_a_callable_returning_an_epoch():
    batches = ug.data.batches(np.zeros((5, 2)), np.zeros(5), 2)
    assert len(list(batches())) == 3


def test_batches_errors():
    with pytest.raises(ValueError, match="x has 3 rows but y has 2"):
        ug.data.batches(np.zeros((3, 1)), np.zeros(2), 1)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        ug.data.batches(np.zeros((3, 1)), np.zeros(3), 0)


# -- digits ---------------------------------------------------------------------------------
def test_digits():
    (x_train, y_train), (x_test, y_test) = ug.data.digits()
    assert x_train.shape[1] == 64 and len(x_train) + len(x_test) == 1797
    assert len(x_test) == round(1797 * 0.2)
    assert x_train.dtype == np.float32 and y_train.dtype == np.int64
    assert 0.0 <= x_train.min() and x_train.max() <= 1.0
    assert set(np.unique(y_test)) == set(range(10))
    (images, _), _ = ug.data.digits(flatten=False)
    assert images.shape[1:] == (1, 8, 8)
    (again, _), _ = ug.data.digits()
    np.testing.assert_array_equal(again, x_train)  # the split is seeded


# -- MNIST IDX files ------------------------------------------------------------------------
def _write_mnist(folder, train=12, test=5, compress=False, rows=28, cols=28):
    rng = np.random.default_rng(0)
    suffix = ".gz" if compress else ""
    data = {}
    for part, count in (("train", train), ("t10k", test)):
        images = rng.integers(0, 256, (count, rows, cols), dtype=np.uint8)
        labels = rng.integers(0, 10, count).astype(np.uint8)
        write_idx(folder / f"{part}-images-idx3-ubyte{suffix}", images)
        write_idx(folder / f"{part}-labels-idx1-ubyte{suffix}", labels)
        data[part] = (images, labels)
    return data


@pytest.mark.parametrize("compress", [False, True])
def test_mnist_reads_idx_files(tmp_path, compress):
    written = _write_mnist(tmp_path, compress=compress)
    (x_train, y_train), (x_test, y_test) = ug.data.mnist(tmp_path)
    assert x_train.shape == (12, 784) and x_test.shape == (5, 784)
    assert x_train.dtype == np.float32 and y_train.dtype == np.int64
    np.testing.assert_allclose(x_train, written["train"][0].reshape(12, 784) / 255.0,
                               rtol=1e-6)
    np.testing.assert_array_equal(y_test, written["t10k"][1])
    (images, _), _ = ug.data.mnist(str(tmp_path), flatten=False)
    assert images.shape == (12, 1, 28, 28)


def test_idx_round_trip(tmp_path):
    for array in (np.arange(24, dtype=np.int32).reshape(2, 3, 4),
                  np.linspace(0, 1, 5).astype(np.float32), np.arange(6, dtype=np.uint8)):
        write_idx(tmp_path / "a.idx", array)
        got = read_idx(tmp_path / "a.idx")
        assert got.dtype == array.dtype
        np.testing.assert_array_equal(got, array)


def test_mnist_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="folder .*nowhere.* does not exist"):
        ug.data.mnist(tmp_path / "nowhere")


def test_mnist_missing_file_is_named(tmp_path):
    _write_mnist(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(FileNotFoundError, match="missing t10k-labels-idx1-ubyte"):
        ug.data.mnist(tmp_path)


def test_mnist_malformed_files(tmp_path):
    _write_mnist(tmp_path)
    path = tmp_path / "train-images-idx3-ubyte"
    raw = path.read_bytes()
    path.write_bytes(raw[:-10])
    with pytest.raises(ValueError, match=r"train-images-idx3-ubyte.*header says shape "
                                         r"\[12, 28, 28\].*truncated"):
        ug.data.mnist(tmp_path)
    path.write_bytes(b"PK\x03\x04" + raw[4:])
    with pytest.raises(ValueError, match="is not an IDX file"):
        ug.data.mnist(tmp_path)
    (tmp_path / "broken.gz").write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match="cannot read IDX file"):
        read_idx(tmp_path / "broken.gz")


def test_mnist_counts_must_match(tmp_path):
    _write_mnist(tmp_path)
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.zeros(11, np.uint8))
    with pytest.raises(ValueError, match="12 images but .* 11 labels"):
        ug.data.mnist(tmp_path)
