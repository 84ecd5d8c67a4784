"""Autograph: plain Python control flow inside `@ug.function`, run as graph control flow.

`convert(fn)` rewrites the source of `fn` (see `transformer`) so that `if`/`elif`/`else`,
`a if c else b`, `and`/`or`/`not`, `while` and `for` call into `runtime`, which keeps
Python's semantics for Python values and eager tensors and builds `cond`/`while_loop`
nodes for symbolic ones:

    @ug.function
    def counter(a, b):
        while a < b:          # a while_loop node on static targets
            a = a + 2
            b = b + 1
        return a, b

The converted function is compiled under the original file name with the original line
numbers, and shares the original's globals and closure cells, so tracebacks, error
messages and `user_source()` point at the user's lines. `Function.source()` shows the
converted code; a lambda converts as the `def` it means. Functions that cannot be converted
(builtins, coroutines, code whose source is unavailable) run as written; a generator's
statements that hold a `yield` stay Python's (their condition must be a Python value). The
user's own functions, methods, callable objects and lambdas that converted code calls run
converted too (`calls`: `helper(x)` becomes `ag__.converted(helper)(x)`).
"""

import __future__  # the compiler flags of future features, to compile like the original

import ast
import functools
import inspect
import types
import warnings
import weakref

from unigraph.autograph import calls, runtime

# The transformer is imported on first conversion: `import unigraph` stays light.

__all__ = ["Conversion", "convert", "original_source", "runtime"]

_FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag
_UNCONVERTIBLE_FLAGS = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


class Conversion:
    """The outcome of `convert`: what to call, and the code it runs (for `source()`)."""

    __slots__ = ("function", "source", "converted")

    def __init__(self, function, source: str, converted: bool):
        self.function = function
        self.source = source
        self.converted = converted


# A function's conversion is kept on the function itself, as (function, Conversion): a
# WeakKeyDictionary would never let go, because the converted code's globals hold the
# function (through the module's names), so each entry kept its own key alive, and with it
# every compiled executable of the `ug.function` wrapping it (on paddle:static, each with
# its interpreter's threads). On the function, it is an ordinary cycle the collector frees.
# The function is stored too: `functools.wraps` copies `__dict__` onto a wrapper, which
# must not take the wrapped function's conversion for its own.
_CONVERSION = "__unigraph_conversion__"


def convert(fn) -> Conversion:
    """Convert `fn` (a Python function or bound method), once per function; if it cannot
    be converted, the result calls `fn` itself and its `source` says why.

    >>> autograph.convert(counter).function(0, 10)
    """
    if isinstance(fn, types.MethodType):
        inner = convert(fn.__func__)
        return Conversion(types.MethodType(inner.function, fn.__self__), inner.source,
                          inner.converted)
    if isinstance(fn, types.FunctionType) and fn.__code__ in calls._CONVERTED:
        # Made by converted code (a lambda or `def` inside it, given to ug.function there)
        return Conversion(fn, "# converted with the code around it\n" + original_source(fn),
                          True)
    reason = _unconvertible(fn)
    if reason is None:
        cached = fn.__dict__.get(_CONVERSION)
        if cached is not None and cached[0] is fn:
            return cached[1]
        try:
            conversion = _convert(fn)
            fn.__dict__[_CONVERSION] = (fn, conversion)
            return conversion
        except Exception as error:  # noqa: BLE001 (a function that cannot be converted still runs)
            reason = f"{type(error).__name__}: {error}"
            if isinstance(error, OSError):  # inspect's: no file or cell holds its source
                reason = ("its source is not available (a function made by exec or typed at "
                          "the python prompt has none): define it in a file")
            warnings.warn(
                f"unigraph autograph could not convert {fn.__qualname__}: {reason}. It runs "
                "as written, so Python `if`/`while` on traced tensors will fail in it; use "
                "ug.cond / ug.while_loop there", stacklevel=4)
    if isinstance(fn, types.FunctionType):
        calls.note_unconvertible(fn.__code__, reason)
    return Conversion(fn, f"# not converted: {reason}\n{original_source(fn)}", False)


