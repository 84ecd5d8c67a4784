"""Running one random program on targets and judging each target against the reference.

The reference is the rendered program run on numpy:eager with its inputs widened to
float64 (so it computes exactly the same input values), forward and `grad_program`.
While it runs, every op it applies is watched (`hazards`): a program whose float64 run
comes within `MARGIN` of a kink (relu, abs), a tie (max, min, maximum, minimum, argmax,
max_pool2d), a comparison's threshold, an integer cast's or a floor, ceil, round or mod
step, that divides by or takes the log or square root of a value near 0 (in a training
program: that centers a nearly constant group to normalise it), or whose values
or gradients leave [-`LIMIT`, `LIMIT`] or are not finite, is *ill-conditioned*: float32
rounding alone could change its answer, so it is rejected (hypothesis `assume`), not
counted.

Each target runs the same source on the inputs in the program's dtype. Its outcome:

* "ok": every output and gradient within budget;
* "disagree": a tensor outside its budget, or of the wrong shape or dtype;
* "raw error": an exception that is not a `UnigraphError` (a framework's own error, or
  a bug in unigraph) on a program the reference ran: always a failure;
* "refused": a `UnigraphError` naming the program's file and line (a documented
  refusal: counted, not a failure);
* "open-dim refusal": a refusal (clear or not, or an error naming the program's line) of
  a program whose input_spec leaves dims open, where the same program with every dim
  known runs and agrees: one program must have one
  meaning, so this is a failure, unless the message is a documented limit of open dims
  that names the fix (`OPEN_DIM_LIMITS`): "open-dim limit", counted apart, neither a pass
  nor a failure;
* "unclear refusal": a `UnigraphError` that does not name the user's line (a failure:
  every refusal must say where);
* "crash", "timeout": the worker process running the target died or hung (see
  `workers`): failures.

Budgets come from the op records (`OpDef.tolerance_for`, the same table `ug.check` uses):
the widest (rtol, atol) of the ops the reference applied, times the number of float op
applications (each may add its own rounding; errors of a well-conditioned program add up
at most linearly). Gradients get twice that (the backward pass applies each rule again).
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field

import numpy as np

from unigraph.config import use_backend
from unigraph.ops import OPS
from unigraph.ops.base import DEFAULT_TOLERANCE
from unigraph.testing.random_programs.model import (
    Program,
    call_seeded,
    forget,
    load,
    render,
    results,
)
from unigraph.testing.random_programs.workers import execute

MARGIN = 1e-3  # relative distance from a kink, tie or threshold (float32 eps is 6e-8)
DOMAIN_MARGIN = 0.05  # log, sqrt, division, non-integer powers: keep the input this far from 0
LIMIT = 1e3  # largest magnitude of any value or gradient


class IllConditioned(Exception):
    """The program's float64 run comes too close to a kink, tie or overflow."""


@dataclass
class Reference:
    outputs: list
    grads: list | None
    op_count: int
    budget: tuple  # (rtol, atol) of the outputs; gradients get twice this
    dtypes: list = field(default_factory=list)  # each output's dtype where not the program's


@dataclass
class Outcome:
    """One target's result for one program."""

    target: str
    status: str  # ok | disagree | raw error | crash | timeout | refused | unclear refusal
    what: str = ""  # the tensor that disagrees ("output[0]", "grad[1]") or the error class
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.status not in ("ok", "refused", "open-dim limit")

    @property
    def signature(self) -> tuple:
        """What makes two failures the same bug, for shrinking: target, status, and the
        error class or whether it is an output or a gradient."""
        return (self.target, self.status, re.sub(r"\[\d+\]", "", self.what))


@dataclass
class Result:
    """A program's outcome on every target it ran on."""

    program: Program
    source: str
    outcomes: list = field(default_factory=list)
    reference_error: str = ""

    @property
    def failures(self) -> list:
        return [o for o in self.outcomes if o.failed]


# -- hazards ---------------------------------------------------------------------------------
def _gap(values: np.ndarray, axes) -> float:
    """The smallest difference between the two largest values of each slice over `axes`."""
    if values.size == 0:
        return np.inf
    moved = np.moveaxis(values, axes, list(range(-len(axes), 0)))
    flat = moved.reshape(moved.shape[: moved.ndim - len(axes)] + (-1,))
    if flat.shape[-1] < 2:
        return np.inf
    top = np.sort(flat, axis=-1)[..., -2:]
    return float(np.min(top[..., 1] - top[..., 0]))


def _near(distance, scale) -> bool:
    return bool(np.size(distance)) and float(np.min(distance)) < MARGIN * max(1.0, scale)


