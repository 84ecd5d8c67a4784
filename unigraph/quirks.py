"""The framework behaviours unigraph routes around, each written down once.

A backend lists its quirks as `Quirk` records (`Backend.quirks()`, usually from its package's
`quirks.py`): the op it affects, the framework and version it was seen on, what the framework
does, how the lowering routes around it, and `pin`, a function that runs the framework's own
call and returns True while the behaviour still holds. `tests/test_quirks.py` runs every pin,
so a framework upgrade that fixes or changes a quirk fails a test and the workaround can be
reviewed. `unigraph quirks` prints the registry.

    Quirk(op="log_softmax", framework="paddle", versions="3.3.1",
          behaviour="paddle.nn.functional.log_softmax saturates: [1000, 0] -> [0, -64]",
          workaround="computed as x - max - log(sum(exp(x - max)))",
          pin=lambda: ...)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Quirk:
    """One framework behaviour a lowering routes around. See the module docstring."""

    op: str
    framework: str
    versions: str
    behaviour: str
    workaround: str
    pin: Callable[[], bool]

    def __str__(self):
        return (f"{self.framework} {self.versions}, {self.op}: {self.behaviour} "
                f"(unigraph: {self.workaround})")


def run_python(code: str, timeout: float = 300):
    """Run `code` in a fresh Python interpreter; the `subprocess.CompletedProcess`. For pins
    whose framework behaviour is a crash (a signal) that must not take the tests down."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=timeout)


def all_quirks() -> list:
    """(backend name, Quirk) for every registered backend's quirks (no framework imported)."""
    from unigraph.plugins import backends

    return [(name, quirk) for name, backend in sorted(backends().items())
            for quirk in backend.quirks()]
