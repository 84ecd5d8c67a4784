"""A public function and a submodule must not share a name: importing `unigraph.x` sets the
attribute `unigraph.x` to the module, so `ug.x(...)` would stop being callable (issue 11
item 1 was `ug.check`). Checked for every public name, after importing every submodule."""

import subprocess
import sys

CODE = r"""
import importlib, pkgutil, types
import unigraph as ug

# Names bound when unigraph is imported (not the lazy ones: those are checked below).
eager = {n: v for n, v in vars(ug).items()
         if not n.startswith("_") and not isinstance(v, types.ModuleType)}
for info in pkgutil.walk_packages(ug.__path__, "unigraph."):  # every submodule, first
    if not info.name.endswith("__main__"):
        importlib.import_module(info.name)
changed = [n for n, v in eager.items() if getattr(ug, n) is not v]
for name, (module, attr) in ug._LAZY.items():
    if attr is not None and isinstance(getattr(ug, name), types.ModuleType):
        changed.append(name)
print("changed:", sorted(changed))
print("checked:", len(eager) + len(ug._LAZY))
"""


def test_no_public_name_is_shadowed_by_a_submodule():
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "changed: []" in done.stdout, done.stdout
    checked = int(done.stdout.split("checked:")[1])
    assert checked > 100  # the op functions, check, view, save, load, ...
