"""The source transformation: one function's AST in, the converted AST out.

Two passes per function scope (the decorated function and every function nested in it):

1. *Jump lowering* removes `break`, `continue` and `return` from inside `if`s and loops:
   each sets a flag (`break__1 = True`, `do_return__2 = True; retval__3 = value`), the
   statements after it are guarded by `if not flag:`, and loops test the flag. What is left
   is structured code whose only jumps are the function's final `return`.
2. *Conversion* turns every `if`, `while` and `for` into a call into `runtime` with the
   branches and body as nested functions and the variables they change as explicit state
   (get/set functions), and every `a if c else b`, `and`, `or`, `not` into a runtime call
   taking its lazily evaluated operands. The runtime keeps Python semantics for Python
   conditions and eager tensors, and builds `cond`/`while_loop` for symbolic ones.

Generated statements carry the line of the statement they replace, so tracebacks and
`user_source()` name the user's own line. Generated names end in `__<n>` and are chosen to
miss every name in the function; runtime helpers are reached through one alias (`ag__`,
lengthened if the function uses that name).
"""

from __future__ import annotations

import ast
import itertools

from unigraph.autograph.analysis import (
    EXTRA_TEST,
    SCOPES,
    TRIES,
    Facts,
    analyse,
    assigned_names,
)


class Namer:
    """Fresh names that collide with nothing the user wrote."""

    def __init__(self, tree):
        self.taken = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                self.taken.add(node.id)
            elif isinstance(node, ast.arg):
                self.taken.add(node.arg)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.taken.add(node.name)
            elif isinstance(node, ast.alias):
                self.taken.add(node.asname or node.name.split(".")[0])
        self._counter = itertools.count(1)

    def alias(self, base: str = "ag__") -> str:
        while base in self.taken:
            base += "_"
        self.taken.add(base)
        return base

    def new(self, base: str) -> str:
        while True:
            name = f"{base}__{next(self._counter)}"
            if name not in self.taken:
                self.taken.add(name)
                return name


# -- small AST builders -------------------------------------------------------------------
def _place(node, where):
    """Put `node`, and every descendant that has no position yet, on the first line of
    `where` (one line: CPython places a call on its attribute's *last* line, and the frame
    line of a runtime call must be the line of the statement it replaces)."""
    line, col = where.lineno, where.col_offset
    end = where.end_col_offset if where.end_lineno == line else col

    def visit(current):
        if "lineno" in current._attributes:
            if hasattr(current, "lineno"):
                return
            current.lineno, current.end_lineno = line, line
            current.col_offset, current.end_col_offset = col, end
        for child in ast.iter_child_nodes(current):
            visit(child)

    visit(node)
    return node


def _name(identifier: str, store=False) -> ast.Name:
    return ast.Name(id=identifier, ctx=ast.Store() if store else ast.Load())


def _assign(identifier: str, value, where) -> ast.Assign:
    value = value if isinstance(value, ast.AST) else ast.Constant(value=value)
    return _place(ast.Assign(targets=[_name(identifier, True)], value=value), where)


def _none_set(flags: list) -> ast.expr:
    """`not f` or `not (f1 or f2)`."""
    operand = _name(flags[0]) if len(flags) == 1 else \
        ast.BoolOp(op=ast.Or(), values=[_name(f) for f in flags])
    return ast.UnaryOp(op=ast.Not(), operand=operand)


def _function(name: str, params: list, body: list, where) -> ast.FunctionDef:
    arguments = ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params],
                              vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                              defaults=[])
    node = ast.FunctionDef(name=name, args=arguments, body=body or [ast.Pass()],
                           decorator_list=[], returns=None, type_comment=None)
    if "type_params" in ast.FunctionDef._fields:
        node.type_params = []
    return _place(node, where)


def _lambda(body: ast.expr) -> ast.Lambda:
    arguments = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                              kw_defaults=[], kwarg=None, defaults=[])
    return _place(ast.Lambda(args=arguments, body=body), body)


