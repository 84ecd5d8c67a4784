"""A 0-d bool cast to another dtype (a loop guard's flag, `(x > y).astype(d)`) is the value
and dtype NumPy's `astype` gives, on every target: numpy:static's generated plan chooses
between the two casts of a bool made once (`codegen._Writer.op`) instead of calling
`astype` on each run. Each call is made several times (the first, the one that makes the
caller, its repeats), for both truth values, every dtype, at the top level, in a cond
branch and in a loop body."""

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32",
          "float64"]
REPEATS = 3


def on(target):
    t = Target.parse(target)
    return ug.use_backend(t.backend, t.mode)


def expected(truth: bool, dtype: str) -> np.ndarray:
    return np.asarray(np.bool_(truth).astype(dtype))


def check(result, truth: bool, dtype: str) -> None:
    value = np.asarray(result.numpy())
    want = expected(truth, dtype)
    assert result.dtype == dtype and value.dtype == want.dtype and value.shape == ()
    assert value.tobytes() == want.tobytes()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_compare_cast_at_the_top_level(target, dtype):
    cast = ug.function(lambda x, y: (x > y).astype(dtype))
    with on(target):
        for x, y in [(3.0, 1.0), (1.0, 3.0), (2.0, 2.0)]:
            for _ in range(REPEATS):
                check(cast(np.float32(x), np.float32(y)), x > y, dtype)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["int32", "float32", "bool"])
def test_a_cast_in_a_cond_branch_and_a_loop_body(target, dtype):
    @ug.function
    def branch(x, y):
        return ug.cond(x > 0, lambda: (x > y).astype(dtype), lambda: (y > x).astype(dtype))

    @ug.function
    def counted(n):
        # each iteration adds the cast of `i is odd`: the number of odd i below n
        def body(i, total):
            return i + 1, total + ((i % 2) > 0).astype(dtype).astype("int64")

        return ug.while_loop(lambda i, total: i < n, body, (n * 0, n * 0))[1]

    with on(target):
        for x, y in [(3, 1), (3, 5), (-3, 1), (-3, -5)]:
            truth = (x > y) if x > 0 else (y > x)
            for _ in range(REPEATS):
                check(branch(np.int64(x), np.int64(y)), truth, dtype)
        for n in [0, 1, 6, 7]:
            for _ in range(REPEATS):
                total = counted(np.int64(n))
                assert total.dtype == "int64" and int(total.numpy()) == n // 2
