"""ONNX's own backend node tests, run through `ug.onnx.load` on unigraph's targets.

The `onnx` package ships one test case per op behaviour (`onnx.backend.test.case.node`: a
one-node model, its inputs and the outputs ONNX's NumPy reference gives). Each case is
imported and run on each target, and its outputs compared with the expected ones within the
case's own rtol/atol (ONNX's backend runner rule). A case is

- "unsupported" when unigraph cannot take it: an op type with no importer, an importer that
  refuses the node's attributes (`OnnxImportError`), or a dtype unigraph has no tensor for;
- "pass" when every output has the expected shape, dtype and values;
- "fail" otherwise (wrong numbers, or any other error).

unigraph takes shapes, axes, pads, split sizes and slice bounds as values known at import
(constants or initializers, as exporters write them), while many node cases feed them as
run-time inputs. By default the runner binds as initializers (the same values, known at
import) the fewest of a case's integer inputs that the importer needs known, and feeds the
others at run time: an integer input that is data (the operands of an integer Add) is
computed by the target, not folded at import by ONNX's reference evaluator. `--strict`
feeds every input at run time, where a case needing a known shape is "unsupported".

    python -m unigraph.onnx.node_tests                     # every target, counts per target
    python -m unigraph.onnx.node_tests --targets numpy:eager,torch:static --ops Conv,Pad -v
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import sys
import time
import warnings
from dataclasses import dataclass

import numpy as np

# The dtypes a unigraph tensor can hold; a case feeding or expecting another is unsupported.
from unigraph.ir import DTYPES


@dataclass
class Outcome:
    """One case on one target: status "pass", "fail" or "unsupported", and why."""

    case: str
    target: str
    status: str
    detail: str = ""


def cases(op_types=None) -> list:
    """ONNX's node test cases (`onnx.backend.test.case.test_case.TestCase`), sorted by name;
    with `op_types`, only those whose every node (subgraphs included) is of those types."""
    from onnx.backend.test.case import node

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        found = node.collect_testcases(None)
    found = sorted(found, key=lambda case: case.name)
    if op_types is None:
        return found
    wanted = set(op_types)
    return [case for case in found if op_types_of(case.model) <= wanted]


def op_types_of(model) -> set:
    """Every op type in `model`'s graph, its subgraphs included."""
    from unigraph.onnx.load import _nodes

    return {node.op_type for node in _nodes(model.graph)}


def _arrays(values):
    """The case's inputs or outputs as arrays, or None if one is not a plain tensor."""
    out = []
    for value in values:
        if isinstance(value, np.generic):  # a 0-d input stored as a NumPy scalar
            value = np.asarray(value)
        elif hasattr(value, "raw_data"):  # a TensorProto (the Cast cases)
            from onnx import numpy_helper

            try:
                value = numpy_helper.to_array(value)
            except (TypeError, ValueError):
                return None
        if not isinstance(value, np.ndarray) or value.dtype.name not in DTYPES:
            return None
        out.append(value)
    return out


def bind_integer_inputs(model, inputs: list, which=None) -> tuple:
    """(`model` with its integer inputs (those at the positions in `which`, if given) made
    initializers holding `inputs`' values, the remaining inputs)."""
    from onnx import numpy_helper

    model = model.__class__.FromString(model.SerializeToString())
    graph = model.graph
    initialized = {t.name for t in graph.initializer}
    fed = [i for i in graph.input if i.name not in initialized]
    keep = []
    for position, (info, value) in enumerate(zip(fed, inputs)):
        if value.dtype.kind in "iu" and (which is None or position in which):
            graph.initializer.append(numpy_helper.from_array(value, info.name))
        else:
            keep.append(value)
    return model, keep


_NEEDED = {}  # case name -> the positions of the integer inputs it needs known at import