def _scale(*arrays) -> float:
    return max((float(np.max(np.abs(a))) for a in arrays if np.size(a)), default=0.0)


def _extreme_hazard(x, sign, axis):
    axes = list(range(x.ndim)) if axis is None else list(axis)
    return _gap(sign * x, axes) < MARGIN * max(1.0, _scale(x))


def _pool_hazard(x, kernel, stride, padding, dilation=(1, 1), ceil_mode=False):
    """A tie between the two largest values of a max_pool2d window (dilated; with
    ceil_mode, the op record's extra cells after the padding, -inf like it)."""
    from numpy.lib.stride_tricks import sliding_window_view

    from unigraph.ops.pooling import pool_geometry

    (oh, ow), pads, extra = pool_geometry(x.shape[2:], kernel, stride, padding, dilation,
                                          ceil_mode)
    padded = np.pad(x, ((0, 0), (0, 0), (pads[0][0], pads[0][1] + extra[0]),
                        (pads[1][0], pads[1][1] + extra[1])), constant_values=-np.inf)
    spans = [d * (k - 1) + 1 for k, d in zip(kernel, dilation)]
    windows = sliding_window_view(padded, spans, axis=(2, 3))[
        :, :, :oh * stride[0]:stride[0], :ow * stride[1]:stride[1], ::dilation[0],
        ::dilation[1]]
    return _gap(windows, [4, 5]) < MARGIN * max(1.0, _scale(x))


def _non_integer(y) -> bool:
    return bool(np.any(y != np.round(y)))


def _near_zero(x) -> bool:
    return bool(np.size(x)) and float(np.min(np.abs(x))) < DOMAIN_MARGIN


def _of_floats(hazard):
    """`hazard` for float inputs only: integer arithmetic is exact, so a kink or tie among
    ints is the same on every target (argmax, and so argmin, takes the first of tied ints)."""
    return lambda x, *rest, **attrs: x.dtype.kind == "f" and hazard(x, *rest, **attrs)


def _off_integer(x) -> np.ndarray:
    """How far each element is from the nearest integer, an integer itself counting as far:
    a float value that is exactly an integer in float64 came from floor, ceil, round or a
    cast (their own steps are hazards), and float32 has that integer too."""
    distance = np.abs(x - np.round(x))
    return np.where(distance == 0, np.inf, distance)


# op name -> (inputs, attrs) -> True when float32 rounding could change the result.
HAZARDS = {
    "relu": _of_floats(lambda x: _near(np.abs(x), 1.0)),
    "abs": _of_floats(lambda x: _near(np.abs(x), 1.0)),
    "maximum": _of_floats(lambda x, y: _near(np.abs(x - y), _scale(x, y))),
    "minimum": _of_floats(lambda x, y: _near(np.abs(x - y), _scale(x, y))),
    # (`initial`: ug.logsumexp's shift, a max marked initial=-inf)
    "max": _of_floats(lambda x, axis, keepdims, initial=None: _extreme_hazard(x, 1, axis)),
    "min": _of_floats(lambda x, axis, keepdims: _extreme_hazard(x, -1, axis)),
    "argmax": _of_floats(lambda x, axis, keepdims: _extreme_hazard(x, 1, (axis,))),
    "max_pool2d": lambda x, kernel, stride, padding, **options: _pool_hazard(
        x, kernel, stride, padding, **options),
    "div": lambda x, y: _near_zero(y),
    "log": lambda x: _near_zero(x),
    "sqrt": lambda x: _near_zero(x),
    "pow": lambda x, y: _non_integer(y) and _near_zero(x),
    "cast": lambda x, dtype: x.dtype.kind == "f" and dtype != "bool" and np.dtype(
        dtype).kind in "iu" and _near(_off_integer(x), 1.0),
}
HAZARDS["floor"] = HAZARDS["ceil"] = lambda x: _near(np.abs(x - np.round(x)), 1.0)
HAZARDS["round"] = lambda x: _near(np.abs(np.abs(x - np.floor(x)) - 0.5), 1.0)
HAZARDS["mod"] = HAZARDS["floor_divide"] = lambda x, y: x.dtype.kind == "f" and (
    _near_zero(y) or _near(np.abs(x / y - np.round(x / y)), 1.0))
for _name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
    HAZARDS[_name] = lambda x, y: x.dtype.kind == "f" and _near(np.abs(x - y), _scale(x, y))

