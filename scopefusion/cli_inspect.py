"""``scopefusion inspect``, ``diff`` and ``passes``: seeing inside a model and comparing two.

* ``inspect MODEL [--depth N] [--explain SCOPE]``: the scope tree with op counts per scope, which passes
  matched where and what they fused or had refused; with ``--explain``, for every pass, why that scope
  did or did not fuse (:meth:`~scopefusion.scope.PassManager.explain`: the first failing feature, the
  nearest dataflow miss, or the refusal). Only the scope layer runs: no IR is built.
* ``diff A B``: the main graphs of two models compared structurally (:func:`scopefusion.testing.graph_diff`).
  A model file is converted (both the same way); a file named ``*.ge`` is read as a saved GE model and
  ``*.ge-text``, ``*.ge.txt`` or ``*.golden.txt`` as one in text form. Exit 0 equal, 1 different, 2 bad input.
* ``passes [--rules FILE]``: every registered pass in run order with its source, general flag and state,
  and the fused ops the rules declare.

The commands register on :data:`scopefusion.cli.app`; heavy imports happen inside them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List, Optional

import typer

from .cli import BadInput, _fail, app
from .files import write_atomic

__all__ = ["diff", "inspect", "load_graph", "passes"]

GE_TEXT_SUFFIXES = (".ge-text", ".getxt", ".ge.txt", ".golden.txt")
GE_BINARY_SUFFIXES = (".ge",)
_MAX_CHILDREN = 40


def _options(enable_pass, disable_pass, rules, input_format=None, signature=None, tag=None) -> dict[str, Any]:
    options: dict[str, Any] = {"enable": enable_pass or (), "disable": disable_pass or (), "rules": rules or ()}
    if input_format:
        options["model_format"] = input_format
    if signature:
        options["signature"] = signature
    if tag:
        options["tags"] = tag
    return options


# ============================================================================= inspect
@app.command("inspect")
def inspect(
    model: Path = typer.Argument(..., help="SavedModel directory, frozen GraphDef .pb, text .pbtxt, or .onnx file."),
    depth: int = typer.Option(
        3, "--depth", min=0, help="Levels of the scope tree shown below the root (of bodies, for a converted model)."
    ),
    only: Optional[str] = typer.Option(
        None, "--filter", help="A converted model: show only the ops whose op type or name contains this (* and ? allowed)."
    ),
    explain: Optional[str] = typer.Option(None, "--explain", help="A scope (e.g. bert/encoder/layer_0/): why each pass did or did not fuse it."),
    enable_pass: Optional[List[str]] = typer.Option(None, "--enable-pass", help="Turn on a non-general fusion pass."),
    disable_pass: Optional[List[str]] = typer.Option(None, "--disable-pass", help="Turn off a general fusion pass."),
    rules: Optional[List[Path]] = typer.Option(None, "--rules", help="A Python file of user fusion rules (repeatable)."),
    input_format: Optional[str] = typer.Option(None, "--input-format", help="Force the model format: savedmodel, pb, pbtxt, onnx."),
    signature: Optional[str] = typer.Option(None, "--signature", help="SavedModel signature (default serving_default)."),
    tag: Optional[List[str]] = typer.Option(None, "--tag", help="SavedModel tag (repeatable)."),
) -> None:
    """Show MODEL's scope tree with op counts, where each fusion pass matched and fused, and why a scope did not
    fuse; for a converted model (.ge, GE text, an ONNX file scopefusion wrote), its IR one op per line."""
    from rich.console import Console

    if input_format is None and _inspect_converted(model, depth, only):
        return

    from .cli_checks import check_pass_names
    from .convert import fusion_setup
    from .dialects.fused.declared import op_registry_for
    from .errors import ScopeFusionError
    from .html_report import scope_notes
    from .parser import load
    from .scope import PassManager, ScopeGraph

    options = _options(enable_pass, disable_pass, rules, input_format, signature, tag)
    load_options: dict[str, Any] = {k: v for k, v in (("format", input_format), ("signature", signature), ("tags", tuple(tag or ()))) if v}
    try:
        check_pass_names(options["enable"], options["disable"], options["rules"])  # before the model is read
        source = load(model, **load_options)
        graph = ScopeGraph.build(source)
        scope = graph.tree[explain] if explain is not None else None
        registry, _ = fusion_setup(rules=options["rules"], enable=options["enable"], disable=options["disable"])
        manager = PassManager(registry, ops=op_registry_for(source, registry.fused_ops))
        run = manager.run(graph)
        explanations = manager.explain(scope, graph) if scope is not None else []
    except (BadInput, ScopeFusionError) as e:
        _fail(str(e))
    notes = scope_notes(run, graph.tree)
    console = Console(highlight=False)
    console.print(_tree(graph.tree, notes, depth))
    console.print(_passes_run_table(run))
    if scope is not None:
        console.print(_explain_table(scope.name, explanations, registry))


def _inspect_converted(model: Path, depth: int, only: Optional[str]) -> bool:
    """Prints a converted model's IR one op per line; False when ``model`` is not a converted model."""
    from .errors import ScopeFusionError
    from .inspect_converted import converted_kind, format_lines, read_converted

    kind = converted_kind(model)
    if kind is None:
        return False
    try:
        listing = read_converted(model, kind)
    except ScopeFusionError as e:
        _fail(str(e))
    for line in format_lines(listing, depth=depth, pattern=only):
        typer.echo(line)
    return True


