#include "compiler/cuda/launches.hpp"

namespace kiln::compiler {

const std::string& cuda_library_source() {
  static const std::string source =
      R"(// kiln's CUDA kernels for the ops that are neither elementwise (generated) nor GEMMs
// (cuBLAS). Each entry takes one struct. Under KILN_HOST_EMULATION (tests without a GPU)
// a prelude supplies CUDA's built-ins and KILN_HOST_TRAMPOLINE a host launcher.
#ifndef KILN_HOST_EMULATION
#define KILN_HOST_TRAMPOLINE(name, Args)
#endif

// One element of `bytes` bytes from in[src] to out[i].
__device__ void kiln_copy_element(unsigned char* out, long long i, const unsigned char* in,
                                  long long src, int bytes) {
  switch (bytes) {
    case 1: out[i] = in[src]; break;
    case 2: ((unsigned short*)out)[i] = ((const unsigned short*)in)[src]; break;
    case 4: ((unsigned int*)out)[i] = ((const unsigned int*)in)[src]; break;
    default: ((unsigned long long*)out)[i] = ((const unsigned long long*)in)[src]; break;
  }
}

__device__ float kiln_inf() {
  union { unsigned u; float f; } v;
  v.u = 0x7f800000u;
  return v.f;
}

// The larger of a and b, a NaN if either is one (PyTorch's maximum; fmaxf drops NaN).
__device__ float kiln_max(float a, float b) { return (a != a || b != b) ? a + b : (a < b ? b : a); }
__device__ float kiln_min(float a, float b) { return (a != a || b != b) ? a + b : (b < a ? b : a); }

// v summed (or its maximum, or product) over the block's threads (blockDim.x a power of
// two <= 1024), through scratch; every thread gets the result. how: 0 sum, 1 max, 2 product.
__device__ float kiln_block_reduce(float v, int how, float* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float o = scratch[threadIdx.x + s], t = scratch[threadIdx.x];
      scratch[threadIdx.x] = how == 1 ? kiln_max(t, o) : how == 2 ? t * o : t + o;
    }
    __syncthreads();
  }
  const float r = scratch[0];
  __syncthreads();
  return r;
}

// Softmax, log-softmax, layer norm and RMS norm along one axis: element i of line
// (o, j) at o * len * inner + i * inner + j. One block per line.
struct KilnRowsArgs {
  const float* x;
  float* y;
  const float* gamma;  // norms: a scale per position along the axis
  const float* beta;   // layer norm: a shift per position
  long long outer, len, inner;
  float eps;
  int kind;  // 0 softmax, 1 log_softmax, 2 layer_norm, 3 rms_norm
};

extern "C" __global__ void kiln_rows(KilnRowsArgs a) {
  __shared__ float scratch[1024];
  const long long s = a.inner;
  for (long long line = blockIdx.x; line < a.outer * a.inner; line += gridDim.x) {
    const long long base = (line / a.inner) * a.len * a.inner + line % a.inner;
    const float* x = a.x + base;
    float* y = a.y + base;
    if (a.kind <= 1) {
      float m = -3.402823466e+38f;  // -FLT_MAX: NVRTC has no math.h
      for (long long i = threadIdx.x; i < a.len; i += blockDim.x) m = kiln_max(m, x[i * s]);
      m = kiln_block_reduce(m, 1, scratch);
      float sum = 0.0f;
      for (long long i = threadIdx.x; i < a.len; i += blockDim.x) sum += expf(x[i * s] - m);
      sum = kiln_block_reduce(sum, 0, scratch);
      if (a.kind == 0) {
        for (long long i = threadIdx.x; i < a.len; i += blockDim.x)
          y[i * s] = expf(x[i * s] - m) / sum;
      } else {
        const float shift = m + logf(sum);
        for (long long i = threadIdx.x; i < a.len; i += blockDim.x) y[i * s] = x[i * s] - shift;
      }
    } else {
      float mean = 0.0f;
      if (a.kind == 2) {
        float sum = 0.0f;
        for (long long i = threadIdx.x; i < a.len; i += blockDim.x) sum += x[i * s];
        mean = kiln_block_reduce(sum, 0, scratch) / (float)a.len;
      }
      float var = 0.0f;
      for (long long i = threadIdx.x; i < a.len; i += blockDim.x) {
        const float d = x[i * s] - mean;
        var += d * d;
      }
      var = kiln_block_reduce(var, 0, scratch) / (float)a.len;
      const float scale = 1.0f / sqrtf(var + a.eps);
      for (long long i = threadIdx.x; i < a.len; i += blockDim.x)
        y[i * s] = (x[i * s] - mean) * scale * a.gamma[i] + (a.beta ? a.beta[i] : 0.0f);
    }
  }
}
KILN_HOST_TRAMPOLINE(kiln_rows, KilnRowsArgs)

