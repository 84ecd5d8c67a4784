"""unigraph's random generator, so every backend sees the same numbers.

Initial weights and dropout masks are drawn here, in NumPy, never by a framework. In a
static graph a random tensor is a graph input that each run feeds with fresh draws, so a
compiled graph does not freeze one mask; where its shape has a dim left open by input_spec,
the run's sizes are found by tracing the function again with the call's shapes (once per
shapes: `Function._draw_shapes`).

The generator is per context, like the target (`ug.use_backend`): each thread (and each
`contextvars` context) draws from its own generator, so two models trained in two threads
get exactly the numbers they would get one after the other. A context that has not drawn
yet starts a fresh generator from the process-wide seed, the last one given to
`ug.manual_seed` anywhere (0 if none). `ug.manual_seed(s)` sets that seed and restarts the
calling context's generator from it; other threads' generators are left alone. A pool
thread keeps its generator from one task to the next, and an asyncio task shares its
creator's: seed at the start of each task, or draw inside `with ug.random.seeded(s):`.

Draws happen where the numbers are used, the same way on every target: never while tracing
a seed (`manual_seed`/`seeded` inside a traced function are refused, the graph draws when
it runs), and never inside a `cond` branch or `while_loop` body (a static graph feeds each
random input once per run).

>>> ug.manual_seed(0)
>>> def train(target):
...     ug.manual_seed(0)               # same weights and dropout masks in every thread
...     ...
"""

from __future__ import annotations

import contextlib
import contextvars
import operator
import sys

import numpy as np

from unigraph.dtypes import as_dtype, is_int

_seed = 0  # where a context that has not drawn yet starts


class _Stream:
    """A context's generator (`rng`) and the words skipped in it and not yet applied: the
    skipped words (`skipped`) start at the generator's state `start` (a dict, shared by the
    initial values that start there: never changed), and the generator moves past them when
    it is next handed out (`generator`). So the layers of a model, built one after another,
    read the generator's state once for all of their initial values, not once a layer
    (~3 us of NumPy calls a Linear; see `skip`)."""

    __slots__ = ("rng", "start", "skipped")

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.start = None  # None: nothing skipped
        self.skipped = 0


# Made on first use in each context: numpy.random costs import time.
_context_generator: contextvars.ContextVar = contextvars.ContextVar(
    "unigraph_generator", default=None)


def _checked_seed(seed) -> int:
    try:
        seed = operator.index(seed)
    except TypeError:
        raise TypeError(f"manual_seed: the seed must be an int, got {seed!r} "
                        f"({type(seed).__name__})") from None
    if seed < 0:
        raise ValueError(f"manual_seed: the seed must be >= 0, got {seed}")
    return seed


def _refuse_while_tracing(what: str) -> None:
    """A static graph draws its random inputs when it runs, after tracing is over: seeding
    while tracing would seed nothing that the graph uses."""
    from unigraph.errors import TracingError
    from unigraph.tracing import in_function, user_source

    if in_function():
        raise TracingError(
            f"{what} at {user_source()} inside a traced function: a static graph draws its "
            "random numbers each time it runs, after tracing, so the seed would not reach "
            "them; seed before calling the function"
        )


def _refuse_inside_control_flow() -> None:
    """A static graph feeds each random input once per run: inside a while_loop body every
    iteration would see the same numbers, and a cond would draw for both branches, where
    eager mode draws per iteration and for the taken branch only. So no mode draws there."""
    from unigraph.errors import TracingError
    from unigraph.tracing import current_region, user_source

    inside = current_region()
    if inside is None or inside[0] not in ("cond", "while_loop"):
        return
    kind, line = inside
    if kind == "while_loop":
        part, why = "a while_loop body", "every iteration would see the same numbers"
        fix = "draw one row per iteration before the loop and index it with the counter"
    else:
        part, why = "a cond branch", "it would draw for both branches, taken or not"
        fix = "draw before the cond and use the numbers in the branch"
    raise TracingError(
        f"a random draw at {user_source()} is inside {part} (the {kind} at {line}): a static "
        f"graph draws each random input once per run, so {why}; no target draws there "
        f"(eager included): {fix}"
    )


