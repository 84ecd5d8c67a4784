"""The `unigraph` command, run for real in a subprocess inside a temporary project folder:
`run` honours the configuration and its own flags, `backends --check`, `--version`; and a
broken plugin does not take the other backends down."""

import os
import subprocess
import sys
import textwrap

import pytest

import unigraph as ug
from unigraph.errors import BackendError
from unigraph.hookspecs import hookimpl
from unigraph.plugins import (
    backends,
    get_backend,
    load_errors,
    register_plugin,
    unregister_plugin,
)

SCRIPT = textwrap.dedent("""
    import sys
    import unigraph as ug
    print("target", ug.current_target())
    print("argv", sys.argv[1:])
""")


def cli(tmp_path, *args, env=None):
    """Run `unigraph ARGS` in `tmp_path` with a clean unigraph environment."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("UNIGRAPH_")}
    done = subprocess.run([sys.executable, "-m", "unigraph.cli", *args], cwd=tmp_path,
                          env={**clean, **(env or {})}, capture_output=True, text=True,
                          timeout=300)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def project(tmp_path):
    (tmp_path / "script.py").write_text(SCRIPT)
    return tmp_path


def printed_target(stdout) -> str:
    return next(line.split()[1] for line in stdout.splitlines() if line.startswith("target"))


def test_run_uses_the_environment(project):
    rc, out, err = cli(project, "run", "script.py", env={"UNIGRAPH_BACKEND": "torch",
                                                         "UNIGRAPH_MODE": "static"})
    assert rc == 0, err
    assert printed_target(out) == "torch:static"


def test_run_uses_the_config_file(project):
    (project / "unigraph.toml").write_text('backend = "paddle"\nmode = "static"\n')
    rc, out, err = cli(project, "run", "script.py")
    assert rc == 0, err
    assert printed_target(out) == "paddle:static"


def test_run_mode_alone_keeps_the_configured_backend(project):
    rc, out, err = cli(project, "run", "--mode", "static", "script.py",
                       env={"UNIGRAPH_BACKEND": "torch"})
    assert rc == 0, err
    assert printed_target(out) == "torch:static"


@pytest.mark.parametrize("flags", [["--backend", "torch:static"],
                                   ["--backend=torch", "--mode=static"],
                                   ["--backend", "torch", "--mode", "static"]])
def test_run_flags_after_the_file_are_unigraphs(project, flags):
    rc, out, err = cli(project, "run", "script.py", *flags, "--lr", "0.1", "--", "--mode", "x")
    assert rc == 0, err
    assert printed_target(out) == "torch:static"
    assert "argv ['--lr', '0.1', '--mode', 'x']" in out


def test_run_puts_the_scripts_folder_on_the_path(project):
    (project / "sub").mkdir()
    (project / "sub" / "helper.py").write_text("VALUE = 41\n")
    (project / "sub" / "main.py").write_text("import helper\nprint('value', helper.VALUE + 1)\n")
    rc, out, err = cli(project, "run", "sub/main.py")
    assert rc == 0, err
    assert "value 42" in out


def test_run_a_missing_file_is_a_clear_error(project):
    rc, out, err = cli(project, "run", "nosuch.py")
    assert rc == 2
    assert "no such file: 'nosuch.py'" in err and "Traceback" not in err


def test_run_an_unknown_backend_lists_the_registered_ones(project):
    rc, out, err = cli(project, "run", "script.py", "--backend", "nosuch")
    assert rc == 2
    assert "unknown backend 'nosuch'" in err and "torch" in err


def test_version(project):
    rc, out, err = cli(project, "--version")
    assert rc == 0 and out.strip() == f"unigraph {ug.__version__}"


def test_backends_check_imports_each_framework_for_real(project):
    rc, out, err = cli(project, "backends", "--check", env={"UNIGRAPH_PLUGINS": "numpy"})
    assert rc == 0, err
    assert "numpy:static" in out and "available (imported)" in out


def test_unknown_plugin_name_in_the_environment_is_named(project):
    (project / "op.py").write_text("import unigraph as ug\nprint(ug.tensor([1.0]).sum())\n")
    rc, out, err = cli(project, "run", "op.py", env={"UNIGRAPH_PLUGINS": "numpy,nosuch"})
    assert rc != 0
    assert "UNIGRAPH_PLUGINS names 'nosuch'" in err


class RaisingPlugin:
    @hookimpl
    def unigraph_backends(self):
        raise RuntimeError("this plugin is broken")


class WrongResultPlugin:
    @hookimpl
    def unigraph_backends(self):
        return ["not a backend"]


@pytest.mark.parametrize("plugin, message", [(RaisingPlugin(), "this plugin is broken"),
                                             (WrongResultPlugin(), "must return a list")])
def test_a_broken_plugin_does_not_take_the_others_down(plugin, message):
    register_plugin(plugin, name="broken")
    try:
        assert {"numpy", "torch", "tensorflow", "paddle"} <= set(backends())
        assert message in load_errors["broken"]
        with ug.use_backend("numpy"):
            assert ug.tensor([1.0, 2.0]).sum().item() == 3.0
        with pytest.raises(BackendError, match=f"backend 'broken' could not be loaded.*{message}"):
            get_backend("broken")
    finally:
        unregister_plugin(plugin)
    assert "broken" not in load_errors


def test_quirks_lists_the_registry(project):
    from unigraph.quirks import all_quirks

    rc, out, err = cli(project, "quirks")
    assert rc == 0, err
    for name, quirk in all_quirks():
        assert f"[{name}] {quirk.op}" in out


def test_a_reader_that_stops_early_gets_no_traceback(project):
    # `unigraph quirks | head -1`: the reader is gone while the list is printed (here from
    # the start: a pipe whose reading end is closed, so the race is always lost).
    clean = {k: v for k, v in os.environ.items() if not k.startswith("UNIGRAPH_")}
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "unigraph.cli", "quirks"], cwd=project,
                              env=clean, stdout=write_end, stderr=subprocess.PIPE, text=True,
                              timeout=300)
    finally:
        os.close(write_end)
    assert done.stderr == "", done.stderr
    assert done.returncode == 1


@pytest.mark.parametrize("output, marker", [("graph.html", 'data-op="while_loop"'),
                                            ("graph.svg", "<svg"), ("graph.dot", "digraph")])
def test_view_draws_a_scripts_check(project, output, marker):
    (project / "counting.py").write_text(textwrap.dedent("""
        import unigraph as ug

        def counter(a, b):
            return ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))

        CHECKS = {"counter": (counter, (0, 10))}
    """))
    rc, out, err = cli(project, "view", "counting.py:counter", "-o", output)
    assert rc == 0, err
    assert marker in (project / output).read_text()


def test_view_names_the_checks_when_the_name_is_wrong(project):
    (project / "one.py").write_text("CHECKS = {'f': (lambda x: x, (1.0,))}\n")
    rc, out, err = cli(project, "view", "one.py:g", "-o", "x.html")
    assert rc == 2 and "has no check 'g'; its CHECKS are: f" in err


# The precedence table of README's "Choosing the target", row by row: (environment,
# config file name and text, `unigraph run` flags, the target the script sees).
PRECEDENCE = [
    ({}, None, [], "numpy:eager"),
    ({"UNIGRAPH_BACKEND": "torch"}, None, [], "torch:eager"),
    ({"UNIGRAPH_BACKEND": "torch:static"}, None, [], "torch:static"),
    ({"UNIGRAPH_MODE": "static"}, None, [], "numpy:static"),
    ({}, ("unigraph.toml", 'backend = "tensorflow"\nmode = "static"\n'), [],
     "tensorflow:static"),
    ({}, ("pyproject.toml", '[tool.unigraph]\nbackend = "paddle:static"\n'), [],
     "paddle:static"),
    ({"UNIGRAPH_MODE": "eager"}, ("unigraph.toml", 'backend = "tensorflow"\nmode = "static"\n'),
     [], "tensorflow:eager"),
    ({"UNIGRAPH_BACKEND": "torch"},
     ("unigraph.toml", 'backend = "tensorflow"\nmode = "static"\n'), [], "torch:static"),
    ({"UNIGRAPH_MODE": "eager"}, ("pyproject.toml", '[tool.unigraph]\nbackend = "paddle:static"\n'),
     [], "paddle:eager"),
    ({"UNIGRAPH_BACKEND": "torch", "UNIGRAPH_MODE": "static"}, None, ["--backend", "paddle"],
     "paddle:static"),
    ({"UNIGRAPH_BACKEND": "torch"}, ("unigraph.toml", 'mode = "static"\n'),
     ["--backend", "tensorflow:function"], "tensorflow:function"),
    ({}, ("pyproject.toml", '[project]\nname = "x"\n'), [], "numpy:eager"),  # no table: fine
]


@pytest.mark.parametrize("env, config, flags, expected", PRECEDENCE)
def test_the_precedence_table(project, env, config, flags, expected):
    if config is not None:
        (project / config[0]).write_text(config[1])
    rc, out, err = cli(project, "run", *flags, "script.py", env=env)
    assert rc == 0, err
    assert printed_target(out) == expected


def test_the_scripts_own_set_backend_outranks_the_flag(project):
    (project / "own.py").write_text(
        "import unigraph as ug\nug.set_backend('numpy:static')\n"
        "print('target', ug.current_target())\n")
    rc, out, err = cli(project, "run", "--backend", "torch", "own.py")
    assert rc == 0, err
    assert printed_target(out) == "numpy:static"


@pytest.mark.parametrize("env, config, message", [
    ({"UNIGRAPH_BACKEND": "nosuch"}, None,
     "the environment variable UNIGRAPH_BACKEND = 'nosuch': unknown backend 'nosuch'"),
    ({"UNIGRAPH_BACKEND": "torch", "UNIGRAPH_MODE": "weird"}, None,
     "the environment variable UNIGRAPH_MODE = 'weird': backend 'torch' has no mode 'weird'"),
    ({}, ("unigraph.toml", 'backend = "nosuch"\n'), "unigraph.toml: backend = 'nosuch'"),
    ({}, ("pyproject.toml", "[tool.unigraph\nbackend = 1\n"), "pyproject.toml: not valid TOML"),
    ({"UNIGRAPH_BACKEND": "torch:static", "UNIGRAPH_MODE": "eager"}, None, "give the mode once"),
])
def test_a_bad_setting_names_where_it_came_from(project, env, config, message):
    if config is not None:
        (project / config[0]).write_text(config[1])
    (project / "op.py").write_text("import unigraph as ug\nprint(ug.tensor([1.0]).sum())\n")
    rc, out, err = cli(project, "run", "op.py", env=env)
    assert rc != 0
    assert message in err, err[-1500:]
    assert "Traceback" not in err


@pytest.mark.parametrize("spelling", ["use_backend('torch:static')", "set_backend('torch:static')"])
def test_the_target_spelling_works_in_python(spelling):
    from unigraph import config

    saved = config._global_target
    try:
        if spelling.startswith("use"):
            with ug.use_backend("torch:static"):
                assert str(ug.current_target()) == "torch:static"
        else:
            ug.set_backend("torch:static")
            assert str(ug.current_target()) == "torch:static"
    finally:
        config._global_target = saved


def test_check_a_saved_artifact_against_its_entry(project):
    (project / "counting.py").write_text(textwrap.dedent("""
        import unigraph as ug

        def counter(a, b):
            return ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))

        CHECKS = {"counter": (counter, (0, 10))}
    """))
    rc, out, err = cli(project, "export", "counting.py:counter", "--format", "torch",
                       "-o", "counter.pt2")
    assert rc == 0, err
    rc, out, err = cli(project, "check", "counter.pt2")
    assert rc == 0, err
    assert "agrees with the float64 reference" in out
