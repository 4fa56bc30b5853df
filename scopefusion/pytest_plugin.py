"""scopefusion's pytest plugin, loaded through the ``pytest11`` entry point when scopefusion is installed.

* ``convert_model`` (session fixture): ``convert_model(path, **options)`` is
  :func:`scopefusion.convert.convert`, cached per model file (path, size, modification time, content
  digest up to 16 MiB) and options
  for the session, so tests that read the same model with the same options share one conversion. Treat
  the returned model as read-only. Under pytest-xdist each worker has its own cache.
* ``assert_matches_golden`` (fixture): ``assert_matches_golden(graph, "name.golden.txt", **compare)``
  compares ``graph`` structurally with a golden file beside the test module (a relative name is resolved
  against the test file's directory); see :mod:`scopefusion.testing.golden` for what the file holds
  (weights as dtype, shape and content hash; ``keep_weights=True`` keeps their bytes).
* ``--scopefusion-update-golden``: the golden checks rewrite their files instead of comparing, and the
  run ends with the list of files rewritten.

Importing the plugin is cheap: scopefusion's converter and IR are imported when a fixture is first used.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from .model import Model

__all__ = ["ModelCache", "UPDATE_OPTION", "assert_matches_golden", "convert_model"]

UPDATE_OPTION = "--scopefusion-update-golden"
_REWRITTEN = pytest.StashKey[list]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("scopefusion", "scopefusion IR graphs")
    group.addoption(
        UPDATE_OPTION,
        action="store_true",
        default=False,
        help="rewrite the golden IR files that assert_matches_golden checks, instead of comparing with them",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_REWRITTEN] = []


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    rewritten = config.stash.get(_REWRITTEN, [])
    if config.getoption(UPDATE_OPTION):
        terminalreporter.write_sep("-", f"scopefusion: {len(rewritten)} golden file(s) rewritten")
        for path in rewritten:
            terminalreporter.write_line(str(path))


def _freeze(value: Any) -> Any:
    """A hashable, order-stable stand-in for an option value (mappings sorted, sequences as tuples)."""
    if isinstance(value, os.PathLike):
        return ("path", os.path.realpath(value))
    if isinstance(value, dict):
        return ("map", tuple(sorted((str(k), _freeze(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_freeze(v) for v in value]
        return ("seq", tuple(sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items))
    try:
        hash(value)
    except TypeError:
        return ("repr", repr(value))
    return value


_HASHED_BYTES = 16 << 20


def _file_key(path: str | os.PathLike) -> tuple:
    """Path, size and modification time; for files up to 16 MiB also a digest of the content (file
    times can be coarser than two writes in one test)."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return (real, None, None, None)
    digest: str | tuple[Any, ...] | None = None
    if os.path.isfile(real) and st.st_size <= _HASHED_BYTES:
        with open(real, "rb") as f:
            digest = hashlib.blake2b(f.read(), digest_size=16).hexdigest()
    elif os.path.isdir(real):  # a SavedModel: its graph file stands for it
        inner = os.path.join(real, "saved_model.pb")
        digest = _file_key(inner) if os.path.exists(inner) else None
    return (real, st.st_size, st.st_mtime_ns, digest)


class ModelCache:
    """``convert`` with a per-session cache keyed by the model file and the options."""

    def __init__(self, convert: Callable[..., "Model"] | None = None) -> None:
        self._convert = convert
        self._models: dict[tuple, "Model"] = {}
        self.conversions = 0

    def __call__(self, path: str | os.PathLike, **options: Any) -> "Model":
        """The model at ``path`` converted with ``options`` (keywords of :func:`scopefusion.convert.convert`)."""
        rules = options.get("rules") or ()
        key = (_file_key(path), _freeze(options), tuple(_file_key(r) for r in rules))
        model = self._models.get(key)
        if model is None:
            convert = self._convert
            if convert is None:
                from .convert import convert as default_convert

                convert = default_convert
            model = self._models[key] = convert(path, **options)
            self.conversions += 1
        return model

    def __len__(self) -> int:
        return len(self._models)

    def clear(self) -> None:
        self._models.clear()


@pytest.fixture(scope="session")
def convert_model() -> ModelCache:
    """``convert_model(path, **options)``: a converted model, cached for the session (read-only)."""
    return ModelCache()


@pytest.fixture
def assert_matches_golden(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``assert_matches_golden(graph, "name.golden.txt", **compare)``: the graph equals the golden file
    beside the test module; with ``--scopefusion-update-golden`` the file is rewritten instead."""
    from .testing import golden

    directory = Path(request.path).parent
    update = bool(request.config.getoption(UPDATE_OPTION))
    rewritten = request.config.stash.setdefault(_REWRITTEN, [])

    def check(graph: Any, name: str | os.PathLike, **compare: Any) -> None:
        __tracebackhide__ = True
        path = Path(name) if Path(name).is_absolute() else directory / name
        if update:
            if golden.write_golden(path, graph, keep_weights=bool(compare.get("keep_weights", False))):
                rewritten.append(path)
            return
        golden.assert_matches_golden(graph, path, **compare)

    return check
