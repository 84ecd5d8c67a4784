"""onnxruntime:static, the fifth backend: a plugin package built on the ONNX exporter.

It is registered here through `unigraph.plugins.register_plugin` when the `onnxruntime`
entry point is not installed, and unregistered afterwards, so the other test modules see
the registry they expect. Covered: the backend contract (`unigraph.testing.
backend_contract`, run against this backend; its eager-gradient test is the one refusal),
every op sample in a compiled graph and outside `@ug.function` (one-node models), programs
with control flow and parameter updates against the float64 reference and against all 9
targets, gradients refused naming the line, and the ONNX Runtime quirks' pins.
"""

import inspect

import numpy as np
import pytest
from conftest import TARGETS, floats_as, op_samples, run_on
from export_cases import Gate, compare, shrink
from unigraph_onnxruntime import plugin
from unigraph_onnxruntime.backend import OnnxRuntimeBackend
from unigraph_onnxruntime.quirks import QUIRKS

import unigraph as ug
from unigraph.dispatch import apply
from unigraph.errors import BackendError
from unigraph.ir import DTYPES, Graph, Node, Value
from unigraph.plugins import backends, register_plugin, unregister_plugin
from unigraph.testing import backend_contract

ORT = "onnxruntime:static"


@pytest.fixture(scope="module", autouse=True)
def registered():
    """The onnxruntime backend in the registry for this module (entry point or by hand)."""
    added = "onnxruntime" not in backends()
    if added:
        register_plugin(plugin, name="onnxruntime")
    yield backends()["onnxruntime"]
    if added:
        unregister_plugin(plugin)


def run_ort(fn, *args):
    return run_on(ORT, fn, *args)


# -- the backend contract ------------------------------------------------------------------------
CONTRACT = [name for name in backend_contract.__all__
            if name != "test_eager_grad_gives_zeros_for_unused_and_integer_leaves"]


@pytest.mark.parametrize("name", CONTRACT)
def test_backend_contract(name):
    """Each contract test, called with this backend (and mode "static", every dtype)."""
    test = getattr(backend_contract, name)
    parameters = inspect.signature(test).parameters
    kwargs = {"backend": OnnxRuntimeBackend()}
    if "mode" in parameters:
        kwargs["mode"] = "static"
    for dtype in DTYPES if "dtype" in parameters else [None]:
        test(**kwargs, **({"dtype": dtype} if dtype else {}))


def test_eager_gradients_are_refused_naming_the_line():
    """No gradients, by design (the contract suite checks that inference-only backends
    refuse them); the refusal names the user's line."""
    backend = OnnxRuntimeBackend()
    x = backend.to_native(np.array([1.0, 2.0]))

    def fn(a):
        return [backend.eager_op("sum", [a], {"axis": None, "keepdims": False})]

    with pytest.raises(BackendError, match=r"inference only: the gradient at .*:\d+ cannot"):
        backend.eager_grad(fn, [x])


# -- every op, compiled and one node at a time -----------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op, sample", op_samples())
def test_every_op_sample(op, sample, dtype):
    """In a compiled graph (float32) and as a one-node model outside @ug.function
    (float64), within the op's tolerance of the float64 reference, in the right dtype."""
    inputs = floats_as(dtype, sample.inputs)
    if dtype == "float32":
        fn = ug.function(lambda *xs: apply(op.name, list(xs), sample.attrs), name=op.name)
        got = run_ort(fn, *inputs)
    else:
        with ug.use_backend("onnxruntime", "static"):
            got = np.asarray(apply(op.name, list(inputs), sample.attrs).numpy())
    assert got.dtype == op.reference(*inputs, **sample.attrs).dtype
    rtol, atol = op.tolerance_for(dtype)
    compare(got, op.reference(*sample.inputs, **sample.attrs), rtol, atol,
            f"{op.name} on {ORT} in {dtype}")


# -- programs -------------------------------------------------------------------------------
def normed():
    """A conv and BatchNorm in training mode: the running statistics are graph updates."""
    ug.manual_seed(3)
    return ug.nn.Sequential(ug.nn.Conv2D(2, 3, 3, padding=1), ug.nn.BatchNorm2D(3)).train()


RNG = np.random.default_rng(1)
X4 = RNG.standard_normal((2, 4)).astype(np.float32)
IMAGES = RNG.standard_normal((2, 2, 5, 5)).astype(np.float32)


