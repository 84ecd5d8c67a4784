"""`model.summary(*example_inputs)`: layers in execution order, every parameter listed
(root-level ones too), output shapes, and counts whose rows add up to the totals."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug


class Shuffled(ug.nn.Module):
    """Layers defined in one order and called in another; a root-level parameter, a frozen
    one, a layer called twice, a layer never called, two inputs."""

    def __init__(self):
        super().__init__()
        self.head = ug.nn.Linear(4, 2)
        self.body = ug.nn.Sequential(ug.nn.Linear(3, 4), ug.nn.ReLU())
        self.again = ug.nn.Linear(4, 4)
        self.spare = ug.nn.Linear(5, 5)
        self.offset = ug.Parameter(np.zeros((2,), np.float32))
        self.again.bias.trainable = False

    def forward(self, x, z):
        h = self.again(self.again(self.body(x)))
        return self.head(h) + self.offset + z


def _rows(table: str) -> list:
    """(layer, output shape, parameters, count) of every row between the header and the
    totals."""
    lines = table.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("===")) + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("---"))
    header = lines[start - 2]
    columns = [header.index(name) for name in ("Output shape", "Parameters", "Param #")]
    rows = []
    for line in lines[start:end]:
        rows.append((line[:columns[0]].strip(), line[columns[0]:columns[1]].strip(),
                     line[columns[1]:columns[2]].strip(), int(line.split()[-1].replace(",", ""))))
    return rows


def _total(table: str, label: str) -> int:
    line = next(line for line in table.splitlines() if line.startswith(label))
    return int(line.split(":")[1].replace(",", ""))


@pytest.mark.parametrize("target", TARGETS)
def test_rows_in_execution_order_add_up_to_the_totals(target):
    model = Shuffled()
    with ug.use_backend(*target.split(":")):  # example inputs may be the target's tensors
        x = ug.tensor(np.zeros((6, 3), np.float32))
        table = model.summary(x, np.zeros((6, 2), np.float32), print_fn=None)
    rows = _rows(table)
    assert [row[0] for row in rows] == [
        "(model) (Shuffled)", "body (Sequential)", "body.0 (Linear)", "body.1 (ReLU)",
        "again (Linear)", "again (Linear)", "head (Linear)", "spare (Linear)"]
    assert rows[0] == ("(model) (Shuffled)", "[6, 2]", "offset [2]", 2)  # root-level
    assert rows[2] == ("body.0 (Linear)", "[6, 4]", "weight [3, 4], bias [4]", 16)
    assert rows[4] == ("again (Linear)", "[6, 4]", "weight [4, 4], bias [4] frozen", 20)
    assert rows[5] == ("again (Linear)", "[6, 4]", "(counted above)", 0)  # called again
    assert rows[7] == ("spare (Linear)", "(not called)", "weight [5, 5], bias [5]", 30)
    # By hand: 2 + (12 + 4) + (16 + 4) + (8 + 2) + (25 + 5); only again.bias is frozen.
    total = 2 + 16 + 20 + 10 + 30
    assert sum(row[3] for row in rows) == _total(table, "Total params") == total
    assert _total(table, "Trainable params") == total - 4
    assert _total(table, "Non-trainable params") == 4
    assert total == sum(int(np.prod(p.shape)) for p in model.parameters())


def test_every_parameter_is_listed_once():
    model = Shuffled()
    rows = _rows(model.summary(np.zeros((1, 3), np.float32), np.zeros((1, 2), np.float32),
                               print_fn=None))
    listed = []
    for layer, _, parameters, _ in rows:
        path = layer.split(" ")[0]
        for name in re.findall(r"(\S+) \[", parameters):  # "weight [4, 4], bias [4]"
            listed.append(name if path == "(model)" else f"{path}.{name}")
    assert sorted(listed) == sorted(name for name, _ in model.named_parameters())


def test_the_shape_form_still_works_and_matches_example_inputs():
    model = ug.nn.Sequential(ug.nn.Conv2D(1, 2, 3, padding=1), ug.nn.BatchNorm2D(2),
                             ug.nn.ReLU())
    from_shape = model.summary((2, 1, 4, 4), print_fn=None)
    from_shape_dtype = model.summary((2, 1, 4, 4), "float32", print_fn=None)
    from_keyword = model.summary(input_shape=(2, 1, 4, 4), print_fn=None)
    from_input = model.summary(np.zeros((2, 1, 4, 4), np.float32), print_fn=None)
    assert from_shape == from_shape_dtype == from_keyword == from_input
    rows = _rows(from_shape)
    assert rows[0] == ("0 (Conv2D)", "[2, 2, 4, 4]", "weight [2, 1, 3, 3], bias [2]", 20)
    assert "Buffers: 4" in from_shape  # batch norm's running mean and variance
    assert sum(row[3] for row in rows) == _total(from_shape, "Total params") == 24


def test_a_single_layer_lists_itself_and_printing_is_optional(capsys):
    table = ug.nn.Linear(3, 4).summary((5, 3))
    assert capsys.readouterr().out.strip() == table
    assert _rows(table) == [("(model) (Linear)", "[5, 4]", "weight [3, 4], bias [4]", 16)]


def test_missing_inputs_are_explained():
    with pytest.raises(TypeError, match=r"example inputs.*net.summary\(\(1, 784\)\)"):
        ug.nn.Linear(3, 4).summary(print_fn=None)
    with pytest.raises(TypeError, match="not both"):
        ug.nn.Linear(3, 4).summary(np.zeros((1, 3)), input_shape=(1, 3), print_fn=None)
