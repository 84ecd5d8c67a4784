"""The benchmark runs, and its native baselines compute what the unigraph workloads compute:
every workload once on every target through `bench/measure.py`'s quick mode (small build
model, one warm-up call and one timed call per side), results compared.

No timing is asserted here (STYLE.md rule 10): speed is reported by `bench/run.py`.
"""

import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import TARGETS

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))  # bench/ is a folder of scripts; run.py imports its siblings

import harness  # noqa: E402
import idiomatic_numpy  # noqa: E402
import measure  # noqa: E402
import run  # noqa: E402
import workloads  # noqa: E402

from unigraph.config import Target  # noqa: E402

# Two calls per side: a training step's last loss was computed after one update, so it
# also checks that both sides applied the same update (one step more or less moves it by
# > 1e-3, see test_agreement_check_sees_one_training_step).
TOLERANCE = run.AGREEMENT_TOLERANCE


@pytest.mark.parametrize("workload", list(workloads.WORKLOADS))
@pytest.mark.parametrize("target", TARGETS)
def test_workload_agrees_with_its_native_code(target, workload):
    record = measure.measure(workload, target, quick=True)
    assert not record["error"], record["error"]
    assert set(record["times"]) == {"unigraph", *record["difference"]}
    assert "native" in record["difference"]
    for side, difference in record["difference"].items():
        assert difference <= TOLERANCE, (
            f"{workload} on {target}: unigraph and the {side} code differ by "
            f"{difference:.2e} (relative)")


def test_agreement_check_sees_one_training_step():
    # The check above passes only if both sides took the same steps: a native side one
    # step behind (or with a learning rate 10% off) is far outside the tolerance.
    data = workloads.make_data("softmax_step")
    fn, inputs = workloads.UNIGRAPH["softmax_step"](data)
    native = idiomatic_numpy.BUILDERS[("softmax_step", "eager")](data)
    fn(*inputs)
    after_two = fn(*inputs)
    after_one = native()
    assert harness.max_difference(after_two, after_one) > 100 * TOLERANCE
    assert harness.max_difference(after_two, native()) <= TOLERANCE


def test_build_workload_has_100_layers_and_quick_has_few():
    assert workloads.depth_of(workloads.make_data("build100")) == 100
    assert workloads.depth_of(workloads.make_data("build100", quick=True)) < 10


def test_goals_follow_issue_19():
    goal = run.goal_for
    assert goal("counter", Target.parse("paddle:static")) == 1.5
    assert goal("cond", Target.parse("numpy:eager")) == 1.5
    assert goal("conv_n64", Target.parse("torch:eager")) == 1.2
    assert goal("mlp_step", Target.parse("tensorflow:function")) == 1.05
    assert goal("softmax_step", Target.parse("tensorflow:static")) == 1.05
    assert goal("conv_n1", Target.parse("numpy:static")) == 1.1
    assert goal("build100", Target.parse("tensorflow:static")) == 2.0


def _record(target, workload, unigraph_s, native_s, round_index, error=""):
    times = {} if error else {"unigraph": {"median": unigraph_s},
                              "native": {"median": native_s}}
    return {"target": target, "workload": workload, "times": times,
            "difference": {} if error else {"native": 0.0}, "error": error,
            "round": round_index}


def test_summary_takes_the_median_ratio_over_rounds_and_its_spread():
    records = [_record("torch:eager", "cond", u, 1.0, i) for i, u in enumerate([3.0, 1.0, 1.1])]
    records.append(_record("paddle:static", "cond", 0, 0, 0, error="worker died (-11): boom"))
    rows = run.summarise(records, [("torch:eager", "cond"), ("paddle:static", "cond")])
    assert rows[0]["ratio"] == pytest.approx(1.1)
    assert (rows[0]["low"], rows[0]["high"]) == (pytest.approx(1.0), pytest.approx(3.0))
    assert run.met(rows[0]) == "yes" and run.met(rows[1]) == "error"
    table = run.format_table(rows)
    assert "1.10" in table and "1.00-3.00" in table and "worker died (-11): boom" in table
    assert "goals met: 1 of 2, missed: 0, errors: 1" in table
    markdown = run.format_markdown(rows)
    assert "| `torch:eager` | 1.10 (1.00–3.00) |" in markdown


def test_worker_process_measures_one_pair(tmp_path):
    class Args:
        rounds, repeat, threads, quiet = 1, 1, 1, True

    records = run.run_rounds([("numpy:static", "cond")], Args)
    assert len(records) == 1 and not records[0]["error"], records[0]["error"]
    assert records[0]["difference"] == {"native": 0.0}
    assert np.isfinite(run.summarise(records, [("numpy:static", "cond")])[0]["ratio"])
