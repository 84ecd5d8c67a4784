"""Every framework quirk a backend routes around still behaves as written down.

A failing pin means the framework changed: look at the quirk's workaround (it may no longer
be needed, or may now be wrong) and update the record.
"""

import numpy as np
import pytest

from unigraph.quirks import Quirk, all_quirks

QUIRKS = all_quirks()


def test_every_quirk_is_described():
    for name, quirk in QUIRKS:
        assert isinstance(quirk, Quirk), name
        for field in ("op", "framework", "versions", "behaviour", "workaround"):
            assert getattr(quirk, field).strip(), f"{name}: {quirk} has an empty {field}"


@pytest.mark.parametrize("quirk", [q for _, q in QUIRKS],
                         ids=[f"{n}-{q.op}-{i}" for i, (n, q) in enumerate(QUIRKS)])
def test_native_behaviour_still_holds(quirk):
    assert quirk.pin() is True, (
        f"the framework no longer behaves as recorded: {quirk}; review the workaround")


def test_the_readme_lists_every_quirk():
    from pathlib import Path

    readme = Path(__file__).resolve().parents[1] / "README.md"
    text = readme.read_text(encoding="utf-8").replace("\\|", "|")
    missing = [str(quirk) for _, quirk in QUIRKS if quirk.behaviour not in text]
    assert not missing, "README's Framework quirks table is missing: " + "; ".join(missing)


def _paddle_quirks():
    from unigraph.plugins import backends

    if "paddle" not in backends():
        pytest.skip("paddle is not loaded")
    from unigraph_paddle import quirks

    return quirks


def test_the_sgd_pin_rounds_exactly_and_holds_for_either_cpu_kernel(monkeypatch):
    """The sgd_ record's pin holds for a kernel rounding p - lr * g as mul then sub at every
    size (an AMD EPYC with AVX-512), or as one FMA but on a float32 p of a multiple of 8
    elements (the x86-64 CPUs it was first recorded on); it fails where a multiple of 8 is
    rounded as an FMA (what unigraph's `sgd_` relies on) or an update is neither rounding;
    and its exact rounding is right where going through float64 rounds twice."""
    from fractions import Fraction

    quirks = _paddle_quirks()
    # 1 + 2**-24 + 2**-60: float64 rounds it to the float32 midpoint 1 + 2**-24, which
    # float32 then rounds to 1 (ties to even); the nearest float32 is 1 + 2**-23.
    exact = Fraction(1) + Fraction(1, 2**24) + Fraction(1, 2**60)
    assert np.float32(float(exact)) == 1.0
    assert quirks._rounded_once(exact, np.float32) == np.float32(1 + 2**-23)
    assert quirks._rounded_once(Fraction(1, 3), np.float64) == 1 / 3

    def fma(p, lr, g):
        return np.array([quirks._rounded_once(Fraction(float(a)) - Fraction(float(lr))
                                              * Fraction(float(b)), p.dtype)
                         for a, b in zip(p, g)])

    def fma_but_multiples_of_8(p, lr, g):
        return p - lr * g if p.dtype == np.float32 and p.size % 8 == 0 else fma(p, lr, g)

    def twice_rounded(p, lr, g):  # through float64: neither rounding on some elements
        return (p.astype(np.float64) - lr.astype(np.float64) * g).astype(p.dtype) if (
            p.dtype == np.float32) else fma(p, lr, g) + np.finfo(p.dtype).eps

    kernels = {"mul then sub": (lambda p, lr, g: p - lr * g, True),
               "fma but multiples of 8": (fma_but_multiples_of_8, True),
               "fma": (fma, False), "neither": (twice_rounded, False)}
    for name, (kernel, holds) in kernels.items():
        monkeypatch.setattr(quirks, "_sgd_kernel_results",
                            lambda paddle, p, lr, g, kernel=kernel: [kernel(p, lr, g)] * 2)
        assert quirks._sgd_rounds_once_and_as_mul_sub_on_multiples_of_8() is holds, name
