"""Calls in converted code: a user's own Python function runs converted too.

The transformer rewrites `helper(x)` into `ag__.converted(helper)(x)` where it cannot tell at
conversion time that `helper` is library code (unigraph's own functions, NumPy, the
frameworks, the standard library, site-packages), a builtin or a class: those stay plain
calls, with no cost at all (`ug.cond(...)`, `np.float32(...)`, `len(...)`). At run time
`converted` gives a user function's converted version, so a tensor `if` in a helper means the
same on every target, as TF's AutoGraph `converted_call` does:

    def helper(x):
        if ug.sum(x) > 0:        # a cond node on static targets, as in f itself
            return x * 2
        return -x

    @ug.function
    def f(x):
        return helper(x) + 1     # runs helper's converted version
"""

from __future__ import annotations

import functools
import sys
import sysconfig
import types
import weakref

# Top-level packages whose functions are library code: called as written, never converted.
LIBRARY_PACKAGES = frozenset({
    "unigraph", "numpy", "torch", "tensorflow", "paddle", "onnx", "onnxruntime", "keras",
    "pluggy", "_pytest", "pytest",
}) | frozenset(sys.stdlib_module_names)
_LIBRARY_PATHS = tuple(sorted({sysconfig.get_paths()[key] for key in
                               ("stdlib", "platstdlib", "purelib", "platlib")}))

# Code objects that run as written: library code and code that cannot be converted
# (decided once: the warning of `convert` is given once). Both are the program's own code.
# By id, holding the code (so that no other code takes its id).
_AS_WRITTEN: dict = {}
# The code of converted functions and of every function compiled inside them (a nested
# `def` of converted code is converted already): weak, as conversions are freed.
_CONVERTED: weakref.WeakSet = weakref.WeakSet()


def is_library(function: types.FunctionType) -> bool:
    """Whether `function` is library code (its module's package, or its file's place)."""
    package = (function.__module__ or "").partition(".")[0]
    if package in LIBRARY_PACKAGES or package.startswith("unigraph_"):
        return True
    return function.__code__.co_filename.startswith(_LIBRARY_PATHS)


def routes_value(value) -> bool:
    """Whether a call of `value`, known when the code is converted (a module global or a
    builtin), must go through `call`: a user function or method, or a partial."""
    if type(value) is types.MethodType:
        value = value.__func__
    if type(value) is types.FunctionType:
        return not is_library(value)
    return type(value) is functools.partial


def converted(fn):
    """What converted code calls for `fn(...)`: the converted version of a user Python
    function or bound method (converted once per function, kept on the function), else
    `fn` itself (a callable object, a class, a builtin, a lambda, library code); for a
    `functools.partial`, a partial of its function's converted version. Returning the
    callable, not calling it: the call's arguments are passed once, by the caller."""
    function = fn.__func__ if type(fn) is types.MethodType else fn
    if type(function) is not types.FunctionType:
        if type(fn) is functools.partial:
            return functools.partial(converted(fn.func), *fn.args, **fn.keywords)
        return fn
    # The conversion first (a user's function, the case that costs), then the code's id
    # (hashing a code object hashes its bytecode: ~0.14 us).
    cached = function.__dict__.get("__unigraph_conversion__")
    if cached is not None and cached[0] is function:
        result = cached[1].function
    elif id(function.__code__) in _AS_WRITTEN:
        return fn
    else:
        result = _convert(function)
        if result is None:
            return fn
    if function is not fn:
        return types.MethodType(result, fn.__self__)
    return result


def _convert(function):
    """`function`'s converted version, or None (and its code runs as written from now on)."""
    from unigraph import autograph

    if function.__code__ in _CONVERTED:
        return function
    if is_library(function):
        _AS_WRITTEN[id(function.__code__)] = function.__code__
        return None
    conversion = autograph.convert(function)
    if not conversion.converted:
        _AS_WRITTEN[id(function.__code__)] = function.__code__
        return None
    return conversion.function


def mark_converted(code: types.CodeType) -> None:
    """Record `code` and every function code compiled inside it as converted already."""
    stack = [code]
    while stack:
        current = stack.pop()
        _CONVERTED.add(current)
        stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
