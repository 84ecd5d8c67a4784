"""What the converter needs to know about one function body, found statically.

* `assigned_names`: the names a block binds in the enclosing function's scope (the
  variables an `if` or a loop may change, hence its state).
* `analyse`: for every `if`/`while`/`for`, the names *definitely* assigned before it (the
  others get a run-time "maybe undefined" guard) and the names *live* after it and, for
  loops, at the top of each iteration (a branch-only or loop-only temporary that nothing
  reads later is not state: AutoGraph's rule, which keeps `tmp = ...` inside one branch
  legal).

Both analyses are conservative where Python is hard to follow (`try`, `match`, nested
functions): they may call a name live or not-yet-defined when it is not, which costs a
little generated code or a loop variable, never a wrong result. The one thing not followed
is a closure stored in a container or an attribute and called from there after its
variables change in another branch or loop (see "closures" below).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
TRIES = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)
# Set by the jump lowering on `for` nodes: the test that stops the loop early (`not break_`).
EXTRA_TEST = "unigraph_extra_test"


def assigned_names(nodes) -> list:
    """Names that `nodes` bind in the enclosing function scope, in order of appearance."""
    found: dict = {}

    def visit(node):
        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Load):
                found.setdefault(node.id)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.setdefault(node.name)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, COMPREHENSIONS):  # only `:=` leaks out of a comprehension
            for child in ast.walk(node):
                if isinstance(child, ast.NamedExpr):
                    visit(child.target)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name != "*":
                    found.setdefault(alias.asname or alias.name.split(".")[0])
            return
        if isinstance(node, ast.ExceptHandler) and node.name:
            found.setdefault(node.name)
        if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            found.setdefault(node.name)
        if isinstance(node, ast.MatchMapping) and node.rest:
            found.setdefault(node.rest)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for node in nodes:
        visit(node)
    return list(found)


def used_names(node) -> set:
    """Every name `node` may read, nested functions included (an over-approximation)."""
    if node is None:
        return set()
    names = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and not isinstance(child.ctx, ast.Store):
            names.add(child.id)
        elif isinstance(child, ast.AugAssign) and isinstance(child.target, ast.Name):
            names.add(child.target.id)
    return names


@dataclass
class Facts:
    """Per converted statement (keyed by `id(node)`): see the module docstring."""

    defined: dict = field(default_factory=dict)
    live_after: dict = field(default_factory=dict)
    live_head: dict = field(default_factory=dict)


def analyse(body: list, params: set, globals_: set, nonlocals: set) -> Facts:
    """Facts for the statements of one function body, given its parameters and the names
    it declares `global` and `nonlocal`."""
    facts = Facts()
    sites = _Sites()
    sites.block(body)
    _live_block(body, frozenset(), facts)
    # Always live: what a nested function declares `nonlocal` (it may assign it whenever
    # it is called), and the enclosing function's variables (`nonlocal`), traced with this
    # one. Globals are not state: like attributes, assigning them is a Python side effect.
    always = frozenset(name for closure in sites.closures for name in closure.reads
                       if name in sites.nonlocal_in_closure) | nonlocals
    for table in (facts.live_after, facts.live_head):
        for key in table:
            table[key] = table[key] | always
    for stmt, names in _shared_with_closures(sites, facts).items():
        facts.live_after[stmt] = facts.live_after[stmt] | names
    _defined_block(body, frozenset(params) | globals_ | nonlocals, facts)
    return facts


# -- closures -----------------------------------------------------------------------------
# A closure reads its free variables when it is called, not where it is defined. In the
# converted code, a variable that a converted statement assigns but does not carry as state
# is a local of the branch or loop-body function: a closure defined elsewhere would not see
# that assignment. The liveness pass counts a closure's variables read where it is defined
# (`used_names` looks into it), which is right for a closure called there (a lambda passed
# to `ug.cond`) and for assignments before it. For a closure bound to a name (`def f`,
# `f = lambda ...`), which may be called later, three rules cover the rest:
#
# 1. A converted statement after the definition that assigns one of the closure's variables
#    carries it if the closure's name is read in it or live after it.
# 2. A converted statement that defines the closure and after which its name is still live
#    carries the closure's variables that something after the statement assigns.
# 3. A loop that defines the closure and keeps it for a later iteration (its name live at
#    the top of the body) carries the closure's variables that the loop assigns.
#
# A closure that calls another reads that one's variables too. So `y = x * 2.0;
# x = ug.cond(p, lambda: y, lambda: -y)` in a tensor loop keeps `y` a temporary of the loop
# body, and in `while c: v = ...; while d: v = v; def f(): return v` the outer loop does not
# carry `v`. Not followed: a closure stored in a container or an attribute, or passed to
# something that keeps it, and called from there after its variables change.
def _shared_with_closures(sites, facts) -> dict:
    """{id(converted statement): the closure variables it must carry} (rules 1 to 3)."""
    shared: dict = {}
    for closure in _through_calls(sites.closures):
        if not closure.bound_to:
            continue
        for stmt, start, end in sites.statements:
            inside = start <= closure.position <= end
            after = facts.live_after[id(stmt)]
            escapes = inside and _any_in(closure.bound_to, after)
            kept = inside and not isinstance(stmt, ast.If) \
                and _any_in(closure.bound_to, facts.live_head.get(id(stmt), ()))  # (rule 3)
            called = start > closure.position \
                and _any_in(closure.bound_to, after | used_names(stmt))
            for name in closure.reads:
                writes = sites.writes.get(name, ())
                assigns = any(start <= w <= end for w in writes)
                if (assigns and (kept or called)) or (escapes and any(w > end for w in writes)):
                    shared.setdefault(id(stmt), set()).add(name)
    return shared


def _through_calls(closures) -> list:
    """`closures`, each reading also what the named closures it reads read."""
    by_name: dict = {}
    for closure in closures:
        for name in closure.bound_to:
            by_name.setdefault(name, set()).update(closure.reads)
    result = []
    for closure in closures:
        reads, todo = set(closure.reads), list(closure.reads)
        while todo:
            more = by_name.get(todo.pop(), set()) - reads
            reads |= more
            todo.extend(more)
        result.append(_Closure(closure.position, reads, closure.bound_to))
    return result


def _any_in(names, live) -> bool:
    return any(name in live for name in names)


def _closure_bindings(stmt) -> tuple:
    """The names `stmt` binds a closure to, so that calling them can be followed:
    `def f(...)` and `f = lambda ...`."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return (stmt.name,)
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Lambda):
        return tuple(target.id for target in stmt.targets if isinstance(target, ast.Name))
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.value, ast.Lambda) \
            and isinstance(stmt.target, ast.Name):
        return (stmt.target.id,)
    return ()


