"""Nested tuples/lists/dicts of leaves, flattened to a list and rebuilt from a description.

Used for function arguments and results and for the carried values of `while_loop`.
"""

from __future__ import annotations

_LEAF = ("*",)


def flatten(tree, is_leaf) -> tuple[list, object]:
    """Return (leaves, treedef). `is_leaf(x)` decides what counts as a leaf; any other
    object that is not a tuple, list or dict is kept inside the treedef as a static part."""
    if type(tree) is tuple and all(is_leaf(x) for x in tree):
        return list(tree), ("tuple", (_LEAF,) * len(tree))  # the common case, made cheap
    leaves: list = []

    def walk(node):
        if is_leaf(node):
            leaves.append(node)
            return ("*",)
        if isinstance(node, (tuple, list)):
            return (type(node).__name__, tuple(walk(x) for x in node))
        if isinstance(node, dict):
            keys = tuple(node)
            return ("dict", keys, tuple(walk(node[k]) for k in keys))
        return ("static", Static(node))

    treedef = walk(tree)
    walk = None  # the closure refers to itself: a cycle that would keep every leaf alive until gc
    return leaves, treedef


class Static:
    """A non-tensor part of a tree: compared by value when hashable, else by identity."""

    __slots__ = ("obj", "key")

    def __init__(self, obj):
        self.obj = obj
        try:
            hash(obj)
            self.key = (type(obj), obj)
        except TypeError:
            self.key = ("id", id(obj))

    def __eq__(self, other):
        return isinstance(other, Static) and self.key == other.key

    def __hash__(self):
        return hash(self.key)

    def __repr__(self):
        return repr(self.obj)


def unflatten(treedef, leaves) -> object:
    """Rebuild the tree described by `treedef`, taking leaves in order."""
    iterator = iter(leaves)

    def build(node):
        kind = node[0]
        if kind == "*":
            return next(iterator)
        if kind == "tuple":
            return tuple(build(x) for x in node[1])
        if kind == "list":
            return [build(x) for x in node[1]]
        if kind == "dict":
            return {k: build(x) for k, x in zip(node[1], node[2])}
        return node[1].obj

    tree = build(treedef)
    build = None  # break the closure's cycle (see flatten)
    return tree


def reordered_keys(a, b):
    """(the keys of a's dict, b's) at the first place where treedefs `a` and `b` hold dicts
    of one set of keys in two orders, or None. (A treedef keeps a dict's keys in insertion
    order: `flatten` lists its leaves that way, and `unflatten` rebuilds it so.)"""
    if a[0] != b[0] or a[0] not in ("tuple", "list", "dict"):
        return None
    if a[0] == "dict" and a[1] != b[1]:
        return (a[1], b[1]) if set(a[1]) == set(b[1]) else None
    children_a, children_b = a[-1], b[-1]
    if len(children_a) != len(children_b):
        return None
    for x, y in zip(children_a, children_b):
        found = reordered_keys(x, y)
        if found is not None:
            return found
    return None


def describe(treedef) -> str:
    """A short human description of a structure, for error messages."""
    kind = treedef[0]
    if kind == "*":
        return "tensor"
    if kind in ("tuple", "list"):
        inner = ", ".join(describe(x) for x in treedef[1])
        return f"({inner})" if kind == "tuple" else f"[{inner}]"
    if kind == "dict":
        items = (f"{k!r}: {describe(x)}" for k, x in zip(treedef[1], treedef[2]))
        return "{" + ", ".join(items) + "}"
    return repr(treedef[1])
