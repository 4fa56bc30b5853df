"""The op output-signature table: generated from TensorFlow's registry, read without TensorFlow."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from scopefusion import dtypes
from scopefusion.parser.op_signatures import OpSignatures, OutputArg

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_table_matches_tensorflows_op_registry():
    spec = importlib.util.spec_from_file_location("gen_op_signatures", REPO / "tools" / "gen_op_signatures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    table = module.build_table()
    assert len(table["ops"]) > 1500
    assert module.OUTPUT.read_text() == module.render(table)


def test_list_arguments_take_their_size_from_the_node_attributes():
    sigs = OpSignatures()
    assert sigs.output_index("Split", {"num_split": 3}, "output", 2) == 2
    assert sigs.num_outputs("Split", {"num_split": 3}) == 3
    assert sigs.num_outputs("While", {"T": (dtypes.INT32, dtypes.FLOAT32)}) == 2
    assert sigs.output_index("FusedBatchNormV3", {}, "batch_variance", 0) == 2
    assert sigs.output_index("FusedBatchNormV3", {}, "reserve_space_3", 0) == 5
    assert sigs.output_index("Unique", {}, "idx", 0) == 1
    assert sigs.num_outputs("NoOp", {}) == 0
    with pytest.raises(IndexError, match="holds 2 tensors, not 3"):
        sigs.output_index("Split", {"num_split": 2}, "output", 2)


def test_unknown_ops_and_unresolved_sizes_give_none():
    sigs = OpSignatures()
    assert sigs.output_index("NotAnOp", {}, "y", 0) is None and sigs.num_outputs("NotAnOp", {}) is None
    assert sigs.num_outputs("Split", {}) is None
    assert sigs.output_index("Split", {}, "output", 0) == 0
    assert sigs.output_index("Relu", {}, "nope", 0) is None


def test_library_functions_are_ops_too():
    sigs = OpSignatures({"MyFn": [OutputArg("a"), OutputArg("rest", number_attr="N")]})
    assert sigs.knows("MyFn") and sigs.num_outputs("MyFn", {"N": 2}) == 3
    assert sigs.output_index("MyFn", {"N": 2}, "rest", 1) == 2
    assert OutputArg.parse("out*N") == OutputArg("out", number_attr="N")
    assert OutputArg.parse("out+T") == OutputArg("out", type_list_attr="T")


def test_output_names_from_the_shared_builtin_counts_are_those_the_signatures_give():
    """assign_output_names reads most ops' counts from the builtin table's answers; a library function named like
    a builtin op shadows it, so with functions those answers are not read."""
    from scopefusion.parser.source_graph import SourceNode
    from scopefusion.parser.tf_nodes import assign_output_names

    def names(signatures: OpSignatures) -> list[list[str]]:
        nodes = [SourceNode("a", "Relu"), SourceNode("b", "Unique"), SourceNode("c", "NoOp"), SourceNode("d", "Relu"),
                 SourceNode("e", "Split", attrs={"num_split": 3}), SourceNode("f", "NotAnOp"),
                 SourceNode("g", "Identity", inputs=[("f", 2)])]
        assign_output_names(nodes, signatures)
        return [n.output_names for n in nodes]

    builtin = OpSignatures()
    names(builtin)  # the table has answered for these ops now
    assert builtin.builtin_fixed_counts["Relu"] == 1 and builtin.builtin_fixed_counts["Split"] is None
    assert names(builtin) == [["a:0"], ["b:0", "b:1"], [], ["d:0"], ["e:0", "e:1", "e:2"], ["f:0", "f:1", "f:2"],
                              ["g:0"]]
    shadowed = OpSignatures({"Relu": [OutputArg("x"), OutputArg("y")]})
    assert not shadowed.builtin_fixed_counts
    assert names(shadowed)[0] == ["a:0", "a:1"] and names(shadowed)[3] == ["d:0", "d:1"]
