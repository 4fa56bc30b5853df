"""A self-contained HTML report of a converted model: ``render_html(model) -> str``.

The page needs nothing but itself: CSS, the memory-plan pictures (SVG) and a small script are inline,
and a Content-Security-Policy forbids every fetch, so it opens the same from a mail attachment or an
air-gapped machine. It shows:

* a summary (model, framework, nodes, fusions, refusals, timings);
* the fusion table (``table#fusions``: one row per accepted fusion: fused node, type, rule, scopes,
  nodes replaced, inputs, outputs), sortable by a click on a column head and filtered by a text box;
* the refused fusions with their reasons (``table#refused``) and what each pass did (``table#passes``);
* the scope tree with op counts, the fused scopes highlighted with their fused type and rule, the scopes
  a pass matched marked;
* per shape profile, the memory plan as a picture: each arena buffer a rectangle whose x extent is the
  schedule positions it is live (first to last, inclusive) and whose y extent is its byte range in the
  arena (offset to offset + size), its values in a tooltip.

:func:`scope_notes` is the per-scope view (passes that matched, fusions, refusals) that
``scopefusion inspect`` shows too.
"""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:  # pragma: no cover
    from .model import Model
    from .scope import RunReport, ScopeTree

__all__ = ["ScopeNotes", "memory_svg", "render_html", "scope_notes"]

_PLOT_W, _PLOT_H = 960, 360
_MAX_TREE_CHILDREN = 200
_OPEN_DEPTH = 2


@dataclass
class ScopeNotes:
    """What the fusion run did at one scope."""

    matched_by: list[str] = field(default_factory=list)
    fused: list[tuple[str, str, str]] = field(default_factory=list)  # (fusion name, fused type, rule)
    refused: list[tuple[str, str, str]] = field(default_factory=list)  # (result name, rule, reason)


def scope_notes(run: "RunReport", tree: "ScopeTree") -> dict[str, ScopeNotes]:
    """Scope name → what the run did there. A fusion without scopes (a dataflow rule's) is noted at the
    deepest scope holding all the nodes it replaced."""
    notes: dict[str, ScopeNotes] = {}

    def at(name: str) -> ScopeNotes:
        scope = tree.get(name)
        key = scope.name if scope is not None else name
        return notes.setdefault(key, ScopeNotes())

    for report in run.passes:
        for name in report.scopes_matched:
            at(name).matched_by.append(report.name)
    for fusion in run.accepted:
        for name in fusion.scopes or (_common_scope(tree, fusion.claimed),):
            at(name).fused.append((fusion.name, fusion.op_type, fusion.pass_name))
    for refusal in run.refused:
        for name in refusal.scopes or (_common_scope(tree, refusal.nodes),):
            at(name).refused.append((refusal.name, refusal.pass_name, refusal.reason))
    return notes


def _common_scope(tree: "ScopeTree", nodes: Iterable[str]) -> str:
    names = []
    for node in nodes:
        try:
            names.append(tree.scope_of(node).name)
        except Exception:  # a synthetic node the tree does not hold
            continue
    if not names:
        return tree.root.name
    prefix = names[0]
    for name in names[1:]:
        while not name.startswith(prefix):
            prefix = prefix[: prefix.rstrip("/").rfind("/") + 1] if "/" in prefix.rstrip("/") else ""
    return prefix or tree.root.name


# ============================================================================= rendering
def render_html(model: "Model") -> str:
    """The report page of ``model`` (see the module docstring), deterministic for a given model."""
    run = model.fusion_run
    tree = run.plan.graph.tree
    notes = scope_notes(run, tree)
    source = model.source
    title = f"scopefusion report: {source.path or source.name}"
    parts = [
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">",
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">",
        f"<meta name=\"generator\" content=\"scopefusion {_version()}\">",
        f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>",
        f"<header><h1>{_e(title)}</h1>{_summary(model)}</header>",
        "<nav><a href=\"#fusions-section\">Fusions</a> <a href=\"#refused-section\">Refused</a> "
        "<a href=\"#passes-section\">Passes</a> <a href=\"#scope-tree\">Scope tree</a> "
        "<a href=\"#memory\">Memory plans</a></nav>",
        _fusion_section(run),
        _refused_section(run),
        _passes_section(run),
        _tree_section(tree, notes),
        _memory_section(model),
        f"<script>{_JS}</script>\n</body>\n</html>\n",
    ]
    return "\n".join(parts)


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _version() -> str:
    from . import __version__

    return __version__


