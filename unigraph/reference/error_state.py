"""NumPy's floating-point error state (`np.errstate`), read and set without its context
manager by the NumPy engine's hot paths: a generated loop of integer ops ignores overflow,
the cross-entropy kernel ignores `invalid` for one subtraction, mean's gradient asks
whether underflow is ignored. NumPy >= 2 keeps the state in a context variable (`STATE`,
None on another NumPy layout: callers then use `np.errstate`); a state is an immutable
object, so the derived states and answers are cached per state.

>>> token = STATE.set(ignoring("over"))
>>> try:
...     np.int8(127) + np.int8(1)   # no RuntimeWarning
... finally:
...     STATE.reset(token)
"""

from __future__ import annotations

import numpy as np

try:  # NumPy >= 2: the error state is a context variable
    from numpy._core._ufunc_config import _extobj_contextvar as STATE
    from numpy._core._ufunc_config import _make_extobj
except ImportError:  # pragma: no cover - another NumPy layout
    STATE = _make_extobj = None

__all__ = ["STATE", "ignores", "ignoring", "last_ignoring"]

_IGNORING: dict = {}  # (a state, a kind) -> that state with the kind ignored
_IGNORES: dict = {}  # (a state, a kind) -> whether the state ignores the kind
_LAST: dict = {}  # a kind -> [(a state, that state with the kind ignored)]: the last answer


def ignoring(kind: str):
    """The current error state with `kind` ("over", "invalid", ...) ignored, the other
    settings (and a call or log set with np.seterrcall) the caller's."""
    current = STATE.get()
    key = (current, kind)
    state = _IGNORING.get(key)
    if state is None:
        if len(_IGNORING) > 64:
            _IGNORING.clear()
        state = _IGNORING[key] = _make_extobj(**{kind: "ignore"})
    last = _LAST.get(kind)
    if last is not None and last[0][0] is not current:
        last[0] = (current, state)  # (one tuple, replaced whole: a reader sees a pair)
    return state


def last_ignoring(kind: str) -> list:
    """A one-element list holding `(a state, ignoring(kind) in that state)`, the last
    answer of `ignoring(kind)` (kept up to date from this call on): generated code reads
    it where a call of `ignoring` would cost ~1.5k instructions (a state is an immutable
    object, so the same object means the same answer; a state never seen is no answer):

    >>> LAST = last_ignoring("over")
    >>> m = LAST[0]
    >>> IGNORE = m[1] if STATE.get() is m[0] else ignoring("over")
    """
    last = _LAST.get(kind)
    if last is None:
        last = _LAST[kind] = [(object(), None)]
    return last


def ignores(kind: str) -> bool:
    """Whether the current error state ignores `kind` (False where `STATE` is None)."""
    if STATE is None:  # pragma: no cover - another NumPy layout
        return False
    key = (STATE.get(), kind)
    answer = _IGNORES.get(key)
    if answer is None:
        if len(_IGNORES) > 64:
            _IGNORES.clear()
        answer = _IGNORES[key] = np.geterr()[kind] == "ignore"
    return answer
