#include "random_programs.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

namespace kiln::testing {
namespace {

using Dims = std::vector<std::int64_t>;

Shape shape_of(const Dims& d) {
  std::vector<Dim> dims(d.begin(), d.end());
  return Shape(std::move(dims));
}

Dims dims_of(const Tensor& t) {
  Dims d;
  for (const Dim& x : t.shape().dims()) d.push_back(x.size());
  return d;
}

bool broadcastable(const Dims& a, const Dims& b) {
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const std::int64_t x = a[a.size() - 1 - i], y = b[b.size() - 1 - i];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

/// A random program over the input tensors, decided by \p seed alone.
std::vector<Tensor> random_program(std::vector<Tensor> pool, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const int steps = 3 + static_cast<int>(pick(10));
  // Ops that round to a grid or pick one element (argmax, a cast through bf16) read inputs
  // only: on computed values the compiled kernels and the reference, an ulp apart, could
  // land on either side of a tie.
  const std::size_t inputs = pool.size();
  for (int s = 0; s < steps; ++s) {
    const Tensor& a = pool[pick(pool.size())];
    const Tensor& b = pool[pick(pool.size())];
    const Dims da = dims_of(a), db = dims_of(b);
    const auto axis = [&](const Tensor& t) {
      return static_cast<std::int64_t>(pick(std::max<std::size_t>(t.rank(), 1)));
    };
    Tensor next;
    const std::int64_t rank = static_cast<std::int64_t>(a.rank());
    switch (pick(24)) {
      case 0:
        next = broadcastable(da, db) ? a + b : tanh(a);
        break;
      case 1:
        next = broadcastable(da, db) ? a * b - a : sigmoid(a);
        break;
      case 2:
        next = broadcastable(da, db) ? maximum(a, b) : relu(a);
        break;
      case 3:
        next = pick(2) ? gelu(a, pick(2) ? "tanh" : "none") : silu(a);
        break;
      case 4:
        next = a.rank() == 2 && b.rank() == 2 && da[1] == db[0] ? matmul(a, b) : abs(a) * 0.5;
        break;
      case 5:
        next = a.rank() > 0 ? sum(a, {axis(a)}, pick(2) == 0) : -a;
        break;
      case 6: {  // max over an empty axis is an error (it has no identity): mean there
        if (a.rank() == 0) {
          next = exp(tanh(a));
          break;
        }
        const std::int64_t ax = axis(a);
        next = pick(2) || dims_of(a)[static_cast<std::size_t>(ax)] == 0 ? mean(a, {ax})
                                                                        : max(a, {ax}, true);
        break;
      }
      case 7:
        next = a.rank() > 1 ? transpose(a) : reshape(a, shape_of({a.shape().num_elements()}));
        break;
      case 8:
        next = a.rank() > 0 ? softmax(a, axis(a)) : a + 1.0;
        break;
      case 9:
        next = a.rank() > 0 ? slice(a, axis(a), 0, 3, 1 + static_cast<std::int64_t>(pick(2))) : a;
        break;
      case 10:
        next = da == db && a.rank() > 0 ? concat({a, b}, 0) : where(a > 0.0, a, a * 0.25);
        break;
      case 12:  // a batched matmul: a by its own transpose, valid for any shape
        next = rank >= 2 ? matmul(a, transpose(a, rank - 2, rank - 1))
                         : (rank == 1 ? matmul(a, a) : a * a);
        break;
      case 13: {  // norms over the last axis, with gamma (and beta) made from a
        if (rank == 0) {
          next = a - 0.5;
          break;
        }
        std::vector<std::int64_t> lead(static_cast<std::size_t>(rank - 1));
        for (std::size_t i = 0; i < lead.size(); ++i) lead[i] = static_cast<std::int64_t>(i);
        const Tensor gamma = rank > 1 ? mean(a, lead) : a;
        next = pick(2) ? layer_norm(a, gamma, gamma * 0.5) : rms_norm(a, gamma);
        break;
      }
      case 14: {  // gather along an axis by the argmax along it, or the argmax itself
        const Tensor& x = pool[pick(inputs)];
        const std::int64_t ax = axis(x);
        if (x.rank() == 0 || dims_of(x)[static_cast<std::size_t>(ax)] == 0) {
          next = x * 3.0;
        } else if (pick(2)) {
          next = gather(x, argmax(x, ax), ax);
        } else {
          next = cast(argmax(x, ax, pick(2) == 0), x.dtype());
        }
        break;
      }
      case 15: {
        const std::int64_t ax = axis(a);
        if (rank > 0 && da[static_cast<std::size_t>(ax)] >= 2) {
          const std::int64_t size = da[static_cast<std::size_t>(ax)];
          next = split(a, {1, size - 1}, ax)[pick(2)];
        } else {
          next = rank > 0 ? concat({a, a * 2.0}, axis(a)) : a + a;
        }
        break;
      }
      case 16: {  // a broadcast to a new leading dim, or its axes permuted
        if (pick(2) || rank < 2) {
          Dims wide{2};
          wide.insert(wide.end(), da.begin(), da.end());
          next = broadcast_to(a, shape_of(wide));
        } else {
          std::vector<std::int64_t> perm(static_cast<std::size_t>(rank));
          for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<std::int64_t>(i);
          std::shuffle(perm.begin(), perm.end(), rng);
          next = permute(a, perm);
        }
        break;
      }
      case 17: {  // min over an empty axis is an error: log_softmax there
        if (rank == 0) {
          next = -a;
          break;
        }
        const std::int64_t ax = axis(a);
        next = pick(2) || dims_of(a)[static_cast<std::size_t>(ax)] == 0
                   ? log_softmax(a, ax)
                   : min(a, {ax}, pick(2) == 0);
        break;
      }
      case 18:
        switch (pick(4)) {
          case 0:
            next = pow(abs(a) + 0.5, 1.5);
            break;
          case 1:
            next = log(abs(a) + 1.0);
            break;
          case 2:
            next = rsqrt(abs(a) + 1.0);
            break;
          default:
            next = sqrt(abs(a));
        }
        break;
      case 19: {  // through another dtype and back
        const Tensor& x = pool[pick(inputs)];
        next = cast(cast(x, pick(2) ? DType::bf16 : DType::f64), x.dtype());
        break;
      }
      case 20:
        next = broadcastable(da, db) ? where(pick(2) ? equal(a, b) : not_equal(a, b), a, b)
                                     : minimum(a, a * 0.5);
        break;
      default:
        next = reshape(a, shape_of({a.shape().num_elements()}));
    }
    pool.push_back(next);
  }
  return {pool.back(), pool[pool.size() - 2]};
}

}  // namespace

RandomCase random_case(std::uint64_t seed, std::int64_t smallest_dim, DType dtype) {
  std::mt19937_64 rng(seed * 7919);
  std::vector<TensorLayout> layouts;
  std::vector<Tensor> inputs;
  const std::size_t n_inputs = 1 + rng() % 3;
  for (std::size_t i = 0; i < n_inputs; ++i) {
    Dims d;
    for (std::size_t r = rng() % 4; r > 0; --r)
      d.push_back(smallest_dim +
                  static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(5 - smallest_dim)));
    layouts.emplace_back(dtype, shape_of(d));
    inputs.push_back(Tensor::random(layouts.back(), seed * 100 + i, -2, 2));
  }
  std::vector<Tensor> placeholders(layouts.begin(), layouts.end());
  return {std::move(inputs),
          stage([seed](std::vector<Tensor> xs) { return random_program(xs, seed); })(placeholders)};
}

std::string compare_outputs(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                            double tolerance) {
  if (got.size() != want.size())
    return std::to_string(got.size()) + " outputs against " + std::to_string(want.size());
  for (std::size_t o = 0; o < got.size(); ++o) {
    const std::vector<double> g = got[o].to_doubles(), w = want[o].to_doubles();
    bool same = got[o].layout() == want[o].layout() && g.size() == w.size();
    for (std::size_t k = 0; same && k < g.size(); ++k)
      same = g[k] == w[k] || std::fabs(g[k] - w[k]) <= tolerance * (1 + std::fabs(w[k])) ||
             (std::isnan(g[k]) && std::isnan(w[k]));
    if (!same) {
      std::ostringstream os;
      os << "output " << o << " differs: " << got[o] << " against " << want[o];
      return os.str();
    }
  }
  return {};
}

}  // namespace kiln::testing
