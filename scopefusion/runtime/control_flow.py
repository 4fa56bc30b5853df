"""Control-flow ops, run by executing their bodies: TF ``While`` / ``If`` / ``Case`` and ONNX ``If`` / ``Loop`` / ``Scan``.

Bodies are the IR graphs in ``node.subgraphs``; their inputs are the loop variables or branch arguments,
and ONNX bodies also read enclosing tensors by name (``outer``).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import VerifyError
from ..ir.graph import Graph, Node

__all__ = ["run"]

MAX_ITERATIONS = 1_000_000


def _body(node: Node, key: str) -> Graph:
    try:
        return node.subgraphs[key]
    except KeyError:
        raise VerifyError(f"node {node.name!r} ({node.op}) has no body {key!r} (it has {sorted(node.subgraphs)})") from None


def _call(body: Graph, feeds: list[Any], outer: dict[str, Any], checked: bool) -> list[Any]:
    from .executor import run_graph

    declared = [v for v in body.inputs if v.producer.attrs.get("_outer_name") is None]
    if len(feeds) != len(declared):
        raise VerifyError(f"body {body.name!r} takes {len(declared)} inputs, given {len(feeds)}")
    return run_graph(body, feeds, outer, checked=checked)


def _truth(x: Any) -> bool:
    return bool(np.asarray(x).reshape(-1)[0]) if np.size(x) else False


def _tf_while(node: Node, args: list[Any], outer: dict[str, Any], checked: bool) -> list[Any]:
    cond, body = _body(node, "cond"), _body(node, "body")
    state = list(args)
    for _ in range(MAX_ITERATIONS):
        if not _truth(_call(cond, state, outer, checked)[0]):
            return state
        state = _call(body, state, outer, checked)
    raise VerifyError(f"node {node.name!r} ({node.op}) did not stop after {MAX_ITERATIONS} iterations")


def _tf_if(node: Node, args: list[Any], outer: dict[str, Any], checked: bool) -> list[Any]:
    branch = "then_branch" if _truth(args[0]) else "else_branch"
    return _call(_body(node, branch), list(args[1:]), outer, checked)


def _tf_case(node: Node, args: list[Any], outer: dict[str, Any], checked: bool) -> list[Any]:
    branches = sorted((k for k in node.subgraphs if k.startswith("branches:")), key=lambda k: int(k.split(":")[1]))
    index = int(np.asarray(args[0]).reshape(-1)[0])
    if not 0 <= index < len(branches):
        index = len(branches) - 1  # TF: an out-of-range index runs the last branch
    return _call(node.subgraphs[branches[index]], list(args[1:]), outer, checked)


def _tf_call(node: Node, args: list[Any], outer: dict[str, Any], checked: bool) -> list[Any]:
    return _call(_body(node, "f"), list(args), outer, checked)


def _onnx_if(node: Node, args: list[Any], outer: dict[str, Any], checked: bool) -> list[Any]:
    branch = "then_branch" if _truth(args[0]) else "else_branch"
    return _call(_body(node, branch), [], outer, checked)


def _onnx_loop(node: Node, args: list[Any], outer: dict[str, Any], checked: bool) -> list[Any]:
    body = _body(node, "body")
    trip = None if args[0] is None else int(np.asarray(args[0]).reshape(-1)[0])
    cond = True if len(args) < 2 or args[1] is None else _truth(args[1])
    carried = list(args[2:])
    n_carried = len(carried)
    scans: list[list[Any]] = []
    i = 0
    while (trip is None or i < trip) and cond:
        if i >= MAX_ITERATIONS:
            raise VerifyError(f"node {node.name!r} (onnx.Loop) did not stop after {MAX_ITERATIONS} iterations")
        out = _call(body, [np.array(i, np.int64), np.array(cond, np.bool_)] + carried, outer, checked)
        cond = _truth(out[0])
        carried = list(out[1 : 1 + n_carried])
        scans.append(list(out[1 + n_carried :]))
        i += 1
    n_scan = len(node.outputs) - n_carried
    stacked = []
    for k in range(n_scan):
        if scans:
            stacked.append(np.stack([np.asarray(s[k]) for s in scans]))
        else:
            stacked.append(np.zeros((0,), np.float32))
    return carried + stacked


def _onnx_scan(node: Node, args: list[Any], outer: dict[str, Any], checked: bool) -> list[Any]:
    body = _body(node, "body")
    n_scan_in = int(node.attrs.get("num_scan_inputs"))
    n_state = len(args) - n_scan_in
    state = list(args[:n_state])
    axes = list(node.attrs.get("scan_input_axes") or [0] * n_scan_in)
    directions = list(node.attrs.get("scan_input_directions") or [0] * n_scan_in)
    inputs = [np.moveaxis(np.asarray(a), ax, 0) for a, ax in zip(args[n_state:], axes)]
    inputs = [x[::-1] if d else x for x, d in zip(inputs, directions)]
    length = inputs[0].shape[0] if inputs else 0
    outs: list[list[Any]] = []
    for t in range(length):
        out = _call(body, state + [x[t] for x in inputs], outer, checked)
        state = list(out[:n_state])
        outs.append(list(out[n_state:]))
    n_scan_out = len(node.outputs) - n_state
    out_axes = list(node.attrs.get("scan_output_axes") or [0] * n_scan_out)
    out_dirs = list(node.attrs.get("scan_output_directions") or [0] * n_scan_out)
    stacked = []
    for k in range(n_scan_out):
        y = np.stack([np.asarray(o[k]) for o in outs]) if outs else np.zeros((0,), np.float32)
        if out_dirs[k]:
            y = y[::-1]
        stacked.append(np.moveaxis(y, 0, out_axes[k]))
    return state + stacked


_RUNNERS: dict[str, Callable[[Node, list[Any], dict[str, Any], bool], list[Any]]] = {
    "tf.While": _tf_while,
    "tf.StatelessWhile": _tf_while,
    "tf.If": _tf_if,
    "tf.StatelessIf": _tf_if,
    "tf.Case": _tf_case,
    "tf.StatelessCase": _tf_case,
    "tf.PartitionedCall": _tf_call,
    "tf.StatefulPartitionedCall": _tf_call,
    "onnx.If": _onnx_if,
    "onnx.Loop": _onnx_loop,
    "onnx.Scan": _onnx_scan,
}


def run(node: Node, args: list[Any], outer: dict[str, Any], checked: bool) -> list[Any]:
    runner = _RUNNERS.get(node.op)
    if runner is None:
        raise VerifyError(f"node {node.name!r} ({node.op}) has bodies {sorted(node.subgraphs)} but no control-flow runner")
    return runner(node, args, outer, checked)
