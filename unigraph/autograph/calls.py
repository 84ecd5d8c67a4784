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
import linecache
import os
import site
import sysconfig
import types
import weakref

# Top-level packages whose functions are library code wherever they are installed. The
# standard library is told by its files' place, not by `sys.stdlib_module_names`: a user's
# own `test.py` or `types.py` is the user's code.
LIBRARY_PACKAGES = frozenset({
    "unigraph", "numpy", "torch", "tensorflow", "paddle", "onnx", "onnxruntime", "keras",
    "pluggy", "_pytest", "pytest",
})
_LIBRARY_PATHS = tuple(sorted({
    os.path.join(path, "") for path in (
        *(sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")),
        *site.getsitepackages(), site.getusersitepackages())}))

# Code objects that run as written: library code and code that cannot be converted
# (decided once: the warning of `convert` is given once). By id (hashing a code object
# hashes its bytecode), each with a weak reference whose callback forgets the id when the
# code is freed (a lambda or nested function made anew per call of library code).
_AS_WRITTEN: dict = {}
# The code of converted functions and of every function compiled inside them (a nested
# `def` of converted code is converted already): weak, as conversions are freed.
_CONVERTED: weakref.WeakSet = weakref.WeakSet()
# Code that autograph could not convert -> why (for the error of a tensor `if` in it).
_UNCONVERTIBLE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def is_library_file(filename: str) -> bool:
    """Whether `filename` is the standard library's (frozen ones too) or site-packages'."""
    return filename.startswith(_LIBRARY_PATHS) or filename.startswith("<frozen ")


def is_library(function: types.FunctionType) -> bool:
    """Whether `function` is library code (its module's package, or its file's place)."""
    package = (function.__module__ or "").partition(".")[0]
    if package in LIBRARY_PACKAGES or package.startswith("unigraph_"):
        return True
    return is_library_file(function.__code__.co_filename)


def is_library_module(module: types.ModuleType) -> bool:
    """Whether `module`'s attributes are library code: its package, or its file's place
    (a module without a file is built into Python)."""
    package = module.__name__.partition(".")[0]
    if package in LIBRARY_PACKAGES or package.startswith("unigraph_"):
        return True
    filename = getattr(module, "__file__", None)
    return filename is None or is_library_file(filename)


def routes_value(value) -> bool:
    """Whether a call of `value`, known when the code is converted (a module global or a
    builtin), must go through `converted`: a user function or method, a partial, or an
    object whose class's `__call__` is a user function."""
    if type(value) is types.MethodType:
        value = value.__func__
    if type(value) is types.FunctionType:
        return not is_library(value)
    if type(value) is functools.partial:
        return True
    if isinstance(value, type):
        return user_init(value) is not None
    call = getattr(type(value), "__call__", None)  # noqa: B004 (the function, not a test)
    return type(call) is types.FunctionType and not is_library(call)


def user_init(cls: type):
    """`cls.__init__` where a call of `cls` runs it as `type.__call__` does and it is the
    user's own function with source, else None: a library class, one whose metaclass has
    its own `__call__`, an `__init__` generated without a file (a dataclass's, made by
    `exec`), a builtin's."""
    init = cls.__init__
    if type(init) is not types.FunctionType or type(cls).__call__ is not type.__call__ \
            or is_library(init):
        return None
    filename = init.__code__.co_filename
    if filename.startswith("<") and not linecache.getlines(filename):
        return None  # (an IPython cell's `<...>` name is in linecache: it converts)
    return init


def constructor(cls: type):
    """What converted code calls for `cls(...)`: where `cls.__init__` is the user's own
    (`user_init`), a function that makes the object as `type.__call__` does and runs the
    converted `__init__` on it, so that a tensor `if` in it means the same on every target;
    else `cls` itself."""
    init = user_init(cls)
    if init is None:
        return cls
    converted_init = converted_function(init)
    if converted_init is init:
        return cls

    def construct(*args, **kwargs):
        new = cls.__new__
        # (object.__new__ refuses the arguments that type.__call__ gives only __init__)
        obj = object.__new__(cls) if new is object.__new__ else new(cls, *args, **kwargs)
        if isinstance(obj, cls):
            # type.__call__ runs type(obj).__init__: a subclass's own, if `__new__` made one
            own = type(obj).__init__
            if own is init:
                converted_init(obj, *args, **kwargs)
            else:
                converted(types.MethodType(own, obj))(*args, **kwargs)
        return obj

    return construct


def converted(fn):
    """What converted code calls for `fn(...)`: the converted version of a user Python
    function (a lambda too), bound method or callable object's `__call__` (converted once
    per function, kept on the function), else `fn` itself (a class, a builtin, library
    code); for a `functools.partial`, a partial of its function's converted version.
    Returning the callable, not calling it: the call's arguments are passed once, by the
    caller."""
    function = fn.__func__ if type(fn) is types.MethodType else fn
    if type(function) is not types.FunctionType:
        if type(fn) is functools.partial:
            return functools.partial(converted(fn.func), *fn.args, **fn.keywords)
        # A callable object: its class's `__call__`, bound to it. A Module's is library
        # code, called as it is (it converts its own `forward`): told first, at the cost
        # of a dict lookup, as `self.fc1(x)` asks on every call.
        call = getattr(type(fn), "__call__", None)  # noqa: B004 (the function, not a test)
        if type(call) is not types.FunctionType:
            # A class (its metaclass's `__call__` is `type.__call__`), or a builtin
            return constructor(fn) if isinstance(fn, type) else fn
        if id(call.__code__) in _AS_WRITTEN or isinstance(fn, type):
            return fn
        result = converted_function(call)
        return fn if result is call else types.MethodType(result, fn)
    result = converted_function(function)
    if result is function:
        return fn
    if function is not fn:
        return types.MethodType(result, fn.__self__)
    return result


def converted_function(function: types.FunctionType) -> types.FunctionType:
    """`function`'s converted version, or `function` itself where it runs as written."""
    # The conversion first (a user's function, the case that costs), then the code's id
    # (hashing a code object hashes its bytecode: ~0.14 us).
    cached = function.__dict__.get("__unigraph_conversion__")
    if cached is not None and cached[0] is function:
        return cached[1].function
    code = function.__code__
    if id(code) in _AS_WRITTEN or code in _CONVERTED:
        return function
    if not is_library(function):
        from unigraph import autograph

        conversion = autograph.convert(function)  # (its warning names the user's call)
        if conversion.converted:
            return conversion.function
    as_written(code)
    return function


def as_written(code: types.CodeType) -> None:
    """Record that `code` runs as written, until it is freed."""
    key = id(code)
    _AS_WRITTEN[key] = weakref.ref(code, functools.partial(forget, _AS_WRITTEN, key))


def forget(table: dict, key: int, _reference) -> None:
    """A weak reference's callback: drop `key` from `table` (bound when the reference is
    made: at exit, module globals may already be None when the code dies)."""
    table.pop(key, None)


def note_unconvertible(code: types.CodeType, reason: str) -> None:
    """Record why autograph could not convert `code`."""
    _UNCONVERTIBLE[code] = reason


def unconvertible_reason(code: types.CodeType) -> str | None:
    """Why autograph could not convert `code`, if it tried and could not."""
    return _UNCONVERTIBLE.get(code)


def mark_converted(code: types.CodeType) -> None:
    """Record `code` and every function code compiled inside it as converted already."""
    stack = [code]
    while stack:
        current = stack.pop()
        _CONVERTED.add(current)
        stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
