#pragma once
/// \file
/// `kiln::nn`: small layers that declare their weights with dotted names while staging,
/// so that a real model can be staged in a few lines.
///
/// Each layer holds its sizes and a `name`; calling it opens `name_scope(name)` and
/// declares its weights there (`weight`, `bias`), so a block called inside
/// `name_scope("layers.3")` declares `layers.3.mlp.w1.weight`. Every op a layer stages is
/// located at the layer's call site in the caller's code (`where`; through `as_subgraph`,
/// the first call's), never in kiln's sources.
///
/// \code
///   kiln::nn::TransformerBlock block{.dim = 512, .heads = 8, .hidden = 2048};
///   auto layer = kiln::as_subgraph(block, {.name = "block"});
///   for (int i = 0; i < 4; ++i) { kiln::name_scope s("layers." + std::to_string(i)); x = layer(x);
///   }
/// \endcode

#include <cstdint>
#include <string>

#include "kiln/stage/tensor.hpp"

namespace kiln::nn {

/// y = x @ weight + bias; weight [in, out], bias [out]. With `torch_layout`, weight is
/// [out, in] as PyTorch's `nn.Linear` stores it (y = x @ weight^T + bias), so a PyTorch
/// checkpoint binds without transposing it.
struct Linear {
  std::int64_t in = 0;
  std::int64_t out = 0;
  bool bias = true;
  std::string name{};
  DType dtype = DType::f32;
  bool torch_layout = false;
  Tensor operator()(const Tensor& x, Loc where = Loc::current()) const;
};

/// Rows of weight [vocab, dim] picked by integer ids.
struct Embedding {
  std::int64_t vocab = 0;
  std::int64_t dim = 0;
  std::string name{};
  DType dtype = DType::f32;
  Tensor operator()(const Tensor& ids, Loc where = Loc::current()) const;
};

/// Layer normalisation over the last axis; weight and bias [dim].
struct LayerNorm {
  std::int64_t dim = 0;
  double eps = 1e-5;
  std::string name{};
  DType dtype = DType::f32;
  Tensor operator()(const Tensor& x, Loc where = Loc::current()) const;
};

/// RMS normalisation over the last axis; weight [dim].
struct RMSNorm {
  std::int64_t dim = 0;
  double eps = 1e-6;
  std::string name{};
  DType dtype = DType::f32;
  Tensor operator()(const Tensor& x, Loc where = Loc::current()) const;
};

/// w2(gelu(w1(x))): dim -> hidden -> dim. GELU as `approximate` says: "none" (exact, with
/// erf: PyTorch's `nn.GELU()` default, BERT's) or "tanh" (GPT-2's approximation).
struct MLP {
  std::int64_t dim = 0;
  std::int64_t hidden = 0;
  std::string name = "mlp";
  DType dtype = DType::f32;
  std::string approximate = "none";
  Tensor operator()(const Tensor& x, Loc where = Loc::current()) const;
};

/// Multi-head self-attention over x [batch, seq, dim] (q, k, v, o projections).
struct MultiHeadAttention {
  std::int64_t dim = 0;
  std::int64_t heads = 1;
  std::string name = "attn";
  DType dtype = DType::f32;
  Tensor operator()(const Tensor& x, Loc where = Loc::current()) const;
};

/// Pre-norm transformer block: h = x + attn(norm1(x)); h + mlp(norm2(h)), GPT-2 style:
/// the MLP's GELU is the tanh approximation unless `gelu_approximate` is "none".
struct TransformerBlock {
  std::int64_t dim = 0;
  std::int64_t heads = 1;
  std::int64_t hidden = 0;
  std::string name{};
  DType dtype = DType::f32;
  std::string gelu_approximate = "tanh";
  Tensor operator()(const Tensor& x, Loc where = Loc::current()) const;
};

}  // namespace kiln::nn
