"""The benchmark runs, and its hand-written baselines compute what the unigraph workloads
compute: every workload once per NumPy target through the harness, results compared.

No timing is asserted here (STYLE.md rule 10): speed is reported by `bench/run.py`.
"""

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))  # bench/ is a folder of scripts; run.py imports its siblings

import run  # noqa: E402  (bench/run.py)
import workloads  # noqa: E402

from unigraph.config import Target  # noqa: E402


@pytest.mark.parametrize("target", ["numpy:eager", "numpy:static"])
@pytest.mark.parametrize("workload", list(workloads.WORKLOADS))
def test_workload_agrees_with_its_native_baseline(workload, target):
    # warmup=2, repeat=1, number=1: each side runs three times, so a training step's last
    # loss also checks that both sides applied the same updates (a learning rate 10% off
    # or a missing bias gradient moves it by more than 1e-4).
    row = run.measure(workload, Target.parse(target), repeat=1, warmup=2, min_sample_s=0)
    assert not row.error, row.error
    assert row.difference is not None and row.difference <= 1e-5, (
        f"{workload} on {target}: unigraph and the hand-written NumPy differ by "
        f"{row.difference:.2e} (relative)"
    )
    assert row.unigraph_s > 0 and row.native_s > 0


def test_table_lists_every_row():
    rows = [run.measure("cond", Target.parse("numpy:static"), repeat=1, warmup=1,
                        min_sample_s=0)]
    table = run.harness.format_table(rows)
    assert "cond" in table and "numpy:static" in table and "ratio" in table
