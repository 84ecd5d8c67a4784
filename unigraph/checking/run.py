"""Running one function or module on many targets with identical inputs and parameters.

`prepare` turns what the user gave `ug.check` into a `Case`: the inputs cast to the checked
dtype (floating inputs only), the Parameters the function uses with a snapshot of their
values, the traced graphs (the forward graph and, with `grads=True`, the graph of its
gradient), names for every compared tensor and the budget of each.

The gradient checked is that of a *scalar reduction* of the outputs,
`sum_i sum(output_i * w_i)`, with fixed pseudo-random weights `w_i` in [-1, 1) (seeded, so
every target and the reference use the same ones): a plain sum would give every element
the same cotangent and hide errors (the gradient of `sum(softmax(x))` is zero). It is
taken with respect to every floating positional input that is a single tensor and every
floating parameter, with `ug.value_and_grad`, so each target uses its own autodiff.

Before every run the parameters are restored from the snapshot and unigraph's random
generator is reseeded, so targets see the same weights and the same dropout masks even
when the function updates parameters (training steps, batch-norm statistics).
"""

from __future__ import annotations

import contextlib
import inspect
import traceback
from dataclasses import dataclass, field

import numpy as np

from unigraph import pytree
from unigraph.checking import accumulation
from unigraph.checking import compare as cmp
from unigraph.config import Target, use_backend
from unigraph.dtypes import is_float
from unigraph.function import Function, function, is_array_leaf
from unigraph.ir import FLOAT_DTYPES, check_dtype
from unigraph.random import seeded
from unigraph.reference import SecondOrderUnsupported, float64
from unigraph.tensor import Tensor


@dataclass
class Case:
    """Everything needed to run one check on any target (see the module docstring)."""

    name: str
    function: Function
    inputs: tuple  # positional arguments, floating leaves cast to `dtype`
    leaves: list  # the flattened argument leaves, as fed to the traced graph
    dtype: str
    seed: int
    params: list  # every Parameter the forward (and gradient) graph uses
    snapshot: dict  # id(param) -> its value when the check started, in its own dtype
    graph: object  # forward Graph
    graph_params: list  # Parameters bound to graph.params, in order
    randoms: list  # (shape, dtype) of the random inputs of the forward graph
    output_names: list
    output_budgets: list
    grad_function: Function | None = None
    grad_graph: object = None
    grad_graph_params: list = field(default_factory=list)
    grad_randoms: list = field(default_factory=list)
    grad_names: list = field(default_factory=list)
    grad_budgets: list = field(default_factory=list)
    grad_dtypes: list = field(default_factory=list)
    default_budgets: dict = field(default_factory=dict)  # tensor name -> budget before overrides
    original_dtypes: dict = field(default_factory=dict)  # id(param) -> the user's dtype
    unreferenced: dict = field(default_factory=dict)  # kind -> why the reference cannot run it
    notes: list = field(default_factory=list)
    _reference: dict = field(default_factory=dict)

    # -- feeds ----------------------------------------------------------------------------
    def feeds(self, kind: str) -> tuple[list, list]:
        """(inputs with random draws, parameter values) of the forward or gradient graph,
        in the target's dtypes, exactly as a target's run sees them."""
        graph_params = self.graph_params if kind == "forward" else self.grad_graph_params
        randoms = self.randoms if kind == "forward" else self.grad_randoms
        rng = np.random.default_rng(self.seed)
        draws = [rng.random(shape).astype(dtype) for shape, dtype in randoms]
        feeds = [np.asarray(x) for x in self.leaves] + draws
        return feeds, [self.param_value(p) for p in graph_params]

    def reference(self, kind: str) -> dict:
        """{value id: float64 array} of the forward or gradient graph on the reference."""
        if kind not in self._reference:
            graph = self.graph if kind == "forward" else self.grad_graph
            feeds, params = self.feeds(kind)
            self._reference[kind] = float64.values(graph, feeds, params)
        return self._reference[kind]

    def has_reference(self, kind: str) -> bool:
        """False (and the reason in `unreferenced`) when the reference cannot compute the
        forward or gradient graph: a gradient of a gradient."""
        if kind in self.unreferenced:
            return False
        try:
            self.reference(kind)
        except SecondOrderUnsupported:
            self.unreferenced[kind] = "it cannot compute gradients of gradients"
            return False
        return True

    def reference_outputs(self) -> list:
        env = self.reference("forward")
        return [env[v.id] for v in self.graph.outputs]

    def reference_grads(self) -> list:
        env = self.reference("gradient")
        return [env[v.id] for v in self.grad_graph.outputs[1:]]

    @property
    def output_dtypes(self) -> list:
        return [v.dtype for v in self.graph.outputs]

    # -- parameters -----------------------------------------------------------------------
    def run_dtype(self, param) -> str:
        """The dtype `param` has during the check: the checked dtype if it is floating."""
        original = self.original_dtypes.get(id(param), param.dtype)
        return self.dtype if original in FLOAT_DTYPES else original

    def param_value(self, param) -> np.ndarray:
        """The snapshot of `param` in its run dtype, as every target is fed it."""
        return self.snapshot[id(param)].astype(self.run_dtype(param), copy=False)

    def cast_params(self):
        """Inside the block every parameter is in its run dtype, holding its snapshot; after
        it, each is back in the user's dtype with the user's value."""
        return params_cast(self.params, self.snapshot, self.original_dtypes, self.run_dtype)

    def restore(self) -> None:
        """Reset every parameter to its snapshot (in the dtype it has now)."""
        for param in self.params:
            param.set_value(self.snapshot[id(param)])

    def add_params(self, params) -> None:
        """Snapshot the Parameters a trace found that the case does not hold yet."""
        for param in params:
            if id(param) not in self.original_dtypes:
                self.params.append(param)
                self.original_dtypes[id(param)] = param.dtype
                self.snapshot[id(param)] = np.array(param.numpy(), copy=True)

    def load_params(self, arrays: list) -> None:
        """Replace the snapshot (isolation: the parent's values win over a worker's)."""
        if len(arrays) != len(self.params):
            raise ValueError(
                f"expected {len(self.params)} parameter values, got {len(arrays)}: the "
                "function binds different parameters in this process"
            )
        for param, array in zip(self.params, arrays):
            if tuple(array.shape) != tuple(param.shape):
                raise ValueError(f"parameter {param.name!r}: shape {list(array.shape)} "
                                 f"instead of {list(param.shape)}")
            self.snapshot[id(param)] = np.asarray(array, dtype=self.original_dtypes[id(param)])
        self._reference.clear()


