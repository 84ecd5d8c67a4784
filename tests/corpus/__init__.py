"""The eager == static corpus: small programs that must mean the same on every target.

Each module in this package defines `PROGRAMS`, a list of `Program`s;
`tests/test_eager_static_corpus.py` runs every program on every target and checks that
either every target returns the same values (within tolerance of numpy:eager's float64
answer) or every target raises the same error class, with a message that matches `match`
(typically the user's file and line).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Program:
    """One corpus case.

    name:    a short id (unique within the corpus)
    make:    a zero-argument callable that builds the function to run, called afresh on
             each target (so `@ug.function` caches, Modules and parameters are never
             shared between targets)
    args:    the arguments, as Python numbers, lists or NumPy arrays (converted by the
             function itself or by `@ug.function`)
    raises:  None if the program must run, else the error class every target must raise
    match:   a regular expression the error message must contain (e.g. r"corpus/cf.py:\\d+")
    kwargs:  keyword arguments for the call
    expect:  None, or the hand-computed result (same nesting as the result; numbers or
             arrays): every target, numpy:eager included, must match it
    rtol, atol: the tolerance of a value against numpy:eager's (and against `expect`)
    """

    name: str
    make: Callable
    args: tuple = ()
    raises: type | None = None
    match: str = ""
    kwargs: dict = field(default_factory=dict)
    expect: object = None
    rtol: float = 1e-5
    atol: float = 1e-6