// For each index of `shape`: out[out_offset + index . out_strides] =
// in[in_offset + index . in_strides] (transpose, broadcast_to, slice, the pieces of concat
// and split): any element size, offsets and strides in elements.
struct KilnCopyArgs {
  const unsigned char* in;
  unsigned char* out;
  long long n;
  long long in_offset, out_offset;
  long long shape[8];
  long long in_strides[8];
  long long out_strides[8];
  int rank;
  int bytes;
};

extern "C" __global__ void kiln_copy(KilnCopyArgs a) {
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += step) {
    long long rest = i, src = a.in_offset, dst = a.out_offset;
    for (int d = a.rank - 1; d >= 0; --d) {
      const long long c = rest % a.shape[d];
      rest /= a.shape[d];
      src += c * a.in_strides[d];
      dst += c * a.out_strides[d];
    }
    kiln_copy_element(a.out, dst, a.in, src, a.bytes);
  }
}
KILN_HOST_TRAMPOLINE(kiln_copy, KilnCopyArgs)

// Sum, mean, max, min or product over some dims: y[o] over the elements whose kept dims give o
// (offsets through kept_* and red_* shapes and strides of x). One block per output.
struct KilnReduceArgs {
  const float* x;
  float* y;
  long long outputs, count;
  long long kept_shape[8], kept_strides[8];
  long long red_shape[8], red_strides[8];
  int kept_rank, red_rank;
  int kind;  // 0 sum, 1 mean, 2 max, 3 min, 4 product
};

extern "C" __global__ void kiln_reduce(KilnReduceArgs a) {
  __shared__ float scratch[1024];
  const bool is_max = a.kind == 2, is_min = a.kind == 3, is_prod = a.kind == 4;
  for (long long o = blockIdx.x; o < a.outputs; o += gridDim.x) {
    long long rest = o, base = 0;
    for (int d = a.kept_rank - 1; d >= 0; --d) {
      base += (rest % a.kept_shape[d]) * a.kept_strides[d];
      rest /= a.kept_shape[d];
    }
    // (Max and min start at -inf and inf; an empty axis never gets here: it is refused.)
    float acc = is_max ? -kiln_inf() : is_min ? kiln_inf() : is_prod ? 1.0f : 0.0f;
    for (long long r = threadIdx.x; r < a.count; r += blockDim.x) {
      long long rr = r, at = base;
      for (int d = a.red_rank - 1; d >= 0; --d) {
        at += (rr % a.red_shape[d]) * a.red_strides[d];
        rr /= a.red_shape[d];
      }
      const float v = a.x[at];
      acc = is_max ? kiln_max(acc, v) : is_min ? kiln_min(acc, v) : is_prod ? acc * v : acc + v;
    }
    acc = is_min ? -kiln_block_reduce(-acc, 1, scratch)
                 : kiln_block_reduce(acc, is_max ? 1 : is_prod ? 2 : 0, scratch);
    if (threadIdx.x == 0) a.y[o] = a.kind == 1 ? acc / (float)a.count : acc;
  }
}
KILN_HOST_TRAMPOLINE(kiln_reduce, KilnReduceArgs)

// The index of the largest element of each line (o, j) along an axis, as the CPU finds
// it (PyTorch's rule): the first NaN if there is one, else the first of the largest
// values. One block per line; each thread keeps its best (value, index), a NaN ranking
// above every number, then the block combines them (the better, or on a tie the smaller
// index).
struct KilnArgmaxArgs {
  const float* x;
  long long* y;
  long long outer, len, inner;
};

