"""The model zoo as SavedModels (``tests/models/saved_models.py``): the native loader against TensorFlow's.

For every zoo SavedModel the native loader (the default) and ``savedmodel_loader="tensorflow"`` give the
same fused graph and the same fusion counts, and ``verify`` matches. The graphs are compared with
``Identity`` / ``NoOp`` nodes, control edges and dead nodes normalised away
(``tests/parser/savedmodel_compare.py``), because TensorFlow's freezing inlines calls through extra
``Identity`` and ``NoOp`` nodes (``Func/<call>/input/_0``...) and the native loader wires them directly;
and the ``_gradient_op_type`` attribute is ignored, because TensorFlow renumbers custom gradients when
it loads a SavedModel. Converting every one of them never imports TensorFlow: a subprocess where
``import tensorflow`` fails converts them all.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from scopefusion.convert import convert
from scopefusion.parser import load
from scopefusion.testing import assert_graphs_equal, fusion_counts
from scopefusion.verify import verify
from tests.e2e.zoo import BY_NAME
from tests.models.saved_models import SAVED_ZOO, write_saved_model
from tests.parser.savedmodel_compare import normalised

REPO = Path(__file__).resolve().parents[2]
NAMES = list(SAVED_ZOO)


@pytest.fixture(scope="session")
def saved_zoo(model_store):
    """``saved_zoo(name)``: the directory of zoo model ``name`` as a SavedModel, built once per session."""

    def get(name: str) -> Path:
        return model_store.written(f"sm_zoo_{name}", lambda path: write_saved_model(name, path))

    return get


def _profile(path: Path, name: str) -> dict[str, list[int]]:
    """The zoo's static profile for the SavedModel's inputs (by name, or by position for one input)."""
    wanted = BY_NAME[name].input_shapes
    inputs = [i.name for i in load(path).inputs]
    if set(inputs) == set(wanted):
        return {k: list(v) for k, v in wanted.items()}
    assert len(inputs) == len(wanted) == 1, (inputs, wanted)
    return {inputs[0]: list(next(iter(wanted.values())))}


@pytest.mark.parametrize("name", NAMES)
def test_the_native_loader_gives_the_graph_the_tensorflow_loader_gives(name, saved_zoo):
    path = saved_zoo(name)
    native = convert(path)
    reference = convert(path, savedmodel_loader="tensorflow")
    assert native.source.metadata["savedmodel_loader"] == "native"
    assert fusion_counts(native) == fusion_counts(reference)
    assert_graphs_equal(normalised(native.graph), normalised(reference.graph), ignore_attrs=["_gradient_op_type"])
    node_names = {n.name for n in native.source.nodes}
    if native.source.metadata["saved_model_kind"] == "tf2":
        assert any(n.startswith(("StatefulPartitionedCall/", "PartitionedCall/")) for n in node_names)
    # The same names, except the NoOp that stands for an inlined call waited on as a whole.
    assert node_names <= {n.name for n in reference.source.nodes} | {"StatefulPartitionedCall", "PartitionedCall"}


@pytest.mark.parametrize("name", NAMES)
def test_verify_matches_with_the_native_loader(name, saved_zoo):
    path = saved_zoo(name)
    report = verify(path, input_shapes=_profile(path, name), rtol=1e-4, atol=1e-5)
    assert report.ok, report.to_dict()


_BLOCKER = """
import importlib.abc
import sys


class _NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "keras", "tf_keras"):
            raise ImportError(f"{name} is blocked in this test")
        return None


sys.meta_path.insert(0, _NoTensorFlow())
"""


def test_converting_every_zoo_saved_model_never_imports_tensorflow(saved_zoo, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(_BLOCKER)
    paths = [str(saved_zoo(name)) for name in NAMES]
    script = textwrap.dedent(f"""
        import sys
        try:
            import tensorflow
        except ImportError:
            pass
        else:
            sys.exit("the blocker did not block tensorflow")
        from scopefusion.convert import convert
        for path in {paths!r}:
            model = convert(path)
            assert model.to_bytes("ge")
        leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "keras", "tf_keras"))
        print("leaked", leaked)
        sys.exit(1 if leaked else 0)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocker), str(REPO)]))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("leaked []")
    out = tmp_path / "module.ge"
    cli = subprocess.run([sys.executable, "-m", "scopefusion.cli", "convert", paths[0], "-o", str(out), "-q"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert out.stat().st_size > 0
    failing = subprocess.run([sys.executable, "-m", "scopefusion.cli", "convert", paths[0], "-o", str(tmp_path / "x.ge"), "-q",
                              "--savedmodel-loader", "tensorflow"], capture_output=True, text=True, timeout=300, env=env)
    assert failing.returncode == 2 and "needs TensorFlow" in failing.stderr, failing.stderr