def _contains(node, kinds, into_loops: bool) -> bool:
    """Whether `node` holds one of `kinds`, not looking into nested functions, nor into the
    bodies of nested loops unless `into_loops` (their `break` is theirs, not ours)."""
    if isinstance(node, kinds):
        return True
    if isinstance(node, SCOPES):
        return False
    if not into_loops and isinstance(node, (ast.While, ast.For, ast.AsyncFor)):
        children = node.orelse
    else:
        children = ast.iter_child_nodes(node)
    return any(_contains(child, kinds, into_loops) for child in children)


def _contains_any(stmts, kinds, into_loops: bool) -> bool:
    return any(_contains(stmt, kinds, into_loops) for stmt in stmts)


# -- pass 1: jump lowering ----------------------------------------------------------------
class _Loop:
    __slots__ = ("break_flag", "continue_flag")

    def __init__(self, break_flag, continue_flag):
        self.break_flag = break_flag
        self.continue_flag = continue_flag


class JumpLowering:
    """Rewrites `break`/`continue`/nested `return` of one function body into flags."""

    def __init__(self, namer: Namer, alias: str):
        self.namer = namer
        self.alias = alias
        self.do_return = None
        self.retval = None

    def lower(self, function: ast.FunctionDef) -> None:
        body = function.body
        nested_return = any(not isinstance(stmt, ast.Return)
                            and _contains(stmt, ast.Return, into_loops=True) for stmt in body)
        if not nested_return:
            function.body = self.block(body, None)
            return
        first = body[0]
        self.do_return = self.namer.new("do_return")
        self.retval = self.namer.new("retval")
        undefined = ast.Call(func=ast.Attribute(value=_name(self.alias),
                                                attr="UndefinedReturnValue", ctx=ast.Load()),
                             args=[], keywords=[])
        final = ast.Call(func=ast.Attribute(value=_name(self.alias), attr="return_value",
                                            ctx=ast.Load()),
                         args=[_name(self.retval)], keywords=[])
        function.body = [_assign(self.do_return, False, first),
                         _assign(self.retval, undefined, first),
                         *self.block(body, None),
                         _place(ast.Return(value=final), body[-1])]

    def block(self, stmts: list, loop) -> list:
        out = []
        for index, stmt in enumerate(stmts):
            if isinstance(stmt, ast.Break):
                out.append(_assign(loop.break_flag, True, stmt))
                return out
            if isinstance(stmt, ast.Continue):
                out.append(_assign(loop.continue_flag, True, stmt))
                return out
            if isinstance(stmt, ast.Return):
                if self.do_return is None:
                    out.append(stmt)
                else:
                    value = stmt.value or _place(ast.Constant(value=None), stmt)
                    out += [_assign(self.do_return, True, stmt),
                            _assign(self.retval, value, stmt)]
                return out
            flags = self._flags(stmt, loop)
            out.extend(self._statement(stmt, loop))
            rest = stmts[index + 1:]
            if flags and rest:
                guarded = ast.If(test=_none_set(flags), body=self.block(rest, loop), orelse=[])
                setattr(guarded, JUMP_GUARD, True)
                out.append(_place(guarded, rest[0]))
                return out
        return out

    def _flags(self, stmt, loop) -> list:
        """The flags `stmt` may set that must stop the rest of the current block."""
        flags = []
        if loop is not None:
            if loop.break_flag and _contains(stmt, ast.Break, into_loops=False):
                flags.append(loop.break_flag)
            if loop.continue_flag and _contains(stmt, ast.Continue, into_loops=False):
                flags.append(loop.continue_flag)
        if self.do_return and _contains(stmt, ast.Return, into_loops=True):
            flags.append(self.do_return)
        return flags

    def _statement(self, stmt, loop) -> list:
        if isinstance(stmt, ast.If):
            stmt.body = self.block(stmt.body, loop) or [ast.Pass()]
            stmt.orelse = self.block(stmt.orelse, loop)
        elif isinstance(stmt, (ast.While, ast.For)):
            return self._loop(stmt, loop)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            stmt.body = self.block(stmt.body, loop)
        elif isinstance(stmt, TRIES):
            stmt.body = self.block(stmt.body, loop)
            for handler in stmt.handlers:
                handler.body = self.block(handler.body, loop) or [ast.Pass()]
            stmt.orelse = self.block(stmt.orelse, loop)
            stmt.finalbody = self.block(stmt.finalbody, loop)
        elif isinstance(stmt, ast.Match):
            for case in stmt.cases:
                case.body = self.block(case.body, loop) or [ast.Pass()]
        return [stmt]

    def _loop(self, stmt, outer) -> list:
        has_break = _contains_any(stmt.body, ast.Break, into_loops=False)
        has_continue = _contains_any(stmt.body, ast.Continue, into_loops=False)
        has_return = self.do_return and _contains_any(stmt.body, ast.Return, into_loops=True)
        inner = _Loop(self.namer.new("break") if has_break else None,
                      self.namer.new("continue") if has_continue else None)
        before = []
        body = self.block(stmt.body, inner)
        if has_break:
            before.append(_assign(inner.break_flag, False, stmt))
        if has_continue:
            body.insert(0, _assign(inner.continue_flag, False, stmt.body[0]))
        stmt.body = body
        stop = [flag for flag in (inner.break_flag, has_return and self.do_return) if flag]
        if stop and isinstance(stmt, ast.While):
            stmt.test = _place(
                ast.BoolOp(op=ast.And(), values=[_none_set(stop), stmt.test]), stmt.test)
        elif stop:
            setattr(stmt, EXTRA_TEST, _place(_none_set(stop), stmt.iter))
        after = []
        if stmt.orelse:
            orelse = self.block(stmt.orelse, outer)
            guarded = ast.If(test=_none_set(stop), body=orelse, orelse=[])
            setattr(guarded, JUMP_GUARD, True)
            after = [_place(guarded, stmt.orelse[0])] if stop else orelse
            stmt.orelse = []
        return [*before, stmt, *after]