extern "C" __global__ void kiln_argmax(KilnArgmaxArgs a) {
  __shared__ float best_value[1024];
  __shared__ long long best_index[1024];
  const long long none = 9223372036854775807LL;
  for (long long line = blockIdx.x; line < a.outer * a.inner; line += gridDim.x) {
    const float* x = a.x + (line / a.inner) * a.len * a.inner + line % a.inner;
    float v = 0.0f;
    long long at = none;
    for (long long i = threadIdx.x; i < a.len; i += blockDim.x) {
      const float e = x[i * a.inner];
      if (at == none || (v == v && (e > v || e != e))) {
        v = e;
        at = i;
      }
    }
    best_value[threadIdx.x] = v;
    best_index[threadIdx.x] = at;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) {
        const float ov = best_value[threadIdx.x + s], mv = best_value[threadIdx.x];
        const long long oi = best_index[threadIdx.x + s];
        const long long mi = best_index[threadIdx.x];
        const bool o_nan = ov != ov, m_nan = mv != mv;
        const bool better = o_nan != m_nan ? o_nan : (o_nan || ov == mv ? oi < mi : ov > mv);
        if (oi != none && (mi == none || better)) {
          best_value[threadIdx.x] = ov;
          best_index[threadIdx.x] = oi;
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) a.y[line] = best_index[0] == none ? 0 : best_index[0];
    __syncthreads();
  }
}
KILN_HOST_TRAMPOLINE(kiln_argmax, KilnArgmaxArgs)

// out[o, t, j] = x[o, ids[t], j] (x viewed as outer x axis_len x inner). An index outside
// [0, axis_len) writes zeros and is reported in error: {1, index, axis_len}.
struct KilnGatherArgs {
  const unsigned char* x;
  const void* ids;
  unsigned char* out;
  long long* error;
  long long outer, axis_len, count, inner;
  int id_bytes;
  int bytes;
};

extern "C" __global__ void kiln_gather(KilnGatherArgs a) {
  const long long n = a.outer * a.count * a.inner;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    const long long j = i % a.inner, t = (i / a.inner) % a.count, o = i / (a.inner * a.count);
    const long long id =
        a.id_bytes == 8 ? ((const long long*)a.ids)[t] : (long long)((const int*)a.ids)[t];
    if (id < 0 || id >= a.axis_len) {
      a.error[1] = id;
      a.error[2] = a.axis_len;
      a.error[0] = 1;
      for (int b = 0; b < a.bytes; ++b) a.out[i * a.bytes + b] = 0;
      continue;
    }
    kiln_copy_element(a.out, i, a.x, (o * a.axis_len + id) * a.inner + j, a.bytes);
  }
}
KILN_HOST_TRAMPOLINE(kiln_gather, KilnGatherArgs)

// Index i of the indices (i32 or i64), counted from the end when negative; one outside
// [-n, n) is reported in error ({code, index, n}: code names the op) and read as 0.
__device__ long long kiln_index(const void* ids, long long i, int id_bytes, long long n,
                                long long* error, long long code) {
  const long long id = id_bytes == 8 ? ((const long long*)ids)[i] : (long long)((const int*)ids)[i];
  if (id < -n || id >= n) {
    error[1] = id;
    error[2] = n;
    error[0] = code;
    return 0;
  }
  return id < 0 ? id + n : id;
}

// out[i] = x[i's coordinates (in the indices' shape), the axis's replaced by ids[i]].
struct KilnGatherElementsArgs {
  const unsigned char* x;
  const void* ids;
  unsigned char* out;
  long long* error;
  long long n, axis_len;             // elements of the indices (and of out); x's axis
  long long shape[8], x_strides[8];  // the indices' shape; x's strides
  int rank, axis, id_bytes, bytes;
};

extern "C" __global__ void kiln_gather_elements(KilnGatherElementsArgs a) {
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += step) {
    long long rest = i, from = 0;
    for (int d = a.rank - 1; d >= 0; --d) {
      long long c = rest % a.shape[d];
      rest /= a.shape[d];
      if (d == a.axis) c = kiln_index(a.ids, i, a.id_bytes, a.axis_len, a.error, 2);
      from += c * a.x_strides[d];
    }
    kiln_copy_element(a.out, i, a.x, from, a.bytes);
  }
}
KILN_HOST_TRAMPOLINE(kiln_gather_elements, KilnGatherElementsArgs)

// out[t, j] = x[batch of t, the k indices of tuple t, j]: each tuple names a slice of
// `inner` elements of x after its batch dims.
struct KilnGatherNdArgs {
  const unsigned char* x;
  const void* ids;
  unsigned char* out;
  long long* error;
  long long n, inner, tuples_per_batch, batch_elements;
  long long dims[8];  // the sizes of the k dims each tuple indexes
  int k, id_bytes, bytes;
};

