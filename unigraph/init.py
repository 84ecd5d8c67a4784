"""Initializers: NumPy arrays drawn from unigraph's one seeded generator.

Every weight starts here, on the host, before any framework sees it, so `ug.manual_seed(s)`
gives bit-identical initial weights on every backend. Draws are made in float64 and then
rounded to the parameter's dtype.

An initializer is an object called as `init(shape, dtype, fan_in=None, fan_out=None)`; the
layers pass their own fans. Without them, `fans(shape)` applies unigraph's layouts: a 2-D
weight is `[in, out]` (`x @ W`), a conv weight `[out, in / groups, kh, kw]`.

>>> w = ug.init.xavier_normal()((64, 10))           # float32 [64, 10]
>>> conv = ug.nn.Conv2D(3, 2, 3, weight_init=ug.init.kaiming_uniform())

Initial values drawn on first read (`parameter`): a layer's weights are usually replaced by
`load_state_dict` before anyone reads them, so the layers draw them only when first read
(a value, a run, `state_dict()`), with the numbers they would have had if drawn at once.
The layer still takes its stretch of the generator's stream when it is built: every later
draw (other layers, dropout masks, `ug.random`) gives the same numbers whether earlier
layers were loaded, read, or never touched. Constant and uniform initializers (the
defaults) defer; normal ones (whose draw takes a varying part of the stream) and custom
ones draw at once, as before.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from unigraph import random
from unigraph.dtypes import as_dtype
from unigraph.random import generator
from unigraph.tensor import Parameter

__all__ = [
    "InitialValue", "Initializer", "constant", "fans", "kaiming_normal", "kaiming_uniform",
    "normal", "ones", "parameter", "uniform", "xavier_normal", "xavier_uniform", "zeros",
]


def fans(shape) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight of `shape` in unigraph's layouts.

    1-D [n]: (n, n); 2-D [in, out]: (in, out); k-D conv [out, in, *kernel]:
    (in * prod(kernel), out * prod(kernel)).
    """
    shape = tuple(int(d) for d in shape)
    if not shape:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


_GAINS = {"linear": 1.0, "sigmoid": 1.0, "tanh": 5.0 / 3.0, "relu": math.sqrt(2.0)}


def gain(nonlinearity: str, negative_slope: float = 0.0) -> float:
    """The recommended scale for a nonlinearity (PyTorch's `calculate_gain`)."""
    if nonlinearity == "leaky_relu":
        return math.sqrt(2.0 / (1.0 + negative_slope ** 2))
    try:
        return _GAINS[nonlinearity]
    except KeyError:
        known = ", ".join([*_GAINS, "leaky_relu"])
        raise ValueError(f"unknown nonlinearity {nonlinearity!r}; use one of {known}") from None


class Initializer:
    """Base class: subclasses implement `draw(shape, fan_in, fan_out) -> float64 array`."""

    def __call__(self, shape, dtype="float32", fan_in=None, fan_out=None) -> np.ndarray:
        shape = tuple(int(d) for d in shape)
        dtype = as_dtype(dtype)
        default_in, default_out = fans(shape)
        fan_in = default_in if fan_in is None else int(fan_in)
        fan_out = default_out if fan_out is None else int(fan_out)
        return np.asarray(self.draw(shape, fan_in, fan_out)).astype(dtype)

    def draw(self, shape, fan_in, fan_out) -> np.ndarray:
        raise NotImplementedError

    def words(self, shape) -> int | None:
        """How many 64-bit words of the generator's stream a draw of `shape` takes, when
        that is known without drawing; None (this default) when it is not, and then
        `parameter` draws at once."""
        return None

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


class Constant(Initializer):
    def __init__(self, value):
        self.value = float(value)

    def draw(self, shape, fan_in, fan_out):
        return np.full(shape, self.value)

    def words(self, shape):
        return 0 if type(self).draw is Constant.draw else None  # a subclass's own draw: unknown


class Normal(Initializer):
    def __init__(self, mean=0.0, std=1.0):
        self.mean, self.std = float(mean), float(std)

    def draw(self, shape, fan_in, fan_out):
        return generator().normal(self.mean, self.std, shape)


class _UniformDraws:
    """A mixin for initializers that draw with `Generator.uniform`: NumPy's PCG64 makes each
    float64 uniform from one 64-bit word, so a draw of n entries takes n words."""

    def words(self, shape):
        # Only for the draws written here: a subclass's own `draw` may draw otherwise.
        return math.prod(shape) if type(self).draw in _UNIFORM_DRAWS else None


class Uniform(_UniformDraws, Initializer):
    def __init__(self, low=-1.0, high=1.0):
        if not low < high:
            raise ValueError(f"uniform: low ({low}) must be below high ({high})")
        self.low, self.high = float(low), float(high)

    def draw(self, shape, fan_in, fan_out):
        return generator().uniform(self.low, self.high, shape)