def _summary(model: "Model") -> str:
    run = model.fusion_run
    ops = Counter(n.op for n in model.graph.nodes)
    fused = sum(c for op, c in ops.items() if op.startswith("fused."))
    items = [
        ("framework", model.source.framework or "?"),
        ("source nodes", len(model.source.nodes)),
        ("IR nodes", len(model.graph.nodes)),
        ("fusions", len(run.accepted)),
        ("fused nodes", fused),
        ("refused", len(run.refused)),
        ("profiles", len(model.profiles)),
    ]
    cells = "".join(f"<div class=\"stat\"><b>{_e(v)}</b><span>{_e(k)}</span></div>" for k, v in items)
    timings = ", ".join(f"{k} {v:.3f} s" for k, v in model.timings.items())
    return f"<div class=\"stats\">{cells}</div><p class=\"muted\">{_e(timings)}</p>"


def _fusion_section(run: "RunReport") -> str:
    tree = run.plan.graph.tree
    rows = []
    for i, f in enumerate(run.accepted):
        inputs = "<br>".join(f"{p.port}: {_e(p.producer)}:{p.index}" for p in f.inputs)
        outputs = "<br>".join(f"{o.port}: {_e(o.claimed_node)}:{o.index}" for o in f.outputs)
        scopes = _e(", ".join(f.scopes)) if f.scopes else f"<i>{_e(_common_scope(tree, f.claimed))}</i>"
        rows.append(
            f"<tr data-rule=\"{_e(f.pass_name)}\"><td>{i}</td><td class=\"name\">{_e(f.name)}</td><td>{_e(f.op_type)}</td>"
            f"<td>{_e(f.pass_name)}</td><td class=\"name\">{scopes}</td>"
            f"<td title=\"{_e(chr(10).join(f.claimed))}\">{len(f.claimed)}</td><td class=\"ports\">{inputs}</td>"
            f"<td class=\"ports\">{outputs}</td></tr>"
        )
    counts = Counter(f.pass_name for f in run.accepted)
    by_rule = ", ".join(f"{rule} × {n}" for rule, n in sorted(counts.items())) or "none"
    head = "".join(f"<th>{h}</th>" for h in ("#", "fused node", "type", "rule", "scopes", "replaced nodes", "inputs", "outputs"))
    empty = "" if rows else "<p class=\"muted\">No fusion was applied.</p>"
    return (
        f"<section id=\"fusions-section\"><h2>Fusions ({len(run.accepted)})</h2><p>By rule: {_e(by_rule)}. A scope in <i>italics</i> is where a "
        "fusion without scopes (a dataflow rule's) sits.</p>"
        "<p><input id=\"fusion-filter\" type=\"search\" placeholder=\"filter fusions\" aria-label=\"filter fusions\"> "
        "<span id=\"fusion-count\"></span></p>"
        f"<table id=\"fusions\" class=\"sortable\"><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{empty}</section>"
    )


def _refused_section(run: "RunReport") -> str:
    rows = "".join(
        f"<tr><td>{_e(r.pass_name)}</td><td class=\"name\">{_e(r.name)}</td><td>{_e(r.reason)}</td><td>{_e(', '.join(r.scopes) or '-')}</td></tr>"
        for r in run.refused
    )
    head = "".join(f"<th>{h}</th>" for h in ("rule", "result", "reason", "scopes"))
    empty = "" if rows else "<p class=\"muted\">No fusion was refused.</p>"
    return (
        f"<section id=\"refused-section\"><h2>Refused fusions ({len(run.refused)})</h2>"
        f"<table id=\"refused\" class=\"sortable\"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{empty}</section>"
    )


