"""The PaddlePaddle backend object.

    paddle:eager   dygraph: each op runs at once on `paddle.Tensor`s; gradients by
                   `paddle.grad`.
    paddle:static  a PIR `paddle.static.Program` built once per compile, run by a
                   long-lived `paddle.static.Executor` (see `unigraph_paddle.static`).

Paddle is imported on first use, quietly: its C++ logging is capped at warnings
(GLOG_minloglevel=2, unless the user set it) and the Python warnings Paddle raises from its
own modules (UserWarning, DeprecationWarning, FutureWarning, e.g. "No ccache found") are
ignored. Errors are never hidden.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings

import numpy as np

from unigraph.backend import Backend
from unigraph.errors import BackendError
from unigraph.ir import DTYPES

_QUIET_CATEGORIES = (UserWarning, DeprecationWarning, FutureWarning)
_LOAD_LOCK = threading.Lock()
# Paddle's dygraph is not thread-safe (3.3.1: two threads running eager ops segfault), and
# its state is process-wide: every eager call of every PaddleBackend holds this lock.
# Reentrant: `eager_grad` runs the user's function, whose ops take it again.
EAGER_LOCK = threading.RLock()
_acquire, _release = EAGER_LOCK.acquire, EAGER_LOCK.release
# How many `eager_grad` functions the current thread is running in (`.value`, 0 when unset).
# From 2 on, the gradient being taken keeps its graph (create_graph) to be differentiated
# again: the lowerings then avoid Paddle ops that have no second derivative.
GRAD_DEPTH = threading.local()
_NO_LOWERINGS: dict = {}  # `lowerings` before `load()`


def quiet_paddle() -> None:
    """Cap Paddle's logging before it is imported (GLOG reads its env var at load time)."""
    os.environ.setdefault("GLOG_minloglevel", "2")
    ignore_paddle_warnings()


def ignore_paddle_warnings() -> None:
    """Ignore the warnings Paddle's own modules raise (e.g. its `paddle.static.gradients`
    reads `Value.place`, then warns that a PIR value has no place)."""
    for category in _QUIET_CATEGORIES:
        warnings.filterwarnings("ignore", category=category, module=r"paddle(\.|$)")


def _at_user_line() -> str:
    """" (at file:line)" of the innermost frame outside unigraph and this package."""
    import unigraph

    skip = (os.path.dirname(unigraph.__file__), os.path.dirname(__file__), "<frozen")
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(skip):
        frame = frame.f_back
    return f" (at {frame.f_code.co_filename}:{frame.f_lineno})" if frame is not None else ""


