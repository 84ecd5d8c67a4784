"""Helpers that tests/test_autograph_calls.py imports: user code in another module, called
from a `@ug.function` in that file (autograph converts it too)."""

import unigraph as ug


def halve_while_large(x):
    while ug.sum(x) > 4.0:  # a tensor condition: a while_loop on static targets
        x = x * 0.5
    return x
