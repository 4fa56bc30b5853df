"""The scope tree: CANN's ``ScopeTree`` of ``Scope`` built from node names.

A node named ``a/b/c`` lives directly in scope ``a/b/``, which is a child of ``a/``, a child of the
root. Names are split on ``/`` with empty parts dropped, so TF names (``bert/encoder/layer_0/...``)
and ONNX names (``/encoder/layers.0/self_attn/MatMul``) build the same kind of tree; a name without
``/`` belongs to the root. Scope names keep CANN's trailing slash (``"a/b/"``); the root is named
``"root"`` and is never matched by a pattern.

``op_counts`` counts op types over a scope's whole subtree (CANN's ``op_nums_``), ``nodes`` holds the
scope's direct nodes and ``all_nodes`` the subtree's, in graph order. ``last_name`` is the scope's last
name part with CANN's ``_N`` index trimmed (``batchnorm_1`` -> ``batchnorm``; ``x_0`` stays).
"""

from __future__ import annotations

from typing import Any, ItemsView, Iterator, KeysView, Mapping, Sequence, ValuesView

from ..errors import FusionError
from ..parser.source_graph import SourceNode

__all__ = ["ROOT_NAME", "Scope", "ScopeTree", "scope_key", "trim_scope_index"]

ROOT_NAME = "root"

#: The children of every scope that has none, one shared dict (a scope gets a dict of its own with its first
#: child, in ScopeTree._make, the only writer): most scopes are leaves, and walks that test a leaf for
#: children then read this one dict rather than one per leaf. Never changed.
_NO_CHILDREN: dict[str, Scope] = {}
_new = object.__new__


def trim_scope_index(name: str) -> str:
    """CANN's TrimScopeIndex: drops a trailing ``_N`` when N is all digits and greater than zero."""
    cut = name.rfind("_")
    if cut < 0:
        return name
    tail = name[cut + 1 :]
    if tail.isdigit() and tail.isascii() and int(tail) > 0:
        return name[:cut]
    return name


def scope_key(name: str) -> str:
    """The canonical scope name for ``name``: parts split on ``/``, empty parts dropped, trailing ``/``.

    ``scope_key("/encoder//layer/")`` is ``"encoder/layer/"``; ``scope_key("")`` is ``""`` (the root).
    """
    parts = [p for p in name.split("/") if p]
    return "/".join(parts) + "/" if parts else ""