def _scope_label(scope: Any, note: Any) -> str:
    from rich.markup import escape

    counts = scope.op_counts
    total = sum(counts.values())
    top = ", ".join(f"{op}×{n}" for op, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:4])
    more = ", …" if len(counts) > 4 else ""
    name = "root" if scope.is_root else scope.name
    text = f"[bold]{escape(name)}[/]  {total} ops [dim]({escape(top + more)})[/]"
    if note is not None:
        for _fusion, type_, rule in note.fused:
            text += f"  [bold green]fused → {escape(type_)} by {escape(rule)}[/]"
        fused_rules = {rule for _, _, rule in note.fused}
        matched = [p for p in note.matched_by if p not in fused_rules]
        if matched:
            text += f"  [cyan]matched by {escape(', '.join(matched))}[/]"
        for _result, rule, reason in note.refused:
            text += f"  [yellow]refused ({escape(rule)}): {escape(reason)}[/]"
    return text


def _tree(tree: Any, notes: dict, depth: int):
    from rich.tree import Tree

    root = Tree(_scope_label(tree.root, notes.get(tree.root.name)))
    stack = [(tree.root, root, 0)]
    while stack:
        scope, node, level = stack.pop()
        children = scope.children
        if not children:
            continue
        if level >= depth:
            below = sum(1 for _ in scope.descendants())
            node.add(f"[dim]… {below} sub-scope(s) below; show them with --depth {level + 1}[/]")
            continue
        added = []
        for child in children[:_MAX_CHILDREN]:
            added.append((child, node.add(_scope_label(child, notes.get(child.name))), level + 1))
        if len(children) > _MAX_CHILDREN:
            node.add(f"[dim]… and {len(children) - _MAX_CHILDREN} more sub-scopes[/]")
        stack.extend(reversed(added))
    return root


def _passes_run_table(run: Any):
    from rich.table import Table

    table = Table(title="Fusion passes (in run order)", title_justify="left")
    for col in ("pass", "source", "status", "scopes matched", "fused", "refused"):
        table.add_column(col, justify="right" if col in ("fused", "refused") else "left", overflow="fold")
    for r in run.passes:
        matched = ", ".join(r.scopes_matched[:3]) + (f", … (+{len(r.scopes_matched) - 3})" if len(r.scopes_matched) > 3 else "")
        status = r.status if not r.error else f"error: {r.error}" + (f" at {r.error_at}" if r.error_at else "")
        if r.replaces:
            status += f" (replaces the {r.replaces}, which would fuse {r.builtin_would_fuse})"
        table.add_row(r.name, r.source, status, matched or "-", str(len(r.results_accepted)), str(len(r.results_refused)))
    if not run.passes:
        table.add_row("(no pass enabled)", "", "", "", "0", "0")
    return table


def _explain_table(scope_name: str, explanations: list, registry: Any):
    from rich.table import Table

    table = Table(title=f"Why {scope_name} did or did not fuse", title_justify="left")
    table.add_column("pass")
    table.add_column("matched")
    table.add_column("reason", overflow="fold")
    for e in explanations:
        table.add_row(e.pass_name, "yes" if e.matched else "no", e.reason)
    for entry in registry.passes():
        if not entry.enabled:
            table.add_row(entry.name, "-", f"disabled; turn it on with --enable-pass {entry.name}")
    return table


# ============================================================================= diff
def load_graph(path: Path, options: dict[str, Any]):
    """The main IR graph of ``path``: a saved GE model (by suffix) read back, any other model converted."""
    from .errors import SerdeError
    from .serde.ge import model_from_bytes, model_from_text

    name = path.name.lower()
    if name.endswith(GE_TEXT_SUFFIXES) or name.endswith(GE_BINARY_SUFFIXES):
        try:
            data = path.read_bytes()
        except OSError as e:
            raise BadInput(f"cannot read {path} ({e.strerror or e}); check the path") from None
        if name.endswith(GE_BINARY_SUFFIXES):
            try:
                return model_from_bytes(data).main
            except SerdeError as binary_error:
                if not _looks_like_text(data):
                    raise SerdeError(f"{path}: {binary_error}") from None
        try:
            main = model_from_text(data.decode("utf-8")).main
        except UnicodeDecodeError:
            raise BadInput(f"{path} is neither a binary nor a text GE model (it is not UTF-8 text)") from None
        except SerdeError as e:
            raise SerdeError(f"{path}: {e}") from None
        from .serde.ge_profiles_text import PROFILE_GRAPH_ATTRS

        for key in PROFILE_GRAPH_ATTRS:  # the text form merges an equal profile into the main graph
            if main.attrs.has_attr(key):
                main.attrs.del_attr(key)
        return main
    from .convert import convert

    return convert(path, **options).graph


