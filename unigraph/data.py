"""Data: mini-batches, scikit-learn's bundled digits, and MNIST from IDX files.

Everything here is NumPy: batches are fed to whatever target runs.

>>> (x_train, y_train), (x_test, y_test) = ug.data.digits()
>>> trainer.fit(ug.data.batches(x_train, y_train, 100, shuffle=True), epochs=10)
"""

from __future__ import annotations

import gzip
import math
import os
from pathlib import Path

import numpy as np

__all__ = ["Batches", "batches", "digits", "mnist", "read_idx", "write_idx"]


class Batches:
    """Re-iterable mini-batches of (x, y): every `iter()` (or call) is one epoch.

    With `shuffle`, each epoch has a fresh order drawn from a generator seeded with `seed`,
    so the sequence of epochs is reproducible; `seed=None` draws the seed from unigraph's
    generator (`ug.manual_seed`).
    """

    def __init__(self, x, y, batch_size, shuffle=False, seed=0, drop_last=False):
        x, y = np.asarray(x), np.asarray(y)
        if len(x) != len(y):
            raise ValueError(f"batches: x has {len(x)} rows but y has {len(y)}")
        if int(batch_size) < 1:
            raise ValueError(f"batches: batch_size must be >= 1, got {batch_size}")
        self.x, self.y = x, y
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.drop_last = drop_last
        if seed is None:
            from unigraph.random import generator

            seed = int(generator().integers(2 ** 63))
        self._rng = np.random.default_rng(seed)

    def __len__(self):
        count = len(self.x) / self.batch_size
        return math.floor(count) if self.drop_last else math.ceil(count)

    def __iter__(self):
        order = self._rng.permutation(len(self.x)) if self.shuffle else None
        for batch in range(len(self)):
            rows = slice(batch * self.batch_size, (batch + 1) * self.batch_size)
            if order is None:
                yield self.x[rows], self.y[rows]
            else:
                index = order[rows]
                yield self.x[index], self.y[index]

    def __call__(self):
        return iter(self)


def batches(x, y, batch_size, shuffle=False, seed=0, drop_last=False) -> Batches:
    """Mini-batches of (x, y) rows, `batch_size` at a time; iterate it once per epoch.

    The last batch is smaller when `batch_size` does not divide the row count (on a static
    target that compiles one more graph) unless `drop_last`.

    >>> for x, y in ug.data.batches(x_train, y_train, 100, shuffle=True, seed=0):
    ...     ...
    """
    return Batches(x, y, batch_size, shuffle, seed, drop_last)


def _split(x, y, test_size, seed):
    order = np.random.default_rng(seed).permutation(len(x))
    test_count = int(round(len(x) * test_size))
    test, train = order[:test_count], order[test_count:]
    return (x[train], y[train]), (x[test], y[test])


def digits(test_size=0.2, seed=0, flatten=True):
    """scikit-learn's bundled handwritten digits: 1797 images of 8x8 pixels, 10 classes, no
    download. Returns ((x_train, y_train), (x_test, y_test)): x float32 in [0, 1] ([N, 64],
    or [N, 1, 8, 8] NCHW without `flatten`), y int64; a seeded random split with
    `test_size` of the rows held out.
    """
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ImportError(
            "ug.data.digits() needs scikit-learn: pip install 'unigraph[train]' "
            "(or pip install scikit-learn)"
        ) from None
    bunch = load_digits()
    x = (bunch.images / 16.0).astype(np.float32)
    x = x.reshape(len(x), 64) if flatten else x.reshape(len(x), 1, 8, 8)
    y = bunch.target.astype(np.int64)
    return _split(x, y, test_size, seed)


# -- IDX (MNIST) ------------------------------------------------------------------------------
_IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4",
              0x0E: ">f8"}
_MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


