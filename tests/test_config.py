"""Target selection: precedence, context isolation, errors that list what is installed."""

import asyncio
import threading

import numpy as np
import pytest
from conftest import FORWARD_TARGETS

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


# -- config keys ------------------------------------------------------------------------------
def test_a_misspelt_key_warns_naming_the_file_the_key_and_the_known_keys(monkeypatch, tmp_path):
    from unigraph import config
    from unigraph.errors import ConfigWarning

    monkeypatch.delenv("UNIGRAPH_BACKEND", raising=False)
    monkeypatch.delenv("UNIGRAPH_MODE", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "unigraph.toml").write_text('backend = "numpy"\nmdoe = "static"\n')
    config.reload()
    with pytest.warns(ConfigWarning) as caught:
        assert current_target() == Target("numpy", "eager")  # the misspelt mode is ignored
    message = str(caught[0].message)
    assert str(tmp_path / "unigraph.toml") in message
    assert "'mdoe' (did you mean 'mode'?)" in message
    assert "backend, mode, max_loop_iterations" in message


def test_pyproject_unknown_key_names_the_table(monkeypatch, tmp_path):
    from unigraph import config
    from unigraph.errors import ConfigWarning

    monkeypatch.delenv("UNIGRAPH_BACKEND", raising=False)
    monkeypatch.delenv("UNIGRAPH_MODE", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.unigraph]\nbackend = "numpy"\nmode = "static"\n'
        'max_loop_iteration = 5\n')
    config.reload()
    with pytest.warns(ConfigWarning, match=r"pyproject\.toml: unknown unigraph config key "
                                           r"\[tool\.unigraph\] 'max_loop_iteration' "
                                           r"\(did you mean 'max_loop_iterations'\?\)"):
        assert current_target() == Target("numpy", "static")


def test_known_keys_do_not_warn(monkeypatch, tmp_path, recwarn):
    from unigraph import config

    monkeypatch.delenv("UNIGRAPH_BACKEND", raising=False)
    monkeypatch.delenv("UNIGRAPH_MAX_LOOP_ITERATIONS", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "unigraph.toml").write_text(
        'backend = "numpy"\nmode = "static"\nmax_loop_iterations = 1_000\n')
    config.reload()
    assert current_target() == Target("numpy", "static")
    assert config.max_loop_iterations() == 1000
    assert not [w for w in recwarn if "unigraph" in str(w.message)]


def test_max_loop_iterations_precedence_and_default(monkeypatch, tmp_path):
    from unigraph import config

    monkeypatch.delenv("UNIGRAPH_MAX_LOOP_ITERATIONS", raising=False)
    monkeypatch.chdir(tmp_path)
    config.reload()
    assert config.max_loop_iterations() == 10_000_000
    (tmp_path / "unigraph.toml").write_text("max_loop_iterations = 250\n")
    assert config.max_loop_iterations() == 10_000_000  # read once
    config.reload()
    assert config.max_loop_iterations() == 250
    monkeypatch.setenv("UNIGRAPH_MAX_LOOP_ITERATIONS", "1_000")
    config.reload()
    assert config.max_loop_iterations() == 1000  # the environment beats the file


@pytest.mark.parametrize("env, text, message", [
    ("0", None, r"environment variable UNIGRAPH_MAX_LOOP_ITERATIONS='0' is not a positive "
                r"integer; set e\.g\."),
    ("lots", None, r"UNIGRAPH_MAX_LOOP_ITERATIONS='lots'"),
    (None, "max_loop_iterations = -3\n", r"unigraph\.toml: max_loop_iterations = -3 is not a "
                                         r"positive integer"),
    (None, 'max_loop_iterations = "100"\n', r"max_loop_iterations = '100' is not a positive"),
    (None, "max_loop_iterations = 1.5e6\n", r"max_loop_iterations = 1500000.0 is not"),
    (None, "max_loop_iterations = true\n", r"max_loop_iterations = True is not"),
])
def test_bad_max_loop_iterations_names_where_it_came_from(monkeypatch, tmp_path, env, text,
                                                          message):
    from unigraph import config
    from unigraph.errors import ConfigError

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("UNIGRAPH_MAX_LOOP_ITERATIONS", raising=False)
    if env is not None:
        monkeypatch.setenv("UNIGRAPH_MAX_LOOP_ITERATIONS", env)
    if text is not None:
        (tmp_path / "unigraph.toml").write_text(text)
    config.reload()
    with pytest.raises(ConfigError, match=message):
        config.max_loop_iterations()


def test_bad_backend_value_and_bad_toml_name_the_file(monkeypatch, tmp_path):
    from unigraph import config
    from unigraph.errors import ConfigError

    monkeypatch.delenv("UNIGRAPH_BACKEND", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "unigraph.toml").write_text("backend = 3\n")
    config.reload()
    with pytest.raises(ConfigError, match=r"unigraph\.toml: backend = 3 must be a non-empty"):
        current_target()
    (tmp_path / "unigraph.toml").write_text("backend = numpy\n")
    config.reload()
    with pytest.raises(ConfigError, match=r"unigraph\.toml: not valid TOML"):
        current_target()


def test_environment_mode_beats_a_file_that_names_only_the_backend(monkeypatch, tmp_path):
    from unigraph import config

    monkeypatch.delenv("UNIGRAPH_BACKEND", raising=False)
    monkeypatch.setenv("UNIGRAPH_MODE", "static")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "unigraph.toml").write_text('backend = "numpy"\n')
    config.reload()
    assert current_target() == Target("numpy", "static")


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_target_object_chooses_the_target(target):
    # The pytest plugin's `target` fixture gives a ug.Target: it is a target spelling too.
    chosen = ug.Target.parse(target)
    with ug.use_backend(chosen):
        assert current_target() == chosen
        np.testing.assert_array_equal((ug.tensor([1.0, 2.0]) * 3.0).numpy(), [3.0, 6.0])
    from unigraph import config

    before = config._global_target
    try:
        ug.set_backend(chosen)
        assert current_target() == chosen
    finally:
        config._global_target = before