# A training program (`training.Training`) divides by small numbers on purpose: Adam by
# 1 - beta2 ** t and by sqrt(v_hat) + eps, which float32 computes as well as float64 does.
# What float32 can change there is the sign of a gradient near 0, which Adam's first step
# turns into a whole step of lr: a gradient (g * g, in v_hat) that small is the hazard.
TRAINING_HAZARDS = {name: hazard for name, hazard in HAZARDS.items()
                    if name not in ("div", "sqrt")}
TRAINING_HAZARDS["sqrt"] = lambda x: bool(np.any((x > 0) & (x < 1e-10)))


def _centering_hazard(x, y) -> bool:
    """x - y where y broadcasts along axes of x with more than one element (a mean: the
    centering of LayerNorm, GroupNorm, BatchNorm): a group of x whose values are all within
    MARGIN of y is nearly constant, and the normalisation that divides by its spread
    (sqrt(var + eps)) amplifies float32 rounding beyond any budget."""
    if x.dtype.kind != "f" or not 0 < y.size < x.size or y.ndim > x.ndim:
        return False
    y_full = np.reshape(y, (1,) * (x.ndim - y.ndim) + y.shape)
    axes = tuple(k for k, (a, b) in enumerate(zip(x.shape, y_full.shape)) if b == 1 and a > 1)
    if not axes:
        return False
    spread = np.max(np.abs(x - y_full), axis=axes)
    return _near(spread, _scale(x))


# A normalisation's division is not checked in training programs (Adam's is not a hazard):
# the nearly constant group it would divide by is found at its centering instead.
TRAINING_HAZARDS["sub"] = _centering_hazard
TRAINING_HAZARDS["adam_update"] = lambda p, g, m, v, lr, t, **attrs: bool(
    np.any((g != 0) & (np.abs(g) < 1e-5)))


class Watch:
    """Records the ops numpy:eager applies and raises `IllConditioned` at the first
    hazard (see the module docstring)."""

    def __init__(self, hazards=None):
        self.ops: list = []
        self.hazards = HAZARDS if hazards is None else hazards

    def __call__(self, op, inputs, attrs, out):
        if op not in OPS and op.endswith("_"):  # an update in place ("sub_", "adam_update_")
            op = op[:-1]  # is its op's, written into its first input
        arrays = [np.asarray(x) for x in inputs]
        hazard = self.hazards.get(op)
        if hazard is not None and hazard(*arrays, **attrs):
            raise IllConditioned(f"{op} on {[a.shape for a in arrays]} is too close to a "
                                 "kink, tie or threshold")
        out = np.asarray(out)
        if out.dtype.kind == "f":
            self.ops.append(op)
            if not _finite_and_bounded([out]):
                raise IllConditioned(f"{op} gives values beyond {LIMIT:g} or not finite")


@contextlib.contextmanager
def watching(watch: Watch):
    """Call `watch` after every op numpy:eager applies (for this process, for this block)."""
    from unigraph.plugins import get_backend

    backend = get_backend("numpy", "eager")
    original = backend.eager_op

    def eager_op(op, inputs, attrs):
        read = inputs
        if op not in OPS and op.endswith("_") and inputs:
            # An update in place writes its result into its first input: the watch must see
            # what the op read (Adam's sqrt_ of v_hat), not what it wrote there.
            read = [np.array(np.asarray(inputs[0]), copy=True), *inputs[1:]]
        out = original(op, inputs, attrs)
        watch(op, read, attrs, out)
        return out

    backend.eager_op = eager_op
    try:
        yield watch
    finally:
        del backend.eager_op  # back to the class's method


# -- running ---------------------------------------------------------------------------------
def _arrays(result) -> list:
    return [np.array(t.numpy(), copy=True) for t in results(result)]


def _output_dtypes(program, result) -> list:
    """Each output's dtype on every target where it is not the program's float dtype (a
    training program's Adam step counts are float64), else None."""
    rule = getattr(program, "output_dtype", None)
    if rule is None or not isinstance(result, dict):
        return []
    return [rule(name) for name in result]


def _run(namespace: dict, inputs: list, grads: bool) -> tuple[list, list | None]:
    outputs = _arrays(namespace["program"](*inputs))
    gradients = None
    if grads and "grad_program" in namespace:
        gradients = _arrays(namespace["grad_program"](*inputs))
    return outputs, gradients


def _finite_and_bounded(arrays) -> bool:
    return all(np.all(np.isfinite(a)) and _scale(a) <= LIMIT for a in arrays)


def budget_of(ops: list, dtype: str, count: int | None = None) -> tuple:
    """(rtol, atol) for a value computed by the op applications `ops` in `dtype`: the
    widest of their ops' budgets times `count` (default: how many applications)."""
    widest = [DEFAULT_TOLERANCE[dtype]] + [OPS[op].tolerance_for(dtype) for op in set(ops)]
    count = max(1, len(ops)) if count is None else count
    return (max(r for r, _ in widest) * count, max(a for _, a in widest) * count)