class Scope:
    """One node of the scope tree; see the module docstring for the meaning of each attribute.

    ``sub_type`` is the only mutable state: a pattern that matches the scope sets it, a rollback resets
    it to ``""``.
    """

    __slots__ = (
        "name",
        "sub_type",
        "parent",
        "_children",
        "_nodes",
        "_counts",
        "_last_name",
        "_all_nodes",
        "_tree",
        "depth",
        "index",
        "_first",
        "_last",
        "_start",
    )

    def __init__(self, name: str, parent: Scope | None, tree: ScopeTree, index: int = 0) -> None:
        self.name = name
        self.sub_type = ""
        self.parent = parent
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.index = index  # place in the tree's creation order (the root is 0)
        self._children: dict[str, Scope] = _NO_CHILDREN
        # The direct nodes: None while they are the graph's nodes _first.._last (most scopes: a layer's nodes
        # sit together), a list of them once one came apart from the others (see ScopeTree._build).
        self._nodes: list[SourceNode] | None = None
        self._counts: dict[str, int] = {}
        self._all_nodes: tuple[SourceNode, ...] | None = None
        self._tree = tree
        self._last_name: str | None = None if parent is not None else ""
        self._first = -1  # graph index of the first and the last of its direct nodes (-1: none)
        self._last = -1
        self._start = -1  # see all_nodes_start (set with _all_nodes)

    # ------------------------------------------------------------------ CANN accessors
    @property
    def last_name(self) -> str:
        """The last name part with CANN's ``_N`` index trimmed (``""`` for the root); cached."""
        last = self._last_name
        if last is None:
            last = self._last_name = trim_scope_index(self.name[:-1].rsplit("/", 1)[-1])
        return last

    @property
    def is_root(self) -> bool:
        return self.parent is None

    @property
    def children(self) -> tuple[Scope, ...]:
        """Direct sub-scopes in creation order."""
        return tuple(self._children.values())

    @property
    def nodes(self) -> tuple[SourceNode, ...]:
        """Nodes directly in this scope, in graph order."""
        return tuple(self._direct_nodes())

    def _direct_nodes(self) -> Sequence[SourceNode]:
        """The nodes directly in this scope, in graph order: the list kept for them, or the graph's nodes
        from the first to the last of them when they are consecutive (no list kept)."""
        listed = self._nodes
        if listed is not None:
            return listed
        if self._first < 0:
            return ()
        return self._tree._graph_nodes[self._first : self._last + 1]

    @property
    def op_counts(self) -> Mapping[str, int]:
        """Op type -> number of nodes of that type in the whole subtree (read-only view)."""
        return _ReadOnlyCounts(self._counts)

    def op_count(self, op_type: str) -> int:
        """Nodes of ``op_type`` in the subtree; ``-1`` when there are none (CANN's GetOpTypeNum)."""
        return self._counts.get(op_type, -1)

    @property
    def all_nodes(self) -> tuple[SourceNode, ...]:
        """Nodes of the whole subtree (direct and in every descendant), in graph order; cached."""
        if self._all_nodes is None:
            if not self._children:
                self._all_nodes = tuple(self._direct_nodes())
                # No list kept: the nodes are the graph's from _first on (a kept list never fills its range)
                self._start = self._first if self._nodes is None else -1
            else:
                self._all_nodes, self._start = self._tree._subtree_nodes(self)
        return self._all_nodes

    @property
    def all_nodes_start(self) -> int:
        """The graph index of the first of :attr:`all_nodes` when they are consecutive nodes of the graph
        (their indexes are ``start, start + 1, ...``), else -1: their indexes without a look-up by name."""
        if self._all_nodes is None:
            self.all_nodes  # noqa: B018 (computes _start with the nodes)
        return self._start

    def sub_scope(self, name: str) -> Scope | None:
        """The direct child named ``name`` (full name, trailing slash optional), else None."""
        return self._children.get(scope_key(name))

    def descendants(self) -> Iterator[Scope]:
        """Every scope below this one (not itself), depth first, children in creation order."""
        stack = list(reversed(self._children.values()))
        while stack:
            scope = stack.pop()
            yield scope
            if scope._children:
                stack.extend(reversed(scope._children.values()))

    def ancestors(self) -> Iterator[Scope]:
        """Parent, grandparent, ... up to and including the root."""
        scope = self.parent
        while scope is not None:
            yield scope
            scope = scope.parent

    def contains(self, other: Scope) -> bool:
        """True if ``other`` is this scope or lies below it."""
        if self.parent is None:
            return True
        return other.name.startswith(self.name)

    def __repr__(self) -> str:
        sub = f", sub_type={self.sub_type!r}" if self.sub_type else ""
        return f"Scope({self.name!r}{sub})"


def _raw_prefix(name: str) -> str:
    """The text up to and including the last ``/`` that precedes the node's own (last) name part."""
    stripped = name.rstrip("/")
    return stripped[: stripped.rfind("/") + 1]