def read_idx(path) -> np.ndarray:
    """Read one IDX file (plain or .gz): magic 0x0000 <type byte> <ndim byte>, ndim
    big-endian int32 sizes, then the data. Raises ValueError naming the file when it is
    malformed."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            raw = handle.read()
    except (OSError, EOFError) as error:
        raise ValueError(f"cannot read IDX file {str(path)!r}: {error}") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(
            f"{str(path)!r} is not an IDX file: it should start with two zero bytes, a type "
            f"byte and a rank byte, but starts with {raw[:4]!r}"
        )
    type_code, ndim = raw[2], raw[3]
    if type_code not in _IDX_TYPES:
        raise ValueError(f"{str(path)!r}: unknown IDX data type 0x{type_code:02x}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{str(path)!r}: truncated header ({len(raw)} bytes for rank {ndim})")
    shape = tuple(int(d) for d in np.frombuffer(raw, ">u4", count=ndim, offset=4))
    dtype = np.dtype(_IDX_TYPES[type_code])
    expected = header + math.prod(shape) * dtype.itemsize
    if len(raw) != expected:
        raise ValueError(
            f"{str(path)!r}: the header says shape {list(shape)} ({expected} bytes in all), "
            f"but the file has {len(raw)} bytes (truncated or not an IDX file)"
        )
    return np.frombuffer(raw, dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


def write_idx(path, array) -> None:
    """Write `array` (uint8, int8, int16, int32, float32 or float64) as an IDX file."""
    array = np.asarray(array)
    codes = {np.dtype(np.uint8): 0x08, np.dtype(np.int8): 0x09, np.dtype(np.int16): 0x0B,
             np.dtype(np.int32): 0x0C, np.dtype(np.float32): 0x0D,
             np.dtype(np.float64): 0x0E}
    if array.dtype not in codes:
        raise TypeError(f"write_idx: dtype {array.dtype} has no IDX type code")
    header = bytes([0, 0, codes[array.dtype], array.ndim])
    header += np.asarray(array.shape, dtype=">u4").tobytes()
    data = array.astype(array.dtype.newbyteorder(">")).tobytes()
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as handle:
        handle.write(header + data)


def _find(folder: Path, stem: str):
    candidates = [stem, stem.replace("-idx", ".idx")]
    for name in candidates:
        for suffix in ("", ".gz"):
            path = folder / (name + suffix)
            if path.is_file():
                return path
    return None


def mnist(path, flatten=True):
    """MNIST from the four IDX files in folder `path` (plain or .gz; also the
    `train-images.idx3-ubyte` spelling): train-images-idx3-ubyte, train-labels-idx1-ubyte,
    t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte.

    Returns ((x_train, y_train), (x_test, y_test)): x float32 in [0, 1] ([N, 784], or
    [N, 1, 28, 28] without `flatten`), y int64. Missing folder or files raise
    FileNotFoundError naming them; malformed files raise ValueError.
    """
    folder = Path(os.path.expanduser(str(path)))
    if not folder.is_dir():
        raise FileNotFoundError(
            f"ug.data.mnist: the folder {str(folder)!r} does not exist (pass the folder "
            f"that holds {', '.join(_MNIST_FILES.values())})"
        )
    found, missing = {}, []
    for key, stem in _MNIST_FILES.items():
        file = _find(folder, stem)
        if file is None:
            missing.append(stem)
        found[key] = file
    if missing:
        present = sorted(p.name for p in folder.iterdir())[:10]
        raise FileNotFoundError(
            f"ug.data.mnist: missing {', '.join(missing)} (or .gz) in {str(folder)!r}; "
            f"the folder holds: {', '.join(present) or 'nothing'}"
        )
    splits = []
    for part in ("train", "test"):
        images = read_idx(found[f"{part}_images"])
        labels = read_idx(found[f"{part}_labels"])
        if images.ndim != 3 or labels.ndim != 1:
            raise ValueError(
                f"ug.data.mnist: {found[f'{part}_images'].name} should hold [N, rows, cols] "
                f"images and {found[f'{part}_labels'].name} [N] labels, got shapes "
                f"{list(images.shape)} and {list(labels.shape)}"
            )
        if len(images) != len(labels):
            raise ValueError(
                f"ug.data.mnist: {found[f'{part}_images'].name} has {len(images)} images but "
                f"{found[f'{part}_labels'].name} has {len(labels)} labels"
            )
        x = images.astype(np.float32) / 255.0
        n, rows, cols = images.shape
        x = x.reshape(n, rows * cols) if flatten else x.reshape(n, 1, rows, cols)
        splits.append((x, labels.astype(np.int64)))
    return tuple(splits)