def _passes_section(run: "RunReport") -> str:
    rows = []
    for r in run.passes:
        matched = ", ".join(r.scopes_matched[:6]) + (f" … (+{len(r.scopes_matched) - 6})" if len(r.scopes_matched) > 6 else "")
        rows.append(
            f"<tr class=\"{_e(r.status)}\"><td>{_e(r.name)}</td><td>{_e(r.source)}</td><td>{_e(r.status)}</td>"
            f"<td>{_e(matched or '-')}</td><td>{len(r.results_accepted)}</td><td>{len(r.results_refused)}</td>"
            f"<td>{r.seconds * 1000:.1f}</td><td>{_e(r.error + (f' at {r.error_at}' if r.error_at else ''))}</td></tr>"
        )
    head = "".join(f"<th>{h}</th>" for h in ("pass", "source", "status", "scopes matched", "fused", "refused", "ms", "error"))
    replaced = "".join(f"<p class=\"muted\">{_e(text)}</p>" for text in run.replacements)
    replaced += "".join(f"<p class=\"warning\">warning: {_e(text)}</p>" for text in run.warnings())
    return (
        f"<section id=\"passes-section\"><h2>Passes ({len(run.passes)} ran)</h2>{replaced}"
        f"<table id=\"passes\" class=\"sortable\"><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></section>"
    )


def _tree_section(tree: "ScopeTree", notes: dict[str, ScopeNotes]) -> str:
    fused_scopes = sum(1 for n in notes.values() if n.fused)
    body = _scope_item(tree.root, notes, 0)
    return (
        f"<section id=\"scope-tree\"><h2>Scope tree ({len(tree)} scopes, {fused_scopes} fused)</h2>"
        "<p class=\"muted\"><span class=\"badge fusedb\">fused</span> a fused scope, with its fused type and rule; "
        "<span class=\"badge matchb\">matched</span> a pass matched the scope; "
        "<span class=\"badge refb\">refused</span> a result there was refused.</p>"
        f"<ul class=\"tree\">{body}</ul></section>"
    )


def _scope_item(scope: Any, notes: dict[str, ScopeNotes], depth: int) -> str:
    note = notes.get(scope.name)
    counts = scope.op_counts
    total = sum(counts.values())
    top = ", ".join(f"{op}×{n}" for op, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:4])
    label = "root" if scope.is_root else scope.name.rstrip("/").rsplit("/", 1)[-1] + "/"
    badges = ""
    classes = ["scope"]
    if note is not None:
        for name, type_, rule in note.fused:
            badges += f" <span class=\"badge fusedb\" title=\"{_e(name)}\">{_e(type_)} · {_e(rule)}</span>"
        if note.fused:
            classes.append("fused")
        matched = [p for p in note.matched_by if p not in {r for _, _, r in note.fused}]
        for rule in matched:
            badges += f" <span class=\"badge matchb\">matched · {_e(rule)}</span>"
        for _name, rule, reason in note.refused:
            badges += f" <span class=\"badge refb\" title=\"{_e(reason)}\">refused · {_e(rule)}</span>"
    head = (
        f"<span class=\"{' '.join(classes)}\" data-scope=\"{_e(scope.name)}\" title=\"{_e(scope.name)}\">{_e(label)}</span> "
        f"<span class=\"muted\">{total} ops: {_e(top)}</span>{badges}"
    )
    children = scope.children
    if not children:
        return f"<li>{head}</li>"
    inner = "".join(_scope_item(child, notes, depth + 1) for child in children[:_MAX_TREE_CHILDREN])
    if len(children) > _MAX_TREE_CHILDREN:
        inner += f"<li class=\"muted\">… {len(children) - _MAX_TREE_CHILDREN} more sub-scopes</li>"
    is_open = " open" if depth < _OPEN_DEPTH or _has_fused(scope, notes) else ""
    return f"<li><details{is_open}><summary>{head}</summary><ul>{inner}</ul></details></li>"


