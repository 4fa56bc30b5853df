"""How the ONNX writer runs an exporter on a node (:meth:`.GraphWriter._emit`)."""

from __future__ import annotations

from scopefusion.convert import convert
from scopefusion.serde.onnx_export import model_to_onnx_bytes
from scopefusion.serde.onnx_lowering import LoweringEmitter, default_lowerings
from scopefusion.serde.onnx_proto import ModelProto


def test_a_lowering_declining_the_channels_first_forms_runs_again_on_the_node_s_own_inputs(tf_convnet_pb):
    model = convert(tf_convnet_pb)
    calls: list[tuple[str, str | None]] = []

    def relu(e: LoweringEmitter) -> None:
        own = e.value_name(e.node.inputs[0])  # type: ignore[arg-type]
        calls.append((e.input(0), own))
        if e.input(0) != own:
            e.decline("only on the input's own (channels-last) form")
        e.result("Relu", [e.input(0)])

    lowerings = default_lowerings()
    lowerings.register("Relu", relu, replace=True)
    proto = ModelProto.FromString(model_to_onnx_bytes(model, lowerings=lowerings))

    assert len(calls) == 2 and calls[0][0] != calls[0][1]  # first on the channels-first form, declined there
    assert calls[1][0] == calls[1][1]  # then as it is: on the input's own name
    relus = [n for n in proto.graph.node if n.op_type == "Relu"]
    assert len(relus) == 1
