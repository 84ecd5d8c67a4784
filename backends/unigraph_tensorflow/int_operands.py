"""The integer operands of eager raw ops (an axis list, a permutation, a shape), as tensors
made once per distinct value.

A raw op given a Python tuple for a tensor input (`raw.Mean(input=x, axis=(0,))`) leaves
TF's eager fast path for its Python fallback, which converts the tuple to a new constant at
every call: 30-40 us against 7 us for the op itself. An eager program asks for the same few
axes and shapes step after step, so each is converted once here.

    raw.Mean(input=x, axis=int_operand((0,)), keep_dims=False)

Only when executing eagerly: in a graph (a v1 Graph, a tf.function trace) the tuple is
returned as it is and becomes a Const node of that graph (an eager tensor would be captured
as an input of every function that uses it).

This module imports tensorflow: `lowerings.py` imports it, after paddle.
"""

from __future__ import annotations

import tensorflow as tf

_INT32 = (-(2 ** 31), 2 ** 31 - 1)
_made: dict = {}  # tuple of ints -> eager int32 (or int64) constant


def int_operand(values):
    """`values` (an int, or a tuple or list of ints) as a raw op's integer input: eagerly a
    constant made once per distinct value, in a graph `values` itself."""
    if not tf.executing_eagerly():
        return values
    if type(values) is list:
        values = tuple(values)
    made = _made.get(values)
    if made is None:
        made = _make(values)
    return made


def _make(values):
    # NumPy ints hash and compare as Python ints: one entry for both.
    values = int(values) if not isinstance(values, tuple) else tuple(int(v) for v in values)
    numbers = values if isinstance(values, tuple) else (values,)
    inside = all(_INT32[0] <= v <= _INT32[1] for v in numbers)
    made = tf.constant(values, tf.int32 if inside else tf.int64)
    if len(_made) > 4096:  # a program with ever new shapes must not grow this without end
        _made.clear()
    _made[values] = made
    return made
