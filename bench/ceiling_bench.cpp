// The machine's ceilings, measured, so that a model's speed can be read as a fraction of
// what the hardware allows in the same minutes (the peer benchmarks run this interleaved
// with the systems they compare; see bench/peers/README.md):
//   fma   f32 multiply-adds per second: independent FMA chains in registers on each thread
//         (AVX-512, else AVX2; no memory traffic): no f32 matmul can run faster;
//   amx   bf16 multiply-adds per second on AMX tiles (tdpbf16ps on tiles loaded once);
//   read  bytes per second read from a buffer of --bytes (the model's weights: a buffer of
//         that size, read again and again, sits where the weights sit between calls),
//         each thread reading its own slice with 512-bit (or 256-bit) loads.
// Each thread runs the probe on its own; a call is timed from the start of the first to the
// end of the last (starting the threads included: tens of microseconds), over enough work
// to take milliseconds.
//
//   bench_ceiling --probe fma|amx|read [--threads N] [--bytes B] [--calls 20]
//       prints the probe's median rate over --calls calls;
//   bench_ceiling ... --serve
//       for a harness: prints "work AMOUNT flop|byte DESCRIPTION", then "ready"; each
//       line N read from standard input is answered with "times t1 ... tN" (milliseconds,
//       one per call); end of input ends.

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "bench_args.hpp"