extern "C" __global__ void kiln_gather_nd(KilnGatherNdArgs a) {
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += step) {
    const long long t = i / a.inner, j = i % a.inner;
    long long offset = 0;
    for (int m = 0; m < a.k; ++m)
      offset = offset * a.dims[m] + kiln_index(a.ids, t * a.k + m, a.id_bytes, a.dims[m], a.error, 3);
    const long long from = (t / a.tuples_per_batch) * a.batch_elements + offset * a.inner + j;
    kiln_copy_element(a.out, i, a.x, from, a.bytes);
  }
}
KILN_HOST_TRAMPOLINE(kiln_gather_nd, KilnGatherNdArgs)

// Running sums along an axis, one thread a line (line = o * inner + j, element s of it at
// o * len * inner + s * inner + j): floats in double from -0.0 (a lone -0.0 stays -0.0;
// the exclusive first is +0), each result rounded once; integers wrap. kind: 0 f32,
// 1 f64, 2 i32, 3 i64.
struct KilnCumsumArgs {
  const unsigned char* x;
  unsigned char* y;
  long long lines, len, inner;
  int kind, exclusive, reverse;
};

__device__ void kiln_cumsum_store(unsigned char* y, long long at, int kind, double f,
                                  unsigned long long u) {
  switch (kind) {
    case 0: ((float*)y)[at] = (float)f; break;
    case 1: ((double*)y)[at] = f; break;
    case 2: ((int*)y)[at] = (int)(unsigned)u; break;
    default: ((long long*)y)[at] = (long long)u; break;
  }
}

extern "C" __global__ void kiln_cumsum(KilnCumsumArgs a) {
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long line = (long long)blockIdx.x * blockDim.x + threadIdx.x; line < a.lines;
       line += step) {
    const long long base = (line / a.inner) * a.len * a.inner + line % a.inner;
    double f = -0.0;
    unsigned long long u = 0;
    for (long long s = 0; s < a.len; ++s) {
      const long long at = base + (a.reverse ? a.len - 1 - s : s) * a.inner;
      if (a.exclusive) kiln_cumsum_store(a.y, at, a.kind, s == 0 ? 0.0 : f, u);
      switch (a.kind) {
        case 0: f += (double)((const float*)a.x)[at]; break;
        case 1: f += ((const double*)a.x)[at]; break;
        case 2: u += (unsigned long long)(long long)((const int*)a.x)[at]; break;
        default: u += (unsigned long long)((const long long*)a.x)[at]; break;
      }
      if (!a.exclusive) kiln_cumsum_store(a.y, at, a.kind, f, u);
    }
  }
}
KILN_HOST_TRAMPOLINE(kiln_cumsum, KilnCumsumArgs)

// out = x, then each tuple t in order writes (or combines) its slice of `inner` updates at
// the k indices it holds: one block, the slice's elements over its threads, the tuples one
// after another (so that the last of several writes wins and reductions combine in order,
// as on the CPU). combine: 0 none (bytes copied), 1 add, 2 mul, 3 max, 4 min; kind as for
// cumsum (for combine != 0). An index out of range is reported ({4, index, n}), its tuple
// skipped.
struct KilnScatterNdArgs {
  const unsigned char* x;
  const void* ids;
  const unsigned char* up;
  unsigned char* out;
  long long* error;
  long long total, tuples, inner;
  long long dims[8];
  int k, id_bytes, bytes, combine, kind;
};

__device__ double kiln_combine_f(double a, double b, int combine) {
  if (combine == 1) return a + b;
  if (combine == 2) return a * b;
  if (a != a || b != b) return a != a ? a : b;  // NaN wins max and min
  return combine == 3 ? (a < b ? b : a) : (b < a ? b : a);
}

__device__ long long kiln_combine_i(long long a, long long b, int combine) {
  const unsigned long long ua = (unsigned long long)a, ub = (unsigned long long)b;
  if (combine == 1) return (long long)(ua + ub);
  if (combine == 2) return (long long)(ua * ub);
  return combine == 3 ? (a < b ? b : a) : (b < a ? b : a);
}