def manual_seed(seed: int) -> None:
    """Reseed: the same seed gives the same weights and masks on every target. Restarts this
    context's generator and sets the seed that new threads start from.

    >>> ug.manual_seed(0)
    """
    global _seed
    _refuse_while_tracing("ug.manual_seed")
    _seed = _checked_seed(seed)
    _context_generator.set(None)


def _stream() -> _Stream:
    stream = _context_generator.get()
    if stream is None:
        stream = _Stream(np.random.default_rng(_seed))
        _context_generator.set(stream)
    return stream


def generator() -> np.random.Generator:
    """The calling context's generator (made from the process-wide seed on first use)."""
    stream = _stream()
    if stream.start is not None:  # words skipped (`skip`): move past them first
        advance(stream.rng.bit_generator, stream.skipped, stream.start)
        stream.start, stream.skipped = None, 0
    return stream.rng


def skips_exactly() -> bool:
    """True when the calling context's generator is NumPy's default PCG64, whose `advance`
    skips exactly the words asked for (see `skip`)."""
    return type(_stream().rng.bit_generator) is np.random.PCG64


def skip(words: int) -> tuple[dict, int]:
    """Move the calling context's generator (a PCG64: see `skips_exactly`) past `words`
    64-bit words, as a draw that takes them would; returns where they start, `(state,
    words)`: the generator's `bit_generator.state` (not to be changed) and the words past it
    (`advance(bits, words, state)` gets there). For `ug.init`'s deferred initial values.

    Skips in a row are applied together, when the generator is next handed out, from one
    read of its state; unless something outside holds the generator or its bit generator
    (it could draw without asking `generator` again), which then moves at once.

    >>> state, past = skip(4096)    # a [64, 64] uniform draw's words
    """
    stream = _stream()
    # (2: the stream's reference and the argument; the Generator holds its bit generator)
    if sys.getrefcount(stream.rng) > 2 or sys.getrefcount(stream.rng.bit_generator) > 2:
        bits = generator().bit_generator
        state = bits.state
        advance(bits, words, state)
        return state, 0
    if stream.start is None:
        stream.start = stream.rng.bit_generator.state
    position = (stream.start, stream.skipped)
    stream.skipped += words
    return position


def advance(bits: np.random.PCG64, words: int, state: dict) -> None:
    """`bits.advance(words)`, keeping the buffered 32-bit half-word of `state` (the state
    `bits` is moved from): `advance` drops it, and a float64 draw of those words keeps it."""
    if not words:
        return
    bits.advance(words)
    if state["has_uint32"]:
        moved = bits.state
        moved["has_uint32"], moved["uinteger"] = state["has_uint32"], state["uinteger"]
        bits.state = moved


@contextlib.contextmanager
def seeded(seed: int):
    """Draw from a generator seeded with `seed` inside the block; the caller's generator
    (and its position) is back afterwards, and the process-wide seed is unchanged.

    >>> with ug.random.seeded(3):
    ...     net = Net()                      # the same weights whatever was drawn before
    """
    _refuse_while_tracing("ug.random.seeded")
    token = _context_generator.set(_Stream(np.random.default_rng(_checked_seed(seed))))
    try:
        yield
    finally:
        _context_generator.reset(token)


@contextlib.contextmanager
def drawing_from(rng: np.random.Generator):
    """Draw from `rng` inside the block (the caller's generator is back afterwards). For
    unigraph's own use: `ug.init` draws a deferred initial value from the generator state
    saved when the value was made; users seed with `seeded`.

    >>> with drawing_from(np.random.default_rng(3)):
    ...     w = ug.init.uniform()((2,))
    """
    token = _context_generator.set(_Stream(rng))
    try:
        yield
    finally:
        _context_generator.reset(token)


def uniform(shape, dtype="float32", *, low=0.0, high=1.0):
    """A tensor of uniform [low, high) draws from unigraph's generator (fresh on every run).

    >>> mask = ug.random.uniform((2, 3)) >= 0.5
    >>> ug.random.uniform((4,), low=-1.0, high=1.0)
    """
    draws = _draw(known_shape(shape, "ug.random.uniform"), as_dtype(dtype))
    if low == 0.0 and high == 1.0:
        return draws
    return draws * (high - low) + low


