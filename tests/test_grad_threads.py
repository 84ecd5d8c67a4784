"""Gradients taken in several threads at once are the gradients one thread gets, on every
target. Each target runs in a fresh process: the race is in how the first threads to ask
for a backend get it, which happens once per process."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TARGETS

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import sys, threading
import numpy as np
import unigraph as ug
from unigraph import plugins

backend, mode = sys.argv[1].split(":")
# The order the first reproducer (two threads, paddle:eager) met by chance, made certain
# by these events; every wait has a timeout, so an order that cannot happen (the late
# thread cannot enter the hooks while the early one is in them) only costs its timeout.
early_in_hooks, late_in_hooks = threading.Event(), threading.Event()
early_in_loss, late_on_target = threading.Event(), threading.Event()


class SlowPlugin:
    # A plugin whose hook takes a while, as one that imports its own modules does.
    @plugins.hookspecs.hookimpl
    def unigraph_backends(self):
        if threading.current_thread().name == "early":
            early_in_hooks.set()
            late_in_hooks.wait(2)
        else:
            late_in_hooks.set()
            early_in_loss.wait(5)
        return []


plugins.register_plugin(SlowPlugin(), name="slow")  # (the registry is made anew below)


def loss(a):
    if threading.current_thread().name == "early":
        early_in_loss.set()
        late_on_target.wait(5)
    return ug.sum(ug.tanh(ug.matmul(a, a)) * 2.0)


@ug.function
def gradient(a):
    return ug.grad(loss)(a)


x = np.random.default_rng(0).standard_normal((8, 8))
found = {}


def early():
    with ug.use_backend(backend, mode):  # the first to ask for a backend: makes the registry
        found["early"] = gradient(x).numpy()


def late():
    with ug.use_backend(backend, mode):
        ug.tensor(x)  # an eager tensor: the current backend looked up, no op run
        late_on_target.set()
        found["late"] = gradient(x).numpy()


first = threading.Thread(target=early, name="early")
first.start()
early_in_hooks.wait(5)
second = threading.Thread(target=late, name="late")
second.start()
first.join()
second.join()
with ug.use_backend(backend, mode):
    alone = gradient(x).numpy()
# By hand: d/dA sum(2 tanh(A A)) = G A^T + A^T G with G = 2 (1 - tanh(A A)^2).
g = 2 * (1 - np.tanh(x @ x) ** 2)
assert np.allclose(alone, g @ x.T + x.T @ g), "one thread"
wrong = [name for name, got in sorted(found.items()) if not np.array_equal(got, alone)]
print("threads differing from one thread:", wrong)
"""


@pytest.mark.parametrize("target", TARGETS)
def test_grad_in_threads_at_once_equals_one_thread(target):
    """Two threads take `ug.grad` of one function (inside a `@ug.function`, so the static
    targets trace and compile it) as their first calls on `target`, the second asking for
    the backend while the first makes the registry and then looking it up while the first
    is inside its gradient; each gradient equals, bit for bit, the one-thread gradient,
    which is checked against the hand-derived formula."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "backends")]),
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, target], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "threads differing from one thread: []"
