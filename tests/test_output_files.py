"""Output files: devices and inputs never overwritten, all outputs or none, no temporary left behind
(even after SIGTERM or SIGKILL), the umask's mode, a full disk reported in one sentence."""

from __future__ import annotations

import errno
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from scopefusion import files
from scopefusion.output_paths import OutputPathError, check_output_paths, write_outputs
from tests.models import hostile_models

REPO = Path(__file__).resolve().parent.parent


def run(*args: str, cwd: Path | None = None, umask: int | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    preexec = (lambda: os.umask(umask)) if umask is not None else None
    return subprocess.run([sys.executable, "-m", "scopefusion", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, preexec_fn=preexec)


@pytest.fixture(scope="module")
def small_pb(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("model") / "m.pb"
    path.write_bytes(hostile_models.splat_const((2, 3)))
    return path


def _no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


@pytest.mark.parametrize("device", ["/dev/null", "/dev/full"])
def test_a_device_output_is_refused_and_left_a_device(small_pb, device):
    before = os.stat(device)
    proc = run("convert", str(small_pb), "-o", device, "-q")
    assert proc.returncode == 2
    assert "is a character device" in proc.stderr
    _no_traceback(proc)
    after = os.stat(device)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


def test_a_fifo_or_directory_output_is_refused(small_pb, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for target, kind in ((fifo, "a FIFO"), (tmp_path, "a directory")):
        proc = run("convert", str(small_pb), "-o", str(target), "-q")
        assert proc.returncode == 2 and kind in proc.stderr, proc.stderr
        _no_traceback(proc)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_an_output_naming_the_input_is_refused_and_the_model_kept(small_pb, tmp_path):
    model = tmp_path / "m.pb"
    model.write_bytes(small_pb.read_bytes())
    original = model.read_bytes()
    link = tmp_path / "link.pb"
    link.symlink_to(model)
    hard = tmp_path / "hard.pb"
    os.link(model, hard)
    for spelled in (str(model), str(link), str(hard), "./m.pb"):
        proc = run("convert", str(model), "-o", spelled, "-q", cwd=tmp_path)
        assert proc.returncode == 2 and "is the same file as the model" in proc.stderr, proc.stderr
        _no_traceback(proc)
    assert model.read_bytes() == original


@pytest.mark.parametrize("option", ["--report", "--html"])
def test_a_report_naming_the_output_is_refused_before_converting(small_pb, tmp_path, option):
    out = tmp_path / "m.ge"
    proc = run("convert", str(small_pb), "-o", str(out), option, str(tmp_path / "." / "m.ge"), "-q")
    assert proc.returncode == 2 and "is the same file as -o" in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_report_and_html_must_differ(small_pb, tmp_path):
    proc = run("convert", str(small_pb), "-o", str(tmp_path / "m.ge"), "--report", str(tmp_path / "r"),
               "--html", str(tmp_path / "r"), "-q")
    assert proc.returncode == 2 and "--html" in proc.stderr and "same file as --report" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_no_output_is_written_when_another_cannot_be(small_pb, tmp_path):
    out = tmp_path / "m.ge"
    proc = run("convert", str(small_pb), "-o", str(out), "--report", str(tmp_path / "missing" / "r.json"), "-q")
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    _no_traceback(proc)
    assert list(tmp_path.iterdir()) == []


def test_outputs_get_the_mode_the_umask_gives(small_pb, tmp_path):
    out, report, html = tmp_path / "m.ge", tmp_path / "r.json", tmp_path / "r.html"
    for umask, mode in ((0o022, 0o644), (0o027, 0o640)):
        proc = run("convert", str(small_pb), "-o", str(out), "--report", str(report), "--html", str(html), "-q",
                   umask=umask)
        assert proc.returncode == 0, proc.stderr
        for path in (out, report, html):
            assert stat.S_IMODE(path.stat().st_mode) == mode, (path, umask)


def test_golden_files_get_the_mode_the_umask_gives(tmp_path):
    import numpy as np

    from scopefusion.ir import Graph, IRContext, OpRegistry, core_ops
    from scopefusion.testing.golden import write_golden

    g = Graph("main", IRContext(), OpRegistry(core_ops()))
    g.set_outputs([g.add_const(np.ones(2, np.float32), "c")])
    old = os.umask(0o022)
    try:
        assert write_golden(tmp_path / "g.txt", g)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "g.txt").stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["g.txt"]


def test_check_output_paths_compares_inodes(tmp_path):
    target = tmp_path / "a"
    target.write_bytes(b"x")
    os.link(target, tmp_path / "b")
    with pytest.raises(OutputPathError, match="same file as -o"):
        check_output_paths([("-o", target), ("--report", tmp_path / "b")])
    check_output_paths([("-o", target), ("--report", tmp_path / "c")], [("the model", tmp_path / "d")])


def test_a_full_disk_is_one_sentence_and_leaves_nothing(tmp_path, monkeypatch):
    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "write", full)
    for unnamed in (True, False):
        with pytest.raises(OSError):
            files.write_atomic(tmp_path / "x", b"data", unnamed=unnamed)
    with pytest.raises(OutputPathError, match="no space left on the device"):
        write_outputs([(tmp_path / "x", b"data"), (tmp_path / "y", b"data")])
    assert list(tmp_path.iterdir()) == []


def test_all_outputs_appear_together_or_none(tmp_path):
    def failing():
        yield b"partial"
        raise OSError(errno.EIO, "input/output error")

    (tmp_path / "keep").write_bytes(b"old")
    with pytest.raises(OSError):
        files.write_together([(tmp_path / "keep", b"new"), (tmp_path / "second", failing())])
    assert (tmp_path / "keep").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep"]
    files.write_together([(tmp_path / "keep", b"new"), (tmp_path / "second", [b"a", b"b"])])
    assert (tmp_path / "keep").read_bytes() == b"new" and (tmp_path / "second").read_bytes() == b"ab"


_WRITER = textwrap.dedent("""
    import sys, time
    from scopefusion import files

    def chunks():
        yield b"x" * (1 << 20)
        print("writing", flush=True)
        time.sleep(60)
        yield b"never"

    files.write_atomic(sys.argv[1], chunks(), unnamed=sys.argv[2] == "unnamed")
""")


@pytest.mark.parametrize(
    "way, signum",
    [("unnamed", signal.SIGKILL), ("unnamed", signal.SIGTERM), ("named", signal.SIGTERM), ("named", signal.SIGINT)],
)
def test_a_signal_during_the_write_leaves_no_temporary(tmp_path, way, signum):
    out = tmp_path / "out" / "m.ge"
    out.parent.mkdir()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(out), way], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "writing"
        if way == "named":
            assert [p.name.startswith(".scopefusion-") for p in out.parent.iterdir()] == [True]
        else:
            assert list(out.parent.iterdir()) == []
        proc.send_signal(signum)
        assert proc.wait(timeout=30) != 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert list(out.parent.iterdir()) == []


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB tmpfs (needs the right to mount; the monkeypatched test above covers the rest)."""
    mount = tmp_path / "small"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_really_full_disk_is_one_sentence_and_leaves_nothing(full_disk):
    proc = run("convert", str(REPO / "testdata" / "bert_tiny.pb"), "-o", str(full_disk / "out.ge"),
               "--report", str(full_disk / "r.json"), "-q")
    assert proc.returncode == 2
    assert "no space left on the device" in proc.stderr
    _no_traceback(proc)
    assert list(full_disk.iterdir()) == []


def test_verify_json_is_checked_before_running(small_pb, tmp_path):
    proc = run("verify", str(small_pb), "--json", str(small_pb))
    assert proc.returncode == 2 and "--json" in proc.stderr and "same file as the model" in proc.stderr, proc.stderr
    proc = run("verify", str(small_pb), "--json", "/dev/null")
    assert proc.returncode == 2 and "is a character device" in proc.stderr


def test_dash_writes_to_stdout_and_the_summary_goes_to_stderr(small_pb, tmp_path):
    proc = run("convert", str(small_pb), "-o", "-", "--format", "ge-text", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith('name: "main"') and "Memory plans" in proc.stderr
    proc = run("convert", str(small_pb), "-o", str(tmp_path / "m.ge"), "--report", "-", "-q")
    assert proc.returncode == 0 and '"framework": "tensorflow"' in proc.stdout
    proc = run("convert", str(small_pb), "-o", "-", "--report", "-", "-q", cwd=tmp_path)
    assert proc.returncode == 2 and "both write to standard output" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.ge"]


def test_a_binary_model_is_not_written_to_a_terminal(monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    with pytest.raises(OutputPathError, match="binary model to the terminal"):
        check_output_paths([("-o", "-")], binary=("-o",))
    check_output_paths([("--report", "-")], binary=("-o",))