def needed_integer_inputs(case, inputs: list) -> tuple:
    """The fewest of `case`'s integer inputs that, bound as initializers, let unigraph import
    and run it (on numpy:eager: whether the importer needs a value known does not depend on
    the target); all of them if no smaller set does."""
    import unigraph as ug
    from unigraph.onnx.load import OnnxImportError

    if case.name in _NEEDED:
        return _NEEDED[case.name]
    integer = [i for i, value in enumerate(inputs) if value.dtype.kind in "iu"]
    if not integer:
        return ()
    subsets = (c for size in range(len(integer)) for c in itertools.combinations(integer, size))
    _NEEDED[case.name] = tuple(integer)
    for subset in subsets:
        model, fed = bind_integer_inputs(case.model, inputs, subset)
        try:
            with ug.use_backend("numpy", "eager"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ug.onnx.load(model)(*fed)
        except OnnxImportError:
            continue
        except Exception:  # noqa: BLE001 - it imported: run_case reports the error
            pass
        _NEEDED[case.name] = subset
        break
    return _NEEDED[case.name]


def run_case(case, target: str, strict: bool = False) -> Outcome:
    """Import `case`'s model, run its first data set on `target`, compare (see the module
    docstring for `strict`)."""
    import unigraph as ug
    from unigraph.config import Target
    from unigraph.onnx.load import OnnxImportError

    inputs, expected = case.data_sets[0]
    inputs, expected = _arrays(inputs), _arrays(expected)
    if inputs is None or expected is None:
        return Outcome(case.name, target, "unsupported", "a sequence, optional or dtype "
                       "that unigraph has no tensor for")
    model = case.model
    if not strict:
        model, inputs = bind_integer_inputs(model, inputs, needed_integer_inputs(case, inputs))
    try:
        model = ug.onnx.load(model)
    except OnnxImportError as error:
        return Outcome(case.name, target, "unsupported", str(error).split(". Supported")[0])
    parsed = Target.parse(target)
    try:
        with ug.use_backend(parsed.backend, parsed.mode), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = model(*inputs)
        got = [np.asarray(t.numpy()) for t in (got if isinstance(got, tuple) else (got,))]
    except OnnxImportError as error:
        return Outcome(case.name, target, "unsupported", str(error))
    except Exception as error:  # noqa: BLE001 - any other error is this case's failure
        return Outcome(case.name, target, "fail", f"{type(error).__name__}: {error}"[:300])
    return Outcome(case.name, target, *_compare(got, expected, case.rtol, case.atol))


def _compare(got, expected, rtol, atol) -> tuple:
    if len(got) != len(expected):
        return "fail", f"{len(got)} outputs, expected {len(expected)}"
    for index, (g, e) in enumerate(zip(got, expected)):
        if g.shape != e.shape or g.dtype != e.dtype:
            return "fail", (f"output {index}: {g.dtype}{list(g.shape)}, expected "
                            f"{e.dtype}{list(e.shape)}")
        if e.dtype.kind in "biu":
            if not np.array_equal(g, e):
                return "fail", f"output {index}: {int((g != e).sum())} elements differ"
        elif not np.allclose(g, e, rtol=rtol, atol=atol, equal_nan=True):
            if not np.array_equal(np.isnan(g), np.isnan(e)):
                return "fail", (f"output {index}: NaN at {int((np.isnan(g) != np.isnan(e)).sum())}"
                                " position(s) where the expected output differs")
            error = np.nanmax(np.abs(g.astype(np.float64) - e)) if e.size else 0.0
            return "fail", f"output {index}: max abs error {error:.3g} (rtol {rtol}, atol {atol})"
    return "pass", ""


def run(targets, op_types=None, names=None, strict: bool = False) -> list:
    """Every selected case on every target: a list of `Outcome`s."""
    selected = [c for c in cases(op_types) if names is None or c.name in names]
    return [run_case(case, target, strict) for target in targets for case in selected]


def table(outcomes) -> str:
    """Counts per target: pass, fail, unsupported, and the pass rate of all cases and of the
    cases unigraph supports."""
    rows = ["| target | pass | fail | unsupported | pass rate (all) | pass rate (supported) |",
            "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for target in dict.fromkeys(o.target for o in outcomes):
        mine = [o for o in outcomes if o.target == target]
        count = {s: sum(o.status == s for o in mine) for s in ("pass", "fail", "unsupported")}
        supported = count["pass"] + count["fail"]
        rows.append(f"| {target} | {count['pass']} | {count['fail']} | {count['unsupported']} "
                    f"| {count['pass'] / max(len(mine), 1):.1%} "
                    f"| {count['pass'] / max(supported, 1):.1%} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    from unigraph.plugins import all_targets, backends

    parser = argparse.ArgumentParser(prog="python -m unigraph.onnx.node_tests",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", help="comma-separated targets (default: every target "
                                          "that trains, the 9 built-in ones)")
    parser.add_argument("--ops", help="comma-separated ONNX op types: only their cases")
    parser.add_argument("--strict", action="store_true",
                        help="feed every integer input at run time (default: bind as "
                             "initializers, known at import, those the importer needs known)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="list every failing case with its reason")
    args = parser.parse_args(argv)
    if args.targets:
        targets = args.targets.split(",")
    else:
        inference = {name for name, b in backends().items() if b.inference_only}
        targets = [str(t) for t in all_targets() if t.backend not in inference]
    start = time.perf_counter()
    outcomes = run(targets, args.ops.split(",") if args.ops else None, strict=args.strict)
    if args.verbose:
        for outcome in outcomes:
            if outcome.status == "fail":
                print(f"FAIL {outcome.target} {outcome.case}: {outcome.detail}")
    print(table(outcomes))
    print(f"{len(outcomes)} runs in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