class XavierNormal(Initializer):
    def __init__(self, gain=1.0):
        self.gain = float(gain)

    def draw(self, shape, fan_in, fan_out):
        std = self.gain * math.sqrt(2.0 / (fan_in + fan_out))
        return generator().normal(0.0, std, shape)


class XavierUniform(_UniformDraws, Initializer):
    def __init__(self, gain=1.0):
        self.gain = float(gain)

    def draw(self, shape, fan_in, fan_out):
        bound = self.gain * math.sqrt(6.0 / (fan_in + fan_out))
        return generator().uniform(-bound, bound, shape)


class _Kaiming(Initializer):
    def __init__(self, negative_slope=0.0, mode="fan_in", nonlinearity="relu"):
        if mode not in ("fan_in", "fan_out"):
            raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
        self.negative_slope, self.mode, self.nonlinearity = float(negative_slope), mode, \
            nonlinearity
        gain(nonlinearity, negative_slope)  # validate now, not at the first draw

    def _std(self, fan_in, fan_out) -> float:
        fan = fan_in if self.mode == "fan_in" else fan_out
        return gain(self.nonlinearity, self.negative_slope) / math.sqrt(fan)


class KaimingNormal(_Kaiming):
    def draw(self, shape, fan_in, fan_out):
        return generator().normal(0.0, self._std(fan_in, fan_out), shape)


class KaimingUniform(_UniformDraws, _Kaiming):
    def draw(self, shape, fan_in, fan_out):
        bound = math.sqrt(3.0) * self._std(fan_in, fan_out)
        return generator().uniform(-bound, bound, shape)


_UNIFORM_DRAWS = (Uniform.draw, XavierUniform.draw, KaimingUniform.draw)
_OWN_INITIALIZERS = frozenset({Constant, Normal, Uniform, XavierNormal, XavierUniform,
                               KaimingNormal, KaimingUniform})
# The layers' default initializers (`xavier_uniform()` and `zeros()`), one object each for
# every layer: handed to no user, so never changed, and held by initial values without a
# copy (`_snapshot`), where a fresh pair a layer cost two objects made and two copied.
DEFAULT_WEIGHT = XavierUniform()
DEFAULT_BIAS = Constant(0.0)


class InitialValue:
    """A parameter's initial value, drawn when first read: `initializer`'s draw of `shape`
    from the generator as it stood when the value was made (its `state`). Making it moves
    that generator past the words the draw takes (`Initializer.words`), so the rest of the
    stream is what it would be had the draw been made then. Held as the parameter's home
    (`Parameter._home`, where the newest value lives until read): `load_state_dict` or
    `set_value` replace it unread, and then nothing is ever drawn.

    >>> value = InitialValue(ug.init.xavier_uniform(), (64, 10), "float32", 64, 10)
    >>> value.get_param(None).shape
    (64, 10)
    """

    __slots__ = ("initializer", "shape", "dtype", "fan_in", "fan_out", "state", "past")

    def __init__(self, initializer: Initializer, shape, dtype, fan_in, fan_out, words=None):
        # A copy: the draw uses the initializer's fields as they are now, not as a later
        # `init.low = ...` (before building the next layer with it) leaves them.
        self.initializer, self.shape, self.dtype = _snapshot(initializer), shape, dtype
        self.fan_in, self.fan_out = fan_in, fan_out
        self.state, self.past = None, 0  # the draw starts `past` words beyond `state`
        if words is None:
            words = initializer.words(shape)
        if words:
            self.state, self.past = random.skip(words)

    def get_param(self, key) -> np.ndarray:
        """The value (drawn now, from the saved state: the same numbers every time)."""
        if self.state is None:
            return self.initializer(self.shape, self.dtype, self.fan_in, self.fan_out)
        bits = np.random.PCG64(0)  # (a seed: no call for OS entropy) then the saved state
        bits.state = self.state
        random.advance(bits, self.past, self.state)
        with random.drawing_from(np.random.Generator(bits)):
            return self.initializer(self.shape, self.dtype, self.fan_in, self.fan_out)


def _snapshot(initializer: Initializer) -> Initializer:
    """`copy.copy(initializer)`, made directly for unigraph's own initializers (their fields
    are their `__dict__`): copy.copy's generic protocol was a sixth of building a Linear."""
    if initializer is DEFAULT_WEIGHT or initializer is DEFAULT_BIAS:
        return initializer
    kind = type(initializer)
    if kind not in _OWN_INITIALIZERS:
        return copy.copy(initializer)
    clone = object.__new__(kind)
    clone.__dict__.update(initializer.__dict__)
    return clone


