"""Issue 19 items 2 and 8: the weight gradient with subnormal values in the upstream gradient
(the case where the orientation of the weight-gradient matmul and flushing matter), and the
options `ug.set_flush_denormal` / `ug.set_tuned`, which change per-thread CPU state and
framework flags: those run in one subprocess per backend (like tests/test_threads.py), read
back from the framework, and results are checked against float64 NumPy computed by hand."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = sorted({target.split(":")[0] for target in TARGETS})
TINY = np.finfo(np.float32).tiny  # the smallest normal float32


def saturated_softmax_data(batch_shape=(12,)):
    """Inputs in [0, 1) and large weights: most samples are classified with logit margins
    above 87, so float32 softmax - onehot holds subnormal entries; a few are not."""
    rng = np.random.default_rng(19)
    x = rng.random(batch_shape + (20,), dtype=np.float32)
    w = (rng.standard_normal((20, 5)) * 20).astype(np.float32)
    labels = np.argmax(x @ w, axis=-1)
    labels[..., 0] = (labels[..., 0] + 1) % 5  # some large, normal gradient entries too
    return x, w, labels.astype(np.int64)


def reference_weight_gradient(x, w, labels):
    """d mean(cross_entropy(x @ w, labels)) / d w in float64, derived by hand, and the
    float32 upstream gradient (softmax - onehot) / n for the precondition."""
    x64, logits = x.astype(np.float64), x.astype(np.float64) @ w.astype(np.float64)
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    softmax = shifted / shifted.sum(axis=-1, keepdims=True)
    n = labels.size
    g = (softmax - np.eye(5)[labels]) / n
    flat_x, flat_g = x64.reshape(-1, x.shape[-1]), g.reshape(-1, 5)
    return flat_x.T @ flat_g, g.astype(np.float32)


def weight_gradient(x, w, labels):
    def loss(w):
        logits = ug.matmul(ug.tensor(x), w)
        return ug.nn.functional.cross_entropy(ug.reshape(logits, (-1, 5)),
                                              ug.tensor(labels.reshape(-1)))

    return ug.function(ug.grad(loss))(w)


@pytest.mark.parametrize("batch_shape", [(12,), (3, 4)], ids=["2d", "3d"])
@pytest.mark.parametrize("target", TARGETS)
def test_weight_gradient_with_subnormal_upstream_gradient(target, batch_shape):
    """The weight gradient of a saturated softmax regression, where the upstream gradient
    holds subnormals, equals the float64 gradient derived by hand on every target; also
    through a 3-D input."""
    x, w, labels = saturated_softmax_data(batch_shape)
    expected, g32 = reference_weight_gradient(x, w, labels)
    subnormal = (g32 != 0) & (np.abs(g32) < TINY)
    assert subnormal.any() and (np.abs(g32) > 1e-3).any()  # the case this test is about
    got = run_on(target, weight_gradient, x, w, labels)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)


SCRIPT = r"""
import json, sys
import numpy as np
import unigraph as ug
sys.path.insert(0, "tests")
from test_tuning import conv_relu, reference_conv_relu, reference_weight_gradient
from test_tuning import saturated_softmax_data, weight_gradient

backend, modes = sys.argv[1], sys.argv[2].split(",")
x, w, labels = saturated_softmax_data()
expected, _ = reference_weight_gradient(x, w, labels)
rng = np.random.default_rng(8)
image = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
kernel = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
errors = {}
for mode in modes:
    with ug.use_backend(backend, mode):
        grad = weight_gradient(x, w, labels).numpy()
        conv = ug.function(conv_relu)(image, kernel).numpy()
    np.testing.assert_allclose(grad, expected, rtol=1e-4, atol=1e-6, err_msg=mode)
    np.testing.assert_allclose(conv, reference_conv_relu(image, kernel), rtol=1e-4,
                               atol=1e-5, err_msg=mode)
print(json.dumps({"flush": ug.get_flush_denormal(), "tuned": ug.get_tuned()}))
"""


def conv_relu(image, kernel):
    return ug.nn.functional.relu(ug.conv2d(image, kernel, padding=1))


def reference_conv_relu(image, kernel):
    """3x3 convolution, padding 1, stride 1, then relu, in float64 by hand."""
    padded = np.pad(image.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    h, w = image.shape[2:]
    out = np.zeros((image.shape[0], kernel.shape[0], h, w))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,oc->nohw", padded[:, :, i:i + h, j:j + w],
                             kernel[:, :, i, j].astype(np.float64))
    return np.maximum(out, 0)


def run_script(backend: str, env_extra: dict, script: str = SCRIPT) -> dict:
    modes = [target.split(":")[1] for target in TARGETS if target.startswith(backend + ":")]
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("UNIGRAPH_") and key != "TF_ENABLE_ONEDNN_OPTS"}
    env.update({"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3",
                "UNIGRAPH_THREADS": "1", **env_extra})
    done = subprocess.run([sys.executable, "-c", script, backend, ",".join(modes)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# What each framework reads back with both options on; NumPy and Paddle have no switch to
# flush subnormals (unigraph.tuning), and torch's oneDNN is on by default.
EXPECTED_ON = {
    "numpy": {"flush": {}, "tuned": {}},
    "torch": {"flush": {"torch": True}, "tuned": {"torch": True}},
    "tensorflow": {"flush": {"tensorflow": True}, "tuned": {"tensorflow": True}},
    "paddle": {"flush": {}, "tuned": {}},
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_flush_denormal_and_tuned_applied_and_within_tolerance(backend):
    """UNIGRAPH_FLUSH_DENORMAL=1 and UNIGRAPH_TUNED=1, applied before the framework loads:
    every mode of the backend computes the saturated weight gradient and a conv + relu
    within the reference tolerance, and the framework reports the settings applied."""
    result = run_script(backend, {"UNIGRAPH_FLUSH_DENORMAL": "1", "UNIGRAPH_TUNED": "1"})
    assert result == EXPECTED_ON[backend]


@pytest.mark.skipif("torch" not in BACKENDS, reason="needs the torch backend")
def test_flush_off_by_default():
    """Without the option, torch keeps subnormals (and the gradients still agree)."""
    assert run_script("torch", {})["flush"] == {"torch": False}


LATE = r"""
import json
import unigraph as ug
from unigraph.tuning import TuningError
with ug.use_backend("tensorflow", "eager"):
    ug.add(1.0, 2.0)
try:
    ug.set_tuned(True)
    print(json.dumps({"error": None}))
except TuningError as error:
    print(json.dumps({"error": str(error)}))
"""


@pytest.mark.skipif("tensorflow" not in BACKENDS, reason="needs the tensorflow backend")
def test_tuned_after_tensorflow_loaded_with_onednn_off_is_refused():
    """TensorFlow reads TF_ENABLE_ONEDNN_OPTS only when imported: asking for the tuned mode
    after it loaded with oneDNN off raises, naming the fix."""
    result = run_script("tensorflow", {"TF_ENABLE_ONEDNN_OPTS": "0"}, LATE)
    assert "before the first TensorFlow target" in result["error"]
    assert "UNIGRAPH_TUNED=1" in result["error"]


def test_bad_values_are_refused_in_user_terms(monkeypatch):
    with pytest.raises(ValueError, match="ug.set_flush_denormal"):
        ug.set_flush_denormal("yes")
    with pytest.raises(ValueError, match="ug.set_tuned"):
        ug.set_tuned(1)
    from unigraph import config

    monkeypatch.setenv("UNIGRAPH_TUNED", "maybe")
    with pytest.raises(ConfigError, match="UNIGRAPH_TUNED='maybe'"):
        config.tuned()
