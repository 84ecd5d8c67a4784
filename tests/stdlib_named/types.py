"""A user's module named `types`, as a standard library module is: autograph decides by the
file's place that this is the user's code (tests/test_autograph_callables.py loads it under
the name `types`, without putting it in `sys.modules`)."""

import unigraph as ug


def double_or_negate(x):
    if ug.sum(x) > 0.0:  # a tensor condition: a cond node on static targets
        return x * 2.0
    return -x
