"""torch:static writes a temporary's memory with the next op that reads it (`fusions`'s
("in_place",) role: Adam's step makes 7 full-size tensors fewer a parameter). A temporary
read twice, or returned, keeps its numbers. The results are bit for bit NumPy's float32 on
all 9 targets (only IEEE-exact ops here: products, sums, differences, quotients by a 0-d)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

F32 = np.float32


def _inputs():
    rng = np.random.default_rng(9)
    a = (rng.standard_normal((40, 30)) * 3).astype(F32)
    b = rng.standard_normal((40, 30)).astype(F32)
    return a, b, np.asarray(0.37, F32)


def _chain(a, b, s):
    kept = a + b  # returned, and read twice: never written
    t = ((a * s + b) / s - a) * kept
    return t, kept, kept * s


chain = ug.function(_chain)


def _by_hand(a, b, s):
    kept = a + b
    return ((a * s + b) / s - a) * kept, kept, kept * s


@pytest.mark.parametrize("target", TARGETS)
def test_chain_of_temporaries_bit_for_bit(target):
    got = run_on(target, chain, *_inputs())
    for g, w in zip(got, _by_hand(*_inputs())):
        assert g.dtype == np.float32
        np.testing.assert_array_equal(g.view(np.uint32), w.view(np.uint32))


def test_torch_static_writes_the_temporaries(monkeypatch):
    """(a * s + b) / s - a: the sum, the quotient and the difference are written into the
    temporary before them; `* kept` too (its first operand is the difference); `kept` (an
    output, read twice) and `a * s` (made from inputs only: nothing to write into) not."""
    from unigraph_torch import fusions

    calls = []
    for name, call in list(fusions.IN_PLACE_CALLS.items()):
        def counted(x, *rest, _call=call, _name=name):
            out = _call(x, *rest)
            calls.append((_name, out is x))
            return out

        monkeypatch.setitem(fusions.IN_PLACE_CALLS, name, counted)

    fresh_chain = ug.function(_chain)  # compiled now, with the counting calls
    got = run_on("torch:static", fresh_chain, *_inputs())
    for g, w in zip(got, _by_hand(*_inputs())):
        np.testing.assert_array_equal(g.view(np.uint32), w.view(np.uint32))
    assert calls == [("op_in_place_add", True), ("op_in_place_div", True),
                     ("op_in_place_sub", True), ("op_in_place_mul", True)]

