"""Writing a traced graph as a Paddle inference model.

The graph is lowered into a `paddle.static.Program` by the paddle:static builder
(`unigraph_paddle.static.build_program`: `paddle.static.nn.cond` / `while_loop` for control
flow, so the model holds Paddle's own `if` and `while` ops), its parameters are set in a
fresh Scope, and `paddle.static.save_inference_model` writes `PATH.json` (the PIR program)
and `PATH.pdiparams` (the weights). Paddle alone reloads it:

    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    program, feed_names, fetches = paddle.static.load_inference_model(PATH, exe)
    outputs = exe.run(program, feed=dict(zip(feed_names, inputs)), fetch_list=fetches)

Feeds are named after the Python arguments (`x`, `y`; `feed_names` lists them in order).

Paddle 3.3.1 writes a non-finite `full` value (NaN, +-inf: the lowerings of relu, argmax and
max_pool2d use them to follow the op records' NaN rules) in a form its own loader rejects
("key 'D' not found"), so while the Program is built for export, every non-finite constant
is computed at run time instead (0/0, +-1/0): the same values, finite attributes only.
"""

from __future__ import annotations

import contextlib
import math
import os
import warnings

import numpy as np

from unigraph.errors import BackendError
from unigraph_paddle.static import StaticMode, build_program


def save_paddle(prepared, path: str) -> str:
    """Write `prepared` (a `unigraph.export.Exportable`) as PATH.json + PATH.pdiparams;
    returns `path`, the prefix."""
    import paddle

    from unigraph.plugins import get_backend

    backend = get_backend("paddle")
    graph = prepared.graph
    lowerings = {**backend.lowerings, "constant": _constant_lowering(paddle, backend.lowerings)}
    with StaticMode(paddle), finite_attributes(paddle):  # StaticMode: no other thread builds
        built = build_program(paddle, graph, lowerings)
    scope = paddle.static.Scope()
    place = paddle.CPUPlace()
    for name, array, value in zip(built.param_names, prepared.params, graph.params):
        tensor = scope.var(name).get_tensor()
        tensor.set(np.asarray(array, dtype=value.dtype, order="C"), place)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with StaticMode(paddle), paddle.static.scope_guard(scope), warnings.catch_warnings():
        # "no variable in your model": a model without weights is fine.
        warnings.filterwarnings("ignore", message="no variable in your model")
        feeds = _feed_values(built.program, built.feed_names)
        _name_feeds(built.program, built.feed_names, prepared.input_names, built.param_names)
        # An output that is also a feed (or repeated) gets its own copy to be fetched.
        fetches = list(built.fetch)
        with paddle.static.program_guard(built.program):
            fetches = [paddle.assign(v) if _is_in(v, feeds) or _is_in(v, fetches[:i]) else v
                       for i, v in enumerate(fetches)]
        executor = paddle.static.Executor(place)
        paddle.static.save_inference_model(path, feeds, fetches, executor,
                                           program=built.program)
    return path


@contextlib.contextmanager
def finite_attributes(paddle):
    """Inside the block `paddle.full` and `paddle.full_like` build a non-finite value as a
    division computed at run time (see the module doc)."""
    full, full_like = paddle.full, paddle.full_like

    def numerator(value):
        return 0.0 if math.isnan(value) else math.copysign(1.0, value)

    def non_finite(value) -> bool:
        return isinstance(value, float) and not math.isfinite(value)

    def safe_full(shape, fill_value, dtype=None, name=None):
        if not non_finite(fill_value):
            return full(shape, fill_value, dtype, name)
        return paddle.divide(full(shape, numerator(fill_value), dtype),
                             full(shape, 0.0, dtype))

    def safe_full_like(x, fill_value, dtype=None, name=None):
        if not non_finite(fill_value):
            return full_like(x, fill_value, dtype, name)
        return paddle.divide(full_like(x, numerator(fill_value), dtype),
                             full_like(x, 0.0, dtype))

    paddle.full, paddle.full_like = safe_full, safe_full_like
    try:
        yield
    finally:
        paddle.full, paddle.full_like = full, full_like


def _constant_lowering(paddle, lowerings: dict):
    """The `constant` lowering, with an array holding NaN or +-inf built from finite
    arrays: where(finite mask, finite values, numerators / 0)."""
    plain = lowerings["constant"]

    def constant(*, value):
        value = np.asarray(value)
        if value.dtype.kind != "f" or value.ndim == 0 or np.isfinite(value).all():
            return plain(value=value)  # a scalar goes through paddle.full (patched)
        finite = np.isfinite(value)
        numerators = np.where(np.isnan(value), 0, np.sign(value)).astype(value.dtype)
        special = paddle.divide(plain(value=numerators), plain(value=np.zeros_like(value)))
        return paddle.where(plain(value=finite), plain(value=np.where(finite, value, 0)
                                                       .astype(value.dtype)), special)

    return constant


def _name_feeds(program, feed_names: list, input_names: list, taken: list) -> None:
    """Rename the `data` ops after the Python arguments (`x`, `y`), unless a name is taken
    (by a parameter, or twice): then that feed keeps its `input_<i>`."""
    reserved = set(taken) | {"feed", "fetch"}
    wanted = dict(zip(feed_names, input_names))
    if len(set(input_names)) != len(input_names) or reserved & set(input_names):
        return
    for op in program.global_block().ops:
        if op.name() == "pd_op.data" and op.attrs()["name"] in wanted:
            op.set_str_attr("name", wanted[op.attrs()["name"]])


def _feed_values(program, names: list) -> list:
    """The `paddle.static.data` values of `program`, in the order of `names`."""
    found = {}
    for op in program.global_block().ops:
        if op.name() == "pd_op.data":
            found[op.attrs()["name"]] = op.result(0)
    missing = [n for n in names if n not in found]
    if missing:
        raise BackendError(f"paddle export: the built Program has no feed {missing[0]!r}")
    return [found[n] for n in names]


def _is_in(value, values) -> bool:
    # Identity, not ==: `==` on a pir.Value builds an `equal` op.
    return any(value is v for v in values)


# format -> writer(prepared, path) -> path, for `Backend.export` and `unigraph.export`.
WRITERS = {"paddle": save_paddle}