@pytest.mark.parametrize("target", TARGETS)
def test_programs_agree_with_every_target(target):
    gate = Gate()
    cases = [(gate, (X4,)), (gate, (-np.abs(X4),)),
             (shrink, (RNG.standard_normal(3).astype(np.float32) * 8, np.float32(0.5)))]
    for fn, args in cases:
        got, want = run_ort(fn, *args), run_on(target, fn, *args)
        for g, w in zip(*(v if isinstance(v, list) else [v] for v in (got, want))):
            compare(g, w, 1e-4, 1e-5 * max(1.0, float(np.max(np.abs(w)))), f"{ORT} vs {target}")


@pytest.mark.parametrize("target", TARGETS)
def test_parameter_updates_agree_with_every_target(target):
    """Two training-mode BatchNorm runs: outputs and running statistics as on `target`."""
    ours, theirs = normed(), normed()
    for step in range(2):
        got, want = run_ort(ours, IMAGES + step), run_on(target, theirs, IMAGES + step)
        compare(got, want, 1e-4, 1e-5, f"output {step} on {ORT} vs {target}")
    for name in ("1.running_mean", "1.running_var"):
        compare(dict(ours.named_buffers())[name].numpy(),
                dict(theirs.named_buffers())[name].numpy(), 1e-5, 1e-6, name)


def test_check_runs_onnxruntime_like_any_target():
    report = ug.check(Gate().eval(), X4, targets=f"numpy:eager,{ORT}", grads=False)
    report.assert_ok()
    assert ORT in str(report)


def test_a_none_batch_runs_on_any_batch_size(registered):
    x, w = Value((None, 3), "float64", "x"), Value((3, 2), "float64", "w")
    y = Value((None, 2), "float64")
    graph = Graph("dense", [x], [w], [Node("matmul", [x, w], [y])], [y]).verify()
    executable = registered.compile(graph, "static")
    weight = np.arange(6.0).reshape(3, 2)
    executable.set_param(0, weight)
    for batch in (1, 4, 0):
        feed = np.arange(batch * 3.0).reshape(batch, 3)
        (got,) = executable.run([feed])
        compare(got, feed @ weight, 1e-12, 1e-12, f"batch {batch}")


# -- what is refused -------------------------------------------------------------------------
def test_gradients_and_training_are_refused_naming_the_line():
    model = ug.nn.Linear(3, 2)
    optimizer = ug.optim.SGD(model.parameters(), lr=0.1)

    @ug.function
    def step(x):
        loss, grads = ug.value_and_grad(lambda: ug.mean(model(x)), wrt=model.parameters())()
        optimizer.apply(grads)
        return loss

    x = np.ones((4, 3), np.float32)
    before = model.weight.numpy().copy()
    with ug.use_backend("onnxruntime", "static"):
        with pytest.raises(BackendError, match=r"inference only.*test_backend_onnxruntime"
                                               r".py:\d+.*Train on another target"):
            step(x)
        with pytest.raises(BackendError, match=r"inference only.* at "
                                               r"tests/test_backend_onnxruntime.py:\d+"):
            ug.grad(lambda v: ug.sum(v * v))(ug.tensor(x))
    np.testing.assert_array_equal(model.weight.numpy(), before)


def test_there_is_no_eager_mode():
    with pytest.raises(BackendError, match="no mode 'eager'; its modes are: static"):
        with ug.use_backend("onnxruntime", "eager"):
            pass


def test_a_failing_run_names_the_op_and_line(monkeypatch):
    from types import SimpleNamespace

    from unigraph_onnxruntime import lowerings

    from unigraph.errors import IndexOutOfRangeError

    with ug.use_backend("onnxruntime", "static"):
        # An index out of range is the error every target raises (README).
        with pytest.raises(IndexOutOfRangeError, match=r"take on onnxruntime:static at "
                           r".*test_backend_onnxruntime.py:\d+: index 5 is out of range"):
            apply("take", [np.arange(3.0), np.array([5])], {"axis": 0})

        # Any other failure of ONNX Runtime's run is a BackendError naming the op and line.
        def failing_run(*args):
            raise RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION")

        monkeypatch.setattr(lowerings, "_session", lambda *args: SimpleNamespace(
            session=SimpleNamespace(run=failing_run), graph=None,
            target="onnxruntime:static"))
        with pytest.raises(BackendError, match=r"take at .*test_backend_onnxruntime.py:\d+ "
                                               r"failed on onnxruntime:static: "
                                               r"\[ONNXRuntimeError\] : 6"):
            apply("take", [np.arange(3.0), np.array([1])], {"axis": 0})


@pytest.mark.parametrize("quirk", QUIRKS, ids=lambda q: q.op)
def test_quirk_pins_hold(quirk):
    """Each ONNX Runtime behaviour the emitters route around still holds: an upgrade that
    fixes one fails here, so the workaround can be reviewed."""
    assert quirk.pin(), str(quirk)