extern "C" __global__ void kiln_scatter_nd(KilnScatterNdArgs a) {
  if (a.out != a.x)
    for (long long i = threadIdx.x; i < a.total; i += blockDim.x)
      kiln_copy_element(a.out, i, a.x, i, a.bytes);
  __syncthreads();
  for (long long t = 0; t < a.tuples; ++t) {
    long long offset = 0;
    bool bad = false;
    for (int m = 0; m < a.k; ++m) {
      const long long id = a.id_bytes == 8 ? ((const long long*)a.ids)[t * a.k + m]
                                           : (long long)((const int*)a.ids)[t * a.k + m];
      if (id < -a.dims[m] || id >= a.dims[m]) {
        if (threadIdx.x == 0 && a.error[0] == 0) {  // the first, as the CPU reports
          a.error[1] = id;
          a.error[2] = a.dims[m];
          a.error[0] = 4;
        }
        bad = true;
      }
      offset = offset * a.dims[m] + (id < 0 ? id + a.dims[m] : id);
    }
    if (!bad)
      for (long long e = threadIdx.x; e < a.inner; e += blockDim.x) {
        const long long at = offset * a.inner + e, u = t * a.inner + e;
        switch (a.combine == 0 ? -1 : a.kind) {
          case -1: kiln_copy_element(a.out, at, a.up, u, a.bytes); break;
          case 0: ((float*)a.out)[at] = (float)kiln_combine_f(((float*)a.out)[at], ((const float*)a.up)[u], a.combine); break;
          case 1: ((double*)a.out)[at] = kiln_combine_f(((double*)a.out)[at], ((const double*)a.up)[u], a.combine); break;
          case 2: ((int*)a.out)[at] = (int)kiln_combine_i(((int*)a.out)[at], ((const int*)a.up)[u], a.combine); break;
          default: ((long long*)a.out)[at] = kiln_combine_i(((long long*)a.out)[at], ((const long long*)a.up)[u], a.combine); break;
        }
      }
    __syncthreads();
  }
}
KILN_HOST_TRAMPOLINE(kiln_scatter_nd, KilnScatterNdArgs)

// The k best of each line along an axis (line = o * inner + j, element s at
// o * n * inner + s * inner + j), one thread a line: a heap of the k best indices seen,
// kept in the indices' own output line, then sorted in place, best first (as the CPU
// kernel): NaN above every number, ties by the lower index. kind as for cumsum.
struct KilnTopKArgs {
  const unsigned char* x;
  unsigned char* values;
  long long* indices;
  long long lines, n, k, inner;
  int kind, largest, bytes;
};

__device__ bool kiln_top_k_before(const KilnTopKArgs& a, long long base, long long p,
                                  long long q) {
  const long long at_p = base + p * a.inner, at_q = base + q * a.inner;
  if (a.kind >= 2) {
    const long long u = a.kind == 2 ? ((const int*)a.x)[at_p] : ((const long long*)a.x)[at_p];
    const long long v = a.kind == 2 ? ((const int*)a.x)[at_q] : ((const long long*)a.x)[at_q];
    if (u != v) return a.largest ? u > v : u < v;
    return p < q;
  }
  const double u = a.kind == 0 ? (double)((const float*)a.x)[at_p] : ((const double*)a.x)[at_p];
  const double v = a.kind == 0 ? (double)((const float*)a.x)[at_q] : ((const double*)a.x)[at_q];
  const bool un = u != u, vn = v != v;
  if (un != vn) return a.largest ? un : vn;
  if (!un && u != v) return a.largest ? u > v : u < v;
  return p < q;
}

__device__ void kiln_top_k_sift_down(const KilnTopKArgs& a, long long base, long long* h,
                                     long long j, long long count) {
  for (;;) {
    long long worst = j;
    for (long long c = 2 * j + 1; c <= 2 * j + 2 && c < count; ++c)
      if (kiln_top_k_before(a, base, h[worst * a.inner], h[c * a.inner])) worst = c;
    if (worst == j) return;
    const long long t = h[j * a.inner];
    h[j * a.inner] = h[worst * a.inner];
    h[worst * a.inner] = t;
    j = worst;
  }
}

