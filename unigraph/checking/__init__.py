"""Cross-framework equivalence checking: `ug.check`, `ug.check_training`, `Report`.

The package is `unigraph.checking`, not `unigraph.check`: importing a subpackage sets it as
an attribute of its parent, which would shadow the public function `ug.check`.

Every target runs the same function with the same inputs and parameters; the NumPy engine
runs the same traced graph in float64 as the reference. Each output (and each gradient, and
for training each step's loss and every weight after the steps) is compared with the
reference under a budget that depends on the dtype and on the ops that computed it. When a
target disagrees, the first node whose *own* error exceeds its budget is named, with the
user's source line.

The float64 reference is the core's reference engine (`unigraph.reference.float64`).
Modules: `compare` (budgets, error figures), `run` (the Case: inputs, parameters in the
checked dtype, running targets), `execute` (a graph on a target with every intermediate),
`localize` (first divergence), `across` (targets compared with each other where the
reference cannot compute: second order), `report` (the Report), `isolate` (one worker
process per target), `scripts` (checkable scripts and their `CHECKS`), `training`
(`check_training`), `checker` (`check`). Suites (many scripts x targets x seeds x dtypes,
`check_suite`): `suite` (planning, cache), `executors` (local processes, Ray), `worker`
(one task in a worker process), `suite_report` and `suite_html` (the merged report).
"""

from unigraph.checking.checker import check, resolve_targets
from unigraph.checking.report import CheckFailed, Comparison, Divergence, Report, TargetReport
from unigraph.checking.suite import SuiteError, check_suite
from unigraph.checking.suite_report import SuiteReport
from unigraph.checking.training import check_training

__all__ = [
    "CheckFailed", "Comparison", "Divergence", "Report", "SuiteError", "SuiteReport",
    "TargetReport", "check", "check_suite", "check_training", "resolve_targets",
]
