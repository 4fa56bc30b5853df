"""The ``scopefusion`` command line.

Exit codes: 0 success; 1 a comparison found a difference (``verify``, ``diff``); 2 bad input (a model
that cannot be read, a bad option, a failing rules file, shapes that contradict the model). Errors are one
sentence on stderr, never a traceback; an output file is written whole or not at all.

Heavy imports (the converter, TensorFlow) happen inside the commands, so ``scopefusion --help`` is quick.
"""

from __future__ import annotations

import json
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, ContextManager, List, Optional, Union

import typer

from .budgets import DEFAULT_MAX_FOLDED_BYTES, DEFAULT_MAX_INLINED_NODES
from .cli_checks import BadInput
from .output_paths import STDOUT, check_output_paths, write_outputs
from .progress import ProgressFn

if TYPE_CHECKING:  # pragma: no cover
    from .files import Data

__all__ = ["app", "main", "parse_input_shape"]

app = typer.Typer(
    name="scopefusion",
    help="Convert TensorFlow and ONNX models into a fused, typed, shape-inferred IR.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

EXIT_BAD_INPUT = 2


def _print_version(value: bool) -> None:
    if value:
        from . import __version__

        typer.echo(f"scopefusion {__version__}")
        raise typer.Exit(0)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", is_eager=True, callback=_print_version
    ),
) -> None:
    """Convert TensorFlow and ONNX models into a fused, typed, shape-inferred IR."""
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(EXIT_BAD_INPUT)


def parse_input_shape(text: str) -> dict[str, tuple[int, ...]]:
    """One shape profile from ``"NAME:D,D;NAME:D,D"`` (CANN ATC's ``--input_shape`` syntax).

    A name may itself hold ``:`` (``input:0``): the shape is what follows the last ``:``. ``NAME:`` is a
    scalar; ``-1`` leaves a dim unknown.
    """
    shapes: dict[str, tuple[int, ...]] = {}
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        name, sep, dims = part.rpartition(":")
        if not sep or not name:
            raise BadInput(f"--input-shape {text!r}: {part!r} is not NAME:D,D,...; write e.g. \"input_ids:1,128\"")
        try:
            shape = tuple(int(d) for d in dims.split(",")) if dims.strip() else ()
        except ValueError:
            raise BadInput(f"--input-shape {text!r}: the dims of {name!r} ({dims!r}) must be integers separated by ','") from None
        if any(d < -1 for d in shape):
            raise BadInput(f"--input-shape {text!r}: dims of {name!r} must be >= 0, or -1 for unknown")
        if name in shapes:
            raise BadInput(f"--input-shape {text!r}: {name!r} is given twice in one profile")
        shapes[name] = shape
    if not shapes:
        raise BadInput(f"--input-shape {text!r} names no input; write e.g. \"input_ids:1,128;mask:1,128\"")
    return shapes


def _fail(message: str) -> None:
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, highlight=False, soft_wrap=True).print(f"[bold red]error:[/] {escape(message)}", markup=True)
    raise typer.Exit(EXIT_BAD_INPUT)


def _check_outputs(outputs: List[tuple[str, Union[str, Path, None]]], model: Path, rules: Optional[List[Path]],
                   binary: tuple[str, ...] = ()) -> None:
    """Refuses unusable output paths (``(option, path)``; ``-`` is stdout) before anything is converted (exit 2)."""
    from .errors import ScopeFusionError

    inputs = [("the model", model)] + [("rules file", r) for r in rules or []]
    try:
        check_output_paths(outputs, inputs, binary)
    except ScopeFusionError as e:
        _fail(str(e))


