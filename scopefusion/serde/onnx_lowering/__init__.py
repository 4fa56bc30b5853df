"""``tf`` dialect ops to default-domain ONNX: one small lowering function per op type, one module per family.

A lowering receives a :class:`~.emitter.LoweringEmitter` for one ``tf.<Type>`` node and writes the ONNX
nodes that compute it with TensorFlow's exact semantics, or declines (``e.decline(reason)``) when it cannot
for this node (an input that must be constant is not, an attribute value ONNX has no form for). A declined
node and an op type without a lowering make the export fail, naming every such op type and its count,
unless the caller keeps them in domain ``tf`` (``keep_tf_ops``).

Families, as in the dialect itself: :mod:`.elementwise` (math, activations, comparisons, casts),
:mod:`.compositions` (Atan2, Cumprod, InTopKV2, BroadcastGradientArgs: exact compositions of ONNX ops),
:mod:`.nn` (matmuls, convolutions, pooling, normalization, resize), :mod:`.conv_transpose`
(Conv2DBackpropInput), :mod:`.resize` (bicubic and area resizes), :mod:`.detection` (TopK,
NonMaxSuppression), :mod:`.array` (reshaping, padding, tiling), :mod:`.space_batch` (SpaceToBatchND,
BatchToSpaceND, and their chain around a convolution as one dilated Conv), :mod:`.slicing` (slices, joins,
gathers, scatters), :mod:`.shapes`, :mod:`.reduce`, :mod:`.misc` (identities, NoOp), :mod:`.random_ops`
(random ops, same distributions), :mod:`.tensor_lists` (TensorLists and TensorArrays as one tensor),
:mod:`.control` (While, If, Case, calls; bodies typed by :mod:`.bodies`, lists written in order as scan outputs
by :mod:`.loop_scans`). TF1 frames are rebuilt as While and If first (:mod:`.tf1_frames`, :mod:`.tf1_conds`).

A family's module is imported on the first lookup of one of its op types (the table
:data:`.registry.FAMILIES` names each family's types; a new family module goes there too), and the writer
imports :mod:`.tf1_frames` only for a graph that has a loop frame or a v1 cond.

Registering a lowering is one call::

    lowerings = default_lowerings()
    lowerings.register("MyOp", lower_my_op)
"""

from __future__ import annotations

from .emitter import LoweringEmitter
from .registry import Lowering, LoweringRegistry, default_lowerings

__all__ = ["Lowering", "LoweringEmitter", "LoweringRegistry", "default_lowerings"]
