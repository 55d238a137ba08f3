#include "compiler/cuda/codegen.hpp"

#include <sstream>

#include "compiler/cpu/fused_program.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln::compiler {
namespace {

using kiln::detail::cat;

std::string value(std::uint32_t v) { return cat("v", v); }

/// Device helpers of the scalar kernels: element loads and stores of every dtype through
/// double, as kiln's load_as_double and store_from_double convert (DType codes as in
/// kiln/core/dtype.hpp).
const char* const kScalarHelpers = R"(
__device__ unsigned kiln_bits(float f) { union { float f; unsigned u; } v; v.f = f; return v.u; }
__device__ float kiln_float(unsigned u) { union { float f; unsigned u; } v; v.u = u; return v.f; }
__device__ float kiln_half_to_float(unsigned short h) {
  const unsigned sign = (unsigned)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) return kiln_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    const float m = (float)mant * 5.9604644775390625e-8f;
    return sign ? -m : m;
  }
  return kiln_float(sign | ((exp + 112u) << 23) | (mant << 13));
}
__device__ unsigned short kiln_float_to_half(float value) {
  const unsigned f = kiln_bits(value), sign = (f >> 16) & 0x8000u, abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u) return (unsigned short)(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);
  if (abs < 0x38800000u) return (unsigned short)(sign | (kiln_bits(kiln_float(abs) + 0.5f) - 0x3f000000u));
  return (unsigned short)(sign | ((abs + 0xc8000fffu + ((abs >> 13) & 1u)) >> 13));
}
// value rounded to float by round-to-odd, so that rounding it again to f16 or bf16 rounds
// once in all (as kiln's round_to_odd_float).
__device__ float kiln_odd_float(double value) {
  float f = (float)value;
  if (value != value || (double)f == value) return f;
  if (fabs((double)f) > fabs(value)) f = kiln_float(kiln_bits(f) - 1u);  // toward zero
  return kiln_float(kiln_bits(f) | 1u);
}
__device__ unsigned short kiln_float_to_bf16(float value) {
  const unsigned f = kiln_bits(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((f >> 16) | 0x40u);
  return (unsigned short)((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
}
__device__ double kiln_load(const void* p, long long i, int dtype) {
  switch (dtype) {
    case 0: return ((const float*)p)[i];
    case 1: return kiln_half_to_float(((const unsigned short*)p)[i]);
    case 2: return kiln_float((unsigned)((const unsigned short*)p)[i] << 16);
    case 3: return ((const double*)p)[i];
    case 4: return ((const signed char*)p)[i];
    case 5: return ((const unsigned char*)p)[i];
    case 6: return ((const int*)p)[i];
    case 7: return (double)((const long long*)p)[i];
    default: return ((const unsigned char*)p)[i] != 0 ? 1.0 : 0.0;
  }
}
// x truncated and clamped to [lo, hi] (NaN: 0), as kiln's saturate.
__device__ double kiln_saturate(double x, double lo, double hi) {
  if (x != x) return 0.0;
  x = trunc(x);
  return x <= lo ? lo : x >= hi ? hi : x;
}
__device__ void kiln_store(void* p, long long i, int dtype, double x) {
  switch (dtype) {
    case 0: ((float*)p)[i] = (float)x; break;
    case 1: ((unsigned short*)p)[i] = kiln_float_to_half(kiln_odd_float(x)); break;
    case 2: ((unsigned short*)p)[i] = kiln_float_to_bf16(kiln_odd_float(x)); break;
    case 3: ((double*)p)[i] = x; break;
    case 4: ((signed char*)p)[i] = (signed char)kiln_saturate(x, -128.0, 127.0); break;
    case 5: ((unsigned char*)p)[i] = (unsigned char)kiln_saturate(x, 0.0, 255.0); break;
    case 6: ((int*)p)[i] = (int)kiln_saturate(x, -2147483648.0, 2147483647.0); break;
    case 7: {
      if (x != x) { ((long long*)p)[i] = 0; break; }
      x = trunc(x);
      ((long long*)p)[i] = x <= -9223372036854775808.0 ? (-9223372036854775807LL - 1)
                           : x >= 9223372036854775808.0 ? 9223372036854775807LL
                                                        : (long long)x;
      break;
    }
    default: ((unsigned char*)p)[i] = x != 0.0 ? 1 : 0; break;
  }
}
// x as a value of dtype reads back (each op's result is rounded so).
__device__ double kiln_round(int dtype, double x) {
  double slot = 0.0;
  kiln_store(&slot, 0, dtype, x);
  return kiln_load(&slot, 0, dtype);
}
// Integers and bool exactly, as kiln's load_as_int and store_from_int: loads widen, stores
// wrap to the width (two's complement); a float dtype takes the value rounded once.
__device__ long long kiln_load_int(const void* p, long long i, int dtype) {
  switch (dtype) {
    case 4: return ((const signed char*)p)[i];
    case 5: return ((const unsigned char*)p)[i];
    case 6: return ((const int*)p)[i];
    case 7: return ((const long long*)p)[i];
    case 8: return ((const unsigned char*)p)[i] != 0 ? 1 : 0;
    default: {  // a float: as a cast to i64 (truncated, saturated, NaN 0)
      const double x = kiln_load(p, i, dtype);
      if (x != x) return 0;
      return x <= -9223372036854775808.0 ? (-9223372036854775807LL - 1)
             : x >= 9223372036854775808.0 ? 9223372036854775807LL
                                          : (long long)trunc(x);
    }
  }
}
__device__ void kiln_store_int(void* p, long long i, int dtype, long long x) {
  switch (dtype) {
    case 4: ((signed char*)p)[i] = (signed char)(unsigned char)((unsigned long long)x & 0xffu); break;
    case 5: ((unsigned char*)p)[i] = (unsigned char)((unsigned long long)x & 0xffu); break;
    case 6: ((int*)p)[i] = (int)(unsigned)((unsigned long long)x & 0xffffffffu); break;
    case 7: ((long long*)p)[i] = x; break;
    case 8: ((unsigned char*)p)[i] = x != 0 ? 1 : 0; break;
    case 0: ((float*)p)[i] = (float)x; break;  // one rounding
    case 3: ((double*)p)[i] = (double)x; break;
    default: {  // f16, bf16: through double and float by round-to-odd
      const unsigned long long u = x < 0 ? 0ull - (unsigned long long)x : (unsigned long long)x;
      double d = (double)x;
      if (u >= (1ull << 53)) {
        int drop = 0;
        while ((u >> drop) >= (1ull << 53)) ++drop;
        unsigned long long kept = u >> drop;
        if ((u & ((1ull << drop) - 1)) != 0) kept |= 1;
        d = (double)kept;
        for (int k = 0; k < drop; ++k) d *= 2.0;
        if (x < 0) d = -d;
      }
      kiln_store(p, i, dtype, d);
      break;
    }
  }
}
__device__ long long kiln_round_int(int dtype, long long x) {
  long long slot = 0;
  kiln_store_int(&slot, 0, dtype, x);
  return kiln_load_int(&slot, 0, dtype);
}
// A float as integer dtype `dtype` (truncated, saturated at its range, NaN 0), and an
// integer as float dtype `dtype` (rounded once): kiln.cast's conversions.
__device__ long long kiln_float_to_int(int dtype, double x) {
  long long slot = 0;
  kiln_store(&slot, 0, dtype, x);
  return kiln_load_int(&slot, 0, dtype);
}
__device__ double kiln_int_to_float(int dtype, long long x) {
  double slot = 0.0;
  kiln_store_int(&slot, 0, dtype, x);
  return kiln_load(&slot, 0, dtype);
}
// Integer arithmetic in two's complement (as the CPU's): wrapping at 64 bits.
__device__ long long kiln_wrap(unsigned long long x) { return (long long)x; }
__device__ long long kiln_idiv(long long a, long long b) {
  return b == 0 ? 0 : b == -1 ? kiln_wrap(0ull - (unsigned long long)a) : a / b;
}
__device__ long long kiln_ifmod(long long a, long long b) {
  return b == 0 || b == -1 ? 0 : a % b;
}
__device__ long long kiln_shl(long long a, long long b) {
  return b < 0 || b > 63 ? 0 : kiln_wrap((unsigned long long)a << b);
}
__device__ long long kiln_shr(long long a, long long b) {
  return b < 0 || b > 63 ? (a < 0 ? -1 : 0) : a >> b;
}
__device__ long long kiln_ipow(long long a, long long b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? ((-(b + 1)) % 2 == 0 ? -1 : 1) : 0;
  unsigned long long r = 1, base = (unsigned long long)a;
  for (unsigned long long e = (unsigned long long)b; e != 0; e >>= 1, base *= base)
    if (e & 1) r *= base;
  return kiln_wrap(r);
}
)";

/// The expression of scalar op \p s: in double on floating-point operands, in long long
/// (exact, wrapping) on integer and bool ones (the CPU interpreter's formulas).
std::string scalar_expression(const Scalar& s, const std::vector<bool>& is_int) {
  const CudaTerms terms{value(s.a), value(s.b), false};
  if (s.kind == ElementwiseKind::select)
    return cat("(", terms.a, " != 0 ? ", terms.b, " : ", value(s.c), ")");
  // kiln.cast: the operand; the conversion is the caller's (the rounding helpers).
  const auto write = is_int[s.a] ? s.form->cuda_int : s.form->cuda;
  if (write == nullptr)
    throw InternalError(cat("cuda_scalar_source: no ", is_int[s.a] ? "integer " : "",
                            "CUDA form for op ", s.result));
  return write(terms);
}

}  // namespace

CudaKernelShape cuda_kernel_shape(const Launch& l) {
  CudaKernelShape shape{l.out[0].shape.size(), {}};
  for (const View& in : l.in) {
    std::int64_t n = 1;
    for (std::int64_t d : in.shape) n *= d;
    shape.inputs.push_back(same_dims(in.shape, l.out[0].shape) ? InputAccess::same_shape
                           : n == 1                            ? InputAccess::scalar
                                                               : InputAccess::broadcast);
  }
  return shape;
}

std::string cuda_fused_source(const FusedProgram& p, const CudaKernelShape& shape,
                              const std::string& name) {
  if (!p.f32)
    throw UserError(
        cat("CUDA code generation: ", name,
            " is not an all-f32 elementwise body (cuda_scalar_source writes the others)"));
  if (shape.inputs.size() != p.args.size())
    throw InternalError(cat("cuda_fused_source: ", shape.inputs.size(), " input accesses for ",
                            p.args.size(), " arguments"));
  const std::size_t inputs = std::max<std::size_t>(1, p.args.size());
  const std::size_t rank = std::max<std::size_t>(1, shape.rank);
  std::ostringstream s;
  s << "// Generated by kiln: an elementwise body over " << p.args.size() << " inputs, rank "
    << shape.rank << ".\n"
    << "struct KilnFusedArgs {\n"
    << "  const float* in[" << inputs << "];\n"
    << "  long long strides[" << inputs << "][" << rank << "];  // broadcast to the output\n"
    << "  long long shape[" << rank << "];\n"
    << "  float* out;\n"
    << "  long long n;\n"
    << "};\n\n"
    << "extern \"C\" __global__ void " << name << "(KilnFusedArgs a) {\n"
    << "  const long long step = (long long)gridDim.x * blockDim.x;\n"
    << "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; "
       "i += step) {\n";
  bool broadcast = false;
  for (InputAccess access : shape.inputs) broadcast = broadcast || access == InputAccess::broadcast;
  if (broadcast) {  // offsets of the broadcast inputs, from the element's index
    for (std::size_t k = 0; k < shape.inputs.size(); ++k)
      if (shape.inputs[k] == InputAccess::broadcast) s << "    long long o" << k << " = 0;\n";
    s << "    long long rest = i;\n"
      << "    for (int d = " << shape.rank << " - 1; d >= 0; --d) {\n"
      << "      const long long c = rest % a.shape[d];\n"
      << "      rest /= a.shape[d];\n";
    for (std::size_t k = 0; k < shape.inputs.size(); ++k)
      if (shape.inputs[k] == InputAccess::broadcast)
        s << "      o" << k << " += c * a.strides[" << k << "][d];\n";
    s << "    }\n";
  }
  for (std::size_t k = 0; k < p.args.size(); ++k) {
    const char* at = shape.inputs[k] == InputAccess::same_shape ? "i"
                     : shape.inputs[k] == InputAccess::scalar   ? "0"
                                                                : nullptr;
    s << "    const float " << value(p.args[k]) << " = a.in[" << k << "]["
      << (at != nullptr ? std::string(at) : cat("o", k)) << "];\n";
  }
  for (const Scalar& op : p.ops)  // an f32 body: each op in float, as the CPU's array ops
    s << "    const float " << value(op.result) << " = "
      << op.form->cuda(CudaTerms{value(op.a), value(op.b), true}) << ";\n";
  s << "    a.out[i] = " << value(p.result) << ";\n"
    << "  }\n"
    << "}\n"
    << "#ifdef KILN_HOST_EMULATION\n"  // tests without a GPU run it on the host
    << "KILN_HOST_TRAMPOLINE(" << name << ", KilnFusedArgs)\n"
    << "#endif\n";
  return s.str();
}

std::string cuda_scalar_source(const FusedProgram& p, const CudaKernelShape& shape,
                               const std::vector<DType>& inputs, DType output,
                               const std::string& name) {
  if (shape.inputs.size() != p.args.size() || inputs.size() != p.args.size())
    throw InternalError(cat("cuda_scalar_source: ", shape.inputs.size(), " accesses and ",
                            inputs.size(), " dtypes for ", p.args.size(), " arguments"));
  const std::size_t k = std::max<std::size_t>(1, p.args.size());
  const std::size_t rank = std::max<std::size_t>(1, shape.rank);
  const auto code = [](DType d) { return static_cast<int>(d); };
  // Which values are integers (or bool): held as long long, exactly; the others as double.
  std::vector<bool> is_int(p.num_values, false);
  for (std::size_t a = 0; a < p.args.size(); ++a) is_int[p.args[a]] = !is_floating(inputs[a]);
  for (const Scalar& op : p.ops) is_int[op.result] = !is_floating(op.dtype);
  std::ostringstream s;
  s << "// Generated by kiln: an elementwise body over " << p.args.size()
    << " inputs of any dtype, rank " << shape.rank << ", floats in double, integers exactly.\n"
    << kScalarHelpers << "\nstruct KilnScalarArgs {\n"
    << "  const void* in[" << k << "];\n"
    << "  long long strides[" << k << "][" << rank << "];\n"
    << "  long long shape[" << rank << "];\n"
    << "  void* out;\n"
    << "  long long n;\n"
    << "};\n\n"
    << "extern \"C\" __global__ void " << name << "(KilnScalarArgs a) {\n"
    << "  const long long step = (long long)gridDim.x * blockDim.x;\n"
    << "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; "
       "i += step) {\n";
  for (std::size_t a = 0; a < p.args.size(); ++a) {
    std::string at = "i";
    if (shape.inputs[a] == InputAccess::scalar) {
      at = "0";
    } else if (shape.inputs[a] == InputAccess::broadcast) {
      s << "    long long o" << a << " = 0;\n"
        << "    for (long long d = " << shape.rank << " - 1, rest = i; d >= 0; --d) {\n"
        << "      o" << a << " += (rest % a.shape[d]) * a.strides[" << a << "][d];\n"
        << "      rest /= a.shape[d];\n"
        << "    }\n";
      at = cat("o", a);
    }
    const bool int_arg = is_int[p.args[a]];
    s << "    const " << (int_arg ? "long long " : "double ") << value(p.args[a])
      << (int_arg ? " = kiln_load_int(a.in[" : " = kiln_load(a.in[") << a << "], " << at << ", "
      << code(inputs[a]) << ");\n";
  }
  for (const Scalar& op : p.ops) {
    // The result's kind is its dtype's; an integer computed into a float (a cast) is
    // stored as that float with one rounding (kiln_round_int), and the other way round.
    const bool int_result = is_int[op.result];
    const bool int_operands = op.kind == ElementwiseKind::select ? int_result : is_int[op.a];
    const char* round = !int_operands && int_result && op.kind == ElementwiseKind::cast
                            ? "kiln_float_to_int"
                        : int_result   ? "kiln_round_int"
                        : int_operands ? "kiln_int_to_float"
                                       : "kiln_round";
    s << "    const " << (int_result ? "long long " : "double ") << value(op.result) << " = "
      << round << "(" << code(op.dtype) << ", " << scalar_expression(op, is_int) << ");\n";
  }
  s << "    " << (is_int[p.result] ? "kiln_store_int" : "kiln_store") << "(a.out, i, "
    << code(output) << ", " << value(p.result) << ");\n"
    << "  }\n"
    << "}\n"
    << "#ifdef KILN_HOST_EMULATION\n"
    << "KILN_HOST_TRAMPOLINE(" << name << ", KilnScalarArgs)\n"
    << "#endif\n";
  return s.str();
}

}  // namespace kiln::compiler
