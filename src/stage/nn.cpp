#include "kiln/stage/nn.hpp"

#include <cmath>
#include <optional>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/stage/stage.hpp"
#include "stage/frame.hpp"

namespace kiln::nn {
namespace {

// name_scope only when the layer has a name.
struct OptionalScope {
  explicit OptionalScope(const std::string& name) {
    if (!name.empty()) scope.emplace(name);
  }
  std::optional<name_scope> scope;
};

TensorLayout layout(DType dtype, Shape shape, const Tensor& like) {
  return TensorLayout(dtype, std::move(shape), like.device());
}

}  // namespace

Tensor Linear::operator()(const Tensor& x, Loc where) const {
  const detail::UserCallSite site(where);
  OptionalScope scope(name);
  Tensor y = torch_layout ? matmul(x, transpose(weight("weight", layout(dtype, {out, in}, x))))
                          : matmul(x, weight("weight", layout(dtype, {in, out}, x)));
  if (bias) y = y + weight("bias", layout(dtype, {out}, x));
  return y;
}

Tensor Embedding::operator()(const Tensor& ids, Loc where) const {
  const detail::UserCallSite site(where);
  OptionalScope scope(name);
  return embedding(weight("weight", layout(dtype, {vocab, dim}, ids)), ids);
}

Tensor LayerNorm::operator()(const Tensor& x, Loc where) const {
  const detail::UserCallSite site(where);
  OptionalScope scope(name);
  return layer_norm(x, weight("weight", layout(dtype, {dim}, x)),
                    weight("bias", layout(dtype, {dim}, x)), eps);
}

Tensor RMSNorm::operator()(const Tensor& x, Loc where) const {
  const detail::UserCallSite site(where);
  OptionalScope scope(name);
  return rms_norm(x, weight("weight", layout(dtype, {dim}, x)), eps);
}

Tensor MLP::operator()(const Tensor& x, Loc where) const {
  const detail::UserCallSite site(where);
  OptionalScope scope(name);
  const Tensor h = gelu(Linear{dim, hidden, true, "w1", dtype}(x), approximate);
  return Linear{hidden, dim, true, "w2", dtype}(h);
}

Tensor MultiHeadAttention::operator()(const Tensor& x, Loc where) const {
  const detail::UserCallSite site(where);
  OptionalScope scope(name);
  if (heads < 1 || dim % heads != 0)
    throw UserError(
        detail::cat("MultiHeadAttention: dim ", dim, " is not divisible by heads ", heads));
  if (x.rank() != 3)
    throw UserError(detail::cat("MultiHeadAttention: expected x of rank 3 [batch, seq, dim], got ",
                                x.layout()));
  const Dim batch = x.shape().dims()[0], seq = x.shape().dims()[1];
  const std::int64_t head_dim = dim / heads;
  const auto split_heads = [&](const Tensor& t) {  // [b, s, d] -> [b, h, s, d/h]
    return permute(reshape(t, Shape{batch, seq, heads, head_dim}), {0, 2, 1, 3});
  };
  const Tensor q = split_heads(Linear{dim, dim, true, "q", dtype}(x));
  const Tensor k = split_heads(Linear{dim, dim, true, "k", dtype}(x));
  const Tensor v = split_heads(Linear{dim, dim, true, "v", dtype}(x));
  const Tensor scores = matmul(q, transpose(k, -1, -2)) * (1.0 / std::sqrt(double(head_dim)));
  const Tensor context = matmul(softmax(scores, -1), v);  // [b, h, s, d/h]
  const Tensor merged = reshape(permute(context, {0, 2, 1, 3}), Shape{batch, seq, dim});
  return Linear{dim, dim, true, "o", dtype}(merged);
}

Tensor TransformerBlock::operator()(const Tensor& x, Loc where) const {
  const detail::UserCallSite site(where);
  OptionalScope scope(name);
  const Tensor h =
      x + MultiHeadAttention{dim, heads, "attn", dtype}(LayerNorm{dim, 1e-5, "norm1", dtype}(x));
  return h +
         MLP{dim, hidden, "mlp", dtype, gelu_approximate}(LayerNorm{dim, 1e-5, "norm2", dtype}(h));
}

}  // namespace kiln::nn
