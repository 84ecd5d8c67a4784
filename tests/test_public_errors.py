"""The errors and warnings README names are reachable where it names them (`ug.X`), and are
what every target raises: a user can catch them without importing unigraph's modules.

README says `ug.ControlFlowShapeError` (ensure_shape, cond/while_loop shape checks), which
`unigraph` did not export (AttributeError); `ConfigError`, `ConfigWarning` and
`WeightFileError` are named without a module.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import FORWARD_TARGETS

import unigraph as ug
from unigraph import errors, weights
from unigraph.config import Target


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_ensure_shape_raises_ug_control_flow_shape_error(target):
    t = Target.parse(target)
    checked = ug.function(lambda x: ug.ensure_shape(x, (None, 3)) * 2.0,
                          input_spec=[ug.Spec((None, None), "float32")])
    with ug.use_backend(t.backend, t.mode):
        with pytest.raises(ug.ControlFlowShapeError, match=r"shape \[2, 4\]") as caught:
            checked(np.ones((2, 4), np.float32))
        np.testing.assert_array_equal(checked(np.ones((2, 3), np.float32)).numpy(),
                                      np.full((2, 3), 2.0))
    assert isinstance(caught.value, ug.ControlFlowError) and isinstance(caught.value,
                                                                         ug.ShapeError)


def test_the_named_errors_are_unigraph_s_own():
    assert ug.ControlFlowShapeError is errors.ControlFlowShapeError
    assert ug.ConfigError is errors.ConfigError
    assert ug.ConfigWarning is errors.ConfigWarning
    assert ug.WeightFileError is weights.WeightFileError


def test_a_missing_weight_file_is_ug_weight_file_error(tmp_path):
    with pytest.raises(ug.WeightFileError, match="missing.safetensors"):
        ug.nn.Linear(2, 2).load(tmp_path / "missing.safetensors")


def test_an_unknown_config_key_warns_ug_config_warning(tmp_path, monkeypatch):
    from unigraph import config

    (tmp_path / "unigraph.toml").write_text('mdoe = "static"\n')
    monkeypatch.chdir(tmp_path)
    for name in ("UNIGRAPH_BACKEND", "UNIGRAPH_MODE"):
        monkeypatch.delenv(name, raising=False)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            config.reload()
            str(ug.current_target())
        assert any(issubclass(w.category, ug.ConfigWarning) and "mode" in str(w.message)
                   for w in caught), [str(w.message) for w in caught]
    finally:
        monkeypatch.undo()
        config.reload()
