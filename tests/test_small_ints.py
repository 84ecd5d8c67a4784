"""int8, uint8 and int16 on every target (onnxruntime too): tensors and constants, casts to and
from every dtype, arithmetic with NumPy's promotion (Python ints weak) and NumPy's wrapping
on overflow, comparisons, reductions, and indexing with them as data. Expected values are
NumPy's own arithmetic on the same dtypes (hand-checked where the wrap is the point)."""

import numpy as np
import pytest

import unigraph as ug
from tests.conftest import FORWARD_TARGETS, TARGETS, run_on
from unigraph.config import Target
from unigraph.ir import DTYPES

SMALL = ("int8", "uint8", "int16")

# Data that overflows on purpose: sums, products and negations wrap.
DATA = {
    "int8": (np.array([[-128, 5, 120], [-7, 127, 1]], np.int8),
             np.array([[3, -1, 10], [2, 1, -7]], np.int8)),
    "uint8": (np.array([[0, 5, 250], [17, 255, 1]], np.uint8),
              np.array([[3, 255, 10], [2, 1, 7]], np.uint8)),
    "int16": (np.array([[-32768, 5, 32000], [-7, 32767, 1]], np.int16),
              np.array([[3, -1, 1000], [2, 1, -7]], np.int16)),
}
OTHER = {"int8": "uint8", "uint8": "int8", "int16": "uint8"}  # a partner for mixed dtypes


