// The f32 array loops for baseline x86-64 (SSE2).
#define KILN_VMATH_TARGET base
#include "compiler/vector_math_impl.hpp"