def _has_fused(scope: Any, notes: dict[str, ScopeNotes]) -> bool:
    prefix = scope.name
    return any(n.fused and name.startswith(prefix) and name != prefix for name, n in notes.items())


def _memory_section(model: "Model") -> str:
    parts = [f"<section id=\"memory\"><h2>Memory plans ({len(model.profiles)} profiles)</h2>"]
    for profile in model.profiles:
        inputs = "; ".join(f"{k}:{'*' if v is None else ','.join(map(str, v))}" for k, v in profile.inputs.items())
        parts.append(f"<h3>Profile {profile.index}</h3><p class=\"muted\">inputs {_e(inputs or '(the model’s own shapes)')}</p>")
        parts.append(memory_svg(profile.memory_plan, profile.index))
    parts.append("</section>")
    return "".join(parts)


def memory_svg(plan: Any, index: int = 0) -> str:
    """The picture of one memory plan: buffers as rectangles, x = live schedule positions, y = bytes."""
    if plan is None:
        return "<p class=\"muted\">No memory plan.</p>"
    stats = (
        f"arena {plan.arena_bytes:,} bytes, lower bound {plan.lower_bound_bytes:,}, naive {plan.naive_bytes:,}; "
        f"{len(plan.buffers)} buffers, {plan.dynamic_tensors} dynamic tensors left for run time; strategy {plan.strategy}"
    )
    if not plan.buffers or plan.arena_bytes <= 0:
        return f"<p class=\"muted\">{_e(stats)}. No tensor is planned in the arena.</p>"
    length = max(plan.schedule_length, max(b.last for b in plan.buffers) + 1, 1)
    arena = plan.arena_bytes
    left, top, bottom = 70, 10, 40
    width, height = left + _PLOT_W + 10, top + _PLOT_H + bottom
    sx, sy = _PLOT_W / length, _PLOT_H / arena
    rects = []
    for i, b in enumerate(plan.buffers):
        x = left + b.first * sx
        w = max((b.last - b.first + 1) * sx, 1.0)
        y = top + b.offset * sy
        h = max(b.size * sy, 1.0)
        hue = (i * 137.508) % 360
        tip = (
            f"{', '.join(b.values)}\nbytes {b.offset:,}–{b.end:,} ({b.size:,})\n"
            f"live at positions {b.first}–{b.last}" + (f"\n{len(b.values) - 1} forwarded alias(es)" if len(b.values) > 1 else "")
        )
        stroke = " stroke=\"#222\" stroke-width=\"1\"" if len(b.values) > 1 else ""
        rects.append(
            f"<rect class=\"buf\" data-values=\"{_e(' '.join(b.values))}\" x=\"{x:.2f}\" y=\"{y:.2f}\" width=\"{w:.2f}\" "
            f"height=\"{h:.2f}\" fill=\"hsl({hue:.0f},65%,62%)\"{stroke}><title>{_e(tip)}</title></rect>"
        )
    axis = (
        f"<line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{top + _PLOT_H}\" class=\"axis\"/>"
        f"<line x1=\"{left}\" y1=\"{top + _PLOT_H}\" x2=\"{left + _PLOT_W}\" y2=\"{top + _PLOT_H}\" class=\"axis\"/>"
        f"<text x=\"{left - 6}\" y=\"{top + 10}\" text-anchor=\"end\">0</text>"
        f"<text x=\"{left - 6}\" y=\"{top + _PLOT_H}\" text-anchor=\"end\">{_bytes(arena)}</text>"
        f"<text x=\"{left}\" y=\"{top + _PLOT_H + 16}\">0</text>"
        f"<text x=\"{left + _PLOT_W}\" y=\"{top + _PLOT_H + 16}\" text-anchor=\"end\">{length - 1}</text>"
        f"<text x=\"{left + _PLOT_W / 2}\" y=\"{top + _PLOT_H + 32}\" text-anchor=\"middle\">schedule position →</text>"
        f"<text x=\"14\" y=\"{top + _PLOT_H / 2}\" transform=\"rotate(-90 14 {top + _PLOT_H / 2})\" text-anchor=\"middle\">arena offset ↓</text>"
    )
    return (
        f"<p class=\"muted\">{_e(stats)}</p><svg class=\"memplan\" id=\"memplan-{index}\" xmlns=\"http://www.w3.org/2000/svg\" "
        f"viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\" role=\"img\" "
        f"aria-label=\"memory plan of profile {index}\">{axis}{''.join(rects)}</svg>"
    )


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)  # pragma: no cover


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 24px 40px;color:#1d2330;background:#fbfbfd}
h1{font-size:20px;margin:18px 0 8px;word-break:break-all}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #dde}
h3{font-size:15px;margin:16px 0 4px}nav a{margin-right:14px}.muted{color:#667}
.stats{display:flex;flex-wrap:wrap;gap:10px}.stat{background:#fff;border:1px solid #dde;border-radius:6px;padding:6px 12px}
.stat b{display:block;font-size:18px}.stat span{color:#667;font-size:12px}
table{border-collapse:collapse;background:#fff;width:100%;font-size:13px}th,td{border:1px solid #dde;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#eef0f6;cursor:pointer;user-select:none;position:sticky;top:0}
td.name,td.ports{font-family:ui-monospace,monospace;font-size:12px;overflow-wrap:anywhere}td.name{min-width:15em}td.ports{min-width:17em;max-width:30em}
tr.error td{background:#fde8e8}tr.changed td:first-child{font-weight:600}
ul.tree,ul.tree ul{list-style:none;padding-left:18px;margin:0}ul.tree{padding-left:0}summary{cursor:pointer}
.scope{font-family:ui-monospace,monospace}.scope.fused{background:#d8f5dc;border:1px solid #4caf50;border-radius:4px;padding:0 4px;font-weight:600}
.badge{display:inline-block;border-radius:9px;padding:0 7px;font-size:11px;margin-left:4px}
.fusedb{background:#4caf50;color:#fff}.matchb{background:#e3ecff;color:#2448a0}.refb{background:#fde2c8;color:#8a3b00}
svg.memplan{background:#fff;border:1px solid #dde;max-width:100%;height:auto}svg.memplan text{font-size:11px;fill:#445}
svg.memplan .axis{stroke:#556;stroke-width:1}svg.memplan rect.buf:hover{stroke:#000;stroke-width:2}
input[type=search]{padding:3px 6px;width:260px}
"""

_JS = """
(function(){
  function cellValue(row,i){var t=row.cells[i]?row.cells[i].textContent.trim():"";var n=Number(t);return t!==""&&!isNaN(n)?n:t.toLowerCase();}
  document.querySelectorAll("table.sortable").forEach(function(table){
    table.querySelectorAll("th").forEach(function(th,i){
      th.addEventListener("click",function(){
        var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows),asc=th.dataset.order!=="asc";
        rows.sort(function(a,b){var x=cellValue(a,i),y=cellValue(b,i);return (x<y?-1:x>y?1:0)*(asc?1:-1);});
        rows.forEach(function(r){body.appendChild(r);});
        table.querySelectorAll("th").forEach(function(h){delete h.dataset.order;});th.dataset.order=asc?"asc":"desc";
      });
    });
  });
  var filter=document.getElementById("fusion-filter"),table=document.getElementById("fusions"),count=document.getElementById("fusion-count");
  function update(){
    var q=filter.value.toLowerCase(),shown=0,rows=table.tBodies[0].rows;
    for(var i=0;i<rows.length;i++){var hit=rows[i].textContent.toLowerCase().indexOf(q)>=0;rows[i].style.display=hit?"":"none";if(hit)shown++;}
    count.textContent=shown+" of "+rows.length+" fusions shown";
  }
  filter.addEventListener("input",update);update();
})();
"""