def _cases(dtype):
    """name -> (ug function of (a, b, c), NumPy function of (a, b, c)); c is `b` in the
    partner dtype, so a + c promotes (int8 + uint8 -> int16, int16 + uint8 -> int16)."""
    unsigned = dtype == "uint8"
    cases = {
        "add": (lambda a, b, c: a + b, lambda a, b, c: a + b),
        "sub": (lambda a, b, c: a - b, lambda a, b, c: a - b),
        "mul": (lambda a, b, c: a * b, lambda a, b, c: a * b),
        "floor_divide": (lambda a, b, c: a // b, lambda a, b, c: a // b),
        "mod": (lambda a, b, c: a % b, lambda a, b, c: a % b),
        "neg": (lambda a, b, c: -a, lambda a, b, c: -a),
        "abs": (lambda a, b, c: ug.abs(a), lambda a, b, c: np.abs(a)),
        "maximum": (lambda a, b, c: ug.maximum(a, b), lambda a, b, c: np.maximum(a, b)),
        "minimum": (lambda a, b, c: ug.minimum(a, b), lambda a, b, c: np.minimum(a, b)),
        "weak_int": (lambda a, b, c: a * 3 + 1, lambda a, b, c: a * 3 + 1),
        "weak_float": (lambda a, b, c: a + 0.5, lambda a, b, c: a + 0.5),
        "mixed": (lambda a, b, c: a + c, lambda a, b, c: a + c),
        "mixed_int32": (lambda a, b, c: a + ug.cast(b, "int32"),
                        lambda a, b, c: a + b.astype(np.int32)),
        "less": (lambda a, b, c: a < b, lambda a, b, c: a < b),
        "equal_mixed": (lambda a, b, c: ug.equal(a, c), lambda a, b, c: a == c),
        "greater_equal": (lambda a, b, c: a >= 5, lambda a, b, c: a >= 5),
        "where": (lambda a, b, c: ug.where(a > b, a, b), lambda a, b, c: np.where(a > b, a, b)),
        "sum": (lambda a, b, c: ug.sum(a, axis=1), lambda a, b, c: a.sum(1, dtype=a.dtype)),
        "sum_all": (lambda a, b, c: ug.sum(a), lambda a, b, c: a.sum(dtype=a.dtype)),
        "max": (lambda a, b, c: ug.max(a, axis=0), lambda a, b, c: a.max(0)),
        "min": (lambda a, b, c: ug.min(a), lambda a, b, c: a.min()),
        "prod": (lambda a, b, c: ug.prod(b, axis=1), lambda a, b, c: b.prod(1, dtype=b.dtype)),
        "cumsum": (lambda a, b, c: ug.cumsum(a, axis=1),
                   lambda a, b, c: a.cumsum(1, dtype=a.dtype)),
        "mean": (lambda a, b, c: ug.mean(a), lambda a, b, c: a.mean(dtype=np.float64)),
        "argmax": (lambda a, b, c: ug.argmax(a, axis=1), lambda a, b, c: a.argmax(1)),
        "take": (lambda a, b, c: ug.take(a, ug.tensor([1, 0, 1]), axis=0),
                 lambda a, b, c: a[[1, 0, 1]]),
        "gather": (lambda a, b, c: a[ug.tensor([1, 0])], lambda a, b, c: a[[1, 0]]),
        "slice": (lambda a, b, c: a[1, 1:], lambda a, b, c: a[1, 1:]),
        "concat": (lambda a, b, c: ug.concat([a, b], axis=0),
                   lambda a, b, c: np.concatenate([a, b], 0)),
        "transpose": (lambda a, b, c: ug.transpose(a), lambda a, b, c: a.T),
        "full": (lambda a, b, c: ug.full((2,), 7, dtype=a.dtype) + a[0, :2],
                 lambda a, b, c: np.full(2, 7, a.dtype) + a[0, :2]),
        "constant": (lambda a, b, c: a + ug.tensor(np.array([1, 2, 3], a.dtype)),
                     lambda a, b, c: a + np.array([1, 2, 3], a.dtype)),
        "sign": (lambda a, b, c: ug.sign(a), lambda a, b, c: np.sign(a)),
        "clip": (lambda a, b, c: ug.clip(a, 1, 100), lambda a, b, c: np.clip(a, 1, 100)),
    }
    if unsigned:  # NumPy's floor_divide/mod by a uint8 0 is 0 with a warning: keep b > 0
        assert (DATA[dtype][1] > 0).all()
    return cases


def _run(target: str, fn, *arrays):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        out = ug.function(fn)(*arrays)
        return np.asarray(out.numpy())


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("dtype", SMALL)
def test_small_int_ops_match_numpy(target, dtype):
    a, b = DATA[dtype]
    c = b.astype(OTHER[dtype]) if dtype != "uint8" else b.astype(np.int8)
    cases = _cases(dtype)
    names = list(cases)

    def every_case(a, b, c):
        return tuple(cases[name][0](a, b, c) for name in names)

    with np.errstate(over="ignore"):  # NumPy warns on the wraps this test is about
        want = [np.asarray(cases[name][1](a, b, c)) for name in names]
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        got = [np.asarray(o.numpy()) for o in ug.function(every_case)(a, b, c)]
    for name, g, w in zip(names, got, want):
        assert g.dtype == w.dtype, (name, g.dtype, w.dtype)
        np.testing.assert_array_equal(g, w, err_msg=name)


def test_wrapping_by_hand():
    # The expected values of the cases above that NumPy itself is trusted for, by hand.
    u8 = np.array([250], np.uint8)
    assert (u8 + np.uint8(10))[0] == 4 and (-u8)[0] == 6
    assert (np.array([127], np.int8) + np.int8(1))[0] == -128
    assert np.array([-128], np.int8).__abs__()[0] == -128
    assert (np.array([300], np.int16) * np.int16(300))[0] == 90000 - 65536 * 1


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_small_int_wraps_on_every_target(target):
    def wraps(u, i, s):
        return u + 10, -u, i + 1, ug.abs(i), s * 300, ug.sum(u)

    u = np.array([250, 3], np.uint8)
    i = np.array([127, -128], np.int8)
    s = np.array([300, -2], np.int16)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        got = [o.numpy().tolist() for o in ug.function(wraps)(u, i, s)]
    assert got == [[4, 13], [6, 253], [-128, -127], [127, -128], [90000 - 65536, -600], 253]


@pytest.mark.parametrize("target", FORWARD_TARGETS)
@pytest.mark.parametrize("source", SMALL)
def test_casts_to_and_from_every_dtype(target, source):
    # In range of every dtype involved, so each cast is exact (or truncates a float).
    values = {"int8": [-7, 0, 5, 100], "uint8": [0, 3, 200, 255],
              "int16": [-300, 0, 7, 30000]}[source]
    x = np.array(values, source)
    floats = np.array([-3.75, 0.5, 2.25, 99.9])
    if source == "uint8":
        floats = np.abs(floats)
    targets = [d for d in DTYPES if d != source]

    def casts(x, f):
        return (tuple(ug.cast(x, d) for d in targets)
                + tuple(ug.cast(ug.cast(f, d), source) for d in ("float32", "float64")))

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        got = [np.asarray(o.numpy()) for o in ug.function(casts)(x, floats)]
    with np.errstate(over="ignore", invalid="ignore"):
        want = [x.astype(d) for d in targets] + [floats.astype(d).astype(source)
                                                 for d in ("float32", "float64")]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_narrowing_int_casts_wrap(target):
    x = np.array([300, -129, 65535, 40000], np.int32)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        got = [o.numpy().tolist() for o in ug.function(
            lambda x: (ug.cast(x, "int8"), ug.cast(x, "uint8"), ug.cast(x, "int16")))(x)]
    assert got == [[44, 127, -1, 64], [44, 127, 255, 64], [300, -129, -1, -25536]]


def test_small_int_tensors_and_errors():
    x = ug.tensor(np.array([1, 2], np.uint8))
    assert x.dtype == "uint8" and repr(ug.uint8) == "ug.uint8"
    assert ug.zeros(3, ug.int16).dtype == "int16" and ug.tensor([1], dtype=ug.int8).dtype == "int8"
    assert (x + 1).dtype == "uint8"  # a Python int is weak
    with pytest.raises(OverflowError, match=r"the integer 300 at .*test_small_ints\.py:\d+ "
                                            r"does not fit in uint8"):
        x + 300
    with pytest.raises(OverflowError, match="does not fit in int8"):
        ug.tensor(np.array([1], np.int8)) * -129


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_small_int_indices(target):
    # No framework gathers with int8/uint8/int16 indices: the frontend widens them.
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)

    def gathers(x, i, j, k):
        return ug.take(x, i, axis=0), x[j], ug.one_hot(k, 3), ug.take(x, i, axis=1)

    i, j, k = np.array([2, -1], np.int8), np.array([0, 2], np.uint8), np.array([1, 2], np.int16)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        got = [o.numpy() for o in ug.function(gathers)(x, i, j, k)]
    np.testing.assert_array_equal(got[0], x[[2, 2]])
    np.testing.assert_array_equal(got[1], x[[0, 2]])
    np.testing.assert_array_equal(got[2], np.eye(3, dtype=np.float32)[[1, 2]])
    np.testing.assert_array_equal(got[3], x[:, [2, 3]])