@contextlib.contextmanager
def params_cast(params: list, snapshot: dict, original_dtypes: dict, run_dtype):
    """Every Parameter in `params` in `run_dtype(param)`, holding `snapshot[id(param)]`
    cast to it, inside the block; in `original_dtypes[id(param)]` with its snapshot after.

    A checked dtype casts the whole computation: a float32 weight in a float16 check would
    otherwise promote every op it touches back to float32."""
    try:
        for param in params:
            _put(param, snapshot[id(param)], run_dtype(param))
        yield
    finally:
        for param in params:
            _put(param, snapshot[id(param)], original_dtypes[id(param)])


def _put(param, value, dtype: str) -> None:
    """Give `param` the dtype `dtype` and the value `value` (cast to it)."""
    param.dtype = dtype
    param.set_value(np.asarray(value).astype(dtype, copy=False))


@dataclass
class TargetRun:
    """What one target produced: arrays, or the error that stopped it."""

    outputs: list | None = None
    grads: list | None = None
    error: str = ""
    error_stage: str = ""  # "forward" or "gradient"
    traceback: str = ""
    grads_skipped: str = ""  # why gradients were not run (an inference-only target)
    unsupported: str = ""  # why this target cannot run the case (SecondOrderUnsupported)


# -- preparing ---------------------------------------------------------------------------
def as_function(fn_or_module, name: str | None = None) -> tuple[Function, object]:
    """(a Function to call, the Python callable whose signature names the arguments)."""
    if isinstance(fn_or_module, Function):
        # A fresh Function: the user's own cache may hold graphs traced with parameters in
        # another dtype, and the checker's traces must not count as the user's retraces.
        user_function = fn_or_module
        return function(lambda *args: user_function(*args), name=name or user_function.name,
                        autograph=False), user_function.fn
    forward = getattr(fn_or_module, "forward", None)
    if forward is not None and hasattr(fn_or_module, "parameters"):  # a ug.nn.Module
        module = fn_or_module
        label = name or type(module).__name__
        return function(lambda *args: module(*args), name=label, autograph=False), forward
    if not callable(fn_or_module):
        raise TypeError(f"ug.check needs a function or a ug.nn.Module, got "
                        f"{type(fn_or_module).__name__}")
    return function(fn_or_module, name=name), fn_or_module


def cast_leaf(x, dtype: str):
    """An argument leaf as the array every target is fed: floating ones in `dtype`."""
    if isinstance(x, Tensor):
        x = x.numpy()
    if isinstance(x, bool):
        return np.asarray(x)
    if isinstance(x, int):
        return np.asarray(x, dtype="int64")
    if isinstance(x, float):
        return np.asarray(x, dtype=dtype)
    array = np.asarray(x)
    check_dtype(array.dtype)
    if array.dtype.name in FLOAT_DTYPES:
        return array.astype(dtype)
    return array.copy()


