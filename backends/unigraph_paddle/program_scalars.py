"""paddle:static: scalar constants, and arithmetic with a 0-d operand, in a Program.

Paddle's interpreter pays per op, and its broadcasting loop over a 0-d operand is ~3x slower
than its same-shape kernels on a large tensor. `ScalarForms` gives `ProgramBuilder` its own
"constant", "full", "mul" and "add" lowerings (the table's entries otherwise):

* A scalar constant is one `full` op per value and dtype in the Program's top-level block,
  however many nodes make it: an optimizer's factors (beta1, 1 - beta1, eps, ...) were made
  once per parameter (45 `full` ops in an Adam MLP step, 8 distinct).
* `x * c`, `c * x`, `x + c`, `c + x`, with c a 0-d float of x's dtype needing no gradient and
  x a tensor of a known shape of 4096+ elements that needs none either (or lies outside
  every differentiated function: an optimizer's update reads the gradients, which Paddle
  marks as differentiable), run the same-shape kernel on c expanded to x's shape: one IEEE
  product or sum an element, as before. A constant c is made at that shape directly (one
  `full` op instead of `full`, `full_int_array`, `expand`), once per value and shape.
* `x + c` of that kind, c a non-zero constant that float32 holds exactly (Adam's eps), is
  `scale(x, 1.0, bias=c)`: x * 1.0 is x, then the one rounding of the sum, one op where the
  add took three (and a full-size fill). Not for c = 0 (nor `scale` for products): the bias
  is an IR float attribute, which Paddle shares between 0.0 and -0.0 (quirk "scale (bias
  -0.0)"), and a float32 one (a float64 c it cannot hold would be rounded).

Constants are shared only in the top-level block (a branch or loop body makes its own) and
never as a differentiated operand: `ProgramBuilder.lower_grad` copies one first
(`is_shared`), since Paddle's gradient with respect to a value counts all of its uses.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
from paddle import _C_ops

# Elements from which Paddle's same-shape kernel on an expanded 0-d operand is faster than
# its broadcasting loop (3.3.1 CPU, 784x256 float32: `add` of a 0-d 351 us, of it expanded
# 94 us; at 256 elements the loop is faster). Not for divide: Paddle's same-shape divide is
# not correctly rounded (its broadcasting one is), so its quotients would change.
EXPAND_FROM = 4096

_FLOATS = ("float32", "float64")


class ScalarForms:
    """The Program lowerings of one `ProgramBuilder` (see the module doc); `table(general)`
    is what the builder spreads over the shared lowering table `general`."""

    def __init__(self, paddle, builder, *, stored: bool = False):
        self.paddle = paddle
        self.builder = builder
        # stored: a full-size constant is a persistable variable, filled once when the
        # Program is loaded (`stored_constants`), not a `full` op filling it every run.
        self._stored = {} if stored else None  # name -> NumPy array
        self._constants = {}  # (dtype, bytes, shape) -> Value, top-level block only
        self._made = {}  # id(Value) -> Value, for each of those
        self._values = {}  # id(0-d constant Value) -> (the Value, its value, a NumPy scalar)
        self._expanded = {}  # (id(0-d Value), shape) -> (the 0-d Value, its expansion)

    def table(self, general: dict) -> dict:
        constant, full = general["constant"], general["full"]
        mul, add = general["mul"], general["add"]

        def lower_constant(*, value):
            value = np.asarray(value)
            if value.ndim != 0:
                return constant(value=value)
            return self._shared(value, (), lambda: constant(value=value))

        def lower_full(*, shape, value, dtype):
            scalar = np.asarray(value, dtype)
            return self._shared(scalar, tuple(shape),
                                lambda: full(shape=shape, value=value, dtype=dtype))

        def lower_mul(x, y):
            out = self._same_shape(x, y, _C_ops.multiply)
            return mul(x, y) if out is None else out

        def lower_add(x, y):
            out = self._same_shape(x, y, _C_ops.add, biased=True)
            return add(x, y) if out is None else out

        def write_mul(target, y):
            out = self._same_shape(target, y, _C_ops.multiply_, in_place=True)
            return _C_ops.multiply_(target, y) if out is None else out

        def write_add(target, y):
            out = self._same_shape(target, y, _C_ops.add_, biased=True, in_place=True)
            return _C_ops.add_(target, y) if out is None else out

        # `updates.plan_writes`: the same forms, written into the first operand
        return {"constant": lower_constant, "full": lower_full, "mul": lower_mul,
                "add": lower_add, "write_mul": write_mul, "write_add": write_add,
                "write_sub": _C_ops.subtract_}

    def stored_constants(self) -> dict:
        """{variable name: NumPy array} of the stored constants, to set in the Scope."""
        return dict(self._stored or {})

    def is_shared(self, value) -> bool:
        """Whether `value` is a constant this builder may hand to more than one node."""
        return self._made.get(id(value)) is value

    def _shared(self, scalar, shape: tuple, make):
        if _negative_zero(scalar):
            make = lambda: self._negative_zero(shape, scalar.dtype.name)  # noqa: E731
        if self.builder.block_depth:
            return make()
        key = (scalar.dtype.name, scalar.tobytes(), shape)
        found = self._constants.get(key)
        if found is None:
            found = self._constants[key] = make()
            self._made[id(found)] = found
            if shape == ():
                self._values[id(found)] = (found, scalar)
        return found

    def _store(self, value, shape: tuple):
        """A persistable variable holding `value` at `shape`, named by its contents (a
        Program built again from the same graph, the probe of `Executable.run_all`, finds
        the same variable in the Scope)."""
        name = f"constant_{value.dtype.name}_{value.tobytes().hex()}_" + "x".join(
            str(d) for d in shape)
        if name not in self._stored:
            self._stored[name] = np.full(shape, value, value.dtype)
        return self._variable(name, shape, value.dtype.name)

    def stored_array(self, array: np.ndarray):
        """A Value holding `array` (a table: Adam's beta powers), made once per contents in
        the top-level block, a persistable variable set once in the Scope where constants
        are stored; elsewhere the table's "constant" lowering (an op holding the values)."""
        if self._stored is None or self.builder.block_depth:
            return self.builder.lowerings["constant"](value=array)
        digest = hashlib.sha1(array.tobytes()).hexdigest()
        name = f"constant_{array.dtype.name}_{digest}_" + "x".join(str(d) for d in array.shape)
        key = (name,)
        found = self._constants.get(key)
        if found is None:
            self._stored[name] = np.array(array)
            found = self._constants[key] = self._variable(name, array.shape, array.dtype.name)
        return found

    def _variable(self, name: str, shape: tuple, dtype: str):
        variable = self.paddle.static.create_parameter(
            list(shape), dtype, name=name,
            default_initializer=self.paddle.nn.initializer.Constant(0.0))  # never run
        variable.stop_gradient = True
        return variable

    def _negative_zero(self, shape: tuple, dtype: str):
        """-0.0 of `shape`: the product of the smallest subnormals of opposite signs, which
        rounds to -0.0. A `full` op of -0.0 may run as +0.0: Paddle's IR keeps one
        attribute for 0.0 and -0.0, the first made in the process (quirk "constant")."""
        paddle = self.paddle
        wide = "float32" if dtype in ("float16", "bfloat16") else dtype  # CPU kernels
        tiny = float(np.finfo(np.dtype(wide)).smallest_subnormal)
        zero = _C_ops.multiply(paddle.full(list(shape), -tiny, wide), paddle.full([], tiny, wide))
        return zero if wide == dtype else paddle.cast(zero, dtype)

    def _operand(self, x, y):
        """(tensor, 0-d operand, its shape) when `x`, `y` are such a pair, else None."""
        for tensor, scalar in ((x, y), (y, x)):
            shape = tensor.shape
            if (len(scalar.shape) == 0 and len(shape) != 0 and -1 not in shape
                    and scalar.dtype == tensor.dtype and _dtype_name(scalar) in _FLOATS
                    and scalar.stop_gradient
                    and (tensor.stop_gradient or not self.builder.grad_depth)
                    and math.prod(shape) >= EXPAND_FROM):
                return tensor, scalar, tuple(shape)
        return None

    def _same_shape(self, x, y, kernel, biased=False, in_place=False):
        """`kernel(x, y)` in one of the forms above, or None; `in_place`: x is written
        (`updates.plan_writes`), with the in-place kernels of the same forms."""
        pair = self._operand(x, y)
        if pair is None or (in_place and pair[0] is not x):
            return None
        tensor, scalar, shape = pair
        known = self._values.get(id(scalar))
        value = known[1] if known is not None and known[0] is scalar else None
        if (biased and value is not None and value != 0 and math.isfinite(value)
                and float(np.float32(value)) == float(value)):
            one = self._shared(np.asarray(1.0, np.float32), (), lambda: self.paddle.full(
                [], 1.0, "float32"))
            scale = _C_ops.scale_ if in_place else _C_ops.scale
            return scale(tensor, one, float(value), True)
        expanded = self._expand(scalar, shape, value)
        return kernel(x, expanded) if scalar is y else kernel(expanded, y)

    def _expand(self, scalar, shape: tuple, value):
        if value is not None:  # a constant: made at the shape, once per value and shape
            if self._stored is not None and not self.builder.block_depth:
                return self._shared(value, shape, lambda: self._store(value, shape))
            return self._shared(value, shape, lambda: self.paddle.full(
                list(shape), value.item(), value.dtype.name))
        if self.builder.block_depth:
            return _C_ops.expand(scalar, list(shape))
        key = (id(scalar), shape)
        found = self._expanded.get(key)
        if found is None or found[0] is not scalar:
            found = self._expanded[key] = (scalar, _C_ops.expand(scalar, list(shape)))
        return found[1]


def _negative_zero(scalar) -> bool:
    return scalar.dtype.kind == "f" and scalar == 0 and bool(np.signbit(scalar))


def _dtype_name(value) -> str:
    # A PIR Value's dtype prints as "paddle.float32".
    return str(value.dtype).rsplit(".", 1)[-1]