@pytest.mark.parametrize("target", [t for t in FORWARD_TARGETS if not t.startswith("onnx")])
@pytest.mark.parametrize("dtype", SMALL)
def test_print_small_ints(target, dtype, capfd):
    from tests.test_print import _printed

    t = Target.parse(target)
    capfd.readouterr()
    with ug.use_backend(t.backend, t.mode):
        out = ug.function(lambda x: ug.print(x + 1, message="x"))(np.array([1, 2], dtype))
    assert out.dtype == dtype and out.numpy().tolist() == [2, 3]
    assert _printed(capfd, target) == ["x [2. 3.]" if target == "paddle:static" else "x [2 3]"]


# -- uint8 is an integer dtype wherever an int is asked for (unigraph.dtypes.is_int) ----------
@pytest.mark.parametrize("target", TARGETS)
def test_uint8_indices_update_and_scatter(target):
    # x.at[j] with a uint8 array (traced on static targets: the scatter route), x.at[r] with
    # a uint8 scalar (traced: the one_hot row route, past a uint8's range: 300 rows) and
    # ug.scatter with uint8 indices.
    x = np.zeros(300, np.float32)

    def updates(x, j, r):
        return x.at[j].add(1.0), x.at[r].set(5.0), ug.scatter(x, j, 2.0)

    j, r = np.array([3, 250, 3], np.uint8), np.array(255, np.uint8)
    got = run_on(target, ug.function(updates), x, j, r)
    added, row, scattered = (np.zeros(300, np.float32) for _ in range(3))
    added[3], added[250] = 2.0, 1.0
    row[255] = 5.0
    scattered[[3, 250]] = 2.0
    for g, w in zip(got, (added, row, scattered), strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("target", TARGETS)
def test_uint8_loop_bounds(target):
    # A uint8 bound of ug.range (a while_loop on static targets) and a uint8
    # maximum_iterations tensor: 0 + 1 + 2 + 3 = 6, and 4 of 10 steps taken.
    def loops(n, most):
        total = ug.zeros((), "float32")
        for i in ug.range(n):
            total = total + i
        steps = ug.while_loop(lambda k: k < 10.0, lambda k: k + 1.0, ug.zeros((), "float32"),
                              maximum_iterations=most)
        return total, steps

    got = run_on(target, ug.function(loops), np.array(4, np.uint8), np.array(4, np.uint8))
    assert [g.tolist() for g in got] == [6.0, 4.0]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype, stop", [("uint8", 255), ("int8", 127)])
def test_a_range_to_the_top_of_a_small_int_ends(target, dtype, stop):
    """for i in ug.range(0, stop, 2): the counter passes `stop` (255 + 1 does not fit in
    uint8) and the loop still ends; the body sees the bounds' dtype."""
    def loop(n):
        total, last = ug.zeros((), "int64"), ug.zeros((), dtype)
        for i in ug.range(0, n, 2):
            total = total + ug.cast(i, "int64")
            last = i
        return total, last

    total, last = run_on(target, ug.function(loop), np.array(stop, dtype))
    assert total.tolist() == sum(range(0, stop, 2))
    assert last.dtype == np.dtype(dtype) and last.tolist() == range(0, stop, 2)[-1]


@pytest.mark.parametrize("target", TARGETS)
def test_uint8_arange_and_randint(target):
    def make():
        return (ug.arange(0, 5, 1.5, dtype="uint8"),
                ug.random.randint((200,), 250, 256, dtype="uint8"))

    ug.manual_seed(3)
    steps, small = run_on(target, ug.function(make))
    # Integer arange as NumPy's (and int8's): the step rounds once, 0, 1, 2, 3 (float64
    # steps rounded would give 0, 1, 3, 4).
    assert steps.dtype == np.uint8 and steps.tolist() == [0, 1, 2, 3]
    assert small.dtype == np.uint8 and set(small.tolist()) == set(range(250, 256))
    ug.manual_seed(3)
    np.testing.assert_array_equal(small, run_on("numpy:eager", make)[1])


@pytest.mark.parametrize("target", TARGETS)
def test_randint_refuses_bounds_past_the_dtype(target):
    # NumPy's Generator.integers refuses them too; a cast would wrap -1 to 255.
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        with pytest.raises(ValueError, match=r"\[-1, 5\) does not fit in uint8 \(\[0, 255\]\)"):
            ug.random.randint((3,), -1, 5, dtype="uint8")
        with pytest.raises(ValueError, match=r"\[0, 129\) does not fit in int8"):
            ug.random.randint((3,), 129, dtype="int8")
        assert ug.random.randint((3,), 128, dtype="int8").dtype == "int8"  # 127 fits
