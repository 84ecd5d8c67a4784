"""The eager == static corpus: every `Program` in `tests/corpus/` on every target.

A program either returns the same values on every target (same structure and dtypes,
values within its tolerance of numpy:eager's) or raises the same error class on every
target, with a message matching its `match`. Each corpus module (`frontend`, `state`,
`autograph`, ...) defines `PROGRAMS`; the ones that exist are collected.
"""

from __future__ import annotations

import importlib
import re

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph import pytree
from unigraph.config import Target

CORPUS_MODULES = ("frontend", "state", "autograph")
REFERENCE = "numpy:eager"


def _programs() -> list:
    programs = []
    for name in CORPUS_MODULES:
        try:
            module = importlib.import_module(f"corpus.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"corpus.{name}":
                raise  # a corpus module that exists but fails to import is a failure
            continue
        programs.extend((name, program) for program in module.PROGRAMS)
    return programs


PROGRAMS = _programs()


def test_program_names_are_unique():
    names = [f"{module}.{program.name}" for module, program in PROGRAMS]
    assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]


def _as_arrays(result) -> tuple:
    """(structure, [NumPy arrays]) of a program's result."""
    leaves, treedef = pytree.flatten(
        result, lambda x: isinstance(x, ug.Tensor | np.ndarray | np.generic | bool | int | float))
    arrays = [np.asarray(x.numpy() if isinstance(x, ug.Tensor) else x) for x in leaves]
    return pytree.describe(treedef), arrays


def _run(program, target: str):
    """('ok', structure, arrays) or ('error', exception)."""
    t = Target.parse(target)
    ug.manual_seed(0)  # the same weights and random draws on every target
    try:
        with ug.use_backend(t.backend, t.mode):
            fn = program.make()
            result = fn(*program.args, **program.kwargs)
            return ("ok", *_as_arrays(result))
    except Exception as error:  # noqa: BLE001 (the outcome under test)
        return ("error", error)


_reference_cache: dict = {}


def _reference(module: str, program):
    key = f"{module}.{program.name}"
    if key not in _reference_cache:
        _reference_cache[key] = _run(program, REFERENCE)
    return _reference_cache[key]


def _check_error(program, target: str, outcome) -> None:
    if outcome[0] != "error":
        pytest.fail(f"{program.name} on {target}: expected {program.raises.__name__}, but it "
                    f"returned {outcome[2]}")
    error = outcome[1]
    if not isinstance(error, program.raises):
        raise AssertionError(
            f"{program.name} on {target}: expected {program.raises.__name__}, got "
            f"{type(error).__name__}: {error}") from error
    if program.match and not re.search(program.match, str(error)):
        raise AssertionError(
            f"{program.name} on {target}: the {type(error).__name__} message does not match "
            f"{program.match!r}: {error}") from error


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("module,program", PROGRAMS,
                         ids=[f"{module}.{program.name}" for module, program in PROGRAMS])
def test_program_means_the_same_on_every_target(module, program, target):
    outcome = _run(program, target)
    if program.raises is not None:
        _check_error(program, target, outcome)
        return
    if outcome[0] == "error":
        raise AssertionError(
            f"{program.name} on {target} raised {type(outcome[1]).__name__}: {outcome[1]}"
        ) from outcome[1]
    reference = _reference(module, program)
    if reference[0] == "error":
        pytest.fail(f"{program.name} fails on the reference target {REFERENCE}: "
                    f"{type(reference[1]).__name__}: {reference[1]}")
    _, structure, arrays = outcome
    _, want_structure, wants = reference
    assert structure == want_structure, f"{program.name} on {target}: result structure"
    for index, (got, want) in enumerate(zip(arrays, wants)):
        where = f"{program.name} on {target}, output {index}"
        assert got.dtype == want.dtype, f"{where}: dtype {got.dtype}, {REFERENCE} {want.dtype}"
        assert got.shape == want.shape, f"{where}: shape {got.shape}, {REFERENCE} {want.shape}"
        np.testing.assert_allclose(got, want, rtol=program.rtol, atol=program.atol,
                                   err_msg=where)
    if program.expect is not None:  # hand-computed: the reference itself is checked too
        _, expected = _as_arrays(program.expect)
        assert len(expected) == len(arrays), f"{program.name}: {len(arrays)} outputs"
        for index, (got, want) in enumerate(zip(arrays, expected)):
            np.testing.assert_allclose(got, want, rtol=program.rtol, atol=program.atol,
                                       err_msg=f"{program.name} on {target}, output {index} "
                                       "against the hand-computed value")
