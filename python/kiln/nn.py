"""kiln.nn: layers that declare their weights by dotted name while staging (C++'s
kiln::nn). Each layer opens ``name_scope(name)`` and declares ``weight`` / ``bias`` there,
so a block called inside ``kiln.name_scope("layers.3")`` reads ``layers.3.mlp.w1.weight``.
``Linear(..., layout="torch")`` reads PyTorch's [out, in] weight as it is stored."""

from ._kiln.nn import (  # noqa: F401
    MLP,
    Embedding,
    LayerNorm,
    Linear,
    MultiHeadAttention,
    RMSNorm,
    TransformerBlock,
)
