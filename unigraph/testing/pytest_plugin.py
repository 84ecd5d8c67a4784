"""The unigraph pytest plugin (loaded through the `pytest11` entry point).

* a `target` fixture, parametrized over the available targets: a test that takes it runs
  once per target, with that target active (`ug.use_backend`) and the `ug.Target` as value;
* `--unigraph-targets=numpy,torch:static` chooses the targets (targets, or backends meaning
  all their modes; default: every registered backend that is installed, every mode).

    def test_counter(target):
        assert counter(0, 10)[0].item() == 20      # runs on every target

It imports unigraph only when a test asks for `target`, so it costs nothing elsewhere.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("unigraph")
    group.addoption(
        "--unigraph-targets", default=None, metavar="TARGETS",
        help="comma-separated unigraph targets (torch:static) or backends (torch) for the "
             "`target` fixture; default: every available target",
    )


def _already_parametrized(metafunc) -> bool:
    for marker in metafunc.definition.iter_markers("parametrize"):
        names = marker.args[0] if marker.args else marker.kwargs.get("argnames", "")
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",")]
        if "target" in names:
            return True
    return False


def _is_ours(metafunc) -> bool:
    """True when `target` resolves to this plugin's fixture, not a project's own."""
    definitions = getattr(metafunc, "_arg2fixturedefs", {}).get("target")
    if not definitions:
        return False
    return getattr(definitions[-1].func, "__module__", "") == __name__


def pytest_generate_tests(metafunc):
    if "target" not in metafunc.fixturenames or _already_parametrized(metafunc):
        return
    if not _is_ours(metafunc):
        return
    from unigraph.checking import resolve_targets

    chosen, _ = resolve_targets(metafunc.config.getoption("unigraph_targets") or "all")
    metafunc.parametrize("target", chosen, ids=[str(t) for t in chosen], indirect=True)


@pytest.fixture
def target(request):
    """The unigraph target this test runs on (active for the test's duration)."""
    from unigraph.config import Target, use_backend

    chosen = getattr(request, "param", None)
    if chosen is None:
        pytest.skip("no unigraph target: the `target` fixture is parametrized by the plugin")
    chosen = chosen if isinstance(chosen, Target) else Target.parse(str(chosen))
    with use_backend(chosen.backend, chosen.mode):
        yield chosen