def reference(program: Program, source: str, grads: bool) -> Reference:
    """The float64 answer; raises `IllConditioned`, or whatever numpy:eager raises."""
    from unigraph.testing.random_programs.training import Training

    namespace = load(source)
    inputs = program.arrays("float64")
    training = isinstance(program, Training)
    hazards = TRAINING_HAZARDS if training else HAZARDS
    forward, backward = Watch(hazards), Watch(hazards)
    try:
        run_program, run_grad = namespace["program"], namespace.get("grad_program")
        seeded = namespace.get("SEEDED")
        if "build" in namespace:  # an input_spec: the same one in float64
            run_program, run_grad = namespace["build"]("float64")
        with use_backend("numpy", "eager"):
            with watching(forward):
                result = call_seeded(run_program, inputs, seeded)
                outputs = _arrays(result)
            gradients = None
            if grads and run_grad is not None:
                with watching(backward):
                    gradients = _arrays(call_seeded(run_grad, inputs, seeded))
    finally:
        forget(namespace)
    if not _finite_and_bounded(gradients or []):
        raise IllConditioned(f"a gradient goes beyond {LIMIT:g} or is not finite")
    if training:  # the checker's budget (ug.check_training): the widest, times the steps
        budget = tuple(b * program.steps for b in budget_of(sorted(set(forward.ops)),
                                                            program.dtype, count=1))
    else:
        budget = budget_of(forward.ops, program.dtype)
    return Reference(outputs, gradients, len(forward.ops), budget,
                     _output_dtypes(program, result))


def difference(actual: np.ndarray, expected: np.ndarray, budget: tuple, dtype: str) -> str:
    """"" when `actual` matches `expected` (shape, dtype, NaN/Inf positions, and every
    finite element within `|a - e| <= atol + rtol * |e|`, NumPy's allclose rule); else
    what differs."""
    if actual.shape != expected.shape:
        return f"shape {list(actual.shape)}, expected {list(expected.shape)}"
    if actual.dtype.name != dtype:
        return f"dtype {actual.dtype.name}, expected {dtype}"
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    rtol, atol = budget
    with np.errstate(invalid="ignore"):
        bad = ~((np.abs(a - e) <= atol + rtol * np.abs(e)) | (a == e) | (np.isnan(a) & np.isnan(e)))
    if not bad.any():
        return ""
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    error = np.abs(a - e)[bad]
    return (f"{int(bad.sum())} of {bad.size} elements differ, max abs error "
            f"{float(np.max(error)):.3g} (budget rtol {rtol:.2g}, atol {atol:.2g}); at "
            f"{list(where)}: {a[where]!r}, expected {e[where]!r}")


def _compare_all(kind, actual, expected, budget, dtype, dtypes=()) -> tuple[str, str]:
    """("output[i]", what differs) for the first tensor outside its budget, or ("", "");
    `dtypes`: each float tensor's dtype where it is not `dtype` (else None)."""
    if len(actual) != len(expected):
        return kind, f"{len(actual)} tensors, expected {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        exact = e.dtype.kind != "f"
        own = dtypes[i] if i < len(dtypes) and dtypes[i] else dtype
        text = difference(a, e, (0.0, 0.0) if exact else budget,
                          e.dtype.name if exact else own)
        if text:
            return f"{kind}[{i}]", text
    return "", ""


def judge(target: str, run: dict, ref: Reference, dtype: str) -> Outcome:
    """The outcome of one target's run (a result of `workers.execute`) against `ref`."""
    if "error" in run:
        text = f"{run['type']}: {run['message']}"
        if run["error"] == "unigraph":
            status = "refused" if run["named"] else "unclear refusal"
        else:
            status = {"raw": "raw error"}.get(run["error"], run["error"])  # crash, timeout
        return Outcome(target, status, run["type"], text[:800])
    what, text = _compare_all("output", run["outputs"], ref.outputs, ref.budget, dtype,
                              ref.dtypes)
    if not what and run["grads"] is not None:
        budget = (2 * ref.budget[0], 2 * ref.budget[1])
        what, text = _compare_all("grad", run["grads"], ref.grads, budget, dtype)
    return Outcome(target, "disagree" if what else "ok", what, text)