@dataclass
class _Closure:
    position: int  # of the statement that defines it
    reads: set  # the names it (and the closures inside it) may read
    bound_to: tuple  # see `_closure_bindings`


class _Sites:
    """Where the closures of one function body are defined and where each name is
    assigned, as positions in program order (statements numbered as they start, so a
    converted statement spans the interval `start..end` of the statements inside it).

    The branches of an `if` and loop bodies become functions of their own; statements
    inside `with`/`try`/`match` stay in theirs and are numbered like the others."""

    def __init__(self):
        self.position = 0
        self.closures: list = []
        self.writes: dict = {}  # name -> positions of its assignments
        self.statements: list = []  # (converted statement, start, end)
        self.nonlocal_in_closure: set = set()

    def add_assigned(self, names) -> None:
        for name in names:
            self.writes.setdefault(name, []).append(self.position)

    def expression(self, node, bound_to=()) -> None:
        """The closures inside `node` (not inside other closures: those read through it)."""
        if node is None:
            return
        stack = [node]
        while stack:
            current = stack.pop()
            if isinstance(current, SCOPES):
                binding = bound_to if current is node else ()
                self.closures.append(_Closure(self.position, used_names(current), binding))
                for inner in ast.walk(current):
                    if isinstance(inner, ast.Nonlocal):
                        self.nonlocal_in_closure.update(inner.names)
            else:
                stack.extend(ast.iter_child_nodes(current))

    def block(self, stmts) -> None:
        for stmt in stmts:
            self.statement(stmt)

    def statement(self, stmt) -> None:
        self.position += 1
        start = self.position
        if isinstance(stmt, ast.If):
            self.expression(stmt.test)
            self.add_assigned(assigned_names([stmt.test]))
            self.block(stmt.body)
            self.block(stmt.orelse)
        elif isinstance(stmt, ast.While):
            self.expression(stmt.test)
            self.add_assigned(assigned_names([stmt.test]))
            self.block(stmt.body)
            self.block(stmt.orelse)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            self.expression(stmt.iter)
            self.expression(getattr(stmt, EXTRA_TEST, None))
            self.add_assigned(assigned_names([stmt.target]))
            self.block(stmt.body)
            self.block(stmt.orelse)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self.expression(item)
            self.add_assigned(assigned_names(stmt.items))
            self.block(stmt.body)
        elif isinstance(stmt, TRIES):
            self.block(stmt.body)
            for handler in stmt.handlers:
                self.expression(handler.type)
                self.add_assigned(assigned_names([handler]))
                self.block(handler.body)
            self.block(stmt.orelse)
            self.block(stmt.finalbody)
        elif isinstance(stmt, ast.Match):
            self.expression(stmt.subject)
            for case in stmt.cases:
                self.expression(case.guard)
                self.add_assigned(assigned_names([case.pattern]))
                self.block(case.body)
        else:
            bindings = _closure_bindings(stmt)
            self.expression(stmt.value if bindings and not isinstance(stmt, SCOPES) else stmt,
                            bindings)
            self.add_assigned(assigned_names([stmt]))
        if isinstance(stmt, (ast.If, ast.While, ast.For, ast.AsyncFor)):
            self.statements.append((stmt, start, self.position))