def _looks_like_text(data: bytes) -> bool:
    head = data[:512]
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return head.lstrip().startswith((b"#", b"name", b"graph", b"version", b"attr", b"custom_version"))


@app.command("diff")
def diff(
    a: Path = typer.Argument(..., help="A model file, or a saved .ge / .ge-text model."),
    b: Path = typer.Argument(..., help="The model to compare it with."),
    check_names: bool = typer.Option(False, "--check-names", help="Node names (and name-only attributes) must match too."),
    no_attrs: bool = typer.Option(False, "--no-attrs", help="Compare ops, wiring and types only, not attributes."),
    rtol: float = typer.Option(0.0, "--rtol", help="Relative tolerance for float attributes and constants."),
    atol: float = typer.Option(0.0, "--atol", help="Absolute tolerance for float attributes and constants."),
    limit: int = typer.Option(8, "--limit", min=1, help="Rows shown per kind of difference."),
    enable_pass: Optional[List[str]] = typer.Option(None, "--enable-pass", help="Turn on a non-general fusion pass (both models)."),
    disable_pass: Optional[List[str]] = typer.Option(None, "--disable-pass", help="Turn off a general fusion pass (both models)."),
    rules: Optional[List[Path]] = typer.Option(None, "--rules", help="A Python file of user fusion rules (both models)."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the difference as JSON here."),
) -> None:
    """Compare the fused IR of two models structurally; exit 0 when equal, 1 when they differ, 2 on bad input."""
    from .errors import ScopeFusionError
    from .testing import graph_diff

    if rtol < 0 or atol < 0:
        _fail(f"--rtol {rtol:g} / --atol {atol:g}: tolerances must be >= 0")
    options = _options(enable_pass, disable_pass, rules)
    try:
        graph_a = load_graph(a, options)
        graph_b = load_graph(b, options)
    except (BadInput, ScopeFusionError) as e:
        _fail(str(e))
    from .testing.golden import comparable

    graph_a, graph_b = comparable(graph_a, graph_b)  # a golden file's weights are summaries: compare those
    result = graph_diff(graph_a, graph_b, check_names=check_names, check_attrs=not no_attrs, rtol=rtol, atol=atol)
    typer.echo(f"a: {a}\nb: {b}")
    typer.echo(result.format(limit=limit))
    if json_out is not None:
        try:
            write_atomic(json_out, (json.dumps(result.to_dict(), indent=2) + "\n").encode())
        except OSError as e:
            _fail(f"cannot write {json_out} ({e.strerror or e}); check the directory exists and is writable")
    raise typer.Exit(0 if result.equal else 1)


# ============================================================================= passes
@app.command("passes")
def passes(
    rules: Optional[List[Path]] = typer.Option(None, "--rules", help="A Python file of user fusion rules (repeatable)."),
    enable_pass: Optional[List[str]] = typer.Option(None, "--enable-pass", help="Turn on a non-general fusion pass."),
    disable_pass: Optional[List[str]] = typer.Option(None, "--disable-pass", help="Turn off a general fusion pass."),
    json_out: bool = typer.Option(False, "--json", help="Print the list as JSON instead of a table."),
) -> None:
    """List every registered fusion pass in run order: source (builtin, user file, package), general flag, enabled state."""
    from rich.console import Console
    from rich.table import Table

    from .convert import fusion_setup
    from .errors import ScopeFusionError

    try:
        registry, _ = fusion_setup(rules=rules or (), enable=enable_pass or (), disable=disable_pass or ())
    except ScopeFusionError as e:
        _fail(str(e))
    entries = registry.passes()
    if json_out:
        rows = [{"order": i + 1, **e.to_dict()} for i, e in enumerate(entries)]
        fused_ops = [op.to_dict() for op in registry.fused_ops]
        typer.echo(json.dumps({"passes": rows, "replacements": [str(r) for r in registry.replacements],
                               "fused_ops": fused_ops}, indent=2))  # fmt: skip
        return
    table = Table(title=f"Fusion passes ({len(entries)} registered, {len(registry.enabled_passes())} enabled)", title_justify="left")
    for col in ("order", "pass", "source", "general", "enabled"):
        table.add_column(col, justify="right" if col == "order" else "left", overflow="fold")
    for i, entry in enumerate(entries):
        table.add_row(str(i + 1), entry.name, entry.source, "yes" if entry.general else "no", "[green]on[/]" if entry.enabled else "[dim]off[/]")
    console = Console(highlight=False)
    console.print(table)
    for r in registry.replacements:
        console.print(f"note: {r}", markup=False)
    for op in registry.fused_ops:
        replaces = " (replaces the builtin op)" if op.replaces else ""
        console.print(f"fused op {op.op.qualified_name} declared by {op.source}{replaces}", markup=False)