def evaluate(program: Program, targets, grads: bool = True, workers=None) -> Result:
    """Run `program` on the reference, then on each target: in `workers` (a
    `workers.Workers`) or, without, in this process. Raises `IllConditioned` for a program
    the tester must not judge."""
    source = render(program)
    result = Result(program, source)
    try:
        ref = reference(program, source, grads)
    except IllConditioned:
        raise
    except Exception as error:  # noqa: BLE001 (the generator or the reference is wrong)
        result.reference_error = f"{type(error).__name__}: {str(error)[:600]}"
        return result
    grads = grads and ref.grads is not None
    targets = [str(t) for t in targets]
    inputs = program.arrays()
    runs = _run_all(targets, source, inputs, grads, workers)
    result.outcomes = [judge(t, runs[t], ref, program.dtype) for t in targets]
    if program.is_open:
        _judge_open_refusals(result, ref, inputs, grads, workers)
    return result


def _run_all(targets, source, inputs, grads, workers) -> dict:
    if workers is None:
        return {t: execute(t, source, inputs, grads) for t in targets}
    return workers.run_all(targets, source, inputs, grads)


# A refusal that holds only where input_spec leaves a dim open, documented in the README
# with the fix named in the message: (pattern of the message, what it is).
OPEN_DIM_LIMITS: list = [
    (r"a negative index \(-?\d+\) along axis \d+, whose size is known only when the "
     r"program runs \(left open by input_spec\)",
     "ug.take with a negative index along an open dim (README: Shapes that vary)"),
    (r"ug\.squeeze at .*so which dims are 1 is not known while tracing; name the axes",
     "ug.squeeze(x) with no axis, of a tensor with an open dim"),
    (r"float64 conv2d at .*ONNX Runtime has no float64 Conv kernel, and its im2col form "
     r"needs the weight's input channels and kernel size while tracing",
     "onnxruntime:static: a float64 conv2d whose input channels or kernel size are open"),
    (r"conv_transpose2d at .*the conv form it is written as there needs the weight's "
     r"channels and kernel size",
     "onnxruntime:static: a float64 conv_transpose2d (or output_padding >= stride) whose "
     "channels or kernel size (or strided height and width) are open"),
    (r"has a dim known only at run time; this function needs every dim: give that dim a "
     r"size in input_spec",
     "pad(mode='reflect') along an open axis (a function that needs every dim)"),
    (r"ceil_mode needs the image size, but x is .*\(give the spatial dims a fixed size\)",
     "max_pool2d / avg_pool2d (and the 1-D pools) with ceil_mode of open spatial dims "
     "(README: Shapes that vary)"),
    (r"adaptive_avg_pool2d: output size .* needs known H and W .*only output size 1 "
     r"\(global average pooling\) takes H and W left open",
     "adaptive_avg_pool2d to a size other than 1 of open H or W (README: Shapes that vary)"),
    (r"`for` over the rows of a tensor at .* whose first dim is left open by input_spec .*"
     r"give that dim a size in input_spec",
     "a converted `for row in x` over an open first dim (unrolled while tracing)"),
]


def open_dim_status(detail: str) -> str:
    """"open-dim limit" for a documented refusal of open dims, else "open-dim refusal"."""
    documented = any(re.search(pattern, detail) for pattern, _ in OPEN_DIM_LIMITS)
    return "open-dim limit" if documented else "open-dim refusal"


def _judge_open_refusals(result: Result, ref: Reference, inputs, grads, workers) -> None:
    """Run each target that refused the program again with every dim known: if it runs
    then, the open dims alone made it refuse (see `open_dim_status`); if it fails then
    (disagrees, a raw error), that failure is the target's outcome. A refusal is a
    unigraph error, or another error whose message names the program's line (an
    IndexError while tracing, say)."""
    refused = [o for o in result.outcomes if o.status in ("refused", "unclear refusal") or (
        o.status == "raw error" and "random_program_" in o.detail)]
    if not refused:
        return
    closed = result.program.closed()
    runs = _run_all([o.target for o in refused], render(closed), inputs, grads, workers)
    for outcome in refused:
        again = judge(outcome.target, runs[outcome.target], ref, closed.dtype)
        if again.failed:  # the refusal hid a failure of the program with every dim known
            outcome.status, outcome.what = again.status, again.what
            outcome.detail = "with every dim known: " + again.detail
        elif again.status == "ok" or (again.status == "refused"
                                      and open_dim_status(outcome.detail) == "open-dim limit"):
            # (refused with every dim known too, for a reason naming the line, such as
            # onnxruntime's gradients: a documented open-dim limit is still just that)
            outcome.status = open_dim_status(outcome.detail)
            # What refused ("cond", "`while` loop", an op) tells these failures apart.
            what = re.match(r"\w+: (.{1,60}?) at random_program_", outcome.detail)
            if what:
                outcome.what += f" ({what.group(1)})"
