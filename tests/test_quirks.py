"""Every framework quirk a backend routes around still behaves as written down.

A failing pin means the framework changed: look at the quirk's workaround (it may no longer
be needed, or may now be wrong) and update the record.
"""

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
