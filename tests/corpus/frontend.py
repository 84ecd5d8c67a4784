"""Corpus programs for the frontend: control flow, assign, Module state, static arguments,
recursion, loop limits, predicates, dtype mixes (see tests/corpus/__init__.py)."""

from __future__ import annotations

import unigraph as ug
from corpus import Program


def _counter():
    @ug.function
    def counter(a, b):
        return ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))
    return counter


PROGRAMS = [
    Program("counter", _counter, (0, 10), expect=(20, 20)),
]