class _ReadOnlyCounts(Mapping[str, int]):
    __slots__ = ("_d",)

    def __init__(self, d: dict[str, int]) -> None:
        self._d = d

    def __getitem__(self, key: str) -> int:
        return self._d[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __contains__(self, key: object) -> bool:
        return key in self._d

    # The dict's own views and look-up: what Mapping's would give, without a Python call per key (they are
    # read-only views, so the counts stay unchangeable through them).
    def keys(self) -> KeysView[str]:
        return self._d.keys()

    def values(self) -> ValuesView[int]:
        return self._d.values()

    def items(self) -> ItemsView[str, int]:
        return self._d.items()

    def get(self, key: str, default: Any = None) -> Any:
        return self._d.get(key, default)

    def __repr__(self) -> str:
        return repr(self._d)


class ScopeTree:
    """Every scope of one graph, keyed by full name, root first in creation order."""

    def __init__(self) -> None:
        self._position: Mapping[str, int] = {}
        self.root = Scope(ROOT_NAME, None, self)
        self._scopes: dict[str, Scope] = {}
        self._order: list[Scope] = [self.root]
        self._graph_nodes: Sequence[SourceNode] = ()
        # NOTE: a pure cache: what a walk of the tree found for a pattern that reads only op counts and last
        # names (see matching.match_one_batch), by what the pattern reads; the tree never changes but for sub_types.
        self.walks: dict[Any, list[Scope]] = {}

    @classmethod
    def from_nodes(cls, nodes: Sequence[SourceNode], positions: Mapping[str, int] | None = None) -> ScopeTree:
        """Builds the tree of ``nodes`` (in graph order) in one pass over their names. ``positions`` maps each
        node's name to its index in ``nodes`` when the caller has that table already
        (:attr:`.SourceGraph.positions`): the tree then shares it instead of building its own."""
        tree = cls()
        tree._position = {node.name: i for i, node in enumerate(nodes)} if positions is None else positions
        tree._build(nodes)
        return tree

    def _build(self, nodes: Sequence[SourceNode]) -> None:
        # NOTE: a node's scope is found from the raw text before the last '/' (see _holder_of_raw). Nodes
        # come in graph order, and neighbours mostly share that text (a layer's nodes sit together), so a
        # node whose text before its last '/' equals the previous node's reuses its scope: a string comparison
        # instead of a look-up in the graph-sized scope table, which on a large graph mostly misses the CPU's
        # caches. The text is split off by rpartition, which takes its argument without parsing it (rfind
        # parses its optional bounds).
        # Every such text met so far, without its '/' (the root's: ""): a run of a scope's nodes that is not the
        # first one (a layer's nodes interleaved with its weights' reads) finds its scope here without a call.
        holders: dict[str, Scope] = {"": self.root}
        previous_head: str | None = None  # so that the first node sets its scope's _first
        scope = self.root
        self._graph_nodes = nodes
        # A scope's direct nodes are listed only once they stop being consecutive (Scope._nodes): most scopes
        # then need no list of their own, and the graph's nodes from _first to _last stand for them.
        listed: list[SourceNode] | None = None  # the list of the current scope's nodes, if it has one
        for i, node in enumerate(nodes):
            head, _, last = node.name.rpartition("/")
            if head != previous_head or not last:
                if last:
                    found = holders.get(head)
                    if found is None:
                        found = holders[head] = self._holder_of_raw(head + "/")
                    previous_head = head
                else:  # a name ending in '/' (or empty): its own part is the one before (never kept, and rare)
                    raw = _raw_prefix(node.name)
                    found = self._holder_of_raw(raw) if raw else self.root
                    previous_head = None
                scope = found
                if scope._first < 0:
                    scope._first = i
                elif scope._nodes is None and scope._last != i - 1:  # not next to its earlier nodes
                    scope._nodes = list(nodes[scope._first : scope._last + 1])
                listed = scope._nodes
            scope._last = i
            if listed is not None:
                listed.append(node)
            counts = scope._counts
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
        # Subtree counts bottom-up: children are created after their parents, so reverse creation order
        # visits every child before its parent.
        for scope in reversed(self._order):
            parent = scope.parent
            if parent is None:
                continue
            into = parent._counts
            if not into:  # nothing counted there yet: the sums are this scope's counts, in the same order
                parent._counts = scope._counts.copy()
                continue
            for op, n in scope._counts.items():
                into[op] = into.get(op, 0) + n

    def _holder_of_raw(self, raw: str) -> Scope:
        """The scope holding a node whose name's text up to its last part is ``raw`` (not ``""``), made if
        missing.

        A prefix without empty parts is its own canonical name (most are), so the scopes by name answer it,
        also for a scope made earlier as another's ancestor; a prefix with empty parts (never a canonical
        name, which has none) is canonicalized first."""
        scope = self._scopes.get(raw)
        if scope is None:
            if raw[:1] != "/" and "//" not in raw:
                scope = self._make(raw)  # absent: the scopes by name said so above
            else:
                key = scope_key(raw)
                scope = self._ensure(key) if key else self.root
        return scope

    def _ensure(self, key: str) -> Scope:
        scope = self._scopes.get(key)
        return scope if scope is not None else self._make(key)

    def _make(self, key: str) -> Scope:
        """Makes the scope called ``key``, which does not exist yet, and its missing ancestors."""
        scopes = self._scopes
        # The missing ancestors, innermost first; then created outermost first (no recursion, so a name
        # with thousands of scope levels is fine). A parent's key is the text up to the last '/' before
        # the trailing one (rpartition: cheaper than rfind with bounds, which parses its arguments).
        missing = [key]
        parent = self.root
        above = key[:-1].rpartition("/")[0]
        while above:
            above += "/"
            found = scopes.get(above)
            if found is not None:
                parent = found
                break
            missing.append(above)
            above = above[:-1].rpartition("/")[0]
        order = self._order
        for name in reversed(missing):
            # Scope(name, parent, self, len(order)) spelled out: a graph has a scope for every few nodes.
            scope = _new(Scope)
            scope.name = name
            scope.sub_type = ""
            scope.parent = parent
            scope.depth = parent.depth + 1
            scope.index = len(order)
            scope._children = _NO_CHILDREN
            scope._nodes = None
            scope._counts = {}
            scope._all_nodes = None
            scope._tree = self
            scope._last_name = None
            scope._first = -1
            scope._last = -1
            scope._start = -1
            if parent._children is _NO_CHILDREN:
                parent._children = {name: scope}
            else:
                parent._children[name] = scope
            scopes[name] = scope
            order.append(scope)
            parent = scope
        return parent

    def _subtree_nodes(self, scope: Scope) -> tuple[tuple[SourceNode, ...], int]:
        """The nodes of ``scope``'s subtree in graph order, and the graph index of the first when they are
        consecutive graph nodes (else -1).

        When they fill a range of graph indexes (a layer's nodes usually sit together), they are that slice
        of the graph's nodes: every one of them lies between the smallest and the largest index, indexes are
        distinct, so as many nodes as indexes in that range are all of the range. Otherwise they are sorted
        by index, which reads every node's index from the graph-sized table of positions."""
        subtree = [scope, *scope.descendants()]
        count = 0
        first = last = -1
        for sub in subtree:
            if sub._first >= 0:
                count += len(sub._nodes) if sub._nodes is not None else sub._last - sub._first + 1
                if first < 0 or sub._first < first:
                    first = sub._first
                if sub._last > last:
                    last = sub._last
        if count and last - first + 1 == count:
            return tuple(self._graph_nodes[first : last + 1]), first
        gathered: list[SourceNode] = []
        for sub in subtree:
            gathered.extend(sub._direct_nodes())
        position = self._position
        by_position = {position[n.name]: n for n in gathered}  # positions are unique: graph order
        return tuple(map(by_position.__getitem__, sorted(by_position))), -1  # not consecutive (tested above)

    # ------------------------------------------------------------------ queries
    def all_scopes(self) -> list[Scope]:
        """Every scope, root first, in creation order (CANN's GetAllScopes)."""
        return list(self._order)

    def get(self, name: str) -> Scope | None:
        """The scope called ``name`` (trailing slash and leading ``/`` optional), else None."""
        if name == ROOT_NAME:
            return self.root
        key = scope_key(name)
        return self._scopes.get(key) if key else self.root

    def __getitem__(self, name: str) -> Scope:
        scope = self.get(name)
        if scope is None:
            raise FusionError(
                f"no scope named {name!r} in the scope tree ({len(self._scopes)} scopes); "
                "scope names are node-name prefixes such as 'a/b/'"
            )
        return scope

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[Scope]:
        return iter(self._order)

    def scope_of(self, node_name: str) -> Scope:
        """The scope that holds ``node_name`` directly (the root for a name without ``/``)."""
        if node_name not in self._position:
            raise FusionError(f"no node named {node_name!r} in the scope tree; pass a node of this graph")
        # Found from the name as _build found it (no node-to-scope table: the tree keeps no graph-sized
        # table of its own); every such scope exists once the tree is built.
        raw = node_name[: node_name.rfind("/") + 1] if node_name[-1:] != "/" else _raw_prefix(node_name)
        scope = self._scopes.get(raw)
        if scope is None:
            key = scope_key(raw)
            scope = self._scopes[key] if key else self.root
        return scope

    def position(self, node_name: str) -> int:
        """The node's index in graph order."""
        return self._position[node_name]

    @property
    def positions(self) -> Mapping[str, int]:
        """Every node's index in graph order (read-only; do not modify)."""
        return self._position

    def reset_sub_types(self) -> None:
        """Clears every scope's ``sub_type``."""
        for scope in self._order:
            scope.sub_type = ""