extern "C" __global__ void kiln_top_k(KilnTopKArgs a) {
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long line = (long long)blockIdx.x * blockDim.x + threadIdx.x; line < a.lines;
       line += step) {
    const long long o = line / a.inner, j = line % a.inner;
    const long long base = o * a.n * a.inner + j;
    long long* h = a.indices + o * a.k * a.inner + j;  // slot m at h[m * inner]
    if (a.k == 0) continue;
    for (long long i = 0; i < a.n; ++i) {
      if (i < a.k) {
        long long m = i;
        h[m * a.inner] = i;
        while (m > 0 && kiln_top_k_before(a, base, h[((m - 1) / 2) * a.inner], h[m * a.inner])) {
          const long long p = (m - 1) / 2, t = h[p * a.inner];
          h[p * a.inner] = h[m * a.inner];
          h[m * a.inner] = t;
          m = p;
        }
      } else if (kiln_top_k_before(a, base, i, h[0])) {
        h[0] = i;
        kiln_top_k_sift_down(a, base, h, 0, a.k);
      }
    }
    for (long long m = a.k - 1; m >= 1; --m) {
      const long long t = h[0];
      h[0] = h[m * a.inner];
      h[m * a.inner] = t;
      kiln_top_k_sift_down(a, base, h, 0, m);
    }
    for (long long m = 0; m < a.k; ++m)
      kiln_copy_element(a.values, o * a.k * a.inner + j + m * a.inner, a.x,
                        base + h[m * a.inner] * a.inner, a.bytes);
  }
}
KILN_HOST_TRAMPOLINE(kiln_top_k, KilnTopKArgs)
// x with each update written (or combined) at its index along an axis (ONNX's
// ScatterElements): updates that can meet differ only along the axis, so one thread takes
// each line of the updates across the axis (line = the other coordinates) and applies its
// updates in order, as the CPU does: the last of several writes wins, reductions combine
// in order. One block: out = x first. combine and kind as for scatter_nd; an index
// outside [-n, n) is reported ({5, index, n}) and its update skipped.
struct KilnScatterElementsArgs {
  const unsigned char* x;
  const void* ids;
  const unsigned char* up;
  unsigned char* out;
  long long* error;
  long long total, lines, len, axis_len;  // len: updates along the axis; axis_len: x's
  long long shape[8], out_strides[8];     // the updates' shape; x's strides
  int rank, axis, id_bytes, bytes, combine, kind;
};

extern "C" __global__ void kiln_scatter_elements(KilnScatterElementsArgs a) {
  if (a.out != a.x)
    for (long long i = threadIdx.x; i < a.total; i += blockDim.x)
      kiln_copy_element(a.out, i, a.x, i, a.bytes);
  __syncthreads();
  long long up_stride = 1;  // the updates' stride along the axis
  for (int d = a.rank - 1; d > a.axis; --d) up_stride *= a.shape[d];
  for (long long line = threadIdx.x; line < a.lines; line += blockDim.x) {
    long long rest = line, up_base = 0, out_base = 0, stride = 1;
    for (int d = a.rank - 1; d >= 0; --d) {
      if (d != a.axis) {
        const long long c = rest % a.shape[d];
        rest /= a.shape[d];
        up_base += c * stride;
        out_base += c * a.out_strides[d];
      }
      stride *= a.shape[d];
    }
    for (long long s = 0; s < a.len; ++s) {
      const long long u = up_base + s * up_stride;
      const long long id = a.id_bytes == 8 ? ((const long long*)a.ids)[u]
                                           : (long long)((const int*)a.ids)[u];
      if (id < -a.axis_len || id >= a.axis_len) {
        a.error[1] = id;
        a.error[2] = a.axis_len;
        a.error[0] = 5;
        continue;
      }
      const long long at = out_base + (id < 0 ? id + a.axis_len : id) * a.out_strides[a.axis];
      switch (a.combine == 0 ? -1 : a.kind) {
        case -1: kiln_copy_element(a.out, at, a.up, u, a.bytes); break;
        case 0: ((float*)a.out)[at] = (float)kiln_combine_f(((float*)a.out)[at], ((const float*)a.up)[u], a.combine); break;
        case 1: ((double*)a.out)[at] = kiln_combine_f(((double*)a.out)[at], ((const double*)a.up)[u], a.combine); break;
        case 2: ((int*)a.out)[at] = (int)kiln_combine_i(((int*)a.out)[at], ((const int*)a.up)[u], a.combine); break;
        default: ((long long*)a.out)[at] = kiln_combine_i(((long long*)a.out)[at], ((const long long*)a.up)[u], a.combine); break;
      }
    }
  }
}
KILN_HOST_TRAMPOLINE(kiln_scatter_elements, KilnScatterElementsArgs)

// conv, conv_transpose, max_pool and avg_pool over f32 [N, C, spatial...] buffers, one
// thread per output element; the spatial dims right-aligned in three (leading ones of
// size 1), as the CPU's WindowGeometry. conv: the group's input channels times
// w [M, C / groups, K...], plus the bias; conv_transpose: every input whose tap lands on
// the element, times w [C, M / groups, K...], plus the bias; max_pool: the largest tap
// inside x (a NaN wins); avg_pool: the mean of the taps inside x, or with include_pad the
// sum over the taps inside the padded input.
struct KilnWindowArgs {
  const float* x;
  const float* w;     // convs
  const float* bias;  // convs; null without one
  float* y;
  long long n, c, m, groups, count;
  long long in[3], out[3], kernel[3], stride[3], dilation[3], pad_begin[3], pad_end[3];
  int kind;  // 0 conv, 1 conv_transpose, 2 max_pool, 3 avg_pool
  int include_pad;
};