def normal(shape, dtype="float32", *, mean=0.0, std=1.0):
    """A tensor of normal draws (mean, std) from unigraph's generator, the same numbers on
    every target: Box-Muller on two float64 uniform draws, sqrt(-2 log(1 - u)) cos(2 pi v),
    computed with ug ops (so a static graph draws afresh on every run) and rounded once.

    >>> noise = ug.random.normal((2, 3), std=0.1)
    """
    from unigraph import api

    shape = known_shape(shape, "ug.random.normal")
    radius = api.sqrt(api.log(1.0 - _draw(shape, "float64")) * -2.0)
    z = radius * api.cos(_draw(shape, "float64") * (2 * np.pi))
    return api.cast(z * float(std) + float(mean), as_dtype(dtype))


def randint(shape, low, high=None, dtype="int64"):
    """A tensor of integers drawn uniformly from [low, high) ([0, low) without high), from
    unigraph's generator, the same numbers on every target: floor(u * (high - low)) + low of
    float64 uniform draws u.

    >>> ug.random.randint((3,), 10)       # three of 0..9
    """
    from unigraph import api

    if high is None:
        low, high = 0, low
    low, high = int(low), int(high)
    if high <= low:
        raise ValueError(f"randint: high ({high}) must be above low ({low})")
    dtype = as_dtype(dtype)
    if not is_int(dtype):
        raise TypeError(f"randint: dtype {dtype!r} is not an integer dtype; use int32 or int64")
    limits = np.iinfo(dtype)
    if low < limits.min or high - 1 > limits.max:  # the cast below would wrap (as NumPy refuses)
        raise ValueError(f"randint: [{low}, {high}) does not fit in {dtype} "
                         f"([{limits.min}, {limits.max}]); use a wider dtype")
    span = high - low
    # u * span < span for u < 1, but rounding can reach it: the minimum keeps it inside.
    draws = _draw(known_shape(shape, "ug.random.randint"), "float64")
    picked = api.minimum(api.cast(draws * float(span), "int64"), span - 1)
    return api.cast(picked + low, dtype)


def known_shape(shape, what: str = "ug.random") -> tuple:
    """`shape` as a tuple of ints, and None for a dim left open by input_spec (None, in a
    traced shape): a static graph is fed each run's draws with the run's sizes, found from
    the arguments' shapes (`draw_shapes`). A dim that the arguments' shapes do not give (a
    size that depends on the data, as after a boolean mask) is refused naming `what`, the
    user's line and the fix."""
    if isinstance(shape, int | np.integer):
        return (int(shape),)
    if any(d is None for d in shape) and _finding_sizes.get():
        from unigraph.errors import ShapeError
        from unigraph.tracing import user_source

        raise ShapeError(f"{what}: the shape {list(shape)} of the draw at {user_source()} "
                         "has a dim known only from the data when the program runs (not from "
                         "the arguments' shapes), so a static graph cannot be fed its draws; "
                         "state the size with ug.ensure_shape(x, shape) first, or draw a "
                         "shape the arguments give and slice it")
    return tuple(None if d is None else int(d) for d in shape)


# True while `draw_shapes` traces a function again with a run's argument shapes.
_finding_sizes: contextvars.ContextVar = contextvars.ContextVar(
    "unigraph_finding_sizes", default=False)


@contextlib.contextmanager
def finding_sizes():
    """Inside: a trace with a run's argument shapes, to find its draws' sizes (`draw_shapes`),
    where a draw with an open dim is refused (the arguments' shapes do not give it)."""
    token = _finding_sizes.set(True)
    try:
        yield
    finally:
        _finding_sizes.reset(token)


def _draw(shape, dtype):
    """Uniform [0, 1) draws: an array now (eager) or a random input of the graph."""
    from unigraph.dispatch import current_backend, symbolic
    from unigraph.tensor import Tensor
    from unigraph.tracing import current_builder

    shape = known_shape(shape)
    _refuse_inside_control_flow()
    builder = current_builder()
    if builder is None:
        draws = generator().random(shape).astype(dtype)  # a fresh array: no copy needed
        return Tensor(shape, dtype, backend=current_backend(), array=draws)
    top = builder
    while top.parent is not None:
        top = top.parent
    value = top.add_random_input(shape, dtype)
    tensor_in_top = symbolic(top, value)
    if builder is top:
        return tensor_in_top
    return symbolic(builder, builder.value_of_symbolic(tensor_in_top))
