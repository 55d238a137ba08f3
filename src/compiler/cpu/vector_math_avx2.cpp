// The f32 array loops for AVX2 and FMA (built with -march=haswell).
#define KILN_VMATH_TARGET avx2
#include "compiler/cpu/vector_math_impl.hpp"