class _Unsupported(Exception):
    pass


def _unconvertible(fn) -> str | None:
    if not isinstance(fn, types.FunctionType):
        return f"{type(fn).__name__} is not a Python function"
    if hasattr(fn, "__wrapped__") and calls.is_library(fn):
        # A user's own wrapper (`functools.wraps`) is converted: it calls the function it
        # wraps through `ag__.converted`, so that one runs converted too.
        return "it is a library decorator's wrapper"
    if fn.__code__.co_flags & _UNCONVERTIBLE_FLAGS:
        return "coroutines and async generators are not converted"
    return None


def original_source(fn) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return f"# (source of {fn!r} is not available)\n"


def _parse(fn) -> ast.FunctionDef:
    """The `def` of `fn`, with the line and column numbers it has in its file."""
    if fn.__code__.co_name == "<lambda>":
        return _parse_lambda(fn.__code__)
    # Of the code, not the function: `inspect` would follow `__wrapped__` to another def.
    lines, first_line = inspect.getsourcelines(fn.__code__)
    text = "".join(lines)
    if lines[0][:1].isspace():
        # An indented `def` (a method, a nested function) parses as the body of an `if`:
        # dedenting instead would also change the text of multi-line strings.
        tree = ast.parse("if 1:\n" + text)
        block = tree.body[0].body
        first_line -= 1
    else:
        tree = ast.parse(text)
        block = tree.body
    function = block[0] if block else None
    if not isinstance(function, ast.FunctionDef) or function.name != fn.__code__.co_name:
        raise _Unsupported("its source does not start with its own `def`")
    ast.increment_lineno(tree, first_line - 1)
    return function


def _parse_lambda(code: types.CodeType) -> ast.FunctionDef:
    """A lambda as the `def` it means (`def <lambda>(x): return body`), positioned in its
    file. Its file is parsed whole: a lambda's first line (`fn(\\n lambda x: ...)`) need
    not start a statement. Of several lambdas on that line, the one whose body holds the
    positions of the code's instructions (the innermost such: a lambda inside another)."""
    lines, _ = inspect.findsource(code)
    arg_names = list(code.co_varnames[:code.co_argcount])
    # (Less the (first line, column 0) entries Python gives the code's entry and exit.)
    entry = (code.co_firstlineno, code.co_firstlineno, 0, 0)
    positions = [p for p in code.co_positions() if None not in p and p != entry]
    candidates = []
    for node in ast.walk(ast.parse("".join(lines))):
        if isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno \
                and [a.arg for a in (*node.args.posonlyargs, *node.args.args)] == arg_names:
            body = node.body
            start, end = (body.lineno, body.col_offset), (body.end_lineno, body.end_col_offset)
            inside = sum(start <= (p[0], p[2]) and (p[1], p[3]) <= end for p in positions)
            candidates.append((-inside, (end[0] - start[0], end[1] - start[1]), node))
    if not candidates:
        raise _Unsupported("its lambda was not found in its source")
    node = min(candidates, key=lambda candidate: candidate[:2])[2]
    function = ast.FunctionDef(name="<lambda>", args=node.args, body=[
        ast.copy_location(ast.Return(value=node.body), node.body)], decorator_list=[],
        returns=None, type_comment=None)
    if "type_params" in ast.FunctionDef._fields:
        function.type_params = []
    return ast.copy_location(function, node)


# Converted code by the id of the code it converts: a function object made anew from the
# same code (a lambda or nested `def` made on every call of the code around it) takes the
# converted code again, with its own globals, defaults and closure cells, instead of
# parsing and converting its source again (~ms). Each entry: (weak reference to the code,
# id of the globals its calls were sorted out with, _Converted); forgotten when the code is
# freed.
_CONVERTED_CODE: dict = {}


class _Converted:
    """One code's conversion: its code, where each of its free variables' cells comes from
    (an index into the original's closure, or None: the runtime alias), and its source."""

    __slots__ = ("code", "cells", "source")

    def __init__(self, code: types.CodeType, cells: tuple, source: str):
        self.code = code
        self.cells = cells
        self.source = source