@app.command()
def convert(
    model: Path = typer.Argument(..., help="SavedModel directory, frozen GraphDef .pb, text .pbtxt, or .onnx file."),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write the converted model."),
    format: Optional[str] = typer.Option(
        None, "--format", help="Output format: ge, ge-text or onnx (default: from the output's suffix, else ge)."
    ),
    opset: Optional[int] = typer.Option(None, "--opset", help="ONNX opset of a TensorFlow model's export (17..23, default 23)."),
    keep_tf_ops: bool = typer.Option(False, "--keep-tf-ops", help="Write TF ops without an ONNX form in domain tf (not runnable)."),
    onnx_target: str = typer.Option("standard", "--onnx-target", help="ONNX flavour: standard or onnxruntime."),
    input_shape: Optional[List[str]] = typer.Option(
        None, "--input-shape", help='One shape profile, "NAME:D,D;NAME:D,D"; repeat for more profiles.'
    ),
    enable_pass: Optional[List[str]] = typer.Option(None, "--enable-pass", help="Turn on a non-general fusion pass."),
    disable_pass: Optional[List[str]] = typer.Option(None, "--disable-pass", help="Turn off a general fusion pass."),
    rules: Optional[List[Path]] = typer.Option(None, "--rules", help="A Python file of user fusion rules (repeatable)."),
    strict: bool = typer.Option(False, "--strict", help="Fail on a raising pass or an op without a definition."),
    report: Optional[str] = typer.Option(None, "--report", help="Write the JSON report here ('-': to stdout, the summary to stderr)."),
    html: Optional[Path] = typer.Option(None, "--html", help="Write a self-contained HTML report here."),
    input_format: Optional[str] = typer.Option(None, "--input-format", help="Force the model format: savedmodel, pb, pbtxt, onnx."),
    signature: Optional[str] = typer.Option(None, "--signature", help="SavedModel signature (default serving_default)."),
    tag: Optional[List[str]] = typer.Option(None, "--tag", help="SavedModel tag (repeatable)."),
    savedmodel_loader: str = typer.Option(
        "native", "--savedmodel-loader", help="SavedModel freezing: native (no TensorFlow) or tensorflow."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print no summary and no progress."),
    max_inlined_nodes: int = typer.Option(
        DEFAULT_MAX_INLINED_NODES, "--max-inlined-nodes", min=0, help="Nodes that inlining TF function calls may make."
    ),
    max_folded_bytes: int = typer.Option(
        DEFAULT_MAX_FOLDED_BYTES, "--max-folded-bytes", min=0, help="Bytes of one value computed at build time."
    ),
) -> None:
    """Convert MODEL, apply the fusion passes, infer shapes per profile, plan memory, and write OUT."""
    from .cli_checks import check_pass_names, output_format
    from .errors import ScopeFusionError
    from .model import SAVE_FORMATS

    # Everything that can be checked without the model is checked before it is read.
    try:
        fmt = output_format(output, format, SAVE_FORMATS)
        profiles = [parse_input_shape(text) for text in input_shape or []]
        check_pass_names(enable_pass or (), disable_pass or (), rules or ())
    except (BadInput, ScopeFusionError) as e:
        _fail(str(e))
    _check_outputs([("-o", output), ("--report", report), ("--html", html)], model, rules,
                   binary=("-o",) if fmt != "ge-text" else ())
    from .convert import convert as run_convert

    to_stdout = STDOUT in (str(output), str(report), str(html))
    try:
        with _progress_display(quiet) as progress:
            result = run_convert(
                model,
                input_shapes=profiles or None,
                enable=enable_pass or (),
                disable=disable_pass or (),
                rules=rules or (),
                strict=strict,
                model_format=input_format,
                signature=signature,
                tags=tag,
                savedmodel_loader=savedmodel_loader,
                progress=progress,
                max_inlined_nodes=max_inlined_nodes,
                max_folded_bytes=max_folded_bytes,
            )
            # Everything is rendered before anything is written, so a failure leaves no file behind; the model's
            # large tensors are streamed from the input file as it is written (Model.serialize).
            onnx_options = {"opset": opset, "keep_tf_ops": keep_tf_ops, "target": onnx_target} if fmt == "onnx" else {}
            files: list[tuple[Union[str, Path], Data]] = [(output, result.serialize(fmt, **onnx_options))]
            if report is not None:
                files.append((report, (json.dumps(result.report(), indent=2, sort_keys=True) + "\n").encode()))
            if html is not None:
                from .html_report import render_html

                files.append((html, render_html(result).encode("utf-8")))
            if progress is not None:
                progress("write", 0, len(files), str(output))
            write_outputs(files)
            if progress is not None:
                progress("write", len(files), len(files), "")
    except ScopeFusionError as e:
        _fail(str(e))
    _say_format_and_runnability(output, format, result)
    if not quiet:
        from .summary import print_fusion_warnings, print_summary

        # With an output on stdout, the summary goes to stderr.
        print_summary(result.report(), str(output), fmt, to_stderr=to_stdout)
        print_fusion_warnings(result.fusion_run.warnings())


@app.command()
def verify(
    model: Path = typer.Argument(..., help="The model to convert and check against its own framework."),
    input: Optional[List[str]] = typer.Option(None, "--input", help="NAME=file.npy: an input value (repeatable); default: seeded random."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random inputs."),
    rtol: float = typer.Option(1e-4, "--rtol", help="Relative tolerance."),
    atol: float = typer.Option(1e-5, "--atol", help="Absolute tolerance."),
    input_shape: Optional[List[str]] = typer.Option(None, "--input-shape", help='A shape profile "NAME:D,D;NAME:D,D" (repeatable).'),
    enable_pass: Optional[List[str]] = typer.Option(None, "--enable-pass", help="Turn on a non-general fusion pass."),
    disable_pass: Optional[List[str]] = typer.Option(None, "--disable-pass", help="Turn off a general fusion pass."),
    rules: Optional[List[Path]] = typer.Option(None, "--rules", help="A Python file of user fusion rules."),
    signature: Optional[str] = typer.Option(None, "--signature", help="SavedModel signature."),
    tag: Optional[List[str]] = typer.Option(None, "--tag", help="SavedModel tag (repeatable)."),
    savedmodel_loader: str = typer.Option(
        "native", "--savedmodel-loader", help="SavedModel freezing: native (no TensorFlow) or tensorflow."
    ),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the comparison as JSON here."),
    runtime: str = typer.Option("reference", "--runtime", help="What runs the converted model: reference or onnxruntime."),
) -> None:
    """Run MODEL in its framework and the converted, fused IR on the same inputs; exit 0 on match, 1 on mismatch."""
    from .cli_checks import check_pass_names
    from .errors import ScopeFusionError

    try:
        profiles = [parse_input_shape(text) for text in input_shape or []]
        feeds = _load_inputs(input or [])
        check_pass_names(enable_pass or (), disable_pass or (), rules or ())
    except (BadInput, ScopeFusionError) as e:
        _fail(str(e))
    _check_outputs([("--json", json_out)], model, rules)
    from .verify import verify as run_verify

    options: dict = {"input_shapes": profiles or None, "enable": enable_pass or (), "disable": disable_pass or (), "rules": rules or ()}
    if signature:
        options["signature"] = signature
    if tag:
        options["tags"] = tag
    if savedmodel_loader != "native":
        options["savedmodel_loader"] = savedmodel_loader
    try:
        report = run_verify(model, inputs=feeds or None, seed=seed, rtol=rtol, atol=atol, runtime=runtime, **options)
    except ScopeFusionError as e:
        _fail(str(e))
    from .summary import Section, print_fusion_warnings, print_sections

    rows = [
        (str(check.profile), out.name, "x".join(map(str, out.shape)) or "scalar", f"{out.max_abs:.3g}",
         f"{out.max_rel:.3g}", "ok" if out.ok else "MISMATCH")
        for check in report.checks
        for out in check.outputs
    ]  # fmt: skip
    title = f"verify {model} in {runtime} (rtol {rtol:g}, atol {atol:g}, {report.seconds:.1f} s)"
    columns = ("profile", "output", "shape", "max abs", "max rel", "result")
    print_sections([Section(title, columns, rows, frozenset({"max abs", "max rel"}))])
    print_fusion_warnings(report.fusion_warnings)
    if json_out is not None:
        try:
            write_outputs([(json_out, (json.dumps(report.to_dict(), indent=2) + "\n").encode())])
        except ScopeFusionError as e:
            _fail(str(e))
    raise typer.Exit(0 if report.ok else 1)


def _progress_display(quiet: bool) -> ContextManager[Optional[ProgressFn]]:
    """The progress display of :mod:`.cli_progress` on stderr; with ``quiet``, none (and no ``rich`` import)."""
    if quiet:
        return nullcontext(None)
    from rich.console import Console

    from .cli_progress import progress_display

    return progress_display(Console(stderr=True))


def _say_format_and_runnability(output: Path, format: Optional[str], result) -> None:
    """On stderr: that an output name without a known suffix was written as GE bytes; that an ONNX file with
    ``tf`` ops will not run in onnxruntime."""
    from .model import output_format

    lines = []
    note = output_format(output, format)[1] if str(output) != STDOUT else ""
    if note:
        lines.append(f"note: {note}")
    exported = getattr(result, "onnx_export", None)
    if exported is not None and exported.get("warning"):
        lines.append(f"warning: {exported['warning']}")
    if not lines:
        return
    from rich.console import Console

    console = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)
    for line in lines:
        console.print(line)


def _load_inputs(items: List[str]) -> dict:
    import numpy as np

    feeds = {}
    for item in items:
        name, sep, file = item.partition("=")
        if not sep or not name or not file:
            raise BadInput(f"--input {item!r} is not NAME=file.npy")
        try:
            _check_npy_size(file)
            feeds[name] = np.load(file, allow_pickle=False)
        except (OSError, ValueError, MemoryError) as e:
            raise BadInput(f"--input {item!r}: cannot read {file!r} as a .npy array ({e})") from None
    return feeds


def _check_npy_size(file: str) -> None:
    """Refuses a .npy whose header claims more data than the file holds (before allocating it)."""
    import os

    import numpy as np

    with open(file, "rb") as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(f)
        count = 1
        for d in shape:
            count *= d
        needed = count * dtype.itemsize
        available = os.fstat(f.fileno()).st_size - f.tell()
    if dtype.hasobject:
        raise ValueError("it holds Python objects, which are not read")
    if needed > available:
        raise ValueError(f"its header claims shape {shape} ({needed:,} bytes) but the file holds {available:,} bytes")


def main(argv: Optional[List[str]] = None) -> None:
    """Console entry point."""
    try:
        app(args=argv, prog_name="scopefusion", standalone_mode=True)
    except KeyboardInterrupt:  # pragma: no cover
        sys.stderr.write("interrupted\n")
        sys.exit(130)


from . import cli_inspect  # noqa: E402,F401  (registers inspect, diff and passes on `app`)

if __name__ == "__main__":  # pragma: no cover
    main()
