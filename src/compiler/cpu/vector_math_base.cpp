// The f32 array loops for baseline x86-64 (SSE2).
#define KILN_VMATH_TARGET base
#include "compiler/cpu/vector_math_impl.hpp"