def _convert(fn) -> Conversion:
    key = id(fn.__code__)
    entry = _CONVERTED_CODE.get(key)
    if entry is None or entry[1] != id(fn.__globals__) or entry[0]() is not fn.__code__:
        # (The table is bound now: at exit, module globals may be None when codes die.)
        forget = functools.partial(calls.forget, _CONVERTED_CODE, key)
        entry = (weakref.ref(fn.__code__, forget), id(fn.__globals__), _convert_code(fn))
        _CONVERTED_CODE[key] = entry
    converted = entry[2]
    return Conversion(_instantiate(fn, converted), converted.source, True)


def _convert_code(fn) -> _Converted:
    from unigraph.autograph.transformer import Namer, convert_function

    function = _parse(fn)
    # Decorators, defaults and annotations were evaluated when `fn` was defined; the
    # converted function takes them from `fn` rather than evaluating them again.
    function.decorator_list = []
    args = function.args
    args.defaults = []
    args.kw_defaults = [None] * len(args.kwonlyargs)
    function.returns = None
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
        if arg is not None:
            arg.annotation = None
    class_name = _class_name(fn)
    if class_name:
        _mangle_private_names(function, class_name)
    if "__class__" in fn.__code__.co_freevars:
        _explicit_super(function)
    namer = Namer(function)
    alias = namer.alias()
    convert_function(function, namer, alias, _call_router(fn, function))
    _strong_results(function, alias)
    source = ast.unparse(function)
    return _compile(fn, function, namer, alias, source)


def _compile(fn, function: ast.FunctionDef, namer, alias: str, source: str) -> _Converted:
    """Compile the converted `def` inside a factory whose parameters are `fn`'s free
    variables (and the runtime alias): its code, to rebuild on `fn`'s own globals and
    closure cells (`_instantiate`), so that it sees the same, live, variables."""
    freevars = fn.__code__.co_freevars
    factory_name = namer.new("factory")
    # Under a name of its own in the factory: there, its own name (a recursive call)
    # would be the factory's local instead of the global it is in `fn`.
    function.name = namer.new("converted")
    params = [ast.arg(arg=name) for name in (*freevars, alias)]
    factory = ast.FunctionDef(
        name=factory_name,
        args=ast.arguments(posonlyargs=[], args=params, vararg=None, kwonlyargs=[],
                           kw_defaults=[], kwarg=None, defaults=[]),
        body=[function, ast.Return(value=ast.Name(id=function.name, ctx=ast.Load()))],
        decorator_list=[], returns=None, type_comment=None)
    if "type_params" in ast.FunctionDef._fields:
        factory.type_params = []
    ast.copy_location(factory, function)
    module = ast.fix_missing_locations(ast.Module(body=[factory], type_ignores=[]))
    code = compile(module, fn.__code__.co_filename, "exec",
                   flags=fn.__code__.co_flags & _FUTURE_FLAGS, dont_inherit=True)
    calls.mark_converted(code)  # its nested functions are converted already
    namespace: dict = {}
    exec(code, namespace)  # defines the factory only: nothing of the user's runs
    made = namespace[factory_name](*[None] * len(params))
    cells = tuple(None if name == alias else freevars.index(name)
                  for name in made.__code__.co_freevars)
    code = made.__code__.replace(co_name=fn.__code__.co_name)  # tracebacks name `fn`
    if hasattr(code, "co_qualname"):
        code = code.replace(co_qualname=fn.__code__.co_qualname)
    calls.mark_converted(code)
    return _Converted(code, cells, source)


def _instantiate(fn, converted: _Converted):
    """The converted function of `fn`: its converted code on `fn`'s globals, defaults and
    closure cells."""
    cells = tuple(types.CellType(runtime) if index is None else fn.__closure__[index]
                  for index in converted.cells)
    function = types.FunctionType(converted.code, fn.__globals__, fn.__name__,
                                  fn.__defaults__, cells or None)
    function.__kwdefaults__ = fn.__kwdefaults__
    function.__qualname__ = fn.__qualname__
    function.__module__ = fn.__module__
    function.__doc__ = fn.__doc__
    function.__annotations__ = dict(getattr(fn, "__annotations__", {}))
    function.__dict__.update(fn.__dict__)
    return function


