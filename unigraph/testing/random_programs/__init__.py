"""A differential tester: random valid programs, every target, the float64 reference.

    python -m unigraph.testing.random_programs --seed 0 --count 2000 \\
        [--targets paddle:static,torch] [--grad/--no-grad] [--open-dims/--no-open-dims]

hypothesis draws programs built from the op records (`strategies`): elementwise ops with
broadcasting, reductions, reshapes / transposes / slices, matmul, the softmax family,
conv2d and pools with valid shapes, nested `ug.cond` / `ug.while_loop` with bounded trip
counts, and Python `if` / `while` / `for` (over `range(n)`, `ug.range`, a value's rows;
`break` / `continue`) inside `@ug.function` and in plain helper functions it calls
(autograph). A program is data
(`model`), rendered as a standalone script using only numpy and unigraph, and that script
is what runs. About one draw in five is instead a training program (`training`): a small
`ug.nn` model, a loss and 1-3 `ug.optim` steps, judged by each step's loss, the weights
and the optimizer's state after the steps. Each program runs forward and under `ug.grad`
(of a fixed weighted sum of its float outputs, with respect to every input), inside
`@ug.function` so static targets compile it, on every target, in a worker process per
backend (`workers`); the answer is compared with numpy:eager on the same inputs in
float64, under budgets taken from the op records (`runner`). Programs that come close to a
kink, a tie or an overflow in float64 are rejected, not judged. A raw framework error, a
crash, or a refusal that does not name the user's line is a failure as much as a wrong
number.

A program may also draw an `input_spec` that leaves dims of its inputs open (None): its
inputs keep their sizes, eager targets check the call against the spec, and static
targets trace with those sizes unknown until the run. A static target that refuses such
a program, where the same program with every dim known runs, fails ("open-dim refusal":
one program, one meaning) unless the refusal is a documented limit naming the fix
(`runner.OPEN_DIM_LIMITS`: "open-dim limit", counted apart).

The CLI prints per-target counts and, for each distinct failure, the program hypothesis
shrank it to, as a script that prints the reference and the failing targets' answers.

>>> from unigraph.testing.random_programs import survey
>>> found = survey(["numpy:static", "torch:eager"], count=20, seed_value=0, open_dims=False)
>>> found.failures
{}
"""

from unigraph.testing.random_programs.model import Program, render
from unigraph.testing.random_programs.runner import evaluate
from unigraph.testing.random_programs.strategies import programs
from unigraph.testing.random_programs.tester import shrink, survey
from unigraph.testing.random_programs.workers import Workers

__all__ = ["Program", "Workers", "evaluate", "programs", "render", "shrink", "survey"]