def _spec(initializer, shape, dtype, fan_in, fan_out) -> tuple:
    """(shape, dtype, fan_in, fan_out, words) of `parameter`'s arguments checked: a tuple of
    ints, a dtype name, the fans (`fans(shape)` where not given), and the words of the
    generator's stream `initializer`'s draw of `shape` takes (`Initializer.words`: None where
    that is unknown, and the draw cannot wait)."""
    shape = tuple(map(int, shape))
    dtype = as_dtype(dtype)
    if fan_in is None or fan_out is None:
        default_in, default_out = fans(shape)
        fan_in = default_in if fan_in is None else fan_in
        fan_out = default_out if fan_out is None else fan_out
    return shape, dtype, int(fan_in), int(fan_out), initializer.words(shape)


# (initializer, shape, dtype, fan_in, fan_out) as given -> `_spec` of them, for the layers'
# default initializers (objects never changed, whose words for a shape are fixed by their
# class): a model of 100 equal layers checked the same two specs 100 times.
_DEFAULT_SPECS: dict = {}


def parameter(initializer: Initializer, shape, dtype="float32", fan_in=None, fan_out=None, *,
              name="", trainable=True, lr_scale=1.0, order="C", **others) -> Parameter:
    """A `ug.Parameter` of `shape` initialised by `initializer`: drawn when first read where
    the initializer allows (see the module docstring), else now; `name`, `trainable`,
    `lr_scale` and `order` are the Parameter's options, with its defaults. The layers make
    their weights so.

    >>> w = ug.init.parameter(ug.init.xavier_uniform(), (784, 10), order="F")
    >>> w.numpy().shape        # drawn here, the numbers of xavier_uniform()((784, 10))
    (784, 10)
    """
    spec = key = None
    if (initializer is DEFAULT_WEIGHT or initializer is DEFAULT_BIAS) and \
            type(shape) is tuple:
        key = (initializer, shape, dtype, fan_in, fan_out)
        try:
            spec = _DEFAULT_SPECS.get(key)
        except TypeError:  # (something unhashable: checked by `_spec`, as it was)
            key = None
    if spec is None:
        spec = _spec(initializer, shape, dtype, fan_in, fan_out)
        if key is not None:
            if len(_DEFAULT_SPECS) >= 256:  # (many layer sizes: keep the table small)
                _DEFAULT_SPECS.clear()
            _DEFAULT_SPECS[key] = spec
    shape, dtype, fan_in, fan_out, words = spec
    if words and not random.skips_exactly():
        words = None
    if words is None:
        return Parameter(initializer(shape, dtype, fan_in, fan_out), name=name,
                         trainable=trainable, lr_scale=lr_scale, order=order, **others)
    # Nothing of the weight's size is allocated or copied for a value that is never read
    # (a loaded model's): the value answers every read.
    value = InitialValue(initializer, shape, dtype, fan_in, fan_out, words)
    if others:  # (an unknown option: refused by the Parameter's signature, as it was)
        return Parameter._deferred(value, shape, dtype, name=name, trainable=trainable,
                                   lr_scale=lr_scale, order=order, **others)
    # (the options by position, not a **options dict made and unpacked: ~0.4 us a Linear)
    return Parameter._deferred(value, shape, dtype, name, trainable, lr_scale, order)


def zeros() -> Initializer:
    """All zeros."""
    return Constant(0.0)


def ones() -> Initializer:
    """All ones."""
    return Constant(1.0)


def constant(value) -> Initializer:
    """Every entry equal to `value`. `ug.init.constant(0.1)((3,))` -> [0.1, 0.1, 0.1]."""
    return Constant(value)


def normal(mean=0.0, std=1.0) -> Initializer:
    """N(mean, std**2). `ug.init.normal(std=0.01)((784, 10))`."""
    return Normal(mean, std)


def uniform(low=-1.0, high=1.0) -> Initializer:
    """U[low, high). `ug.init.uniform(-0.1, 0.1)((10,))`."""
    return Uniform(low, high)


def xavier_normal(gain=1.0) -> Initializer:
    """Glorot & Bengio: N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out)).

    >>> ug.init.xavier_normal()((2, 3, 3, 3))   # conv weight: fans 27 and 18
    """
    return XavierNormal(gain)


def xavier_uniform(gain=1.0) -> Initializer:
    """Glorot & Bengio: U[-b, b) with b = gain * sqrt(6 / (fan_in + fan_out))."""
    return XavierUniform(gain)


def kaiming_normal(negative_slope=0.0, mode="fan_in", nonlinearity="relu") -> Initializer:
    """He et al.: N(0, std**2) with std = gain(nonlinearity) / sqrt(fan), fan by `mode`
    (relu: std = sqrt(2 / fan_in))."""
    return KaimingNormal(negative_slope, mode, nonlinearity)


def kaiming_uniform(negative_slope=0.0, mode="fan_in", nonlinearity="relu") -> Initializer:
    """He et al.: U[-b, b) with b = sqrt(3) * gain(nonlinearity) / sqrt(fan)."""
    return KaimingUniform(negative_slope, mode, nonlinearity)