# -- pass 2: conversion ------------------------------------------------------------------
def _declarations(function) -> tuple[set, set]:
    """Names `function` declares global and nonlocal (not looking into nested scopes)."""
    globals_, nonlocals = set(), set()
    stack = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Global):
            globals_.update(node.names)
        elif isinstance(node, ast.Nonlocal):
            nonlocals.update(node.names)
        elif not isinstance(node, SCOPES):
            stack.extend(ast.iter_child_nodes(node))
    return globals_, nonlocals


def _parameters(function) -> set:
    args = function.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return set(names)


def _holds_yield(node) -> bool:
    """Whether `node` holds a `yield` of the function being converted (not of a nested
    scope): a generator's."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (ast.Yield, ast.YieldFrom)):
            return True
        stack.extend(child for child in ast.iter_child_nodes(current)
                     if not isinstance(child, SCOPES))
    return False


def _has_walrus(node) -> bool:
    return any(isinstance(child, ast.NamedExpr) for child in ast.walk(node))


# Set on the `if`s the jump lowering wraps the rest of a loop body in (`if not break_:`).
JUMP_GUARD = "unigraph_jump_guard"
# The fixes named when a Python form meets a tensor (`ag__.python_test`).
ASSERT_FIX = ("a static graph cannot stop on a value it computes, so the eager targets "
              "would check it and the static ones could not; check the function's result "
              "after the call, or replace bad values with ug.where")
FILTER_FIX = ("the list's length would depend on a value a static graph knows only when it "
              "runs; keep every element and choose values with ug.where or an "
              "`a if cond else b` element")
WALRUS_FIX = ("a while_loop's condition cannot assign a variable; assign it before the loop "
              "and again at the end of the loop's body")
RAISE_FIX = ("it would raise on every call, whatever the values; check the values after the "
             "call (or decide the `raise` on a Python value), or replace bad values with "
             "ug.where")
YIELD_FIX = ("it holds a generator's `yield`, which cannot be inside a cond or while_loop; "
             "decide it on a Python value, or compute the values under the tensor condition "
             "first and yield them after it")
DEL_FIX = ("the variable would be deleted on every path, whichever runs; delete it after "
           "the `if` or the loop")
# Methods that grow a Python list in place.
GROWING = {"append", "extend", "insert"}


def _grown_outside(nodes, modified) -> list:
    """(line, "kept.append(...)") for each `kept.append(...)`-like call in `nodes` (not in
    nested functions) on an object the block does not bind (`kept`, `self.kept`), and
    (line, "self.scale = ...") for each attribute or item such an object has set or deleted
    there: Python objects made before an `if` or a loop that the block changes, which a
    tensor condition forbids."""
    found = set()
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, SCOPES):
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in GROWING and _made_outside(node.func.value, modified):
            found.add((node.lineno, f"{ast.unparse(node.func)}(...)"))
        for target in _stored_in(node):
            if isinstance(target, (ast.Attribute, ast.Subscript)) \
                    and _made_outside(target.value, modified):
                found.add((node.lineno, _change(node, target)))
        stack.extend(ast.iter_child_nodes(node))
    return sorted(found)


def _run_on_every_path(nodes) -> list:
    """(line, "raise ...", None) for each `raise` in `nodes` and (line, "del y", "y") for
    each `del` of a plain name not assigned again after it, not in nested functions, nor in
    a `try` body that has handlers, nor in a nested `if` or loop (checked by its own):
    statements a static trace runs on every path, whichever the tensor condition takes.
    `_refused` keeps the `del`s of variables the statement carries."""
    found, stored = [], {}  # stored: a name -> the last line that assigns it
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, SCOPES):
            continue
        if isinstance(node, ast.Raise):
            found.append((node.lineno, ast.unparse(node), None))
        elif isinstance(node, ast.Delete):
            found.extend((node.lineno, f"del {target.id}", target.id)
                         for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stored[node.id] = max(stored.get(node.id, 0), node.lineno)
        if isinstance(node, ast.Try | ast.TryStar) and node.handlers:
            stack.extend([*node.handlers, *node.orelse, *node.finalbody])
            continue
        if isinstance(node, ast.While | ast.For) or (isinstance(node, ast.If)
                                                      and not getattr(node, JUMP_GUARD, False)):
            # A nested `if` or loop checks its own body once its condition is known: a
            # `raise` under a Python condition (`if n < 0: raise ...`) stays Python's.
            stack.extend([node.test] if isinstance(node, ast.If | ast.While) else [node.iter])
            continue
        stack.extend(ast.iter_child_nodes(node))
    # A `del y` followed by `y = ...` leaves `y` bound: nothing to refuse.
    return [(line, text, name) for line, text, name in found
            if name is None or stored.get(name, 0) <= line]


def _refused(found, state) -> list:
    """(line, text, fix) for the `raise`s and the `del`s of `state` variables in `found`
    (`_run_on_every_path`), refused under a tensor condition in every mode."""
    return sorted((line, text, RAISE_FIX if name is None else DEL_FIX)
                  for line, text, name in found if name is None or name in state)


def _made_outside(value, modified) -> bool:
    """Whether `value` (`kept`, `self.kept`, `d[k]`) is reached from a name the block does
    not bind."""
    while isinstance(value, (ast.Attribute, ast.Subscript)):
        value = value.value
    return isinstance(value, ast.Name) and value.id not in modified


def _change(statement, target) -> str:
    """`self.scale = ...`, `self.steps += ...`, `del cache['y']`: the change, its value
    left out."""
    if isinstance(statement, ast.Delete):
        return f"del {ast.unparse(target)}"
    op = statement.op if isinstance(statement, ast.AugAssign) else None
    return ast.unparse(ast.AugAssign(target=target, op=op, value=ast.Name(id="...")) if op
                       else ast.Assign(targets=[target], value=ast.Name(id="..."), lineno=0))


def _stored_in(node) -> list:
    """The targets a statement stores to or deletes, tuples and lists unpacked."""
    if isinstance(node, (ast.Assign, ast.Delete)):
        targets = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    else:
        return []
    stored = []
    while targets:
        target = targets.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            targets.extend(target.elts)
        elif isinstance(target, ast.Starred):
            targets.append(target.value)
        else:
            stored.append(target)
    return stored


def convert_function(function: ast.FunctionDef, namer: Namer, alias: str,
                     routes=None) -> None:
    """Lower and convert one function scope in place (nested functions recursively).
    `routes(func)`: whether a call of the expression `func` goes through `ag__.converted`
    (which gives a user function's converted version); None: no call does."""
    JumpLowering(namer, alias).lower(function)
    globals_, nonlocals = _declarations(function)
    facts = analyse(function.body, _parameters(function), globals_, nonlocals)
    converter = Converter(namer, alias, facts, globals_, nonlocals | globals_, routes)
    function.body = converter.visit_block(function.body)
    if converter.guarded:
        # A guarded variable may hold an Undefined marker: check what is returned.
        for stmt in function.body:
            if isinstance(stmt, ast.Return) and stmt.value is not None \
                    and not _is_runtime_call(stmt.value, alias, "return_value"):
                stmt.value = converter._runtime("return_value", [stmt.value], stmt.value)


def _is_runtime_call(node, alias: str, attr: str) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == attr and isinstance(node.func.value, ast.Name)
            and node.func.value.id == alias)