// The taps k in [0, kernel) of a window from start whose positions start + k dilation lie
// in [lo, hi): [*first, *last), empty when none do (worked out, not scanned: a hostile
// kernel_shape may have 2^31 taps).
__device__ void kiln_tap_range(long long start, long long dilation, long long kernel,
                               long long lo, long long hi, long long* first, long long* last) {
  *first = *last = 0;
  if (hi <= lo) return;
  const long long below = lo - start, above = hi - 1 - start;
  if (above < 0) return;
  const long long f = below <= 0 ? 0 : (below + dilation - 1) / dilation;
  const long long l = above / dilation + 1 < kernel ? above / dilation + 1 : kernel;
  if (f < l) { *first = f; *last = l; }
}

extern "C" __global__ void kiln_window(KilnWindowArgs a) {
  const long long out_plane = a.out[0] * a.out[1] * a.out[2];
  const long long in_plane = a.in[0] * a.in[1] * a.in[2];
  const long long taps = a.kernel[0] * a.kernel[1] * a.kernel[2];
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {
    const long long pos = i % out_plane, ch = i / out_plane % a.m, n = i / out_plane / a.m;
    const long long o[3] = {pos / (a.out[1] * a.out[2]), pos / a.out[2] % a.out[1], pos % a.out[2]};
    long long lo[3], hi[3], start[3], padded = 1;
    for (int d = 0; d < 3; ++d) {
      start[d] = o[d] * a.stride[d] - a.pad_begin[d];
      kiln_tap_range(start[d], a.dilation[d], a.kernel[d], 0, a.in[d], &lo[d], &hi[d]);
      long long p0, p1;
      kiln_tap_range(start[d], a.dilation[d], a.kernel[d], -a.pad_begin[d],
                     a.in[d] + a.pad_end[d], &p0, &p1);
      padded *= p1 - p0;
    }
    float acc = a.kind == 2 ? -kiln_inf() : 0.0f;
    if (a.kind >= 2) {  // pools: channel ch of x (m == c)
      const float* x = a.x + (n * a.c + ch) * in_plane;
      long long inside = 0;
      for (long long k0 = lo[0]; k0 < hi[0]; ++k0)
        for (long long k1 = lo[1]; k1 < hi[1]; ++k1)
          for (long long k2 = lo[2]; k2 < hi[2]; ++k2) {
            const long long i0 = start[0] + k0 * a.dilation[0], i1 = start[1] + k1 * a.dilation[1],
                            i2 = start[2] + k2 * a.dilation[2];
            const float v = x[(i0 * a.in[1] + i1) * a.in[2] + i2];
            ++inside;
            if (a.kind == 3) acc += v;
            else if (v > acc || v != v) acc = v;  // a NaN wins, and stays
          }
      if (a.kind == 3) acc /= (float)(a.include_pad ? padded : inside);
    } else if (a.kind == 0) {  // conv
      const long long cg = a.c / a.groups, mg = a.m / a.groups, first = ch / mg * cg;
      for (long long c = 0; c < cg; ++c) {
        const float* x = a.x + (n * a.c + first + c) * in_plane;
        const float* w = a.w + (ch * cg + c) * taps;
        for (long long k0 = lo[0]; k0 < hi[0]; ++k0)
          for (long long k1 = lo[1]; k1 < hi[1]; ++k1)
            for (long long k2 = lo[2]; k2 < hi[2]; ++k2) {
              const long long i0 = start[0] + k0 * a.dilation[0],
                              i1 = start[1] + k1 * a.dilation[1],
                              i2 = start[2] + k2 * a.dilation[2];
              acc += x[(i0 * a.in[1] + i1) * a.in[2] + i2] *
                     w[(k0 * a.kernel[1] + k1) * a.kernel[2] + k2];
            }
      }
    } else {  // conv_transpose: input i lands on o through tap k when i stride - pad + k dilation = o
      const long long cg = a.c / a.groups, mg = a.m / a.groups, first = ch / mg * cg, j = ch % mg;
      for (long long c = first; c < first + cg; ++c) {
        const float* x = a.x + (n * a.c + c) * in_plane;
        const float* w = a.w + (c * mg + j) * taps;
        for (long long k0 = 0; k0 < a.kernel[0]; ++k0) {
          const long long t0 = o[0] + a.pad_begin[0] - k0 * a.dilation[0];
          if (t0 < 0 || t0 % a.stride[0] != 0 || t0 / a.stride[0] >= a.in[0]) continue;
          for (long long k1 = 0; k1 < a.kernel[1]; ++k1) {
            const long long t1 = o[1] + a.pad_begin[1] - k1 * a.dilation[1];
            if (t1 < 0 || t1 % a.stride[1] != 0 || t1 / a.stride[1] >= a.in[1]) continue;
            for (long long k2 = 0; k2 < a.kernel[2]; ++k2) {
              const long long t2 = o[2] + a.pad_begin[2] - k2 * a.dilation[2];
              if (t2 < 0 || t2 % a.stride[2] != 0 || t2 / a.stride[2] >= a.in[2]) continue;
              acc += x[((t0 / a.stride[0]) * a.in[1] + t1 / a.stride[1]) * a.in[2] +
                       t2 / a.stride[2]] *
                     w[(k0 * a.kernel[1] + k1) * a.kernel[2] + k2];
            }
          }
        }
      }
    }
    if (a.kind <= 1 && a.bias) acc += a.bias[ch];
    a.y[i] = acc;
  }
}
KILN_HOST_TRAMPOLINE(kiln_window, KilnWindowArgs)
// Resize (ONNX's), one thread per output element, over the taps the CPU works out
// (`ResizeTables`, one device copy per plan): an element outside tf_crop_and_resize's crop
// is the extrapolation value; nearest copies the one element its taps pick, bit for bit;
// linear and cubic sum, in double as the CPU does and in its order, each combination of
// the other axes' taps (weight 0 skipped) times the sum over the last axis's taps.
// kind: 0 f32, 1 f64 (what linear, cubic and the extrapolation value compute in).
struct KilnResizeArgs {
  const unsigned char* x;
  unsigned char* y;
  const long long* tables;  // offsets (i64), weights (f64 bits) and outside flags per axis
  long long n;
  long long shape[8], taps[8], at[8];
  double extrapolation;
  int rank, nearest, kind, bytes;
};