# -- definitely assigned (forward) -------------------------------------------------------
# "Defined" here means bound in the scope the converted statement will be in. A converted
# `if` binds only its state (the names live after it) there: its other assignments land in
# the branch functions. So an `if` adds what both branches assign *and* is live after it.
def _defined_block(stmts, defined: frozenset, facts: Facts) -> frozenset:
    for stmt in stmts:
        defined = _defined_stmt(stmt, defined, facts)
    return defined


def _defined_stmt(stmt, defined: frozenset, facts: Facts) -> frozenset:
    if isinstance(stmt, ast.If):
        facts.defined[id(stmt)] = defined
        defined = defined | set(assigned_names([stmt.test]))
        then = _defined_block(stmt.body, defined, facts)
        other = _defined_block(stmt.orelse, defined, facts)
        return defined | (then & other & facts.live_after[id(stmt)])
    if isinstance(stmt, ast.While):
        facts.defined[id(stmt)] = defined
        _defined_block(stmt.body, defined | set(assigned_names([stmt.test])), facts)
        _defined_block(stmt.orelse, defined, facts)
        return defined
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        facts.defined[id(stmt)] = defined
        _defined_block(stmt.body, defined | set(assigned_names([stmt.target])), facts)
        _defined_block(stmt.orelse, defined, facts)
        return defined
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return _defined_block(stmt.body, defined | set(assigned_names(stmt.items)), facts)
    if isinstance(stmt, TRIES):
        _defined_block(stmt.body, defined, facts)
        for handler in stmt.handlers:
            _defined_block(handler.body, defined | set(assigned_names([handler])), facts)
        _defined_block(stmt.orelse, defined, facts)
        _defined_block(stmt.finalbody, defined, facts)
        return defined
    if isinstance(stmt, ast.Match):
        for case in stmt.cases:
            _defined_block(case.body, defined | set(assigned_names([case.pattern])), facts)
        return defined
    return defined | set(assigned_names([stmt]))


# -- live variables (backward) ------------------------------------------------------------
def _live_block(stmts, out: frozenset, facts: Facts) -> frozenset:
    for stmt in reversed(stmts):
        out = _live_stmt(stmt, out, facts)
    return out


def _fixpoint(step, start: frozenset) -> frozenset:
    current = start
    while True:
        new = step(current)
        if new == current:
            return current
        current = new


def _live_stmt(stmt, out: frozenset, facts: Facts) -> frozenset:
    if isinstance(stmt, ast.If):
        facts.live_after[id(stmt)] = out
        body = _live_block(stmt.body, out, facts)
        orelse = _live_block(stmt.orelse, out, facts)
        # What a branch may read before it assigns it (`x = f(x)`, x dead after the if) is
        # the enclosing scope's variable, so it is carried as state. (One branch reading
        # what only the other assigns reads the enclosing scope's: nothing to carry.)
        facts.live_head[id(stmt)] = (body & set(assigned_names(stmt.body))) \
            | (orelse & set(assigned_names(stmt.orelse)))
        return used_names(stmt.test) | body | orelse
    if isinstance(stmt, ast.While):
        facts.live_after[id(stmt)] = out
        test = used_names(stmt.test)
        head = _fixpoint(lambda h: out | test | _live_block(stmt.body, h, facts), out | test)
        facts.live_head[id(stmt)] = head
        return head | _live_block(stmt.orelse, out, facts)
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        facts.live_after[id(stmt)] = out
        extra = used_names(getattr(stmt, EXTRA_TEST, None))
        target = set(assigned_names([stmt.target]))
        head = _fixpoint(lambda h: out | extra | (_live_block(stmt.body, h, facts) - target),
                         out | extra)
        facts.live_head[id(stmt)] = head
        return head | used_names(stmt.iter) | _live_block(stmt.orelse, out, facts)
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        items = set().union(*[used_names(item) for item in stmt.items])
        return _live_block(stmt.body, out, facts) | items
    if isinstance(stmt, (*TRIES, ast.Match)):
        # Control may leave a try/match block anywhere: treat everything in it as live.
        out = out | used_names(stmt)
        blocks = [stmt.body, stmt.orelse, stmt.finalbody, *[h.body for h in stmt.handlers]] \
            if isinstance(stmt, TRIES) else [case.body for case in stmt.cases]
        for block in blocks:
            _live_block(block, out, facts)
        return out
    if isinstance(stmt, (ast.Return, ast.Raise)):
        return frozenset(used_names(stmt))
    return (out - set(assigned_names([stmt]))) | used_names(stmt)