def _call_router(fn, function: ast.FunctionDef):
    """`routes(func)` for the transformer: whether a call of `func` goes through
    `ag__.converted`. Decided now, from `fn`'s globals and the builtins, where `func` is a name
    (or a module's attribute) that no scope of `fn` binds: a library module's attribute, a
    builtin, a class, a library function stay plain calls. Every other call (a local, a
    closure variable, an attribute of a value, `fns[0]`) is decided when it runs."""
    bound = set(fn.__code__.co_freevars)
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add(node.asname or node.name.split(".")[0])
    builtins = fn.__globals__.get("__builtins__", {})
    builtins = getattr(builtins, "__dict__", builtins)

    def routes(func) -> bool:
        root, attribute = func, False
        while isinstance(root, ast.Attribute):
            root, attribute = root.value, True
        if not isinstance(root, ast.Name) or root.id in bound:
            return True
        if root.id in fn.__globals__:
            value = fn.__globals__[root.id]
        elif root.id in builtins:
            value = builtins[root.id]
        else:
            return True  # not defined yet: decided when called
        if attribute:
            # A library module's attributes are library code; a user module's may not be.
            return not (isinstance(value, types.ModuleType) and calls.is_library_module(value))
        return calls.routes_value(value)

    # Whether `print(...)` is the builtin (no scope of `fn` binds it, nor its globals):
    # then it becomes `ag__.print_(...)` (`autograph.printing`).
    routes.prints = "print" not in bound and \
        fn.__globals__.get("print", builtins.get("print")) is print
    return routes


def _strong_results(function: ast.FunctionDef, alias: str) -> None:
    """`return v` -> `return ag__.result(v)`: weakly typed values (a loop index, a carried
    Python number) stay weak inside the function, as Python numbers would, and leave it as
    ordinary tensors, as a static graph's outputs do. After conversion every `return` of
    the function itself is a statement of its body."""
    for stmt in function.body:
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            func = ast.Attribute(value=ast.Name(id=alias, ctx=ast.Load()), attr="result",
                                 ctx=ast.Load())
            stmt.value = ast.copy_location(ast.Call(func=func, args=[stmt.value], keywords=[]),
                                           stmt.value)


def _class_name(fn) -> str | None:
    parts = getattr(fn.__code__, "co_qualname", fn.__qualname__).split(".")
    if len(parts) >= 2 and parts[-2] != "<locals>":
        return parts[-2]
    return None


def _mangle_private_names(function: ast.FunctionDef, class_name: str) -> None:
    """Apply the `__name` -> `_Class__name` mangling Python did when it compiled the method
    inside its class (the converted copy is compiled outside any class)."""
    stripped = class_name.lstrip("_")
    if not stripped:
        return

    def mangle(name):
        if name and name.startswith("__") and not name.endswith("__") and "." not in name:
            return f"_{stripped}{name}"
        return name

    stack = [function]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.ClassDef):
            continue  # a nested class mangles with its own name
        if isinstance(node, ast.Name):
            node.id = mangle(node.id)
        elif isinstance(node, ast.Attribute):
            node.attr = mangle(node.attr)
        elif isinstance(node, ast.arg):
            node.arg = mangle(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.name = mangle(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            node.names = [mangle(n) for n in node.names]
        elif isinstance(node, ast.alias) and node.asname:
            node.asname = mangle(node.asname)
        stack.extend(ast.iter_child_nodes(node))


def _explicit_super(function: ast.FunctionDef) -> None:
    """`super()` -> `super(__class__, self)`: a zero-argument `super()` finds neither inside
    the nested functions that converted branches and loop bodies become."""
    positional = [*function.args.posonlyargs, *function.args.args]
    if not positional:
        return
    first = positional[0].arg
    stack = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "super" and not node.args and not node.keywords):
            node.args = [ast.Name(id="__class__", ctx=ast.Load()),
                         ast.Name(id=first, ctx=ast.Load())]
        stack.extend(ast.iter_child_nodes(node))
