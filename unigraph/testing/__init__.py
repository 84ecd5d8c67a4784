"""Helpers for users' own test suites.

`assert_agree(fn, *inputs)` fails a test, with the agreement table as the message, unless
every target agrees with the float64 reference. The pytest plugin (`pytest11` entry point,
`unigraph.testing.pytest_plugin`) adds a `target` fixture parametrized over the available
targets and the option `--unigraph-targets=`.

>>> from unigraph.testing import assert_agree
>>> def test_model():
...     assert_agree(model, x)
"""

from __future__ import annotations


def assert_agree(fn, *inputs, **options):
    """`ug.check(fn, *inputs, **options).assert_ok()`; returns the report.

    >>> assert_agree(ug.nn.Linear(4, 2), np.ones((3, 4)), targets="numpy")
    """
    from unigraph.checking import check

    return check(fn, *inputs, **options).assert_ok()


__all__ = ["assert_agree"]
