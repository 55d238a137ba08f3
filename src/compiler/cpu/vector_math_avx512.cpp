// The f32 array loops for AVX-512 (built with -march=skylake-avx512).
#define KILN_VMATH_TARGET avx512
#include "compiler/cpu/vector_math_impl.hpp"
