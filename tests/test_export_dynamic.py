"""Exports with unknown dims (issue 15, dynamic batch): `ug.export(..., dynamic_batch=True)`,
`input_spec=[ug.Spec((None, 4))]`, or a function's own input_spec write artifacts that run
on other batch sizes than the example's. Each framework reloads them in a fresh process
that never imports unigraph, on batches 1, 3 and 8 (the example has 2), and every output is
compared with the float64 reference (numpy:eager on float64 inputs and weights)."""

from pathlib import Path

import numpy as np
import pytest
from export_cases import Gate, reference

import unigraph as ug
from unigraph.cli_export import main as export_main
from unigraph.errors import ShapeError
from unigraph.export import FORMATS, prepare, write
from unigraph.export.verify import (
    RELOADERS,
    Artifact,
    check_artifact,
    other_batches,
    reload_outputs,
)

FORMATS_DYNAMIC = ("savedmodel", "tflite", "torch", "paddle", "onnx")
BATCHES = (1, 3, 8)


class MLP(ug.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = ug.nn.Linear(4, 5)
        self.fc2 = ug.nn.Linear(5, 3)

    def forward(self, x):
        return ug.nn.functional.softmax(self.fc2(ug.nn.functional.relu(self.fc1(x))))


@ug.function(input_spec=[ug.Spec((None, 4)), None])
def scaled_rows(x, k):
    """A function with its own input_spec: the export keeps its None dim."""
    return ug.sum(x * k, axis=1), ug.mean(x, axis=0)


def rows(batch: int) -> np.ndarray:
    return np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)


# name -> (function or model, example inputs, export options, inputs of other batch sizes)
PROGRAMS = {
    "mlp": (MLP().eval(), (rows(2),), {"dynamic_batch": True}, [(rows(b),) for b in BATCHES]),
    "gate": (Gate(), (rows(2),), {"input_spec": [ug.Spec((None, 4))]},
             [(rows(b),) for b in BATCHES]),
}

def export_and_reload(framework: str, folder: Path) -> dict:
    """{(format, program): [outputs per other batch, or the error text]} from one fresh
    process for `framework`."""
    artifacts, keys = [], []
    for format in (f for f in FORMATS_DYNAMIC if RELOADERS[f][0] == framework):
        for name, (fn, inputs, options, others) in PROGRAMS.items():
            prepared = prepare(fn, inputs, **options)
            path = write(prepared, str(folder / f"{name}.{format}{FORMATS[format].suffix}"),
                         format)
            for other in others:
                feeds = [np.asarray(x) for x in other]
                artifacts.append(Artifact(format, path, prepared.input_names,
                                          prepared.output_names, feeds))
                keys.append((format, name))
    results: dict = {}
    for key, got in zip(keys, reload_outputs(artifacts, str(folder))):
        results.setdefault(key, []).append(got)
    return results


@pytest.fixture(scope="module")
def reloaded(tmp_path_factory):
    done: dict = {}

    def results(format: str, name: str) -> list:
        framework = RELOADERS[format][0]
        if framework not in done:
            done[framework] = export_and_reload(framework, tmp_path_factory.mktemp(framework))
        return done[framework][(format, name)]

    return results


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("format", FORMATS_DYNAMIC)
def test_an_artifact_with_an_unknown_batch_runs_other_batch_sizes(reloaded, format, name):
    fn, _, _, others = PROGRAMS[name]
    for inputs, got in zip(others, reloaded(format, name)):
        assert not isinstance(got, str), f"{format} reload of {name} failed:\n{got}"
        want = reference(fn, inputs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert np.shape(g) == np.shape(w), f"{name} as {format}: {np.shape(g)}"
            np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=1e-4, atol=1e-5)


def test_prepare_leaves_the_spec_dims_unknown():
    fn, inputs, options, _ = PROGRAMS["mlp"]
    assert [v.shape for v in prepare(fn, inputs, **options).graph.inputs] == [(None, 4)]
    assert [v.shape for v in prepare(scaled_rows, (rows(2), np.float32(1.0))).graph.inputs] \
        == [(None, 4), ()]
    assert [v.shape for v in prepare(fn, inputs).graph.inputs] == [(2, 4)]
    with pytest.raises(ShapeError, match=r"argument 'x'.*dim 1 \(4, the spec says 5\)"):
        prepare(fn, inputs, input_spec=[ug.Spec((None, 5))])
    assert [x.shape for (x,) in other_batches((rows(3),))] == [(1, 4), (6, 4)]


def test_cli_dynamic_batch_is_verified_on_other_sizes_and_rechecked(tmp_path, capsys):
    script = tmp_path / "model.py"
    script.write_text(
        "import numpy as np\nimport unigraph as ug\n\n"
        "@ug.function\ndef forward(x):\n    return ug.tanh(x) * 2.0\n\n"
        "CHECKS = {'forward': (forward, (np.ones((3, 2), np.float32),))}\n")
    out = tmp_path / "forward.onnx"
    status = export_main([f"{script}:forward", "--format", "onnx", "-o", str(out),
                          "--dynamic-batch", "--verify"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "agrees with the float64 reference" in printed
    checked = check_artifact(str(out))
    assert checked.ok, checked.summary()
    # the example (3 rows), its first row, its rows twice over
    assert [np.shape(o) for o in checked.outputs] == [(3, 2), (1, 2), (6, 2)]


@pytest.mark.parametrize("batch", [2, 1, 0])
def test_torch_dynamic_shapes_trace_one_program_for_every_batch(batch):
    """The helper the torch writer uses (`dynamic_shapes`), exported in process: the
    example's batch of 0 or 1 is widened so that torch.export does not specialise it."""
    from unigraph.export.torch_dims import dynamic_shapes
    from unigraph.plugins import get_backend

    torch = get_backend("torch").load()
    from unigraph_torch.export import named_module

    fn, _, options, others = PROGRAMS["gate"]
    prepared = prepare(fn, (rows(batch),), **options)
    examples = tuple(torch.from_numpy(x.copy()) for x in prepared.example_inputs)
    shapes, examples = dynamic_shapes(prepared, examples)
    assert [tuple(x.shape) for x in examples] == [(max(batch, 2), 4)]
    with torch.no_grad():
        program = torch.export.export(named_module(prepared).eval(), examples,
                                      dynamic_shapes=shapes, strict=False).module()
        for (x,) in others:
            (got,) = program(torch.from_numpy(x))
            np.testing.assert_allclose(got.numpy().astype(np.float64), reference(fn, (x,))[0],
                                       rtol=1e-4, atol=1e-5)