def trace_with_params(fn: Function, inputs: tuple):
    """(graph, Parameters bound to graph.params, output treedef, random input specs).

    `Function.trace` gives only the graph; the checker also needs the Parameter objects.
    """
    traced = fn.trace_full(*inputs)
    return (traced.graph, traced.params, traced.out_treedef,
            [(v.shape, v.dtype) for v in traced.random_inputs])


def output_names(treedef, prefix: str = "output") -> list:
    """Names of the leaves of a result: `output`, `output[0]`, `output[logits]`."""
    names: list = []

    def walk(node, path):
        kind = node[0]
        if kind == "*":
            names.append(path)
        elif kind in ("tuple", "list"):
            for index, child in enumerate(node[1]):
                walk(child, f"{path}[{index}]")
        elif kind == "dict":
            for key, child in zip(node[1], node[2]):
                walk(child, f"{path}[{key}]")

    walk(treedef, prefix)
    return names


def argument_names(signature_of, count: int) -> list:
    try:
        params = list(inspect.signature(signature_of).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for index in range(count):
        if index < len(params) and params[index].kind in (
                inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            names.append(params[index].name)
        elif params and params[-1].kind is inspect.Parameter.VAR_POSITIONAL:
            names.append(f"{params[-1].name}[{index - len(params) + 1}]")
        else:
            names.append(f"arg{index}")
    return names


def _collect_updates():
    """`ug.nn.collect_updates()` when nn is there: a differentiated forward pass must not
    assign batch-norm statistics inside a static graph."""
    try:
        from unigraph.nn import collect_updates
    except ImportError:
        return contextlib.nullcontext()
    return collect_updates()


REDUCTION_SOURCE = "<ug.check: weighted sum of the outputs>"


def _reduction(fn: Function, weights: list):
    from unigraph import api
    from unigraph.tracing import current_builder

    def reduced(*args):
        with _collect_updates():
            result = fn(*args)
        builder = current_builder()
        start = len(builder.graph.nodes) if builder is not None else 0
        leaves, _ = pytree.flatten(result, is_array_leaf)
        total = None
        for leaf, weight in zip(leaves, weights):
            if weight is None:
                continue
            term = api.sum(leaf * weight)
            total = term if total is None else total + term
        if builder is not None:  # name the checker's own nodes, not the caller's line
            for node in builder.graph.nodes[start:]:
                node.source = REDUCTION_SOURCE
        return total

    reduced.__name__ = f"reduce({fn.name})"
    return reduced


def prepare(fn_or_module, inputs: tuple, dtype: str = "float32", grads: bool = True,
            rtol=None, atol=None, seed: int = 0, name: str | None = None) -> Case:
    """Build the `Case` for `ug.check(fn_or_module, *inputs, ...)`."""
    from unigraph.autodiff import value_and_grad

    dtype = check_dtype(dtype)
    if dtype not in FLOAT_DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(FLOAT_DTYPES)}, got {dtype!r}")
    fn, signature_of = as_function(fn_or_module, name)
    leaves, treedef = pytree.flatten(tuple(inputs), is_array_leaf)
    leaves = [cast_leaf(x, dtype) for x in leaves]
    inputs = pytree.unflatten(treedef, leaves)
    with seeded(seed):
        traced = trace_with_params(fn, inputs)
    case = Case(name=name or fn.name, function=fn, inputs=tuple(inputs), leaves=leaves,
                dtype=dtype, seed=seed, params=[], snapshot={}, graph=None, graph_params=[],
                randoms=[], output_names=[], output_budgets=[])
    case.add_params(traced[1])
    with case.cast_params():
        if any(case.run_dtype(p) != case.original_dtypes[id(p)] for p in case.params):
            with seeded(seed):  # again, with the parameters in the checked dtype
                traced = trace_with_params(fn, inputs)
            built = [p for p in traced[1] if id(p) not in case.original_dtypes]
            if built:  # (its layers built anew: not the parameters cast above)
                raise ValueError(
                    f"ug.check({case.name}, dtype={dtype!r}): the function builds "
                    f"{len(built)} parameter(s) each time it runs (a layer made inside it, "
                    f"such as {built[0].name or 'an unnamed parameter'}), so they cannot be "
                    "cast to the checked dtype: build the layers outside the function and "
                    "check the model (or a function that calls it)")
        graph, graph_params, out_treedef, case.randoms = traced
        case.graph, case.graph_params = graph, list(graph_params)
        case.output_names = names = output_names(out_treedef)
        # A loop whose trip count only a run tells: counted in a float64 run (budgets).
        accumulation.observe(graph, *case.feeds("forward"))
        defaults = [cmp.value_budget(v.dtype, dtype, cmp.cone_ops(graph, [v.id]))
                    for v in graph.outputs]
        case.output_budgets = [cmp.override(budget, out_name, rtol, atol)
                               for budget, out_name in zip(defaults, names)]
        case.default_budgets = dict(zip(names, defaults))
        if grads:
            _prepare_grads(case, value_and_grad, signature_of, rtol, atol)
    return case


def _prepare_grads(case: Case, value_and_grad, signature_of, rtol, atol) -> None:
    graph = case.graph
    rng = np.random.default_rng(case.seed + 1)
    shapes = [v.shape for v in graph.outputs]
    if any(d is None for shape in shapes for d in shape):  # a length only a run tells
        shapes = [out.shape for out in float64.outputs(graph, *case.feeds("forward"))]
    weights = [rng.uniform(-1.0, 1.0, shape).astype(v.dtype) if is_float(v.dtype) else None
               for v, shape in zip(graph.outputs, shapes)]
    if all(w is None for w in weights):
        case.notes.append("gradients not checked: the function has no floating output")
        return
    positions = [i for i, x in enumerate(case.inputs)
                 if isinstance(x, np.ndarray) and is_float(x.dtype.name)]
    params = [p for p in case.graph_params if is_float(p.dtype)]
    if not positions and not params:
        case.notes.append("gradients not checked: no floating input or parameter")
        return
    grad_fn = value_and_grad(_reduction(case.function, weights), argnums=tuple(positions),
                             wrt=params)
    with seeded(case.seed):
        grad_graph, grad_params, _, grad_randoms = trace_with_params(grad_fn, case.inputs)
    arg_names = argument_names(signature_of, len(case.inputs))
    names = [f"grad({arg_names[i]})" for i in positions]
    names += [f"grad({p.name or f'param{k}'})" for k, p in enumerate(params)]
    case.grad_graph_params = list(grad_params)
    case.grad_randoms = grad_randoms
    case.add_params(grad_params)
    accumulation.observe(grad_graph, *case.feeds("gradient"))
    # Every op of the forward pass has its VJP in the backward pass: the widest budget.
    op_names = cmp.ops_of(grad_graph)
    dtypes = [case.inputs[i].dtype.name for i in positions] + [p.dtype for p in params]
    case.grad_function = grad_fn
    case.grad_graph = grad_graph
    case.grad_names = names
    case.grad_dtypes = dtypes
    defaults = [cmp.value_budget(d, case.dtype, op_names) for d in dtypes]
    case.grad_budgets = [cmp.override(b, n, rtol, atol) for b, n in zip(defaults, names)]
    case.default_budgets.update(zip(names, defaults))


# -- running -----------------------------------------------------------------------------
def _arrays(result) -> list:
    leaves, _ = pytree.flatten(result, is_array_leaf)
    return [np.array(x.numpy() if isinstance(x, Tensor) else x, copy=True) for x in leaves]


def error_text(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) < 2000 else text[:2000] + " ..."


def inference_only(target: Target) -> bool:
    """True for a target whose backend runs forward passes only (e.g. onnxruntime)."""
    from unigraph.plugins import backends

    backend = backends().get(target.backend)
    return bool(backend is not None and backend.inference_only)


def _takes_gradients(graph) -> bool:
    return any(node.op == "grad" for node in graph.walk())


def run_target(case: Case, target: Target) -> TargetRun:
    """Run the case's function (and its gradient) on `target`; never raises."""
    run = TargetRun()
    if inference_only(target) and _takes_gradients(case.graph):
        run.unsupported = (f"{target} is inference-only and the function itself takes "
                           "gradients (ug.grad inside it)")
        run.error_stage = "forward"
        return run
    stage = "forward"
    try:
        with use_backend(target.backend, target.mode), case.cast_params():
            with seeded(case.seed):
                run.outputs = _arrays(case.function(*case.inputs))
            if case.grad_function is not None and inference_only(target):
                run.grads_skipped = (f"{target} is inference-only: its gradients were not "
                                     "checked (its outputs were)")
            elif case.grad_function is not None:
                stage = "gradient"
                case.restore()
                with seeded(case.seed):
                    _, grads = case.grad_function(*case.inputs)
                run.grads = _arrays(grads)
    except SecondOrderUnsupported as error:  # this target cannot run the case at all
        run.unsupported = str(error)
        run.error_stage = stage
    except Exception as error:  # a target's failure is a result, not a crash of the check
        run.error = error_text(error)
        run.error_stage = stage
        run.traceback = traceback.format_exc(limit=-8)
    return run
