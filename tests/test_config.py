"""Target selection: precedence, context isolation, errors that list what is installed."""

import asyncio
import threading

import pytest

import unigraph as ug
from unigraph.config import Target, current_target
from unigraph.errors import BackendError


@pytest.fixture(autouse=True)
def _reread_environment_and_files():
    """Each test changes the environment or the working directory: read them afresh, and
    leave the next test a fresh read too."""
    from unigraph import config

    config.reload()
    yield
    config.reload()


def test_environment_is_read_once_until_reload(monkeypatch, tmp_path):
    from unigraph import config

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("UNIGRAPH_BACKEND", raising=False)
    assert current_target() == Target("numpy", "eager")
    monkeypatch.setenv("UNIGRAPH_BACKEND", "numpy")
    monkeypatch.setenv("UNIGRAPH_MODE", "static")
    assert current_target() == Target("numpy", "eager")  # cached: eager ops ask every time
    config.reload()
    assert current_target() == Target("numpy", "static")


def test_default_is_numpy_eager(monkeypatch, tmp_path):
    monkeypatch.delenv("UNIGRAPH_BACKEND", raising=False)
    monkeypatch.chdir(tmp_path)
    assert current_target() == Target("numpy", "eager")


def test_precedence_explicit_context_global_env_file(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.unigraph]\nbackend = "numpy"\nmode = "static"\n')
    from unigraph import config

    config.reload()
    assert current_target() == Target("numpy", "static")  # from pyproject.toml
    monkeypatch.setenv("UNIGRAPH_BACKEND", "numpy")
    monkeypatch.setenv("UNIGRAPH_MODE", "eager")
    config.reload()
    assert current_target() == Target("numpy", "eager")  # env beats the file
    monkeypatch.setattr(config, "_global_target", Target("numpy", "static"))
    assert current_target() == Target("numpy", "static")  # set_backend beats env
    with ug.use_backend("numpy", "eager"):
        assert current_target() == Target("numpy", "eager")  # context beats set_backend
        assert current_target("numpy:static") == Target("numpy", "static")  # explicit wins
    config.reload()


def test_unigraph_toml_is_read(monkeypatch, tmp_path):
    monkeypatch.delenv("UNIGRAPH_BACKEND", raising=False)
    (tmp_path / "unigraph.toml").write_text('backend = "numpy"\nmode = "static"\n')
    sub = tmp_path / "deeper"
    sub.mkdir()
    monkeypatch.chdir(sub)
    from unigraph import config

    config.reload()
    assert current_target() == Target("numpy", "static")
    config.reload()


def test_set_backend_then_restore():
    from unigraph import config

    before = config._global_target
    try:
        ug.set_backend("numpy", mode="static")
        assert current_target() == Target("numpy", "static")
    finally:
        config._global_target = before


def test_use_backend_does_not_leak_into_threads_or_tasks(monkeypatch, tmp_path):
    monkeypatch.delenv("UNIGRAPH_BACKEND", raising=False)
    monkeypatch.delenv("UNIGRAPH_MODE", raising=False)
    monkeypatch.chdir(tmp_path)
    seen = {}

    def worker():
        seen["thread"] = current_target()

    async def task():
        seen["task"] = current_target()

    with ug.use_backend("numpy", "static"):
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    asyncio.run(task())
    assert seen["thread"] == Target("numpy", "eager")  # the thread did not inherit the block
    assert seen["task"] == Target("numpy", "eager")


def test_unknown_backend_lists_registered_ones():
    with pytest.raises(BackendError, match="unknown backend 'jax'; registered backends: .*numpy"):
        ug.use_backend("jax").__enter__()


def test_unknown_mode_lists_modes():
    with pytest.raises(BackendError, match="has no mode 'lazy'; its modes are: eager, static"):
        ug.set_backend("numpy", mode="lazy")


def test_missing_framework_names_the_extra():
    from unigraph.backend import Backend

    class Ghost(Backend):
        name = "ghost"
        framework = "no_such_framework_module"
        extra = "ghost"

    available, reason = Ghost().status()
    assert not available
    assert "pip install 'unigraph[ghost]'" in reason


def test_target_parse():
    assert Target.parse("paddle:static") == Target("paddle", "static")
    assert Target.parse("torch") == Target("torch", "eager")
    assert str(Target("tensorflow", "function")) == "tensorflow:function"