class PaddleBackend(Backend):
    name = "paddle"
    modes = ("eager", "static")
    framework = "paddle"
    distribution = "paddlepaddle"
    extra = "paddle"

    def __init__(self):
        self._paddle = None
        self._place = None

    # -- loading ------------------------------------------------------------------------
    def load(self):
        with _LOAD_LOCK:
            if self._paddle is None:
                self._load()
        return self._paddle

    def _load(self):
        if "tensorflow" in sys.modules and "paddle" not in sys.modules:
            # paddlepaddle 3.3.1 imported after tensorflow 2.21 segfaults the process.
            raise BackendError(
                "cannot load the paddle backend: tensorflow was imported before paddle, and "
                "importing paddle now would crash this process (paddlepaddle 3.3.1 after "
                f"tensorflow 2.21){_at_user_line()}. Import paddle first: put `import "
                "paddle` above `import tensorflow` (unigraph's own tensorflow backend already "
                "imports paddle first)."
            )
        quiet_paddle()
        paddle = super().load()
        from unigraph_paddle.lowerings import lowerings_for

        device = paddle.get_device()  # "cpu" or "gpu:N", Paddle's default device
        on_gpu = device.startswith("gpu")
        if on_gpu:
            self._place = paddle.CUDAPlace(int(device.split(":")[1]))
        else:
            self._place = paddle.CPUPlace()
        self.lowerings = lowerings_for(on_gpu)
        self._dtypes = {np.dtype(name): getattr(paddle, name) for name in DTYPES}
        self._full = paddle._C_ops.full
        # The constructor's documented "original usage": (value, place, persistable,
        # zero_copy, name, stop_gradient); zero_copy=False copies the array.
        self._tensor = paddle.Tensor
        self._partial_grad = paddle.base.core.eager.run_partial_grad
        self._run_backward = paddle.base.core.eager.run_backward
        self._paddle = paddle  # last: other threads take a set _paddle as "loaded"

    # -- eager --------------------------------------------------------------------------
    def eager_op(self, op: str, inputs: list, attrs: dict):
        # Backend.eager_op's table lookup inlined (one Python call less on every eager op);
        # its own path (loading, the missing-op error) where the lookup fails. The lock's
        # acquire/release called directly: ~0.1 us less than `with` (every eager op).
        lowering = (self.lowerings or _NO_LOWERINGS).get(op)
        _acquire()
        try:
            if lowering is None:
                return Backend.eager_op(self, op, inputs, attrs)
            return lowering(*inputs, **attrs)
        finally:
            _release()

    def truth(self, native) -> bool:
        """`bool()` of a one-element bool Tensor: its `.item()` (~0.4 us) where Paddle's own
        `__bool__` costs ~6 us and a NumPy copy ~1.5 (an eager predicate, each cond/while)."""
        _acquire()
        try:
            return native.item()
        finally:
            _release()

    def to_native(self, array):
        with EAGER_LOCK:
            return self._to_native(array)

    def _to_native(self, array):
        """A paddle Tensor holding a copy of `array`, with its dtype and shape.

        `paddle.to_tensor` costs ~20 us a call in Python-side checks, and the frontend
        converts every Python scalar an op meets: a scalar becomes one `full` op (~2 us;
        exact for every dtype, int64 included), an array goes straight to the Tensor
        constructor (~10 us)."""
        if self._paddle is None:
            self.load()
        dtype = self._dtypes.get(array.dtype)  # keyed by np.dtype: `.name` costs ~4 us
        if dtype is None:
            return self._paddle.to_tensor(array)  # let Paddle refuse unsupported dtypes
        if array.ndim == 0:
            return self._full([], array.item(), dtype, self._place)
        return self._tensor(array, self._place, False, False, None, True)

    def to_numpy(self, native):
        with EAGER_LOCK:
            return native.numpy()

    def is_native(self, obj) -> bool:
        # Without importing paddle: nothing can be a paddle Tensor before paddle is loaded.
        paddle = self._paddle or sys.modules.get("paddle")
        return paddle is not None and isinstance(obj, paddle.Tensor)

    def eager_grad(self, fn, watched: list):
        """`paddle.grad` over `fn(*leaves)`. At the outermost level each leaf is a detached
        alias of its tensor; inside another `eager_grad` (a gradient of a gradient) a leaf
        is a differentiable copy, and the gradient keeps its graph (create_graph=True), so
        the outer level can differentiate through it. One thread at a time (`EAGER_LOCK`)."""
        with EAGER_LOCK:
            return self._eager_grad(fn, watched)

    def _eager_grad(self, fn, watched: list):
        paddle = self._paddle or self.load()
        depth = getattr(GRAD_DEPTH, "value", 0)
        nested = depth > 0
        half, single, double = paddle.float16, paddle.float32, paddle.float64
        leaves = []
        for tensor in watched:
            dtype = tensor.dtype  # identity tests: `==` on a paddle dtype costs ~1 us
            if dtype is single or dtype is double or dtype is half:
                leaf = paddle.assign(tensor) if nested else tensor.detach()
                leaf.stop_gradient = False
            else:
                leaf = tensor  # ints and bools have no gradient
            leaves.append(leaf)
        GRAD_DEPTH.value = depth + 1
        try:
            outputs = list(fn(*leaves))
        finally:
            GRAD_DEPTH.value = depth
        target = outputs[0]
        wanted = [i for i, leaf in enumerate(leaves) if not leaf.stop_gradient]
        grads = [None] * len(leaves)
        if wanted and not target.stop_gradient:
            if nested:
                # paddle.grad's own checks cost ~50 us a call; these arguments are its own.
                found = self._partial_grad([target], [leaves[i] for i in wanted], [], True,
                                           True, True, True, [], None)
            else:
                found = self._backward([target], [leaves[i] for i in wanted])
            for i, g in zip(wanted, found):
                grads[i] = g
        grads = [paddle.zeros_like(leaf) if g is None else g for g, leaf in zip(grads, leaves)]
        if not nested:
            outputs = [o.detach() if isinstance(o, paddle.Tensor) else o for o in outputs]
        return outputs, grads

    def _backward(self, targets: list, leaves: list) -> list:
        """The gradients of `targets` with respect to `leaves` (None where unused), by
        Paddle's `backward()` into each leaf's `.grad` (what `loss.backward()` runs).

        At the outermost `eager_grad` the leaves are the only tensors that require a
        gradient (every other tensor comes from `to_native` or from ops on such tensors,
        with stop_gradient set), so `backward()` writes no other tensor's `.grad`; it is
        `paddle.grad`'s answer with less work: Paddle's partial-gradient engine
        (`run_partial_grad`) first copies and prunes the graph, ~2x the time per node
        (softmax regression's step: ~0.2 ms of ~0.7)."""
        self._run_backward(targets, [], False, None)
        grads = [leaf.grad for leaf in leaves]
        for g in grads:
            if g is not None:
                g.stop_gradient = True  # `.grad` requires one; paddle.grad's results do not
        return grads

    # -- documentation ------------------------------------------------------------------
    def quirks(self) -> list:
        from unigraph_paddle.quirks import QUIRKS  # imports no paddle: only the pins do

        return QUIRKS

    # -- static -------------------------------------------------------------------------
    def compile(self, graph, mode: str):
        if mode != "static":
            raise BackendError(
                f"the paddle backend compiles only in mode 'static', not {mode!r}"
            )
        paddle = self._paddle or self.load()
        from unigraph_paddle.executable import PaddleExecutable

        return PaddleExecutable(paddle, graph, self.lowerings, self._place)
