// Picks the array loops built for the best instruction set this CPU has, once.

#include "compiler/vector_math.hpp"

namespace kiln::compiler::vmath {

#define KILN_DECLARE_TARGET(target)                                           \
  namespace target {                                                          \
  void unary(Unary f, const float* x, float* y, std::size_t n);               \
  void binary(Binary f, const float* a, std::size_t a_stride, const float* b, \
              std::size_t b_stride, float* y, std::size_t n);                 \
  }
KILN_DECLARE_TARGET(avx512)
KILN_DECLARE_TARGET(avx2)
KILN_DECLARE_TARGET(base)
#undef KILN_DECLARE_TARGET

namespace {

struct Table {
  void (*unary)(Unary, const float*, float*, std::size_t);
  void (*binary)(Binary, const float*, std::size_t, const float*, std::size_t, float*, std::size_t);
};

Table pick() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return {avx512::unary, avx512::binary};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {avx2::unary, avx2::binary};
#endif
  return {base::unary, base::binary};
}

const Table& table() {
  static const Table t = pick();
  return t;
}

}  // namespace

const char* instruction_set() {
  const Table& t = table();
  return t.unary == avx512::unary ? "avx512" : t.unary == avx2::unary ? "avx2" : "baseline";
}

void unary(Unary f, const float* x, float* y, std::size_t n) { table().unary(f, x, y, n); }

void binary(Binary f, const float* a, std::size_t a_stride, const float* b, std::size_t b_stride,
            float* y, std::size_t n) {
  table().binary(f, a, a_stride, b, b_stride, y, n);
}

}  // namespace kiln::compiler::vmath
