"""The op record: everything unigraph knows about one op, in one place.

Backends never redefine what an op means: they map `OpDef.name` to a native function in
their lowering table. The NumPy `reference` is the definition; `vjp` is its gradient rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

# Default tolerances (rtol, atol) against the float64 reference, per dtype of the run.
DEFAULT_TOLERANCE = {
    "float16": (1e-2, 1e-2),
    "float32": (1e-5, 1e-6),
    "float64": (1e-10, 1e-12),
}

# How a public function promotes an op's operands (OpDef.promote).
PROMOTIONS = ("same", "float", "none")


@dataclass(frozen=True)
class TensorSpec:
    """The static type of a tensor: shape (ints or None) and dtype name."""

    shape: tuple
    dtype: str


@dataclass(frozen=True)
class Sample:
    """One test case for an op: NumPy inputs (float64 for floating inputs) and attrs.

    at_kink: the inputs sit on purpose where the op has no derivative (a tie that the rule
    does not split the way finite differences do, a NaN): the gradient there is the record's
    convention, checked against the VJP rule on every target but not by finite differences.
    """

    inputs: tuple
    attrs: dict = field(default_factory=dict)
    at_kink: bool = False


@dataclass(frozen=True)
class OpDef:
    """One op.

    infer(*specs, **attrs) -> TensorSpec: shape/dtype rule; raises `ShapeError` naming the
        op, the shapes and the fix.
    reference(*arrays, **attrs) -> np.ndarray: the NumPy definition; returns the dtype
        `infer` gives.
    vjp(g, inputs, output, **attrs) -> list: gradient of each input given the cotangent `g`
        of the output (None for an input that has no gradient); None if not differentiable.
    samples(rng) -> list[Sample]: inputs for tests (floating inputs in float64; tests cast).
    tolerance: per-dtype (rtol, atol) overriding `DEFAULT_TOLERANCE` where the op
        accumulates more rounding (long reductions, conv, matmul).
    skips: {"backend:mode" or "backend": reason} for declared exceptions in the suite.
    example: one call of the public function and its result, "ug.op(args)  # result", for
        generated docs; tests run it on every target and compare.
    promote: how the public function brings its tensor operands to the one dtype `infer`
        wants (`unigraph.api.operands.promote_for`): "same" (NumPy's rules, Python numbers
        weak), "float" (the same, then ints and bools to float64), "none" (as given).
    """

    name: str
    infer: Callable
    reference: Callable
    vjp: Callable | None
    doc: str
    samples: Callable
    tolerance: dict = field(default_factory=dict)
    skips: dict = field(default_factory=dict)
    differentiable_inputs: tuple | None = None  # None: every floating input
    # True when `vjp` also takes `needs` (one bool per input) and may skip the inputs whose
    # gradient nobody asked for: the NumPy engine passes it for expensive rules (matmul).
    partial_vjp: bool = False
    example: str = ""
    promote: str = "same"

    def __post_init__(self):
        if self.promote not in PROMOTIONS:
            raise ValueError(f"op {self.name!r}: promote={self.promote!r}, not one of "
                             f"{PROMOTIONS}")

    def tolerance_for(self, dtype: str) -> tuple:
        return self.tolerance.get(dtype, DEFAULT_TOLERANCE.get(dtype, (0.0, 0.0)))


OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} is defined twice")
    OPS[op.name] = op
    return op
