"""README's Python code blocks, run as written, so that the README cannot drift from the code.

Every ```python block of README.md is listed in BLOCKS under its section's heading, with
what it needs defined first (`setup`, for blocks that show a call on names of the reader's
own, such as `model_or_fn`) and the targets it claims: a block that says it runs on every
target runs under `ug.use_backend(target)` for each of them; one that picks its own
targets (Quick start, Models and training) runs once, as written. A new block fails
`test_every_python_block_is_listed` until it is listed here.

A top-level expression whose comment is a Python literal, `# [2., 4.]` or
`# numpy:eager -> (20, 20)`, is checked against that value.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS

import unigraph as ug
from unigraph.config import Target

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> dict:
    """{section heading: [the code of each ```python block under it]} of README.md."""
    blocks, heading, code = {}, None, None
    for line in README.read_text().splitlines():
        if code is not None:
            if line.startswith("```"):
                blocks.setdefault(heading, []).append("\n".join(code) + "\n")
                code = None
            else:
                code.append(line)
        elif line.startswith("## "):
            heading = line[3:].strip()
        elif line.strip() == "```python":
            code = []
    return blocks


CONTROL_FLOW_SETUP = """
x, y = ug.tensor(2.0), ug.tensor(-1.0)
a, b = ug.tensor(0), ug.tensor(10)
i, t = ug.tensor(0), ug.tensor(0.0)
def body(s):
    return {"i": s["i"] + 1, "total": s["total"] + 2.0}
"""

GRADIENTS_SETUP = """
x, y = ug.tensor([1.0, 2.0]), ug.tensor([3.0, -1.0])
f = lambda x, y: ug.sum(x * x * y)
ug.manual_seed(0)
model = ug.nn.Linear(2, 3)
loss_fn = lambda out, want: ug.mean((out - want) ** 2)
x_batch, y_batch = ug.tensor([[1.0, 2.0]]), ug.tensor([[0.5, 0.0, -0.5]])
"""
# The block's own names x and y are the function's arguments; the model's batch is bound
# to them by the model lines below, so the setup renames before those lines run.
GRADIENTS_MODEL_INPUTS = "x, y = x_batch, y_batch\n"

CHECKING_SETUP = """
import numpy as np
ug.manual_seed(0)
model = ug.nn.Linear(4, 3)
model_or_fn = model
inputs = (np.linspace(-1.0, 1.0, 8, dtype=np.float32).reshape(2, 4),)
loss_fn = ug.nn.functional.cross_entropy
optimizer = ug.optim.SGD(model.parameters(), lr=0.1)
batches = [(inputs[0], np.array([0, 2]))]
"""

# heading -> one entry per block: (setup, targets: None = as written, "each" = every
# target the block claims, listed in `claimed`)
BLOCKS = {
    "Quick start": [{"setup": "", "targets": None}],
    "Control flow": [{"setup": CONTROL_FLOW_SETUP, "targets": FORWARD_TARGETS}],
    "Gradients": [{"setup": GRADIENTS_SETUP, "targets": TARGETS,
                   "before_line": ("loss, grads", GRADIENTS_MODEL_INPUTS)}],
    "Models and training": [{"setup": "", "targets": None}],
    "Checking agreement": [{"setup": CHECKING_SETUP, "targets": None}],
    "Backends as plugins": [{"setup": "", "targets": None}],
}

CASES = [(heading, k) for heading, entries in BLOCKS.items() for k in range(len(entries))]


def test_every_python_block_is_listed():
    found = {heading: len(codes) for heading, codes in python_blocks().items()}
    listed = {heading: len(entries) for heading, entries in BLOCKS.items()}
    assert found == listed, "README's python blocks changed: list them in BLOCKS"


def _expected(comment: str):
    """The value a `# ...` comment states, or None: a literal, alone or after `->`."""
    text = comment.lstrip("#").strip()
    text = text.split("->")[-1].strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None


def _comments(code: str) -> dict:
    """{line number: comment text} of `code`."""
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type == tokenize.COMMENT:
            found[token.start[0]] = token.string
    return found


def _as_numbers(value):
    if isinstance(value, tuple | list):
        return type(value)(_as_numbers(v) for v in value)
    if isinstance(value, ug.Tensor):
        return value.numpy()
    return value


def run_block(code: str, setup: str, folder: Path, before_line=None) -> dict:
    """Run `setup`, then `code` statement by statement; check each top-level expression
    whose comment states a value. Returns the block's namespace. Both are files in
    `folder`, as a reader's script would be (autograph reads the functions' source)."""
    namespace = {"__name__": "readme_block", "ug": ug, "np": np}
    setup_file, block_file = folder / "readme_setup.py", folder / "readme_block.py"
    setup_file.write_text(setup)
    block_file.write_text(code)
    exec(compile(setup, str(setup_file), "exec"), namespace)
    comments = _comments(code)
    checked, values = 0, []
    for statement in ast.parse(code).body:
        source = ast.get_source_segment(code, statement)
        if before_line is not None and source.startswith(before_line[0]):
            exec(before_line[1], namespace)
            before_line = None
        module = ast.Module([statement], type_ignores=[])
        if isinstance(statement, ast.Expr):
            value = eval(compile(ast.Expression(statement.value), str(block_file), "eval"),
                         namespace)
            values.append(_as_numbers(value))
            want = _expected(comments.get(statement.end_lineno, ""))
            if want is not None:
                np.testing.assert_allclose(np.asarray(_as_numbers(value), np.float64),
                                           np.asarray(want, np.float64), rtol=1e-6,
                                           err_msg=source)
                checked += 1
        else:
            exec(compile(module, str(block_file), "exec"), namespace)
    namespace["_checked_values"], namespace["_values"] = checked, values
    return namespace


def _targets_of(heading: str, k: int) -> list:
    targets = BLOCKS[heading][k]["targets"]
    return [None] if targets is None else targets


@pytest.mark.parametrize("heading, k, target",
                         [(h, k, t) for h, k in CASES for t in _targets_of(h, k)])
def test_readme_block_runs(heading, k, target, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # files a block writes (loss.png) land here
    entry = BLOCKS[heading][k]
    code = python_blocks()[heading][k]
    if target is None:
        namespace = run_block(code, entry["setup"], tmp_path, entry.get("before_line"))
    else:
        t = Target.parse(target)
        with ug.use_backend(t.backend, t.mode):
            namespace = run_block(code, entry["setup"], tmp_path, entry.get("before_line"))
    check = AFTER.get(heading)
    if check is not None:
        check(namespace, tmp_path)


# What each block leaves behind, checked after it ran.
def _after_quick_start(namespace, _):
    assert namespace["report"].ok
    assert namespace["_checked_values"] == 1  # `counter(0, 10)  # ... -> (20, 20)`


def _after_control_flow(namespace, _):
    branch, (a, b), state = namespace["_values"]
    assert float(branch) == 1.0  # x > y: x + y
    assert (int(a), int(b)) == (20, 20)
    assert (int(state["i"]), float(state["total"])) == (5, 10.0)


def _after_gradients(namespace, _):
    assert namespace["_checked_values"] == 1  # `ug.grad(...)(...)  # [2., 4.]`
    loss, grads = namespace["loss"], namespace["grads"]
    assert np.isfinite(loss.numpy())
    assert [g.shape for g in grads] == [p.shape for p in namespace["model"].parameters()]


def _after_models(namespace, tmp_path):
    accuracy = namespace["trainer"].evaluate(namespace["x_test"], namespace["y_test"])
    assert accuracy["accuracy"] > 0.3, accuracy  # 3 epochs of Adam: it learned something
    assert (tmp_path / "loss.png").stat().st_size > 0


def _after_checking(namespace, _):
    report = namespace["report"]
    assert report.ok and "agree" in str(report)


def _after_plugins(namespace, _):
    from unigraph.backend import Backend

    (backend,) = namespace["unigraph_backends"]()
    assert isinstance(backend, Backend) and backend.name == "mine"
    assert backend.modes == ("eager", "static")


AFTER = {"Quick start": _after_quick_start, "Control flow": _after_control_flow,
         "Gradients": _after_gradients, "Models and training": _after_models,
         "Checking agreement": _after_checking, "Backends as plugins": _after_plugins}


def test_the_value_comments_are_read():
    assert _expected("# numpy:eager -> (20, 20)") == (20, 20)
    assert _expected("# [2., 4.]") == [2.0, 4.0]
    assert _expected("# tf.while_loop in a tf.compat.v1.Graph + Session") is None


def _renumbered(listing: str) -> str:
    """`listing` with its value ids numbered in order of first appearance (%0, %1, ...),
    and its source paths without their folders (they are relative to the working folder)."""
    ids: dict = {}
    listing = re.sub(r"# \S*/(\w+\.py:\d+)", r"# \1", listing)
    return re.sub(r"%(\d+)", lambda m: f"%{ids.setdefault(m.group(1), len(ids))}", listing)


def test_the_ir_listing_is_what_counter_traces_to():
    import sys

    text = README.read_text()
    start = text.index("a `@ug.function` traces to:\n\n```\n") + len(
        "a `@ug.function` traces to:\n\n```\n")
    shown = text[start:text.index("```", start)]
    examples = str(README.parent / "examples")
    sys.path.insert(0, examples)
    try:
        import counter_loop
    finally:
        sys.path.remove(examples)
    traced = str(counter_loop.counter.trace(0, 10))
    assert _renumbered(shown.strip()) == _renumbered(traced.strip())