__device__ void kiln_store_real(unsigned char* y, long long i, int kind, double v) {
  if (kind == 0) ((float*)y)[i] = (float)v;
  else ((double*)y)[i] = v;
}

extern "C" __global__ void kiln_resize(KilnResizeArgs a) {
  const double* weights = (const double*)a.tables;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += step) {
    long long c[8], rest = i;
    bool outside = false;
    for (int d = a.rank - 1; d >= 0; --d) {
      c[d] = rest % a.shape[d];
      rest /= a.shape[d];
      const long long cells = a.shape[d] * a.taps[d];
      outside = outside || a.tables[a.at[d] + 2 * cells + c[d]] != 0;
    }
    if (outside) {
      kiln_store_real(a.y, i, a.kind, a.extrapolation);
      continue;
    }
    if (a.nearest) {  // one tap on every axis
      long long from = 0;
      for (int d = 0; d < a.rank; ++d) from += a.tables[a.at[d] + c[d]];
      kiln_copy_element(a.y, i, a.x, from, a.bytes);
      continue;
    }
    const int last = a.rank - 1;
    long long combos = 1;
    for (int d = 0; d < last; ++d) combos *= a.taps[d];
    const long long last_cells = a.shape[last] * a.taps[last];
    double sum = 0;
    for (long long combo = 0; combo < combos; ++combo) {
      double w = 1;
      long long from = 0, r = combo;
      for (int d = last - 1; d >= 0; --d) {
        const long long k = c[d] * a.taps[d] + r % a.taps[d];
        r /= a.taps[d];
        const long long cells = a.shape[d] * a.taps[d];
        w *= weights[a.at[d] + cells + k];
        from += a.tables[a.at[d] + k];
      }
      if (w == 0) continue;  // reads nothing, not even a NaN
      double across = 0;
      for (long long j = 0; j < a.taps[last]; ++j) {
        const long long k = c[last] * a.taps[last] + j;
        const double wl = weights[a.at[last] + last_cells + k];
        if (wl == 0) continue;
        const long long at = from + a.tables[a.at[last] + k];
        across += wl * (a.kind == 0 ? (double)((const float*)a.x)[at] : ((const double*)a.x)[at]);
      }
      sum += w * across;
    }
    kiln_store_real(a.y, i, a.kind, sum);
  }
}
KILN_HOST_TRAMPOLINE(kiln_resize, KilnResizeArgs)
)";
  return source;
}

}  // namespace kiln::compiler