namespace {

using Clock = std::chrono::steady_clock;

/// One thread's share of a probe: runs it, returns nothing (the work is fixed).
using Probe = std::function<void(int thread)>;

// ---- f32 FMA --------------------------------------------------------------------------

constexpr std::int64_t kFmaIterations = std::int64_t{1} << 19;  // milliseconds a call

/// Independent accumulators: more than the FMA latency times the FMA ports, so that the
/// units never wait for a result.
constexpr int kZmmChains = 24, kYmmChains = 12;

/// The sum of the f32 lanes of the vector \p v, any width (not _mm512_reduce_add_ps: GCC
/// 12 warns inside it). By reference: a vector passed by value to code built without its
/// instruction set would change the calling convention.
template <class Vector>
float lane_sum(const Vector& v) {
  float lanes[sizeof(Vector) / sizeof(float)];
  std::memcpy(lanes, &v, sizeof lanes);
  float sum = 0;
  for (float x : lanes) sum += x;
  return sum;
}

__attribute__((target("avx512f"))) float fma_avx512() {
  __m512 acc[kZmmChains];
  for (int i = 0; i < kZmmChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
  for (std::int64_t it = 0; it < kFmaIterations; ++it)
#pragma GCC unroll 32  // every chain in a register of its own
    for (int i = 0; i < kZmmChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  for (int i = 1; i < kZmmChains; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  return lane_sum(acc[0]);
}

__attribute__((target("avx2,fma"))) float fma_avx2() {
  __m256 acc[kYmmChains];
  for (int i = 0; i < kYmmChains; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
  for (std::int64_t it = 0; it < kFmaIterations; ++it)
#pragma GCC unroll 32  // every chain in a register of its own
    for (int i = 0; i < kYmmChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  for (int i = 1; i < kYmmChains; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  return lane_sum(acc[0]);
}

std::atomic<float> g_sink{0};  // results land here, so that no probe is optimised away

// ---- AMX bf16 -------------------------------------------------------------------------

constexpr std::int64_t kAmxIterations = std::int64_t{1} << 17;
/// Multiply-adds of one tdpbf16ps on full tiles: 16 x 16 outputs, each a sum of 32 products.
constexpr double kAmxMacsPerOp = 16.0 * 16 * 32;

/// The tile configuration of palette 1: eight tiles of 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1, start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};

/// Whether the CPU has AMX-BF16 and Linux lets this process use the tile data (asked for
/// once, as Linux requires before a process's first tile instruction).
bool amx_usable(std::string& why) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 22))) {
    why = "this CPU has no AMX-BF16 (CPUID leaf 7: AMX-TILE and AMX-BF16 not both set)";
    return false;
  }
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
    why = std::string("Linux refused AMX tile data to this process (arch_prctl: ") +
          std::strerror(errno) + "); a kernel older than 5.16 has no AMX support";
    return false;
  }
  return true;
}

__attribute__((target("amx-tile,amx-bf16"))) float amx_bf16() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = 16;
    config.bytes_per_row[t] = 64;
  }
  _tile_loadconfig(&config);
  alignas(64) std::uint16_t operand[16 * 32];
  std::fill(std::begin(operand), std::end(operand), std::uint16_t{0x3c00});  // bf16 0.0078
  alignas(64) float out[16 * 16];
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  for (std::int64_t it = 0; it < kAmxIterations; ++it) {  // four independent accumulators
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

// ---- reading memory -------------------------------------------------------------------

struct AlignedFree {
  void operator()(float* p) const noexcept { ::operator delete[](p, std::align_val_t{64}); }
};

__attribute__((target("avx512f"))) float read_avx512(const float* p, std::int64_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (std::int64_t i = 0; i + 64 <= n; i += 64) {
    s0 = _mm512_add_ps(s0, _mm512_load_ps(p + i));
    s1 = _mm512_add_ps(s1, _mm512_load_ps(p + i + 16));
    s2 = _mm512_add_ps(s2, _mm512_load_ps(p + i + 32));
    s3 = _mm512_add_ps(s3, _mm512_load_ps(p + i + 48));
  }
  return lane_sum(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

__attribute__((target("avx2"))) float read_avx2(const float* p, std::int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (std::int64_t i = 0; i + 32 <= n; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_load_ps(p + i));
    s1 = _mm256_add_ps(s1, _mm256_load_ps(p + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_load_ps(p + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_load_ps(p + i + 24));
  }
  return lane_sum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

/// About this many bytes are read per call, whatever the buffer's size: whole passes.
constexpr double kReadBytesPerCall = 64.0 * (1 << 20);

struct Setup {
  Probe probe;
  double work = 0;  // per call, in `unit`
  const char* unit = "flop";
  std::string what;
};

int fail(const std::string& message, int code) {
  std::fprintf(stderr, "bench_ceiling: %s\n", message.c_str());
  return code;
}

/// Runs \p probe once on each of \p threads threads (the caller's the first); returns the
/// seconds from the moment every thread is running to the end of the last probe. Starting
/// a thread is not part of the ceiling: in a virtual machine, a thread started on an idle
/// virtual CPU waits for the host to run it (milliseconds, seen on an AMD EPYC).
double time_call(const Probe& probe, int threads) {
  std::atomic<int> waiting{threads}, running{threads};
  std::vector<std::jthread> helpers;
  for (int t = 1; t < threads; ++t)
    helpers.emplace_back([&, t] {
      waiting.fetch_sub(1);
      while (waiting.load() > 0) {
      }
      probe(t);
      running.fetch_sub(1);
    });
  waiting.fetch_sub(1);
  while (waiting.load() > 0) {
  }
  const auto start = Clock::now();
  probe(0);
  running.fetch_sub(1);
  while (running.load() > 0) {
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  helpers.clear();  // joins
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  std::string kind;
  int threads = 1, calls = 20;
  std::int64_t bytes = std::int64_t{64} << 20;
  bool serve = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--probe" && has_value) {
      kind = argv[++i];
    } else if (arg == "--threads" && has_value) {
      threads = std::atoi(argv[++i]);
    } else if (arg == "--bytes" && has_value) {
      bytes = std::atoll(argv[++i]);
    } else if (arg == "--calls" && has_value) {
      calls = std::atoi(argv[++i]);
    } else if (arg == "--serve") {
      serve = true;
    } else {
      return fail("unknown or incomplete argument '" + arg +
                      "'; usage: bench_ceiling --probe fma|amx|read [--threads N] [--bytes B] "
                      "[--calls N] [--serve]",
                  1);
    }
  }
  if (threads < 1 || threads > 1024)
    return fail("--threads must be 1..1024, not " + std::to_string(threads), 1);
  if (calls < 1) return fail("--calls must be positive, not " + std::to_string(calls), 1);
  if (bytes < 4096) return fail("--bytes must be at least 4096, not " + std::to_string(bytes), 1);

  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const std::string on_threads = ", " + std::to_string(threads) + " thread(s)";
  Setup setup;
  std::unique_ptr<float[], AlignedFree> buffer;
  if (kind == "fma") {
    if (!avx512 && !avx2) return fail("this CPU has neither AVX-512 nor AVX2 with FMA", 2);
    const int lanes = avx512 ? 16 : 8, chains = avx512 ? kZmmChains : kYmmChains;
    setup.probe = [avx512](int) { g_sink = g_sink + (avx512 ? fma_avx512() : fma_avx2()); };
    setup.work = 2.0 * lanes * chains * static_cast<double>(kFmaIterations) * threads;
    setup.what = std::string("f32 FMA, ") + (avx512 ? "AVX-512" : "AVX2") + on_threads;
  } else if (kind == "amx") {
    std::string why;
    if (!amx_usable(why)) return fail(why, 2);
    setup.probe = [](int) { g_sink = g_sink + amx_bf16(); };
    setup.work = 2.0 * kAmxMacsPerOp * 4 * static_cast<double>(kAmxIterations) * threads;
    setup.what = "bf16 AMX tiles" + on_threads;
  } else if (kind == "read") {
    if (!avx512 && !avx2) return fail("this CPU has neither AVX-512 nor AVX2", 2);
    const std::int64_t n = bytes / 4 / (64 * threads) * (64 * threads);  // whole lines each
    buffer.reset(static_cast<float*>(::operator new[](n * 4, std::align_val_t{64})));
    for (std::int64_t i = 0; i < n; ++i) buffer[i] = static_cast<float>(i % 7);
    const std::int64_t passes =
        std::max<std::int64_t>(1, static_cast<std::int64_t>(kReadBytesPerCall / (4.0 * n)));
    const float* data = buffer.get();
    setup.probe = [=](int t) {
      const std::int64_t slice = n / threads;
      float sum = 0;
      for (std::int64_t p = 0; p < passes; ++p) {
        asm volatile("" ::: "memory");  // each pass reads again: the compiler may not merge them
        sum += avx512 ? read_avx512(data + t * slice, slice) : read_avx2(data + t * slice, slice);
      }
      g_sink = g_sink + sum;
    };
    setup.work = 4.0 * static_cast<double>(n) * static_cast<double>(passes);
    setup.unit = "byte";
    char size[32];
    std::snprintf(size, sizeof size, "%.1f MiB", static_cast<double>(n) * 4 / (1 << 20));
    setup.what = std::string("reading ") + size + ", " + (avx512 ? "512" : "256") + "-bit loads" +
                 on_threads;
  } else {
    return fail("--probe must be fma, amx or read, not '" + kind + "'", 1);
  }

  (void)time_call(setup.probe, threads);  // warm: the frequency settles, the buffer is read
  if (serve) {
    std::printf("work %.0f %s %s\nready\n", setup.work, setup.unit, setup.what.c_str());
    std::fflush(stdout);
    for (std::string line; std::getline(std::cin, line);) {
      const int n = std::atoi(line.c_str());
      if (n < 1) return fail("expected a number of calls, not '" + line + "'", 1);
      std::printf("times");
      for (int c = 0; c < n; ++c) std::printf(" %.6f", time_call(setup.probe, threads) * 1e3);
      std::printf("\n");
      std::fflush(stdout);
    }
    return 0;
  }
  std::vector<double> rates;
  for (int c = 0; c < calls; ++c) rates.push_back(setup.work / time_call(setup.probe, threads));
  const double rate = kiln::bench::median(rates);
  std::printf("%s: %.1f G%s/s (median of %d calls)\n", setup.what.c_str(), rate * 1e-9,
              setup.unit[0] == 'f' ? "FLOP" : "B", calls);
  return 0;
}