class Converter(ast.NodeTransformer):
    """Rewrites the control flow of one function scope into runtime calls."""

    def __init__(self, namer: Namer, alias: str, facts: Facts, globals_: set, declared: set,
                 routes=None):
        self.namer = namer
        self.routes = routes
        self.alias = alias
        self.facts = facts
        self.globals = globals_
        self.declared = declared  # global or nonlocal: bound elsewhere, never guarded
        self.guarded = False  # whether any `ld` guard was emitted

    def visit_block(self, stmts: list) -> list:
        out = []
        for stmt in stmts:
            result = self.visit(stmt)
            out.extend(result if isinstance(result, list) else [result])
        return out

    def _runtime(self, attr: str, args: list, where) -> ast.Call:
        func = ast.Attribute(value=_name(self.alias), attr=attr, ctx=ast.Load())
        return _place(ast.Call(func=func, args=args, keywords=[]), where)

    # -- scopes -------------------------------------------------------------------------
    def visit_FunctionDef(self, node):
        # Decorators and defaults run in this scope; the body is a scope of its own.
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.args.defaults = [self.visit(d) for d in node.args.defaults]
        node.args.kw_defaults = [d if d is None else self.visit(d)
                                 for d in node.args.kw_defaults]
        convert_function(node, self.namer, self.alias, self.routes)
        return node

    def visit_AsyncFunctionDef(self, node):
        return node  # coroutines cannot be traced: left as they are

    def visit_ClassDef(self, node):
        return node  # a class body is not a function scope: left as it is

    # -- expressions --------------------------------------------------------------------
    def visit_Call(self, node):
        """`f(a, k=b)` -> `ag__.converted(f)(a, k=b)` where `f` may be a user function,
        whose converted version then runs (decided by `routes`, see `autograph.calls`)."""
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Name) and func.id == "print" \
                and getattr(self.routes, "prints", False):
            # The builtin print: a tensor argument prints when it runs (autograph.printing)
            node.func = _place(ast.Attribute(value=_name(self.alias), attr="print_",
                                             ctx=ast.Load()), func)
            node.args = [self._print_argument(arg) for arg in node.args]
            return node
        if self.routes is None or (isinstance(func, ast.Attribute)
                                   and isinstance(func.value, ast.Name)
                                   and func.value.id == self.alias):
            return node  # (the runtime's own calls, made by jump lowering)
        if not self.routes(func):
            return node
        node.func = self._runtime("converted", [func], node)
        return node

    def _print_argument(self, arg):
        """An f-string argument of print -> `ag__.FString("text", ag__.Field(value), ...)`:
        its tensor fields print when the line runs. A field with a conversion or format
        spec carries a lambda that formats it as Python would."""
        if not isinstance(arg, ast.JoinedStr):
            return arg
        pieces = []
        for value in arg.values:
            if not isinstance(value, ast.FormattedValue):
                pieces.append(value)
                continue
            field_args = [value.value]
            if value.conversion != -1 or value.format_spec is not None:
                name = self.namer.new("field")
                field = ast.FormattedValue(value=_name(name), conversion=value.conversion,
                                           format_spec=value.format_spec)
                field_args.append(ast.Lambda(
                    args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=name)], vararg=None,
                                       kwonlyargs=[], kw_defaults=[], kwarg=None,
                                       defaults=[]),
                    body=ast.JoinedStr(values=[field])))
            pieces.append(self._runtime("Field", field_args, value))
        return self._runtime("FString", pieces, arg)

    def _kept_python(self, node, what: str):
        """A statement holding a generator's `yield` stays Python's (a `yield` cannot be
        inside a cond branch or a loop body, which are functions of their own), its inner
        statements converted; its condition or iterable must be a Python value in every
        mode (`ag__.python_test`): a tensor one is refused eagerly too."""
        self.generic_visit(node)
        if isinstance(node, ast.For):
            node.iter = self._python_test(node.iter, what, YIELD_FIX)
            extra = getattr(node, EXTRA_TEST, None)
            if extra is not None:  # (the flags of a lowered `break`/`return`)
                stop = ast.If(test=ast.UnaryOp(op=ast.Not(), operand=self.visit(extra)),
                              body=[ast.Break()], orelse=[])
                node.body.insert(0, _place(stop, node))
        else:
            node.test = self._python_test(node.test, what, YIELD_FIX)
        return node

    def visit_IfExp(self, node):
        if _holds_yield(node):
            return self._kept_python(node, "conditional expression")
        self.generic_visit(node)
        if _has_walrus(node.body) or _has_walrus(node.orelse):
            return node  # a lambda would give `:=` a scope of its own
        return self._runtime("if_exp", [node.test, _lambda(node.body), _lambda(node.orelse)],
                             node)

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        if any(_has_walrus(value) or _holds_yield(value) for value in node.values[1:]):
            return node
        helper = "and_" if isinstance(node.op, ast.And) else "or_"
        return self._runtime(helper, [node.values[0], *map(_lambda, node.values[1:])], node)

    def visit_Compare(self, node):
        """`a < b <= c` -> `ag__.compare_chain(a, ("Lt", lambda: b), ("LtE", lambda: c))`:
        Python's `a < b and b <= c` (b evaluated once), which on tensors is a `bool()`."""
        self.generic_visit(node)
        if len(node.ops) == 1 or any(_has_walrus(c) or _holds_yield(c)
                                     for c in node.comparators):
            return node
        links = [ast.Tuple(elts=[ast.Constant(value=type(op).__name__), _lambda(operand)],
                           ctx=ast.Load()) for op, operand in zip(node.ops, node.comparators)]
        return self._runtime("compare_chain", [node.left, *links], node)

    def _python_test(self, test, what: str, fix: str) -> ast.Call:
        """`test` -> `ag__.python_test(test, what, fix)`: a form a graph cannot hold, whose
        value must be Python's in every mode (a tensor is refused, eagerly too)."""
        return self._runtime("python_test", [test, ast.Constant(value=what),
                                             ast.Constant(value=fix)], test)

    def visit_Assert(self, node):
        self.generic_visit(node)
        node.test = self._python_test(node.test, "`assert`", ASSERT_FIX)
        return node

    def visit_comprehension(self, node):
        self.generic_visit(node)
        node.ifs = [self._python_test(test, "a comprehension's `if`", FILTER_FIX)
                    for test in node.ifs]
        return node

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return self._runtime("not_", [node.operand], node)
        return node

    # -- statements ---------------------------------------------------------------------
    def _facts(self, node, modified):
        key = id(node)
        live = self.facts.live_after.get(key, frozenset(modified))
        head = self.facts.live_head.get(key, frozenset())
        return self.facts.defined.get(key, frozenset()), live, head

    def _guards(self, state, defined, where) -> list:
        """`x = ag__.ld(lambda: x, 'x')` for state perhaps unbound here: binds it (the
        nested functions declare it nonlocal) to its value or to an Undefined marker."""
        guards = []
        for name in state:
            if name in defined or name in self.declared:
                continue
            read = self._runtime("ld", [_lambda(_place(_name(name), where)),
                                        ast.Constant(value=name)], where)
            guards.append(_assign(name, read, where))
            self.guarded = True
        return guards

    def _scope_function(self, name, params, body, state, modified, where) -> ast.FunctionDef:
        """A nested function whose assignments to `state` (and to names this scope declares
        global or nonlocal) land in this scope; its other assignments stay its own (they
        are dead after the statement)."""
        declarations = []
        shared = [n for n in modified if n in state or n in self.declared]
        globals_ = [n for n in shared if n in self.globals]
        nonlocals = [n for n in shared if n not in self.globals]
        if globals_:
            declarations.append(_place(ast.Global(names=globals_), where))
        if nonlocals:
            declarations.append(_place(ast.Nonlocal(names=nonlocals), where))
        return _function(name, params, declarations + body, where)

    def _state(self, state, where) -> tuple[list, str, str]:
        get_name, set_name = self.namer.new("get_state"), self.namer.new("set_state")
        values = ast.Tuple(elts=[_name(n) for n in state], ctx=ast.Load())
        getter = _function(get_name, [], [_place(ast.Return(value=values), where)], where)
        argument = self.namer.new("values")
        targets = ast.Tuple(elts=[_name(n, store=True) for n in state], ctx=ast.Store())
        body = [_place(ast.Assign(targets=[targets], value=_name(argument)), where)]
        setter = self._scope_function(set_name, [argument], body if state else [], state,
                                      state, where)
        return [getter, setter], get_name, set_name

    def _state_names(self, modified, live) -> list:
        """The variables a statement carries: those it may change that are read later.
        Globals are not state: assigning one is a Python side effect, like an attribute."""
        return [n for n in modified if n in live and n not in self.globals]

    def _names(self, state) -> ast.Tuple:
        return ast.Tuple(elts=[ast.Constant(value=n) for n in state], ctx=ast.Load())

    @staticmethod
    def _with_grown(call: ast.Call, grown: list) -> ast.Call:
        """`call` with `grown=((line, "kept.append(...)"), ...)` (see `_grown_outside`),
        the Python objects made before the statement that it changes: the runtime refuses
        them once the condition is a tensor."""
        if grown:
            value = ast.Tuple(elts=[ast.Tuple(elts=[ast.Constant(value=part) for part in entry],
                                              ctx=ast.Load())
                                    for entry in grown], ctx=ast.Load())
            call.keywords.append(_place(ast.keyword(arg="grown", value=value), call))
        return call

    def visit_If(self, node):
        if _holds_yield(node):
            return self._kept_python(node, "`if`")
        modified = assigned_names(node.body + node.orelse)
        in_body, in_else = set(assigned_names(node.body)), set(assigned_names(node.orelse))
        defined, live, head = self._facts(node, modified)
        # (Not for the `if`s the jump lowering adds: an eager loop runs them as Python, and
        # the loop is checked itself where its condition is a tensor.)
        guard = getattr(node, JUMP_GUARD, False)
        grown = [] if guard else _grown_outside(node.body + node.orelse, modified)
        every_path = [] if guard else _run_on_every_path(node.body + node.orelse)
        self.generic_visit(node)
        state = self._state_names(modified, live | head)
        grown += _refused(every_path, state)
        functions, get_name, set_name = self._state(state, node)
        body_name, else_name = self.namer.new("if_body"), self.namer.new("else_body")
        functions += [self._scope_function(body_name, [], node.body, state, modified, node),
                      self._scope_function(else_name, [], node.orelse, state, modified, node)]
        # State only one branch assigns must be bound before a tensor `if` (in every mode):
        # named here, checked by the runtime once it sees the condition.
        one_branch = []
        for name in state:
            if (name in in_body) != (name in in_else):
                branch = "if" if name in in_body else "else"
                one_branch.append(ast.Tuple(elts=[ast.Constant(value=name),
                                                  ast.Constant(value=branch)], ctx=ast.Load()))
        args = [node.test, _name(body_name), _name(else_name), _name(get_name), _name(set_name),
                self._names(state)]
        if one_branch:
            args.append(ast.Tuple(elts=one_branch, ctx=ast.Load()))
        call = self._with_grown(self._runtime("if_stmt", args, node), grown)
        return [*self._guards(state, defined, node), *functions,
                _place(ast.Expr(value=call), node)]

    def visit_While(self, node):
        if _holds_yield(node):
            return self._kept_python(node, "`while`")
        if node.orelse or _has_walrus(node.test):
            # `:=` in the test would change loop variables in the loop's *condition*,
            # which a while_loop cannot do: the loop stays a Python `while`, and a test
            # with `:=` must give a Python value (a tensor one is refused in every mode).
            self.generic_visit(node)
            if _has_walrus(node.test):
                node.test = self._python_test(node.test, "`:=` in a `while` test", WALRUS_FIX)
            return node
        modified = assigned_names([node.test, *node.body])
        defined, live, head = self._facts(node, modified)
        grown = _grown_outside([node.test, *node.body], modified)
        every_path = _run_on_every_path([node.test, *node.body])
        self.generic_visit(node)
        state = self._state_names(modified, live | head)
        grown += _refused(every_path, state)
        functions, get_name, set_name = self._state(state, node)
        test_name, body_name = self.namer.new("loop_test"), self.namer.new("loop_body")
        test = [_place(ast.Return(value=node.test), node.test)]
        functions += [self._scope_function(test_name, [], test, state, modified, node),
                      self._scope_function(body_name, [], node.body, state, modified, node)]
        call = self._with_grown(self._runtime("while_stmt", [
            _name(test_name), _name(body_name), _name(get_name), _name(set_name),
            self._names(state)], node), grown)
        return [*self._guards(state, defined, node), *functions,
                _place(ast.Expr(value=call), node)]

    def visit_For(self, node):
        if _holds_yield(node):
            return self._kept_python(node, "`for`")
        if node.orelse:
            return self.generic_visit(node)
        modified = assigned_names([node.target, *node.body])
        defined, live, head = self._facts(node, modified)
        grown = _grown_outside(node.body, modified)
        every_path = _run_on_every_path(node.body)
        self.generic_visit(node)
        state = self._state_names(modified, live | head)
        grown += _refused(every_path, state)
        functions, get_name, set_name = self._state(state, node)
        body_name, item = self.namer.new("loop_body"), self.namer.new("item")
        bind = _place(ast.Assign(targets=[node.target], value=_name(item)), node.target)
        functions.append(self._scope_function(body_name, [item], [bind, *node.body], state,
                                              modified, node))
        extra = getattr(node, EXTRA_TEST, None)
        extra_test = ast.Constant(value=None)
        if extra is not None:
            test_name = self.namer.new("extra_test")
            body = [_place(ast.Return(value=self.visit(extra)), node)]
            functions.append(_function(test_name, [], body, node))
            extra_test = _name(test_name)
        iterable = node.iter
        if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) \
                and iterable.func.id == "range" and not iterable.keywords:
            iterable = self._runtime("range_call", [iterable.func, *iterable.args], iterable)
        call = self._with_grown(self._runtime("for_stmt", [
            iterable, extra_test, _name(body_name), _name(get_name), _name(set_name),
            self._names(state)], node), grown)
        return [*self._guards(state, defined, node), *functions,
                _place(ast.Expr(value=call), node)]
