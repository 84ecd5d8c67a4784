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
little generated code or a loop variable, never a wrong result.
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
    _live_block(body, frozenset(), facts)
    # Always live: what a nested function or lambda reads where it may run after its
    # variables change in another block (see `_closure_reads`), and the enclosing
    # function's variables (`nonlocal`), traced with this one. Globals are not state: like
    # attributes, assigning them is a Python side effect.
    always = frozenset(_closure_reads(body, params)) | nonlocals
    for table in (facts.live_after, facts.live_head):
        for key in table:
            table[key] = table[key] | always
    _defined_block(body, frozenset(params) | globals_ | nonlocals, facts)
    return facts


def _closure_reads(body, params) -> set:
    """The names nested functions and lambdas read that must count as read everywhere.

    A closure reads its free variables when it is called, which may be anywhere later. But
    when every assignment to a name, and every closure that reads it, lie directly in one
    block (one branch, one loop body, or the function body itself), the closure sees the
    same value as if it read the name where it is defined: nothing outside that block
    changes it. Such names are read where the closure is defined (the liveness pass already
    counts that: `used_names` looks into nested functions), so that
    `y = x * 2.0; x = ug.cond(p, lambda: y, lambda: -y)` in a tensor loop keeps `y` a
    temporary of the loop body instead of state read before it is assigned.
    """
    sites = _Sites()
    sites.add_assigned(params, 0)
    sites.block(body, 0)
    return {name for name, blocks in sites.reads.items()
            if name in sites.nonlocal_in_closure
            or len(blocks | sites.assigned.get(name, set())) > 1}


class _Sites:
    """Which blocks assign each name, and which blocks define closures that read it.

    Blocks are the statement lists the converter turns into functions of their own (the
    branches of an `if`, loop bodies); `with`/`try`/`match` bodies stay in their block."""

    def __init__(self):
        self.count = 0
        self.assigned: dict = {}
        self.reads: dict = {}
        self.nonlocal_in_closure: set = set()

    def new_block(self) -> int:
        self.count += 1
        return self.count

    def add_assigned(self, names, block: int) -> None:
        for name in names:
            self.assigned.setdefault(name, set()).add(block)

    def expression(self, node, block: int) -> None:
        """The closures inside `node` (not inside other closures: those read through it)."""
        if node is None:
            return
        stack = [node]
        while stack:
            current = stack.pop()
            if isinstance(current, SCOPES):
                for name in used_names(current):
                    self.reads.setdefault(name, set()).add(block)
                for inner in ast.walk(current):
                    if isinstance(inner, ast.Nonlocal):
                        self.nonlocal_in_closure.update(inner.names)
            else:
                stack.extend(ast.iter_child_nodes(current))

    def block(self, stmts, block: int) -> None:
        for stmt in stmts:
            self.statement(stmt, block)

    def statement(self, stmt, block: int) -> None:
        if isinstance(stmt, ast.If):
            self.expression(stmt.test, block)
            self.add_assigned(assigned_names([stmt.test]), block)
            self.block(stmt.body, self.new_block())
            self.block(stmt.orelse, self.new_block())
        elif isinstance(stmt, ast.While):
            test = self.new_block()  # the test runs in a function of its own
            self.expression(stmt.test, test)
            self.add_assigned(assigned_names([stmt.test]), test)
            self.block(stmt.body, self.new_block())
            self.block(stmt.orelse, self.new_block())
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            self.expression(stmt.iter, block)
            self.expression(getattr(stmt, EXTRA_TEST, None), self.new_block())
            body = self.new_block()
            self.add_assigned(assigned_names([stmt.target]), body)
            self.block(stmt.body, body)
            self.block(stmt.orelse, self.new_block())
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self.expression(item, block)
            self.add_assigned(assigned_names(stmt.items), block)
            self.block(stmt.body, block)
        elif isinstance(stmt, TRIES):
            self.block(stmt.body, block)
            for handler in stmt.handlers:
                self.expression(handler.type, block)
                self.add_assigned(assigned_names([handler]), block)
                self.block(handler.body, block)
            self.block(stmt.orelse, block)
            self.block(stmt.finalbody, block)
        elif isinstance(stmt, ast.Match):
            self.expression(stmt.subject, block)
            for case in stmt.cases:
                self.expression(case.guard, block)
                self.add_assigned(assigned_names([case.pattern]), block)
                self.block(case.body, block)
        else:
            self.expression(stmt, block)
            self.add_assigned(assigned_names([stmt]), block)


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
        return (used_names(stmt.test) | _live_block(stmt.body, out, facts)
                | _live_block(stmt.orelse, out, facts))
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
