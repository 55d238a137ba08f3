// The CUDA backend against a host emulation of the driver (fake_cuda_driver.hpp): what kiln
// itself decides (argument packing and checks, memsets of wide elements, host-function
// errors, events, the CUDA graph built for a device graph, updates and their fallback,
// nesting, capture, clean-up) is tested on every machine, GPU or not.

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "../compiler/random_programs.hpp"
#include "../error_matchers.hpp"
#include "compiler/cuda/launches.hpp"
#include "fake_cuda_driver.hpp"
#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/compiler/reference.hpp"
#include "kiln/core/error.hpp"
#include "kiln/runtime/device_context.hpp"
#include "kiln/runtime/device_graph.hpp"
#include "kiln/runtime/profiler.hpp"
#include "kiln/stage/nn.hpp"
#include "kiln/stage/stage.hpp"
#include "runtime/cuda/cuda_stream.hpp"
#include "runtime/cuda/nccl.hpp"

namespace kiln {
namespace {

using testing::FakeCuda;
using testing::FakeKernel;

template <class T>
T arg(const unsigned char* args, std::size_t offset) {
  T value;
  std::memcpy(&value, args + offset, sizeof(T));
  return value;
}

/// y[i] += a * x[i] for i < n, one element per thread: (float* y, const float* x, float a,
/// int n), laid out at offsets 0, 8, 16, 20.
FakeKernel axpy_kernel() {
  return {{8, 8, 4, 4},
          [](const unsigned char* args, const unsigned grid[3], const unsigned block[3]) {
            auto* y = arg<float*>(args, 0);
            const auto* x = arg<const float*>(args, 8);
            const auto a = arg<float>(args, 16);
            const auto n = arg<int>(args, 20);
            const long long threads = 1LL * grid[0] * block[0];
            for (long long i = 0; i < threads && i < n; ++i) y[i] += a * x[i];
            return CUDA_SUCCESS;
          }};
}

/// Reverses x[0, n) through the block's dynamic shared memory: (int* x, int n).
FakeKernel reverse_kernel() {
  return {{8, 4}, [](const unsigned char* args, const unsigned*, const unsigned*) {
            auto* x = arg<int*>(args, 0);
            const auto n = arg<int>(args, 8);
            std::vector<int> copy(x, x + n);
            for (int i = 0; i < n; ++i) x[i] = copy[static_cast<std::size_t>(n - 1 - i)];
            return CUDA_SUCCESS;
          }};
}

const char* const kReverseSource =
    "extern \"C\" __global__ void reverse(int* x, int n) {\n"
    "  extern __shared__ int s[];\n"
    "  for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = x[i];\n"
    "  __syncthreads();\n"
    "  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = s[n - 1 - i];\n"
    "}\n";

const char* const kAxpySource =
    "extern \"C\" __global__ void axpy(float* y, const float* x, float a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] += a * x[i];\n"
    "}\n";

/// Runs on the fake driver (parameter false) and, where there is one, on a real GPU (true:
/// the same tests, less what only the fake can show or force).
class CudaBackend : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (gpu()) {
      try {
        (void)detail::CudaDriver::instance();
      } catch (const UserError& e) {
        GTEST_SKIP() << e.what();
      }
      return;
    }
    FakeCuda::get().reset();
    FakeCuda::get().kernels["axpy"] = axpy_kernel();
    FakeCuda::get().kernels["reverse"] = reverse_kernel();
    FakeCuda::get().kernels["fault"] = {{},
                                        [](const unsigned char*, const unsigned*, const unsigned*) {
                                          return CUDA_ERROR_ILLEGAL_ADDRESS;
                                        }};
  }
  static bool gpu() { return GetParam(); }
  static DeviceContext context(int index = 0) {
    if (gpu()) return DeviceContext(Device::cuda(index));
    return DeviceContext(detail::make_cuda_stream(Device::cuda(index), FakeCuda::get().driver(),
                                                  &FakeCuda::get().blas()));
  }
  /// The fake loads any module naming the entry; a GPU gets the kernel from NVRTC.
  static DeviceFunction<CudaKernel> axpy(const DeviceContext& ctx) {
    if (gpu()) return ctx.compile_function(CudaSource{kAxpySource, "axpy"});
    return ctx.compile_function(CudaModule{"fake module: axpy", "axpy"});
  }
  static FakeCuda& fake() { return FakeCuda::get(); }
  /// The driver the context runs on, for work enqueued as another library would.
  static const detail::CudaDriver& driver() {
    return gpu() ? detail::CudaDriver::instance() : fake().driver();
  }
};

#define KILN_FAKE_ONLY(why) \
  if (gpu()) GTEST_SKIP() << "only the fake driver can " why

TEST_P(CudaBackend, CopiesAndLaunchesRunInStreamOrder) {
  {
    DeviceContext ctx = context();
    EXPECT_EQ(ctx.device(), Device::cuda(0));
    std::vector<float> x_host(100), y_host(100, 1.0f);
    for (int i = 0; i < 100; ++i) x_host[i] = static_cast<float>(i);
    auto x = ctx.enqueue_create_buffer<float>(100);
    auto y = ctx.enqueue_create_buffer<float>(100);
    ctx.enqueue_copy(x, x_host);
    ctx.enqueue_copy(y, y_host);
    const auto fn = axpy(ctx);
    EXPECT_EQ(fn.name(), "axpy");
    ctx.enqueue_function(fn, LaunchConfig{4, 32}, y.data(), x.data(), 2.0f, 100);
    auto out = ctx.enqueue_create_host_buffer<float>(100);
    ctx.enqueue_copy(out, y);
    ctx.synchronize();
    for (int i = 0; i < 100; ++i) ASSERT_EQ(out[i], 1.0f + 2.0f * static_cast<float>(i)) << i;
    if (gpu()) return;
    EXPECT_EQ(FakeCuda::get().kernel_launches, 1);
    // The context is made current once, and again only after other code switched away.
    const int switches = FakeCuda::get().context_switches;
    ctx.synchronize();
    EXPECT_EQ(FakeCuda::get().context_switches, switches);
    FakeCuda::get().driver().cuCtxSetCurrent(nullptr);
    ctx.synchronize();
    EXPECT_EQ(FakeCuda::get().context_switches, switches + 2);
    EXPECT_EQ(FakeCuda::get().live_streams, 1);
  }
  // The last handle releases the stream, the primary context and every allocation.
  EXPECT_EQ(FakeCuda::get().live_streams, 0);
  EXPECT_EQ(FakeCuda::get().live_contexts, 0);
  EXPECT_EQ(FakeCuda::get().live_allocations, 0);
}

TEST_P(CudaBackend, MemsetsOfEveryElementWidth) {
  DeviceContext ctx = context();
  auto bytes = ctx.enqueue_create_buffer<std::uint8_t>(7);
  auto halves = ctx.enqueue_create_buffer<std::int32_t>(5);
  auto doubles = ctx.enqueue_create_buffer<double>(9);
  auto longs = ctx.enqueue_create_buffer<std::int64_t>(3);
  ctx.enqueue_memset(bytes, std::uint8_t{0xab});
  ctx.enqueue_memset(halves, -7);
  ctx.enqueue_memset(doubles, -1.25);  // two 32-bit words that differ
  ctx.enqueue_memset(longs, std::int64_t{0x0123456789abcdefLL});
  std::vector<std::uint8_t> b(7);
  std::vector<std::int32_t> h(5);
  std::vector<double> d(9);
  std::vector<std::int64_t> l(3);
  ctx.enqueue_copy(b, bytes);
  ctx.enqueue_copy(h, halves);
  ctx.enqueue_copy(d, doubles);
  ctx.enqueue_copy(l, longs);
  ctx.synchronize();
  for (auto v : b) EXPECT_EQ(v, 0xab);
  for (auto v : h) EXPECT_EQ(v, -7);
  for (auto v : d) EXPECT_EQ(v, -1.25);
  for (auto v : l) EXPECT_EQ(v, 0x0123456789abcdefLL);
}

TEST_P(CudaBackend, KernelArgumentsAreCheckedAgainstTheParameters) {
  DeviceContext ctx = context();
  const auto fn = axpy(ctx);
  auto y = ctx.enqueue_create_buffer<float>(4);
  KILN_EXPECT_THROW_MSG(ctx.enqueue_function(fn, LaunchConfig{1, 4}, y.data(), y.data(), 2.0f),
                        UserError, "kernel 'axpy' takes 4 parameters of 8, 8, 4, 4 bytes",
                        "3 arguments were given");
  KILN_EXPECT_THROW_MSG(ctx.enqueue_function(fn, LaunchConfig{1, 4}, y.data(), y.data(), 2.0, 4),
                        UserError, "argument 2 has 8 bytes where parameter 2 has 4",
                        "float, not double");
  KILN_EXPECT_THROW_MSG(ctx.enqueue_function(fn, LaunchConfig{0, 4}, y.data(), y.data(), 2.0f, 4),
                        UserError, "every component must be >= 1");
  if (!gpu()) {
    EXPECT_EQ(FakeCuda::get().kernel_launches, 0);
  }
}

TEST_P(CudaBackend, KernelsOfTheWrongKindOrModuleSayWhat) {
  DeviceContext ctx = context();
  KILN_EXPECT_THROW_MSG(ctx.compile_function([](int) {}), UserError, "is a C++ callable",
                        "cuda:0 context launches CUDA code", "CudaSource");
  if (!gpu()) {
    KILN_EXPECT_THROW_MSG(ctx.compile_function(CudaModule{"fake module", "missing"}), UserError,
                          "no __global__ function named 'missing'", "extern \"C\"");
    KILN_EXPECT_THROW_MSG(ctx.compile_function(CudaModule{"bad image", "axpy"}), UserError,
                          "cannot load the module", "device kernel image is invalid");
  } else {
    KILN_EXPECT_THROW_MSG(ctx.compile_function(CudaSource{kAxpySource, "missing"}), UserError,
                          "no __global__ function named 'missing'", "extern \"C\"");
    KILN_EXPECT_THROW_MSG(ctx.compile_function(CudaModule{"not a module", "axpy"}), UserError,
                          "cannot load the module");
  }
  KILN_EXPECT_THROW_MSG(ctx.compile_function(CudaModule{"fake module: axpy", ""}), UserError,
                        "names no entry");
  DeviceContext cpu;
  KILN_EXPECT_THROW_MSG(cpu.compile_function(CudaModule{"fake module: axpy", "axpy"}), UserError,
                        "runs only on a CUDA context", "cpu:0");
  const auto host_fn = cpu.compile_function([](float*) {});
  KILN_EXPECT_THROW_MSG(ctx.enqueue_function(host_fn, LaunchConfig{1, 1}, nullptr), UserError,
                        "compiled for cpu:0 but launched on cuda:0");
  KILN_EXPECT_THROW_MSG(context(99), UserError, "cuda:99 is not available", "CUDA device");
}

TEST_P(CudaBackend, AHostFunctionsExceptionSurfacesFromSynchronize) {
  DeviceContext ctx = context();
  int runs = 0;
  ctx.enqueue_host_function([&] { ++runs; });
  ctx.enqueue_host_function([] { throw std::runtime_error("host boom"); });
  ctx.enqueue_host_function([&] { ++runs; });
  try {
    ctx.synchronize();
    ADD_FAILURE() << "synchronize did not throw";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("host function failed on cuda:0: host boom"),
              std::string::npos)
        << e.what();
    EXPECT_THROW(std::rethrow_if_nested(e), std::runtime_error);
  }
  EXPECT_EQ(runs, 2);
  EXPECT_NO_THROW(ctx.synchronize());  // reported once; the context stays usable
}

TEST_P(CudaBackend, AKernelFaultSurfacesFromSynchronizeWithTheDriversWords) {
  KILN_FAKE_ONLY("fault a kernel without ruining the process's context");
  DeviceContext ctx = context();
  const auto fault = ctx.compile_function(CudaModule{"fake module: fault", "fault"});
  ctx.enqueue_function(fault, LaunchConfig{1, 1});
  KILN_EXPECT_THROW_MSG(ctx.synchronize(), DeviceError, "work on cuda:0 (Fake GPU) failed",
                        "an illegal memory access", "restart the process");
}

TEST_P(CudaBackend, EventsTimeWorkAndRefuseOtherDevices) {
  DeviceContext ctx = context();
  DeviceEvent start = ctx.create_event(), end = ctx.create_event();
  EXPECT_TRUE(start.is_complete());
  KILN_EXPECT_THROW_MSG(DeviceEvent::elapsed_ms(start, end), UserError, "never recorded");
  ctx.enqueue_record(start);
  ctx.enqueue_record(end);
  ctx.enqueue_wait(start);
  end.synchronize();
  EXPECT_TRUE(end.is_complete());
  EXPECT_GE(DeviceEvent::elapsed_ms(start, end), 0.0);
  DeviceContext cpu;
  DeviceEvent cpu_event = cpu.create_event();
  KILN_EXPECT_THROW_MSG(ctx.enqueue_wait(cpu_event), UserError, "another kind of device");
  KILN_EXPECT_THROW_MSG(cpu.enqueue_record(start), UserError, "another kind of device");
}

TEST_P(CudaBackend, AnEventWaitOrdersWorkAcrossTheStreamsOfOneGpu) {
  // Two contexts of one GPU are two streams. `reader` sees what `writer` wrote only
  // because it waits for writer's event: the fake driver runs a stream's work only when
  // something needs it done, so without the wait the copy back reads the old values.
  DeviceContext writer = context(), reader = context();
  auto buffer = writer.enqueue_create_buffer<float>(1024);
  writer.enqueue_memset(buffer, 1.0f);
  writer.synchronize();
  writer.enqueue_memset(buffer, 7.0f);
  DeviceEvent written = writer.create_event();
  writer.enqueue_record(written);
  reader.enqueue_wait(written);
  std::vector<float> host(1024, 0.0f);
  reader.enqueue_copy(host, buffer);
  reader.synchronize();  // the reader's stream only
  EXPECT_EQ(host, std::vector<float>(1024, 7.0f));
  EXPECT_TRUE(written.is_complete());
  writer.synchronize();
}

TEST_P(CudaBackend, AProfilerSeesEveryNodeOfEveryReplay) {
  DeviceContext ctx = context();
  const auto fn = axpy(ctx);
  auto x = ctx.enqueue_create_buffer<float>(32);
  auto y = ctx.enqueue_create_buffer<float>(32);
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    auto fill = b.add_memset(x, 1.0f, {});
    auto clear = b.add_memset(y, 0.0f, {});
    auto k = b.add_function(fn, LaunchConfig{1, 32}, {fill, clear}, y.data(), x.data(), 2.0f, 32);
    b.set_label(k, "y += 2x");
  });
  graph.replay();  // not profiled
  auto profiler = std::make_shared<Profiler>();
  ctx.set_profiler(profiler);
  EXPECT_EQ(ctx.profiler(), profiler);
  graph.replay();
  graph.replay();
  ctx.set_profiler(nullptr);
  graph.replay();  // not profiled again
  std::vector<float> out(32);
  ctx.enqueue_copy(out, y);
  ctx.synchronize();
  for (float v : out) ASSERT_EQ(v, 2.0f);  // the profiled twin computes the same
  EXPECT_EQ(profiler->replays(), 2u);
  const std::vector<ProfileEvent> events = profiler->events();
  ASSERT_EQ(events.size(), 6u);  // 3 nodes x 2 replays
  int kernels = 0;
  for (const ProfileEvent& e : events) {
    EXPECT_LE(e.begin_ns, e.end_ns);
    EXPECT_LT(e.node, 3u);
    if (std::string(e.name.data()) == "y += 2x") {
      ++kernels;
      EXPECT_EQ(e.node, 2u);
    }
  }
  EXPECT_EQ(kernels, 2);
  if (!gpu()) {  // the twin: an event before and after each node; the kernel after both memsets
    EXPECT_EQ(fake().instantiations, 2);
    const auto& g = *fake().last_instantiated;
    ASSERT_EQ(g.nodes.size(), 9u);
    EXPECT_EQ(g.nodes[0]->type, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
    EXPECT_EQ(g.nodes[1]->type, CU_GRAPH_NODE_TYPE_MEMSET);
    EXPECT_EQ(g.nodes[7]->type, CU_GRAPH_NODE_TYPE_KERNEL);
    EXPECT_EQ(g.index_of(g.nodes[6]->dependencies.at(0)), 2);  // begin 2 after end 0
    EXPECT_EQ(g.index_of(g.nodes[6]->dependencies.at(1)), 5);  // and end 1
  }
  // An update builds the twin again from the new parameters.
  ctx.set_profiler(profiler);
  graph.update([&](DeviceGraphBuilder& b) {
    auto fill = b.add_memset(x, 3.0f, {});
    auto clear = b.add_memset(y, 0.0f, {});
    b.add_function(fn, LaunchConfig{1, 32}, {fill, clear}, y.data(), x.data(), 2.0f, 32);
  });
  graph.replay();
  ctx.set_profiler(nullptr);
  ctx.enqueue_copy(out, y);
  ctx.synchronize();
  for (float v : out) ASSERT_EQ(v, 6.0f);
  EXPECT_EQ(profiler->events().size(), 9u);
}

TEST_P(CudaBackend, ADeviceGraphBecomesACudaGraphWithTheSameEdges) {
  DeviceContext ctx = context();
  const auto fn = axpy(ctx);
  auto x = ctx.enqueue_create_buffer<float>(64);
  auto y = ctx.enqueue_create_buffer<float>(64);
  auto z = ctx.enqueue_create_buffer<float>(64);
  auto out = ctx.enqueue_create_host_buffer<float>(64);
  int host_runs = 0;
  // x = 1 (root); y = 0 (root); y += 3x; z = y; then host; the 8-byte memset of a
  // scratch buffer is two CUDA nodes, both waited for by the join.
  auto scratch = ctx.enqueue_create_buffer<double>(8);
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    auto fill_x = b.add_memset(x, 1.0f, {});
    auto fill_y = b.add_memset(y, 0.0f, {});
    auto wide = b.add_memset(scratch, 2.5, {});
    auto k =
        b.add_function(fn, LaunchConfig{2, 32}, {fill_x, fill_y}, y.data(), x.data(), 3.0f, 64);
    b.set_label(k, "y += 3x");
    auto join = b.add_empty({k, wide});
    auto copy = b.add_copy(z, y, join);
    auto c2 = b.add_copy(out, z, copy);
    b.add_host_function([&] { ++host_runs; }, c2);
  });
  EXPECT_NE(graph.to_dot().find("y += 3x"), std::string::npos);
  for (int replay = 0; replay < 3; ++replay) graph.replay();
  ctx.synchronize();
  EXPECT_EQ(host_runs, 3);
  for (float v : out) ASSERT_EQ(v, 3.0f);
  std::vector<double> s(8);
  ctx.enqueue_copy(s, scratch);
  ctx.synchronize();
  for (double v : s) EXPECT_EQ(v, 2.5);
  if (gpu()) return;

  EXPECT_EQ(FakeCuda::get().graph_launches, 3);
  const auto& g = *FakeCuda::get().last_instantiated;
  ASSERT_EQ(g.nodes.size(), 9u);  // 8 kiln nodes, the wide memset as two
  const auto deps = [&](int i) {
    std::vector<int> out_deps;
    for (const auto* d : g.nodes[static_cast<std::size_t>(i)]->dependencies)
      out_deps.push_back(g.index_of(d));
    return out_deps;
  };
  EXPECT_EQ(g.nodes[0]->type, CU_GRAPH_NODE_TYPE_MEMSET);
  EXPECT_EQ(g.nodes[2]->type, CU_GRAPH_NODE_TYPE_MEMSET);
  EXPECT_EQ(g.nodes[3]->type, CU_GRAPH_NODE_TYPE_MEMSET);
  EXPECT_EQ(g.nodes[4]->type, CU_GRAPH_NODE_TYPE_KERNEL);
  EXPECT_EQ(deps(4), (std::vector<int>{0, 1}));
  EXPECT_EQ(g.nodes[5]->type, CU_GRAPH_NODE_TYPE_EMPTY);
  EXPECT_EQ(deps(5), (std::vector<int>{4, 2, 3}));
  EXPECT_EQ(g.nodes[6]->type, CU_GRAPH_NODE_TYPE_MEMCPY);
  EXPECT_EQ(deps(6), (std::vector<int>{5}));
  EXPECT_EQ(g.nodes[8]->type, CU_GRAPH_NODE_TYPE_HOST);
  EXPECT_EQ(g.nodes[4]->grid[0], 2u);
  EXPECT_EQ(g.nodes[4]->block[0], 32u);
}

const char* const kConditionalSource =
    "extern \"C\" __global__ void set_flag(int* flag, const int* value) {\n"
    "  *flag = *value > 0 ? 1 : 0;\n"
    "}\n"
    "extern \"C\" __global__ void count_down(int* left, long long* steps, int* go_on) {\n"
    "  ++*steps;\n"
    "  --*left;\n"
    "  *go_on = *left > 0 ? 1 : 0;\n"
    "}\n"
    "extern \"C\" __global__ void add_i64(long long* sum, long long v) { *sum += v; }\n";

TEST_P(CudaBackend, ConditionalNodesDecideOnTheDeviceAtEachReplay) {
  if (!gpu()) {
    fake().kernels["set_flag"] = {{8, 8},
                                  [](const unsigned char* a, const unsigned*, const unsigned*) {
                                    *arg<int*>(a, 0) = *arg<const int*>(a, 8) > 0 ? 1 : 0;
                                    return CUDA_SUCCESS;
                                  }};
    fake().kernels["count_down"] = {{8, 8, 8},
                                    [](const unsigned char* a, const unsigned*, const unsigned*) {
                                      ++*arg<std::int64_t*>(a, 8);
                                      int* left = arg<int*>(a, 0);
                                      --*left;
                                      *arg<int*>(a, 16) = *left > 0 ? 1 : 0;
                                      return CUDA_SUCCESS;
                                    }};
    fake().kernels["add_i64"] = {{8, 8},
                                 [](const unsigned char* a, const unsigned*, const unsigned*) {
                                   *arg<std::int64_t*>(a, 0) += arg<std::int64_t>(a, 8);
                                   return CUDA_SUCCESS;
                                 }};
  }
  DeviceContext ctx = context();
  const auto load = [&](const char* name) {
    return gpu() ? ctx.compile_function(CudaSource{kConditionalSource, name})
                 : ctx.compile_function(CudaModule{std::string("fake module: ") + name, name});
  };
  const auto set_flag = load("set_flag");
  const auto count_down = load("count_down");
  const auto add = load("add_i64");
  auto value = ctx.enqueue_create_buffer<int>(1);
  auto flag = ctx.enqueue_create_buffer<int>(1);
  auto left = ctx.enqueue_create_buffer<int>(1);
  auto go_on = ctx.enqueue_create_buffer<int>(1);
  auto steps = ctx.enqueue_create_buffer<std::int64_t>(1);
  auto sum = ctx.enqueue_create_buffer<std::int64_t>(1);
  ctx.enqueue_memset(sum, std::int64_t{0});
  std::vector<int> staged(1);  // what the copies below read (when they run, not now)
  const auto write = [&](auto& buffer, int v) {
    staged[0] = v;
    ctx.enqueue_copy(buffer, staged);
    ctx.synchronize();
  };
  const auto read = [&](const auto& buffer) {
    std::vector<std::decay_t<decltype(*buffer.data())>> host(1);
    ctx.enqueue_copy(host, buffer);
    ctx.synchronize();
    return host[0];
  };

  // IF: the body runs when the first node finds the value positive.
  const auto if_graph = [&](std::int64_t amount) {
    return [&, amount](DeviceGraphBuilder& b) {
      auto decide = b.add_function(set_flag, LaunchConfig{1, 1}, {}, flag.data(), value.data());
      b.add_if(
          flag.data(),
          [&](DeviceGraphBuilder& body) {
            body.add_function(add, LaunchConfig{1, 1}, {}, sum.data(), amount);
          },
          decide);
    };
  };
  auto branch = DeviceGraph::create(ctx, if_graph(1));
  std::int64_t expected = 0;
  for (int v : {3, -1, 0, 7}) {
    write(value, v);
    branch.replay();
    expected += v > 0 ? 1 : 0;
    EXPECT_EQ(read(sum), expected) << "value " << v;
  }
  branch.update(if_graph(100));  // the body's argument, in place
  write(value, 1);
  branch.replay();
  EXPECT_EQ(read(sum), expected + 100);

  // WHILE: as many passes as the device counts down.
  auto loop = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    auto decide = b.add_function(set_flag, LaunchConfig{1, 1}, {}, go_on.data(), left.data());
    b.add_while(
        go_on.data(),
        [&](DeviceGraphBuilder& body) {
          body.add_function(count_down, LaunchConfig{1, 1}, {}, left.data(), steps.data(),
                            go_on.data());
        },
        decide);
  });
  for (int n : {4, 0, 9}) {
    write(left, n);
    ctx.enqueue_memset(steps, std::int64_t{0});
    loop.replay();
    EXPECT_EQ(read(steps), n) << "a loop of " << n;
  }

  // Nested: an IF inside the WHILE's body (its handle belongs to the body graph).
  auto nested = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    auto decide = b.add_function(set_flag, LaunchConfig{1, 1}, {}, go_on.data(), left.data());
    b.add_while(
        go_on.data(),
        [&](DeviceGraphBuilder& body) {
          auto inner = body.add_if(
              go_on.data(),
              [&](DeviceGraphBuilder& then) {
                then.add_function(add, LaunchConfig{1, 1}, {}, sum.data(), std::int64_t{1});
              },
              {});
          body.add_function(count_down, LaunchConfig{1, 1}, inner, left.data(), steps.data(),
                            go_on.data());
        },
        decide);
  });
  ctx.enqueue_memset(sum, std::int64_t{0});
  write(left, 6);
  nested.replay();
  EXPECT_EQ(read(sum), 6);

  // CUDA forbids host functions in a body: refused, naming the node.
  const auto host_in_body = [&](DeviceGraphBuilder& b) {
    b.add_if(flag.data(), [](DeviceGraphBuilder& body) { body.add_host_function([] {}, {}); }, {});
  };
  KILN_EXPECT_THROW_MSG(DeviceGraph::create(ctx, host_in_body), UserError,
                        "node 0 of its body is a host function node",
                        "a conditional body may hold kernels");
  if (gpu()) return;

  // The shape of the CUDA graph: the setter, then the conditional node after it; the
  // WHILE's body holds the kiln body's nodes (here an IF with its own setter, then the
  // count-down kernel) and ends with the setter again, after the body's last node.
  const auto& g = *fake().last_instantiated;
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(g.nodes[1]->type, CU_GRAPH_NODE_TYPE_KERNEL);
  EXPECT_EQ(g.nodes[2]->type, CU_GRAPH_NODE_TYPE_CONDITIONAL);
  EXPECT_EQ(g.nodes[2]->condition_type, CU_GRAPH_COND_TYPE_WHILE);
  EXPECT_EQ(g.index_of(g.nodes[2]->dependencies.at(0)), 1);
  const testing::FakeGraph& body = *g.nodes[2]->child;
  ASSERT_EQ(body.nodes.size(), 4u);
  EXPECT_EQ(body.nodes[0]->type, CU_GRAPH_NODE_TYPE_KERNEL);  // the IF's setter
  EXPECT_EQ(body.nodes[1]->type, CU_GRAPH_NODE_TYPE_CONDITIONAL);
  EXPECT_EQ(body.nodes[1]->condition_type, CU_GRAPH_COND_TYPE_IF);
  EXPECT_EQ(body.nodes[2]->type, CU_GRAPH_NODE_TYPE_KERNEL);  // count_down
  EXPECT_EQ(body.index_of(body.nodes[2]->dependencies.at(0)), 1);
  EXPECT_EQ(body.nodes[3]->type, CU_GRAPH_NODE_TYPE_KERNEL);  // the WHILE's setter
  EXPECT_EQ(body.index_of(body.nodes[3]->dependencies.at(0)), 2);
}

TEST_P(CudaBackend, UpdatesAreInPlaceOrReinstantiateSayingWhy) {
  DeviceContext ctx = context();
  const auto fn = axpy(ctx);
  auto x = ctx.enqueue_create_buffer<float>(8);
  auto y = ctx.enqueue_create_buffer<float>(8);
  ctx.enqueue_memset(x, 1.0f);
  ctx.enqueue_memset(y, 0.0f);
  float a = 2.0f;
  const auto build = [&](DeviceGraphBuilder& b) {
    b.add_function(fn, LaunchConfig{1, 8}, {}, y.data(), x.data(), a, 8);
  };
  auto graph = DeviceGraph::create(ctx, build);
  graph.replay();  // y = 2
  a = 10.0f;
  graph.update(build);
  EXPECT_EQ(graph.last_update_fallback(), "");  // a kernel's arguments update in place
  if (!gpu()) {
    EXPECT_EQ(FakeCuda::get().graph_updates, 1);
    EXPECT_EQ(FakeCuda::get().instantiations, 1);
  }
  graph.replay();  // y = 12

  fake().refuse_updates = !gpu();
  a = 100.0f;
  graph.update(build);
  if (!gpu()) {
    EXPECT_EQ(FakeCuda::get().instantiations, 2);
    EXPECT_NE(graph.last_update_fallback().find("instantiated again"), std::string::npos)
        << graph.last_update_fallback();
    EXPECT_NE(graph.last_update_fallback().find("parameters changed"), std::string::npos);
    EXPECT_EQ(FakeCuda::get().live_graph_execs, 1);
  }
  graph.replay();  // y = 112
  std::vector<float> out(8);
  ctx.enqueue_copy(out, y);
  ctx.synchronize();
  for (float v : out) EXPECT_EQ(v, 112.0f);

  KILN_EXPECT_THROW_MSG(graph.update([&](DeviceGraphBuilder& b) { b.add_memset(y, 0.0f, {}); }),
                        UserError, "node 0 is a memset node in the update but a kernel node");
}

TEST_P(CudaBackend, ChildGraphsAndCapturedWorkNest) {
  DeviceContext ctx = context();
  const auto fn = axpy(ctx);
  auto x = ctx.enqueue_create_buffer<float>(16);
  auto y = ctx.enqueue_create_buffer<float>(16);
  auto child = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    b.add_function(fn, LaunchConfig{1, 16}, {}, y.data(), x.data(), 1.0f, 16);
  });
  auto parent = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    DeviceContext rec = b.recording_context();
    rec.enqueue_memset(x, 2.0f);  // captured: a chain of nodes
    rec.enqueue_memset(y, 0.0f);
    auto twice = b.add_child_graph(child, b.last_node());
    b.add_child_graph(child, twice);
  });
  if (!gpu()) {
    const auto& g = *FakeCuda::get().last_instantiated;
    ASSERT_EQ(g.nodes.size(), 4u);
    EXPECT_EQ(g.nodes[2]->type, CU_GRAPH_NODE_TYPE_GRAPH);
    EXPECT_EQ(g.index_of(g.nodes[1]->dependencies.at(0)), 0);
  }
  parent.replay();
  std::vector<float> out(16);
  ctx.enqueue_copy(out, y);
  ctx.synchronize();
  for (float v : out) EXPECT_EQ(v, 4.0f);

  DeviceContext cpu;
  const auto host_fn = cpu.compile_function([](int) {});
  KILN_EXPECT_THROW_MSG(DeviceGraph::create(ctx,
                                            [&](DeviceGraphBuilder& b) {
                                              b.add_function(host_fn, LaunchConfig{1, 1}, {}, 1);
                                            }),
                        UserError, "is a C++ callable but the context is cuda:0");
  auto cpu_graph = DeviceGraph::create(cpu, [](DeviceGraphBuilder& b) { b.add_empty({}); });
  KILN_EXPECT_THROW_MSG(
      DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) { b.add_child_graph(cpu_graph, {}); }),
      UserError, "built for another context");
}

/// Sets \p count 32-bit words at \p dst to \p value on \p stream, as a library would.
void set_words(const detail::CudaDriver& cu, void* stream, std::int32_t* dst, std::size_t count,
               std::int32_t value) {
  const CUresult r = cu.cuMemsetD32Async(detail::device_address(dst), static_cast<unsigned>(value),
                                         count, static_cast<CUstream>(stream));
  if (r != CUDA_SUCCESS) throw std::runtime_error("cuMemsetD32Async failed");
}

TEST_P(CudaBackend, CudaWorkRunsInStreamOrderAndIsCapturedIntoGraphs) {
  DeviceContext ctx = context();
  const detail::CudaDriver& cu = driver();
  auto x = ctx.enqueue_create_buffer<std::int32_t>(64);
  auto out = ctx.enqueue_create_host_buffer<std::int32_t>(64);
  // Eagerly: between two kiln operations, in their order.
  ctx.enqueue_memset(x, 1);
  void* seen = nullptr;
  ctx.enqueue_cuda_work([&](void* stream) {
    seen = stream;
    set_words(cu, stream, x.data(), 32, 7);
  });
  EXPECT_NE(seen, nullptr);
  ctx.enqueue_copy(out, x);
  ctx.synchronize();
  for (int i = 0; i < 64; ++i) ASSERT_EQ(out[i], i < 32 ? 7 : 1) << i;

  // In a graph: captured once, when the graph is built, and run by every replay between
  // its dependencies and its dependents.
  int captures = 0, value = 5;
  std::vector<std::int32_t> at_host;
  const auto build = [&](DeviceGraphBuilder& b) {
    auto clear = b.add_memset(x, 0, {});
    auto work = b.add_cuda_work(
        [&, v = value](void* stream) {
          ++captures;
          EXPECT_NE(stream, seen);  // a stream in capture, not the context's
          set_words(cu, stream, x.data() + 16, 16, v);
        },
        {clear});
    b.set_label(work, "library call");
    auto copy = b.add_copy(out, x, work);
    b.add_host_function([&] { at_host.push_back(out[16] + out[15]); }, copy);
  };
  auto graph = DeviceGraph::create(ctx, build);
  EXPECT_EQ(captures, 1);
  EXPECT_NE(graph.to_dot().find("library call"), std::string::npos);
  for (int replay = 0; replay < 3; ++replay) graph.replay();
  ctx.synchronize();
  EXPECT_EQ(captures, 1);
  EXPECT_EQ(at_host, (std::vector<std::int32_t>{5, 5, 5}));
  for (int i = 0; i < 64; ++i) ASSERT_EQ(out[i], i >= 16 && i < 32 ? 5 : 0) << i;
  if (!gpu()) {
    const auto& g = *fake().last_instantiated;
    ASSERT_EQ(g.nodes.size(), 4u);
    EXPECT_EQ(g.nodes[1]->type, CU_GRAPH_NODE_TYPE_GRAPH);
    EXPECT_EQ(g.index_of(g.nodes[1]->dependencies.at(0)), 0);
    EXPECT_EQ(g.index_of(g.nodes[2]->dependencies.at(0)), 1);
    ASSERT_EQ(g.nodes[1]->child->nodes.size(), 1u);
    EXPECT_EQ(g.nodes[1]->child->nodes[0]->type, CU_GRAPH_NODE_TYPE_MEMSET);
    EXPECT_EQ(fake().live_streams, 1);  // the capture stream is gone
  }

  // An update captures the work again, with its new parameters.
  value = 9;
  graph.update(build);
  EXPECT_EQ(captures, 2);
  graph.replay();
  ctx.synchronize();
  EXPECT_EQ(at_host.back(), 9);

  // A recording context adds CUDA work as a node too.
  auto recorded = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    DeviceContext rec = b.recording_context();
    rec.enqueue_memset(x, 3);
    rec.enqueue_cuda_work([&](void* stream) { set_words(cu, stream, x.data(), 1, 4); });
    rec.enqueue_copy(out, x);
  });
  recorded.replay();
  ctx.synchronize();
  EXPECT_EQ(out[0], 4);
  EXPECT_EQ(out[1], 3);
}

TEST_P(CudaBackend, CudaWorkThatCannotBeCapturedSaysWhy) {
  DeviceContext ctx = context();
  const detail::CudaDriver& cu = driver();
  KILN_EXPECT_THROW_MSG(
      DeviceGraph::create(
          ctx,
          [&](DeviceGraphBuilder& b) {
            b.add_cuda_work(
                [&](void* stream) { cu.cuStreamSynchronize(static_cast<CUstream>(stream)); }, {});
          }),
      DeviceError, "could not be captured");
  try {
    DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
      b.add_cuda_work([](void*) { throw std::runtime_error("the library refused"); }, {});
    });
    ADD_FAILURE() << "expected the work's exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "the library refused");
  }
  // The context is still usable, and nothing leaked.
  auto x = ctx.enqueue_create_buffer<std::int32_t>(4);
  ctx.enqueue_cuda_work([&](void* stream) { set_words(cu, stream, x.data(), 4, 2); });
  std::vector<std::int32_t> out(4);
  ctx.enqueue_copy(out, x);
  ctx.synchronize();
  EXPECT_EQ(out, (std::vector<std::int32_t>{2, 2, 2, 2}));
  if (!gpu()) {
    EXPECT_EQ(fake().live_streams, 1);
    EXPECT_EQ(fake().captures, 2);
  }

  DeviceContext cpu;
  KILN_EXPECT_THROW_MSG(cpu.enqueue_cuda_work([](void*) {}), UserError, "cpu:0 has no CUDA stream");
  KILN_EXPECT_THROW_MSG(
      DeviceGraph::create(cpu, [](DeviceGraphBuilder& b) { b.add_cuda_work([](void*) {}, {}); }),
      UserError, "add_cuda_work: the graph is for cpu:0, which has no CUDA stream");
}

TEST_P(CudaBackend, DynamicSharedMemoryBeyondTheDefaultIsAskedForAndChecked) {
  DeviceContext ctx = context();
  const auto reverse = gpu() ? ctx.compile_function(CudaSource{kReverseSource, "reverse"})
                             : ctx.compile_function(CudaModule{"fake module: reverse", "reverse"});
  constexpr int n = 20'000;  // 80 000 bytes: more than a block gets without asking
  constexpr std::uint32_t bytes = n * sizeof(int);
  std::vector<int> host(n);
  for (int i = 0; i < n; ++i) host[static_cast<std::size_t>(i)] = i;
  auto x = ctx.enqueue_create_buffer<int>(n);
  ctx.enqueue_copy(x, host);
  ctx.enqueue_function(reverse, LaunchConfig{1, 256, bytes}, x.data(), n);
  std::vector<int> out(n);
  ctx.enqueue_copy(out, x);
  ctx.synchronize();
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[static_cast<std::size_t>(i)], n - 1 - i) << i;
  if (!gpu()) {
    EXPECT_EQ(fake().last_shared_bytes, bytes);
    EXPECT_EQ(fake().kernels["reverse"].max_dynamic_shared, static_cast<int>(bytes));
  }

  // In a graph: the kernel node carries the size; a replay reverses again.
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    b.add_function(reverse, LaunchConfig{1, 256, bytes}, {}, x.data(), n);
  });
  EXPECT_NE(graph.to_dot().find("shared 80000 B"), std::string::npos) << graph.to_dot();
  graph.replay();
  ctx.enqueue_copy(out, x);
  ctx.synchronize();
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[static_cast<std::size_t>(i)], i) << i;
  if (!gpu()) {
    EXPECT_EQ(fake().last_instantiated->nodes.at(0)->shared_bytes, bytes);
  }

  // More than the device has: said before anything is enqueued.
  KILN_EXPECT_THROW_MSG(
      ctx.enqueue_function(reverse, LaunchConfig{1, 256, 300'000}, x.data(), n), UserError,
      "kernel 'reverse' asks for 300000 bytes of dynamic shared memory per block, but cuda:0");
  KILN_EXPECT_THROW_MSG(
      DeviceGraph::create(ctx,
                          [&](DeviceGraphBuilder& b) {
                            b.add_function(reverse, LaunchConfig{1, 256, 300'000}, {}, x.data(), n);
                          }),
      UserError, "gives a block at most");
}

TEST_P(CudaBackend, CompiledGraphsSayWhatTheyCannotRunOnCudaYet) {
  // Every op has a CUDA kernel but the collectives, and those need several devices, which
  // a compiled graph on CUDA refuses first (below); the check itself names the op.
  EXPECT_EQ(compiler::cuda_unsupported(ir::lookup_op("kiln.argmax")), "");
  EXPECT_EQ(compiler::cuda_unsupported(ir::lookup_op("kiln.fused")), "");
  const std::string why = compiler::cuda_unsupported(ir::lookup_op("kiln.allreduce_sum"));
  EXPECT_NE(why.find("no CUDA kernel for kiln.allreduce_sum yet"), std::string::npos) << why;
  EXPECT_NE(why.find("compile the module for a CPU device"), std::string::npos) << why;
}

#if defined(KILN_TEST_NVRTC) && defined(KILN_TEST_HOST_CXX)
/// What a prelude gives kiln's CUDA sources so that they compile for the host: CUDA's
/// index variables (per emulated thread), __shared__ as one array per block, and
/// __syncthreads as a barrier of the block's threads. KILN_HOST_TRAMPOLINE (which every
/// kiln kernel source names under KILN_HOST_EMULATION) then exports a launcher that runs a
/// grid: one host thread per CUDA thread of a block, the blocks in turn.
const char* const kHostPrelude = R"(#include <math.h>
#include <barrier>
#include <thread>
#include <vector>
struct KilnHostDim3 { unsigned x = 1, y = 1, z = 1; };
static thread_local KilnHostDim3 threadIdx, blockIdx;
static KilnHostDim3 blockDim, gridDim;
static std::barrier<>* kiln_host_barrier;
#define __global__
#define __device__
#define __shared__ static
#define __syncthreads() kiln_host_barrier->arrive_and_wait()
template <class F>
void kiln_host_run(unsigned grid, unsigned block, const F& body) {
  gridDim.x = grid;
  blockDim.x = block;
  std::barrier<> bar(block);
  kiln_host_barrier = &bar;
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < block; ++t)
    threads.emplace_back([&, t] {
      threadIdx.x = t;
      for (unsigned b = 0; b < grid; ++b) {
        blockIdx.x = b;
        body();
        bar.arrive_and_wait();
      }
    });
  for (auto& th : threads) th.join();
}
#define KILN_HOST_TRAMPOLINE(name, Args)                                          \
  extern "C" unsigned long kiln_host_args_size_##name() { return sizeof(Args); } \
  extern "C" void kiln_host_launch_##name(const void* a, unsigned g, unsigned b) { \
    kiln_host_run(g, b, [&] { name(*static_cast<const Args*>(a)); });           \
  }
#define KILN_HOST_EMULATION 1
)";

/// The fake driver runs kernel \p name of kiln's CUDA \p source by compiling the source
/// for the host (once per source) with kHostPrelude.
void emulate_on_host(const std::string& name, const std::string& source) {
  static std::map<std::string, void*> libraries;  // by source
  void*& handle = libraries[source];
  if (handle == nullptr) {
    // Compiled once per build tree, shared by the test processes ctest starts: the prelude
    // as a precompiled header (it halves each kernel's compile), each source as a library
    // named by its hash. Written under temporary names and renamed, so that two processes
    // never see half a file.
    const std::filesystem::path dir = KILN_TEST_HOST_CACHE;
    std::filesystem::create_directories(dir);
    const std::string pid = std::to_string(::getpid());
    const auto run = [](const std::string& command) {
      if (std::system(command.c_str()) != 0)
        throw std::runtime_error("host compile failed: " + command);
    };
    const std::string cxx = std::string(KILN_TEST_HOST_CXX) + " -std=c++20 -O0 -pthread -fPIC";
    const std::filesystem::path prelude = dir / "prelude.hpp", pch = dir / "prelude.hpp.gch";
    if (!std::filesystem::exists(pch)) {
      const std::filesystem::path text = dir / ("prelude." + pid + ".tmp");
      std::ofstream(text) << kHostPrelude;
      std::filesystem::rename(text, prelude);
      const std::filesystem::path part = dir / ("prelude." + pid + ".gch");
      run(cxx + " -x c++-header -o '" + part.string() + "' '" + prelude.string() + "'");
      std::filesystem::rename(part, pch);
    }
    const std::string stem =
        std::to_string(std::hash<std::string>{}(source)) + "_" + std::to_string(source.size());
    const std::filesystem::path lib = dir / (stem + ".so");
    if (!std::filesystem::exists(lib)) {
      const std::filesystem::path src = dir / (stem + "." + pid + ".cpp"),
                                  part = dir / (stem + "." + pid + ".so");
      std::ofstream(src) << source;
      run(cxx + " -shared -include '" + prelude.string() + "' -o '" + part.string() + "' '" +
          src.string() + "'");
      std::filesystem::rename(part, lib);
      std::filesystem::remove(src);
    }
    handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) throw std::runtime_error(dlerror());
  }
  using Launch = void (*)(const void*, unsigned, unsigned);
  using Size = unsigned long (*)();
  const auto launch = reinterpret_cast<Launch>(dlsym(handle, ("kiln_host_launch_" + name).c_str()));
  const auto size = reinterpret_cast<Size>(dlsym(handle, ("kiln_host_args_size_" + name).c_str()));
  if (launch == nullptr || size == nullptr)
    throw std::runtime_error("no host trampoline for " + name);
  FakeCuda::get().kernels[name] = {
      {size()},
      [launch](const unsigned char* args, const unsigned grid[3], const unsigned block[3]) {
        launch(args, grid[0], block[0]);
        return CUDA_SUCCESS;
      }};
}

/// Runs \p staged on \p ctx and on the CPU, twice each, and expects the same outputs.
void expect_cuda_matches_cpu(const std::shared_ptr<DeviceContext>& ctx, const StagedGraph& staged,
                             const std::map<std::string, Tensor>& weights,
                             const std::function<std::vector<Tensor>(int)>& inputs) {
  CompiledCallable on_gpu(staged, weights, {.context = ctx});
  CompiledCallable on_cpu(staged, weights);
  for (int call = 0; call < 2; ++call) {
    const std::vector<Tensor> x = inputs(call);
    const std::vector<Tensor> got = on_gpu.run(x), want = on_cpu.run(x);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t o = 0; o < got.size(); ++o) {
      ASSERT_EQ(got[o].layout().dtype, want[o].layout().dtype);
      ASSERT_EQ(got[o].shape(), want[o].shape());
      const std::vector<double> g = got[o].to_doubles(), w = want[o].to_doubles();
      for (std::size_t i = 0; i < g.size(); ++i)
        ASSERT_NEAR(g[i], w[i], 1e-5 * (1 + std::fabs(w[i])))
            << "call " << call << " output " << o << " element " << i;
    }
  }
  EXPECT_EQ(on_gpu.stats().plans, 1u);
}

TEST_P(CudaBackend, ACompiledGraphRunsOnCudaAsOnTheCpu) {
  if (!gpu()) compiler::set_cuda_source_observer(emulate_on_host);
  // A weight matmul over a batch of rows with a fused epilogue (bias, relu), a reshape,
  // one matrix against a batch of weights, a batch against a batch, and a chain of
  // elementwise ops with constants.
  const auto f32 = [](Shape shape) { return TensorLayout(DType::f32, std::move(shape)); };
  const auto model = [&](Tensor x) {
    const Tensor h = relu(matmul(x, weight("w1", f32({8, 16}))) + weight("b1", f32({16})));
    const Tensor u = matmul(reshape(h, Shape({6, 16})), weight("w3", f32({2, 16, 5})));
    const Tensor z = matmul(h, weight("w2", f32({2, 16, 5})));
    return std::make_tuple(gelu(z) * 0.5 + 1.0, u);
  };
  const StagedGraph staged = stage(model)(f32({2, 3, 8}));
  const std::map<std::string, Tensor> weights{
      {"w1", Tensor::random(f32({8, 16}), 1, -0.5, 0.5)},
      {"b1", Tensor::random(f32({16}), 2, -0.5, 0.5)},
      {"w2", Tensor::random(f32({2, 16, 5}), 3, -0.5, 0.5)},
      {"w3", Tensor::random(f32({2, 16, 5}), 4, -0.5, 0.5)}};
  const auto ctx = std::make_shared<DeviceContext>(context());
  expect_cuda_matches_cpu(ctx, staged, weights, [&](int call) {
    return std::vector{Tensor::random(f32({2, 3, 8}), 10 + call, -1, 1)};
  });
  if (!gpu()) {
    compiler::set_cuda_source_observer(nullptr);
    EXPECT_EQ(fake().gemms, 6);  // 3 matmuls x 2 calls
    // In program order, one after another: GEMMs as captured child graphs, elementwise
    // kernels, the reshape as a copy.
    const auto& g = *fake().last_instantiated;
    std::vector<CUgraphNodeType> types;
    for (const auto& node : g.nodes) types.push_back(node->type);
    const auto count = [&](CUgraphNodeType t) { return std::count(types.begin(), types.end(), t); };
    EXPECT_EQ(count(CU_GRAPH_NODE_TYPE_GRAPH), 3);
    EXPECT_EQ(count(CU_GRAPH_NODE_TYPE_MEMCPY), 1);
    EXPECT_GE(count(CU_GRAPH_NODE_TYPE_KERNEL), 2);
    EXPECT_EQ(count(CU_GRAPH_NODE_TYPE_KERNEL) + 4, static_cast<long>(types.size()));
    for (std::size_t i = 1; i < g.nodes.size(); ++i)
      EXPECT_EQ(g.index_of(g.nodes[i]->dependencies.at(0)), static_cast<int>(i) - 1);
  }
}

TEST_P(CudaBackend, AnAttentionBlockRunsOnCudaAsOnTheCpu) {
  if (!gpu()) compiler::set_cuda_source_observer(emulate_on_host);
  // Embedding (gather), layer norm, heads split by reshape and transpose, scores with a
  // softmax, heads merged, an RMS norm, a log-softmax along a middle axis and a
  // broadcast_to: every op of kiln's CUDA library.
  const auto f32 = [](Shape shape) { return TensorLayout(DType::f32, std::move(shape)); };
  const auto model = [&](Tensor ids) {
    const Tensor e = embedding(weight("table", f32({11, 8})), ids);  // [2, 5, 8]
    const Tensor n = layer_norm(e, weight("g", f32({8})), weight("b", f32({8})));
    const auto heads = [&](const char* w) {  // [2, 2, 5, 4]
      return transpose(reshape(matmul(n, weight(w, f32({8, 8}))), Shape({2, 5, 2, 4})), 1, 2);
    };
    const Tensor q = heads("wq"), k = heads("wk"), v = heads("wv");
    const Tensor s = softmax(matmul(q, transpose(k, 2, 3)) * 0.5, -1);  // [2, 2, 5, 5]
    const Tensor c = reshape(transpose(matmul(s, v), 1, 2), Shape({2, 5, 8}));
    const Tensor o = rms_norm(c + e, weight("g2", f32({8})));
    return std::make_tuple(log_softmax(o, 1), broadcast_to(weight("g", f32({8})), Shape({3, 8})));
  };
  const StagedGraph staged = stage(model)(TensorLayout(DType::i64, {2, 5}));
  std::map<std::string, Tensor> weights;
  int seed = 20;
  for (const auto& [name, shape] : std::vector<std::pair<std::string, Shape>>{{"table", {11, 8}},
                                                                              {"g", {8}},
                                                                              {"b", {8}},
                                                                              {"wq", {8, 8}},
                                                                              {"wk", {8, 8}},
                                                                              {"wv", {8, 8}},
                                                                              {"g2", {8}}})
    weights.emplace(name, Tensor::random(f32(shape), seed++, -1, 1));
  const auto ctx = std::make_shared<DeviceContext>(context());
  const auto ids = [](int call) {
    std::vector<std::int64_t> v(10);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<std::int64_t>((i * 7 + call) % 11);
    return Tensor::from_bytes(DType::i64, Shape({2, 5}), Device::cpu(), v.data(),
                              v.size() * sizeof(std::int64_t));
  };
  expect_cuda_matches_cpu(ctx, staged, weights, [&](int call) { return std::vector{ids(call)}; });

  // An index outside the table is an error of the call that names it; the next call runs.
  CompiledCallable on_gpu(staged, weights, {.context = ctx});
  std::vector<std::int64_t> bad(10, 3);
  bad[4] = 11;
  KILN_EXPECT_THROW_MSG(on_gpu.run({Tensor::from_bytes(DType::i64, Shape({2, 5}), Device::cpu(),
                                                       bad.data(), bad.size() * 8)}),
                        UserError, "a gather's index 11 is outside [0, 11)");
  EXPECT_NO_THROW(on_gpu.run({ids(0)}));
  if (!gpu()) compiler::set_cuda_source_observer(nullptr);
}

TEST_P(CudaBackend, GatherElementsGatherNdAndCumsumRunOnCudaAsOnTheCpu) {
  // The ops exported transformers build their masks and positions with: negative indices,
  // indices shorter than the data off the axis, batch dims, every cumsum mode and dtype.
  if (!gpu()) compiler::set_cuda_source_observer(emulate_on_host);
  const auto model = [](Tensor x, Tensor ids, Tensor tuples, Tensor n) {
    // x: f32 [3, 4, 5]; ids: i64 [3, 2, 5]; tuples: i32 [3, 2, 1]; n: i64 [3, 4]
    return std::make_tuple(gather_elements(x, ids, 1), gather_nd(x, tuples, 1), cumsum(x, 2),
                           cumsum(x, 1, true, true), cumsum(n, 0, false, true),
                           cumsum(cast(n, DType::i32), 1, true), cumsum(cast(x, DType::f64), 0));
  };
  const StagedGraph staged =
      stage(model)(TensorLayout(DType::f32, {3, 4, 5}), TensorLayout(DType::i64, {3, 2, 5}),
                   TensorLayout(DType::i32, {3, 2, 1}), TensorLayout(DType::i64, {3, 4}));
  const auto inputs = [](int call) {
    std::vector<std::int64_t> ids(30), n(12);
    std::vector<std::int32_t> tuples(6);
    for (std::size_t i = 0; i < ids.size(); ++i)
      ids[i] = static_cast<std::int64_t>((i * 5 + static_cast<std::size_t>(call)) % 8) - 4;
    for (std::size_t i = 0; i < tuples.size(); ++i)
      tuples[i] = static_cast<std::int32_t>((i + static_cast<std::size_t>(call)) % 8) - 4;
    for (std::size_t i = 0; i < n.size(); ++i)
      n[i] = (std::int64_t{1} << 40) * static_cast<std::int64_t>(i % 5) - 7 + call;
    return std::vector{Tensor::random(TensorLayout(DType::f32, {3, 4, 5}), 70 + call, -1, 1),
                       Tensor::from_data(ids, Shape{3, 2, 5}),
                       Tensor::from_data(tuples, Shape{3, 2, 1}),
                       Tensor::from_data(n, Shape{3, 4})};
  };
  const auto ctx = std::make_shared<DeviceContext>(context());
  expect_cuda_matches_cpu(ctx, staged, {}, inputs);
  // An index outside [-4, 4) is an error of the call that names it; the next call runs.
  CompiledCallable on_gpu(staged, {}, {.context = ctx});
  std::vector<Tensor> bad = inputs(0);
  std::vector<std::int64_t> ids = bad[1].to_vector<std::int64_t>();
  ids[7] = -5;
  bad[1] = Tensor::from_data(ids, Shape{3, 2, 5});
  KILN_EXPECT_THROW_MSG(on_gpu.run(bad), UserError,
                        "a gather_elements' index -5 is outside [-4, 4)");
  std::vector<std::int32_t> tuples = bad[2].to_vector<std::int32_t>();
  tuples[1] = 4;
  bad = inputs(0);
  bad[2] = Tensor::from_data(tuples, Shape{3, 2, 1});
  KILN_EXPECT_THROW_MSG(on_gpu.run(bad), UserError, "a gather_nd's index 4 is outside [-4, 4)");
  EXPECT_NO_THROW(on_gpu.run(inputs(1)));
  // Nine dims are more than the kernels' fixed arrays hold: refused, not overrun.
  const Shape nine{1, 1, 1, 1, 1, 1, 1, 1, 2};
  const StagedGraph deep = stage([](Tensor t, Tensor i) { return gather_nd(t, i); })(
      TensorLayout(DType::f32, nine), TensorLayout(DType::i64, {1, 9}));
  KILN_EXPECT_THROW_MSG(CompiledCallable(deep, {}, {.context = ctx})
                            .run({Tensor::zeros(TensorLayout(DType::f32, nine)),
                                  Tensor::zeros(TensorLayout(DType::i64, {1, 9}))}),
                        UserError, "more than 8 dimensions");
  if (!gpu()) compiler::set_cuda_source_observer(nullptr);
}

TEST_P(CudaBackend, ScatterNdAndTopKRunOnCudaAsOnTheCpu) {
  // A KV-cache style update (duplicate rows: the last write wins; add combines in order)
  // and top_k with ties and NaNs, largest and smallest, along the last and a middle axis.
  if (!gpu()) compiler::set_cuda_source_observer(emulate_on_host);
  const auto model = [](Tensor cache, Tensor rows, Tensor update, Tensor scores, Tensor n) {
    // cache: f32 [6, 4]; rows: i64 [3, 1]; update: f32 [3, 4]; scores: f32 [3, 5, 7];
    // n: i64 [6, 4]
    auto [best, at] = top_k(scores, 3);
    auto [low, low_at] = top_k(scores, 2, 1, false);
    auto [top_n, top_n_at] = top_k(n, 4, 0);
    return std::make_tuple(scatter_nd(cache, rows, update), scatter_nd(cache, rows, update, "add"),
                           scatter_nd(n, rows, cast(update, DType::i64), "max"), best, at, low,
                           low_at, top_n, top_n_at);
  };
  const StagedGraph staged =
      stage(model)(TensorLayout(DType::f32, {6, 4}), TensorLayout(DType::i64, {3, 1}),
                   TensorLayout(DType::f32, {3, 4}), TensorLayout(DType::f32, {3, 5, 7}),
                   TensorLayout(DType::i64, {6, 4}));
  const auto inputs = [](int call) {
    std::vector<float> scores =
        Tensor::random(TensorLayout(DType::f32, {3, 5, 7}), 90 + call, -2, 2).to_vector<float>();
    for (std::size_t i = 0; i < scores.size(); i += 5) scores[i] = 0.5f;  // ties
    scores[3] = std::numeric_limits<float>::quiet_NaN();
    scores[40] = std::numeric_limits<float>::quiet_NaN();
    std::vector<std::int64_t> n(24);
    for (std::size_t i = 0; i < n.size(); ++i)
      n[i] = static_cast<std::int64_t>((i * 7 + static_cast<std::size_t>(call)) % 5) - 2;
    return std::vector{Tensor::random(TensorLayout(DType::f32, {6, 4}), 80 + call, -1, 1),
                       Tensor::from_data(std::vector<std::int64_t>{2, -1, 2}, Shape{3, 1}),
                       Tensor::random(TensorLayout(DType::f32, {3, 4}), 85 + call, -3, 3),
                       Tensor::from_data(scores, Shape{3, 5, 7}),
                       Tensor::from_data(n, Shape{6, 4})};
  };
  const auto ctx = std::make_shared<DeviceContext>(context());
  // NaN outputs compare as NaN; every index and integer exactly (to_doubles: small values).
  CompiledCallable on_gpu(staged, {}, {.context = ctx});
  CompiledCallable on_cpu(staged, {});
  for (int call = 0; call < 2; ++call) {
    const std::vector<Tensor> x = inputs(call);
    const std::vector<Tensor> got = on_gpu.run(x), want = on_cpu.run(x);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t o = 0; o < got.size(); ++o) {
      ASSERT_EQ(got[o].shape(), want[o].shape()) << "output " << o;
      const std::vector<double> g = got[o].to_doubles(), w = want[o].to_doubles();
      for (std::size_t i = 0; i < g.size(); ++i)
        EXPECT_TRUE((std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i])
            << "call " << call << " output " << o << " element " << i << ": " << g[i] << " vs "
            << w[i];
    }
  }
  std::vector<Tensor> bad = inputs(0);
  bad[1] = Tensor::from_data(std::vector<std::int64_t>{2, 6, 0}, Shape{3, 1});
  KILN_EXPECT_THROW_MSG(on_gpu.run(bad), UserError, "a scatter_nd's index 6 is outside [-6, 6)");
  EXPECT_NO_THROW(on_gpu.run(inputs(1)));
  if (!gpu()) compiler::set_cuda_source_observer(nullptr);
}

TEST_P(CudaBackend, ConvsPoolsScatterElementsAndProductsRunOnCudaAsOnTheCpu) {
  // What ResNet-like models and exporters' index updates bring: a grouped, strided,
  // dilated, padded conv with a bias, a 1-D conv, a transposed conv with output padding,
  // max pools with ceil_mode and a NaN, average pools with and without the pads counted,
  // scatter_elements along both axes (duplicates: the last write wins; add combines in
  // order) and products over an axis.
  if (!gpu()) compiler::set_cuda_source_observer(emulate_on_host);
  const auto model = [](Tensor x, Tensor w, Tensor bias, Tensor wt, Tensor line, Tensor w1,
                        Tensor table, Tensor ids, Tensor up) {
    // x: [2, 4, 9, 8]; w: [6, 2, 3, 3]; bias: [6]; wt: [4, 3, 3, 2]; line: [2, 3, 10];
    // w1: [5, 3, 4]; table: [6, 4]; ids: i64 [3, 4]; up: [3, 4]
    return std::make_tuple(
        conv(x, w, bias,
             Window{.strides = {2, 1}, .pads = {1, 0, 1, 2}, .dilations = {1, 2}, .groups = 2}),
        conv(line, w1, Window{.strides = {3}, .pads = {2, 1}}),
        conv_transpose(
            x, wt, bias,
            Window{.strides = {2, 2}, .pads = {1, 0, 0, 1}, .groups = 2, .output_padding = {1, 0}}),
        max_pool(x, {3, 3}, Window{.strides = {2, 2}, .pads = {1, 1, 1, 1}}, true),
        max_pool(line, {2}, Window{.dilations = {3}}),
        avg_pool(x, {2, 3}, Window{.strides = {2, 2}, .pads = {1, 1, 1, 1}}, true, true),
        avg_pool(x, {3, 2}, Window{.pads = {1, 0, 1, 1}}, false),
        scatter_elements(table, ids, up, 0), scatter_elements(table, ids, up, 0, "add"),
        scatter_elements(table, slice(ids, 1, 0, 2), slice(up, 1, 0, 2), 1, "max"), prod(x, {3}),
        prod(line, {0, 2}, true));
  };
  const auto f32 = [](Shape shape) { return TensorLayout(DType::f32, std::move(shape)); };
  const StagedGraph staged = stage(model)(
      f32({2, 4, 9, 8}), f32({6, 2, 3, 3}), f32({6}), f32({4, 3, 3, 2}), f32({2, 3, 10}),
      f32({5, 3, 4}), f32({6, 4}), TensorLayout(DType::i64, {3, 4}), f32({3, 4}));
  const auto inputs = [&](int call) {
    std::vector<float> x = Tensor::random(f32({2, 4, 9, 8}), 100 + call, -1, 1).to_vector<float>();
    x[17] = std::numeric_limits<float>::quiet_NaN();  // in some pool windows, not others
    std::vector<std::int64_t> ids(12);
    for (std::size_t i = 0; i < ids.size(); ++i)  // duplicates along both axes, negatives
      ids[i] = static_cast<std::int64_t>((i * 3 + static_cast<std::size_t>(call)) % 5) - 2;
    return std::vector{Tensor::from_data(x, Shape{2, 4, 9, 8}),
                       Tensor::random(f32({6, 2, 3, 3}), 110 + call, -1, 1),
                       Tensor::random(f32({6}), 120 + call, -1, 1),
                       Tensor::random(f32({4, 3, 3, 2}), 130 + call, -1, 1),
                       Tensor::random(f32({2, 3, 10}), 140 + call, 0.5, 1.5),
                       Tensor::random(f32({5, 3, 4}), 150 + call, -1, 1),
                       Tensor::random(f32({6, 4}), 160 + call, -1, 1),
                       Tensor::from_data(ids, Shape{3, 4}),
                       Tensor::random(f32({3, 4}), 170 + call, -3, 3)};
  };
  const auto ctx = std::make_shared<DeviceContext>(context());
  CompiledCallable on_gpu(staged, {}, {.context = ctx});
  CompiledCallable on_cpu(staged, {});
  for (int call = 0; call < 2; ++call) {
    const std::vector<Tensor> x = inputs(call);
    const std::vector<Tensor> got = on_gpu.run(x), want = on_cpu.run(x);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t o = 0; o < got.size(); ++o) {
      ASSERT_EQ(got[o].shape(), want[o].shape()) << "output " << o;
      const std::vector<double> g = got[o].to_doubles(), w = want[o].to_doubles();
      for (std::size_t i = 0; i < g.size(); ++i)
        EXPECT_TRUE((std::isnan(g[i]) && std::isnan(w[i])) ||
                    std::fabs(g[i] - w[i]) <= 1e-5 * (1 + std::fabs(w[i])))
            << "call " << call << " output " << o << " element " << i << ": " << g[i] << " vs "
            << w[i];
    }
  }
  std::vector<Tensor> bad = inputs(0);
  std::vector<std::int64_t> ids = bad[7].to_vector<std::int64_t>();
  ids[5] = 6;
  bad[7] = Tensor::from_data(ids, Shape{3, 4});
  KILN_EXPECT_THROW_MSG(on_gpu.run(bad), UserError,
                        "a scatter_elements' index 6 is outside [-6, 6)");
  EXPECT_NO_THROW(on_gpu.run(inputs(1)));
  // Other dtypes are refused, saying what to do.
  const StagedGraph f64_pool =
      stage([](Tensor t) { return max_pool(t, {2}); })(TensorLayout(DType::f64, {1, 1, 4}));
  KILN_EXPECT_THROW_MSG(CompiledCallable(f64_pool, {}, {.context = ctx})
                            .run({Tensor::zeros(TensorLayout(DType::f64, {1, 1, 4}))}),
                        UserError, "kiln.max_pool runs on CUDA over f32 so far");
  if (!gpu()) compiler::set_cuda_source_observer(nullptr);
}

TEST_P(CudaBackend, ResizeRunsOnCudaAsOnTheCpu) {
  // Each mode over the CPU's tap tables: nearest of integers (exact), bilinear up, an
  // antialiased bicubic shrink with excluded outside taps, a crop with its extrapolation
  // value, and f64.
  if (!gpu()) compiler::set_cuda_source_observer(emulate_on_host);
  const auto model = [](Tensor x, Tensor n, Tensor d) {  // x: f32 [2, 3, 6, 5]; n: i64 [1, 7]
    const Resampling linear{.mode = "linear"};
    const Resampling cubic{.mode = "cubic", .exclude_outside = true, .antialias = true};
    const Resampling crop{.mode = "linear",
                          .coordinates = "tf_crop_and_resize",
                          .extrapolation_value = 9.5,
                          .roi = {0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3}};
    const Resampling nearest{
        .mode = "nearest", .coordinates = "asymmetric", .nearest_mode = "ceil"};
    return std::make_tuple(resize(x, {-1, -1, 12, 10}, linear), resize(x, {-1, -1, 4, 2}, cubic),
                           resize(x, {-1, -1, 5, 7}, crop), resize(n, {-1, 17}, nearest),
                           resize(d, {-1, -1, 9, 4}, linear));
  };
  const StagedGraph staged =
      stage(model)(TensorLayout(DType::f32, {2, 3, 6, 5}), TensorLayout(DType::i64, {1, 7}),
                   TensorLayout(DType::f64, {1, 2, 3, 3}));
  const auto inputs = [](int call) {
    std::vector<std::int64_t> n(7);
    for (std::size_t i = 0; i < n.size(); ++i)
      n[i] = (std::int64_t{1} << 60) + static_cast<std::int64_t>(i) * 3 - call;  // exact
    return std::vector{Tensor::random(TensorLayout(DType::f32, {2, 3, 6, 5}), 180 + call, -1, 1),
                       Tensor::from_data(n, Shape{1, 7}),
                       Tensor::random(TensorLayout(DType::f64, {1, 2, 3, 3}), 190 + call, -1, 1)};
  };
  const auto ctx = std::make_shared<DeviceContext>(context());
  CompiledCallable on_gpu(staged, {}, {.context = ctx});
  CompiledCallable on_cpu(staged, {});
  for (int call = 0; call < 2; ++call) {
    const std::vector<Tensor> x = inputs(call);
    const std::vector<Tensor> got = on_gpu.run(x), want = on_cpu.run(x);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t o = 0; o < got.size(); ++o) {
      ASSERT_EQ(got[o].layout(), want[o].layout()) << "output " << o;
      if (got[o].layout().dtype == DType::i64) {  // copied exactly, above 2^53 too
        EXPECT_EQ(got[o].to_vector<std::int64_t>(), want[o].to_vector<std::int64_t>());
        continue;
      }
      // The same sums in the same order, in double; a GPU fuses multiply-adds, so f64
      // results may differ in their last bits.
      const std::vector<double> g = got[o].to_doubles(), w = want[o].to_doubles();
      for (std::size_t i = 0; i < g.size(); ++i)
        ASSERT_NEAR(g[i], w[i], 1e-12 * (1 + std::fabs(w[i])))
            << "call " << call << " output " << o << " element " << i;
    }
  }
  // What the kernel does not compute is refused, saying what to do.
  const StagedGraph half = stage([](Tensor t) {
    return resize(t, {1, 8}, Resampling{.mode = "linear"});
  })(TensorLayout(DType::f16, {1, 4}));
  KILN_EXPECT_THROW_MSG(CompiledCallable(half, {}, {.context = ctx})
                            .run({Tensor::zeros(TensorLayout(DType::f16, {1, 4}))}),
                        UserError, "run on CUDA over f32 and f64 so far");
  if (!gpu()) compiler::set_cuda_source_observer(nullptr);
}

TEST_P(CudaBackend, SlicesConcatsSplitsAndReductionsRunOnCudaAsOnTheCpu) {
  if (!gpu()) compiler::set_cuda_source_observer(emulate_on_host);
  const auto model = [](Tensor x) {                         // x: [3, 4, 6]
    const Tensor s = slice(x, 2, 1, 6, 2);                  // [3, 4, 3], a stride of 2
    const std::vector<Tensor> parts = split(x, {2, 4}, 2);  // [3, 4, 2], [3, 4, 4]
    const Tensor c = concat({parts[1], s, parts[0]}, 2);    // [3, 4, 9]
    return std::make_tuple(c, sum(c, {0, 2}), mean(x, {1}, true), max(s, {2}), min(x, {0, 1, 2}),
                           argmax(x, 1), argmax(c, 2, true), gather(x, arange(3, 0, -1), 1));
  };
  const StagedGraph staged = stage(model)(TensorLayout(DType::f32, {3, 4, 6}));
  expect_cuda_matches_cpu(std::make_shared<DeviceContext>(context()), staged, {}, [](int call) {
    return std::vector{Tensor::random(TensorLayout(DType::f32, {3, 4, 6}), 30 + call, -2, 2)};
  });
  if (!gpu()) compiler::set_cuda_source_observer(nullptr);
}

TEST_P(CudaBackend, ArgmaxOnCudaTakesTiesAndNaNsAsTheCpuDoes) {
  if (!gpu()) compiler::set_cuda_source_observer(emulate_on_host);
  const StagedGraph staged =
      stage([](Tensor x) { return argmax(x, 1); })(TensorLayout(DType::f32, {5, 70}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_cuda_matches_cpu(std::make_shared<DeviceContext>(context()), staged, {}, [&](int call) {
    std::vector<float> x(5 * 70);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37 + call) % 11);
    x[0] = nan;                                          // row 0 starts with NaN: 0
    x[70 + 5] = x[70 + 60] = nan;                        // row 1: the first NaN, 5
    x[140 + 69] = 99;                                    // row 2: the largest is last
    x[210 + 3] = x[210 + 40] = 50;                       // row 3: a tie, the first wins
    for (std::size_t i = 280; i < 350; ++i) x[i] = nan;  // row 4: all NaN: 0
    return std::vector{Tensor::from_bytes(DType::f32, Shape({5, 70}), Device::cpu(), x.data(),
                                          x.size() * sizeof(float))};
  });
  if (!gpu()) compiler::set_cuda_source_observer(nullptr);
}

TEST_P(CudaBackend, ElementwiseOpsOfEveryDtypeRunOnCudaAsOnTheCpu) {
  if (!gpu()) compiler::set_cuda_source_observer(emulate_on_host);
  // Comparisons to bool, where, integer division, casts that saturate and round, f16 and
  // bf16 arithmetic (in double, rounded after each op), f64: the per-element interpreter's
  // semantics, generated as CUDA.
  const auto model = [](Tensor x, Tensor n) {  // x: f32 [4, 6], n: i32 [4, 6]
    const Tensor mask = x > 0.0;
    const Tensor picked = where(mask, x, cast(n, DType::f32));
    const Tensor quotient = cast(x * 40.0, DType::i32) / n;  // truncating, 0 for n = 0
    const Tensor small = cast(x * 300.0, DType::i8);         // saturates at -128 and 127
    const Tensor half = exp(cast(x, DType::f16)) * cast(x, DType::f16);
    const Tensor brain = tanh(cast(x, DType::bf16)) + cast(n, DType::bf16);
    const Tensor wide = gelu(cast(x, DType::f64), "tanh") / 3.0;
    return std::make_tuple(mask, picked, quotient, small, half, brain, wide,
                           cast(maximum(x, cast(n, DType::f32)), DType::i64));
  };
  const StagedGraph staged =
      stage(model)(TensorLayout(DType::f32, {4, 6}), TensorLayout(DType::i32, {4, 6}));
  expect_cuda_matches_cpu(std::make_shared<DeviceContext>(context()), staged, {}, [](int call) {
    std::vector<std::int32_t> n(24);
    for (std::size_t i = 0; i < n.size(); ++i) n[i] = static_cast<std::int32_t>(i % 7) - 3 + call;
    std::vector<float> x =
        Tensor::random(TensorLayout(DType::f32, {4, 6}), 40 + call, -1, 1).to_vector<float>();
    x[0] = 1.0f + 3.0f / 2048;  // halfway between two f16 values, the lower one odd: rounds up
    x[1] = 1.0f + 1.0f / 2048;  // halfway, the lower one even: rounds down
    return std::vector{Tensor::from_bytes(DType::f32, Shape({4, 6}), Device::cpu(), x.data(),
                                          x.size() * sizeof(float)),
                       Tensor::from_bytes(DType::i32, Shape({4, 6}), Device::cpu(), n.data(),
                                          n.size() * sizeof(std::int32_t))};
  });
  if (!gpu()) compiler::set_cuda_source_observer(nullptr);
}

TEST_P(CudaBackend, IntegersAreExactAndNanPropagatesOnCudaAsOnTheCpu) {
  // The generated scalar kernels hold integers as 64-bit integers (a double would round
  // 2^53 + 1), wrap as two's complement, cast once; maximum propagates NaN. Bit for bit.
  if (!gpu()) compiler::set_cuda_source_observer(emulate_on_host);
  const auto model = [](Tensor a, Tensor b, Tensor x) {
    return std::make_tuple(a + b, a * b, equal(a, b), maximum(a, b), cast(a, DType::f32),
                           cast(a, DType::i8), abs(neg(a)), maximum(x, x * 0.5), relu(x - 1.0),
                           cast(x * 1e10, DType::i32));
  };
  const TensorLayout i64(DType::i64, {4});
  const StagedGraph staged = stage(model)(i64, i64, TensorLayout(DType::f32, {4}));
  const std::int64_t big = (std::int64_t{1} << 53) + 1;
  const std::int64_t e60 = (std::int64_t{1} << 60) + (std::int64_t{1} << 36) + 1;
  const std::int64_t lowest = std::numeric_limits<std::int64_t>::min();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<Tensor> in = {
      Tensor::from_data(std::vector<std::int64_t>{big, e60, lowest, 300}, Shape{4}),
      Tensor::from_data(std::vector<std::int64_t>{big - 1, 3, -1, 2}, Shape{4}),
      Tensor::from_data(std::vector<float>{nan, 2, -3, 0.5f}, Shape{4})};
  CompiledCallable on_gpu(staged, {}, {.context = std::make_shared<DeviceContext>(context())});
  CompiledCallable on_cpu(staged, {});
  const std::vector<Tensor> got = on_gpu.run(in), want = on_cpu.run(in);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t o = 0; o < got.size(); ++o) {
    if (want[o].dtype() == DType::f32) {
      // Bit for bit but NaN's payload: a GPU's arithmetic returns the canonical NaN
      // (0x7fffffff) where x86 keeps its operand's (0x7fc00000), as IEEE 754 allows.
      const std::vector<float> g = got[o].to_vector<float>(), w = want[o].to_vector<float>();
      ASSERT_EQ(g.size(), w.size()) << "output " << o;
      for (std::size_t i = 0; i < g.size(); ++i)
        EXPECT_TRUE((std::isnan(g[i]) && std::isnan(w[i])) ||
                    std::bit_cast<std::uint32_t>(g[i]) == std::bit_cast<std::uint32_t>(w[i]))
            << "output " << o << " element " << i << ": " << g[i] << " vs " << w[i];
      continue;
    }
    const auto g = got[o].bytes(), w = want[o].bytes();
    EXPECT_TRUE(std::equal(g.begin(), g.end(), w.begin(), w.end())) << "output " << o;
  }
  EXPECT_EQ(want[0].to_vector<std::int64_t>()[0], 2 * big - 1);
  EXPECT_EQ(want[4].to_vector<float>()[1], 0x1.000002p60f);  // rounded once
  EXPECT_TRUE(std::isnan(want[7].to_vector<float>()[0]));
  if (!gpu()) compiler::set_cuda_source_observer(nullptr);
}

TEST_P(CudaBackend, TheDemoTransformerRunsOnCudaAsOnTheCpu) {
  if (!gpu()) compiler::set_cuda_source_observer(emulate_on_host);
  // kiln demo's model, small: embedding, two blocks sharing one subgraph body (layer norm,
  // attention, GELU MLP), a final RMS norm and the LM head.
  const nn::TransformerBlock block{.dim = 16, .heads = 2, .hidden = 32};
  const auto model = [&](Tensor ids) {
    Tensor x = nn::Embedding{.vocab = 20, .dim = 16, .name = "embed"}(ids);
    const auto layer = as_subgraph(block, {.name = "block"});
    for (int i = 0; i < 2; ++i) {
      name_scope scope("layers." + std::to_string(i));
      x = layer(x);
    }
    x = nn::RMSNorm{.dim = 16, .name = "final_norm"}(x);
    return nn::Linear{.in = 16, .out = 20, .bias = false, .name = "lm_head"}(x);
  };
  const StagedGraph staged = stage(model)(TensorLayout(DType::i64, {"batch", "seq"}));
  std::map<std::string, Tensor> weights;
  std::uint64_t seed = 100;
  for (const auto& [name, type] : module_weights(staged.graph()))
    weights.emplace(name, Tensor::random(TensorLayout(type.dtype, type.shape), seed++, -0.5, 0.5));
  const auto ids = [](int call) {
    std::vector<std::int64_t> v(2 * 6);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<std::int64_t>((i * 5 + call) % 20);
    return Tensor::from_bytes(DType::i64, Shape({2, 6}), Device::cpu(), v.data(),
                              v.size() * sizeof(std::int64_t));
  };
  expect_cuda_matches_cpu(std::make_shared<DeviceContext>(context()), staged, weights,
                          [&](int call) { return std::vector{ids(call)}; });
  if (!gpu()) compiler::set_cuda_source_observer(nullptr);
}

// The random-graph differential test (tests/compiler/random_programs.hpp) on CUDA: each
// random program compiled for the GPU and compared with the reference interpreter, as the
// CPU's random-graph test does, empty dims included. What CUDA refuses with its error
// (an op form it has no kernel for yet) is counted, not compared; most programs must run.
TEST_P(CudaBackend, RandomGraphsComputeOnCudaWhatTheReferenceComputes) {
  if (!gpu()) compiler::set_cuda_source_observer(emulate_on_host);
  const auto ctx = std::make_shared<DeviceContext>(context());
  constexpr std::uint64_t kGraphs = 40;
  std::uint64_t compared = 0;
  std::vector<std::string> refused;
  for (std::uint64_t seed = 1; seed <= kGraphs; ++seed) {
    const testing::RandomCase c = testing::random_case(seed, seed % 4 == 0 ? 0 : 1, DType::f32);
    std::vector<Tensor> got;
    try {  // CUDA's plan is made at the first call
      got = CompiledCallable(c.staged, {}, {.context = ctx}).run(c.inputs);
    } catch (const UserError& e) {
      const std::string what = e.what();
      if (what.find("run on CPU devices only") == std::string::npos) throw;
      refused.push_back("seed " + std::to_string(seed) + ": " + what);
      continue;
    }
    const std::string diff =
        testing::compare_outputs(got, reference_run(c.staged.graph(), c.inputs), 2e-5);
    if (!diff.empty()) {
      ADD_FAILURE() << "random graph seed " << seed << " on CUDA: " << diff << " (the reference)\n"
                    << c.staged.str();
      break;
    }
    ++compared;
  }
  compiler::set_cuda_source_observer(nullptr);
  EXPECT_EQ(compared + refused.size(), kGraphs);
  EXPECT_GE(compared, kGraphs * 3 / 4) << ::testing::PrintToString(refused);
}

#endif

/// \p n floats starting at \p first, counting by \p step.
std::vector<float> iota_values(std::size_t n, float first, float step = 1) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = first + step * static_cast<float>(i);
  return v;
}

TEST_P(CudaBackend, NcclCollectivesOfTwoGpusFromOneThread) {
  KILN_FAKE_ONLY("give one process two GPUs");
  fake().device_count = 2;
  std::vector<DeviceContext> ctx = {context(0), context(1)};
  const auto comm =
      detail::make_nccl_communicator({Device::cuda(0), Device::cuda(1)}, ctx, fake().nccl());
  ASSERT_EQ(comm->size(), 2);
  // Device buffers of each rank, filled from the host and read back after the collective.
  const auto run = [&](const std::vector<std::vector<float>>& in, std::vector<std::size_t> out_n,
                       const auto& make) {
    std::vector<DeviceBuffer<float>> ins, outs;
    std::vector<Collective> parts;
    for (int r = 0; r < 2; ++r) {
      ins.push_back(ctx[r].enqueue_create_buffer<float>(std::max<std::size_t>(1, in[r].size())));
      outs.push_back(ctx[r].enqueue_create_buffer<float>(out_n[r]));
      if (!in[r].empty()) ctx[r].enqueue_copy(std::span<float>(ins[r].data(), in[r].size()), in[r]);
      parts.push_back(make(r, ins[r].data(), outs[r].data()));
    }
    comm->enqueue_all(ctx, parts);
    std::vector<std::vector<float>> got;
    for (int r = 0; r < 2; ++r) {
      got.emplace_back(out_n[r]);
      ctx[r].enqueue_copy(got[r], outs[r]);
      ctx[r].synchronize();
    }
    return got;
  };
  using V = std::vector<float>;
  // allreduce: both get the sum.
  auto got = run(
      {iota_values(6, 1), iota_values(6, 10, 10)}, {6, 6},
      [](int, float* in, float* out) { return Collective::allreduce_sum(in, out, 6, DType::f32); });
  EXPECT_EQ(got[0], (V{11, 22, 33, 44, 55, 66}));
  EXPECT_EQ(got[1], got[0]);
  // allgather, even and uneven (one broadcast per rank).
  got = run({iota_values(2, 1), iota_values(2, 5)}, {4, 4}, [](int, float* in, float* out) {
    return Collective::allgather(in, out, {2, 2}, DType::f32);
  });
  EXPECT_EQ(got[0], (V{1, 2, 5, 6}));
  EXPECT_EQ(got[1], got[0]);
  got = run({iota_values(1, 1), iota_values(3, 5)}, {4, 4}, [](int, float* in, float* out) {
    return Collective::allgather(in, out, {1, 3}, DType::f32);
  });
  EXPECT_EQ(got[0], (V{1, 5, 6, 7}));
  EXPECT_EQ(got[1], got[0]);
  // reduce_scatter, even and uneven (one reduce per rank).
  got = run({iota_values(4, 1), iota_values(4, 10, 10)}, {2, 2}, [](int, float* in, float* out) {
    return Collective::reduce_scatter_sum(in, out, {2, 2}, DType::f32);
  });
  EXPECT_EQ(got[0], (V{11, 22}));
  EXPECT_EQ(got[1], (V{33, 44}));
  got = run({iota_values(4, 1), iota_values(4, 10, 10)}, {1, 3}, [](int, float* in, float* out) {
    return Collective::reduce_scatter_sum(in, out, {1, 3}, DType::f32);
  });
  EXPECT_EQ(got[0], (V{11}));
  EXPECT_EQ(got[1], (V{22, 33, 44}));
  // broadcast from rank 1; all_to_all of two elements a chunk.
  got = run({iota_values(3, 1), iota_values(3, 7)}, {3, 3}, [](int, float* in, float* out) {
    return Collective::broadcast(in, out, 3, 1, DType::f32);
  });
  EXPECT_EQ(got[0], (V{7, 8, 9}));
  EXPECT_EQ(got[1], got[0]);
  got = run({iota_values(4, 1), iota_values(4, 5)}, {4, 4}, [](int, float* in, float* out) {
    return Collective::all_to_all(in, out, 2, DType::f32);
  });
  EXPECT_EQ(got[0], (V{1, 2, 5, 6}));
  EXPECT_EQ(got[1], (V{3, 4, 7, 8}));
  EXPECT_EQ(fake().nccl_launches, 7);

  // Each rank's part must be on a context of its own GPU; sums of bools are refused.
  auto x = ctx[0].enqueue_create_buffer<float>(4);
  std::vector<DeviceContext> swapped = {ctx[1], ctx[0]};
  const std::vector<Collective> parts(2,
                                      Collective::allreduce_sum(x.data(), x.data(), 4, DType::f32));
  KILN_EXPECT_THROW_MSG(comm->enqueue_all(swapped, parts), UserError,
                        "rank 0 on a context of cuda:1, but rank 0 is cuda:0");
  const std::vector<Collective> bools(
      2, Collective::allreduce_sum(x.data(), x.data(), 4, DType::bool_));
  KILN_EXPECT_THROW_MSG(comm->enqueue_all(ctx, bools), UserError, "allreduce_sum of bool");
  KILN_EXPECT_THROW_MSG(comm->enqueue_all(std::span<const DeviceContext>(ctx.data(), 1), parts),
                        UserError, "1 contexts and 2 parts for 2 ranks");
  KILN_EXPECT_THROW_MSG(
      detail::make_nccl_communicator({Device::cuda(0), Device::cuda(0)}, ctx, fake().nccl()),
      UserError, "cuda:0 appears twice");
  KILN_EXPECT_THROW_MSG(Communicator::create_nccl({Device::cpu(0)}), UserError,
                        "cpu:0 is not a GPU");
}

TEST_P(CudaBackend, AOneGpuNcclCommunicatorRunsInStreamsAndGraphs) {
  DeviceContext ctx = context();
  const auto comm = gpu() ? Communicator::create_nccl({Device::cuda(0)})
                          : detail::make_nccl_communicator({Device::cuda(0)}, {ctx}, fake().nccl());
  const std::vector<float> values = iota_values(8, 1);
  auto x = ctx.enqueue_create_buffer<float>(8);
  auto y = ctx.enqueue_create_buffer<float>(8);
  ctx.enqueue_copy(x, values);
  ctx.enqueue_memset(y, 0.0f);
  comm->enqueue(ctx, 0, Collective::allreduce_sum(x.data(), y.data(), 8, DType::f32));
  std::vector<float> out(8);
  ctx.enqueue_copy(out, y);
  ctx.synchronize();
  EXPECT_EQ(out, values);  // one rank: the sum is the input

  // In a graph: captured once, replayed with the graph, after the memset it depends on.
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    auto clear = b.add_memset(y, 0.0f, {});
    auto reduce =
        comm->add(b, 0, Collective::broadcast(x.data(), y.data(), 8, 0, DType::f32), {clear});
    b.add_copy(out, y, reduce);
  });
  std::fill(out.begin(), out.end(), -1.0f);
  graph.replay();
  ctx.synchronize();
  EXPECT_EQ(out, values);
  comm->run(0, Collective::allreduce_sum(x.data(), y.data(), 8, DType::f32));
  if (!gpu()) {
    EXPECT_EQ(fake().nccl_launches, 3);
    EXPECT_EQ(fake().last_instantiated->nodes.at(1)->type, CU_GRAPH_NODE_TYPE_GRAPH);
  }
}

TEST_P(CudaBackend, CompiledGraphsRefuseSeveralDevicesWithCuda) {
  const auto ctx = std::make_shared<DeviceContext>(context());
  const StagedGraph staged = stage([](Tensor x) { return transfer_to(x, Device::cpu(1)) + 1.0; })(
      TensorLayout(DType::f32, {4}));
  KILN_EXPECT_THROW_MSG(CompiledCallable(staged, {}, {.context = ctx}), UserError,
                        "one of them CUDA", "one GPU so far");
}

#ifdef KILN_TEST_NVRTC
TEST_P(CudaBackend, SourceIsCompiledByNvrtcForTheDevicesArchitecture) {
  KILN_FAKE_ONLY("show the PTX it loads (on a GPU every other test compiles with NVRTC)");
  const auto cache = std::filesystem::temp_directory_path() / "kiln-cuda-backend-test-cache";
  std::filesystem::remove_all(cache);
  ::setenv("KILN_CACHE_DIR", cache.c_str(), 1);
  DeviceContext ctx = context();
  const std::string source = kAxpySource;
  std::string why;
  try {
    const auto fn = ctx.compile_function(CudaSource{source, "axpy"});
    ASSERT_FALSE(FakeCuda::get().loaded_images.empty());
    const std::string& ptx = FakeCuda::get().loaded_images.back();
    EXPECT_NE(ptx.find(".entry axpy("), std::string::npos);
    EXPECT_NE(ptx.find(".target sm_90"), std::string::npos);
    auto x = ctx.enqueue_create_buffer<float>(3);
    auto y = ctx.enqueue_create_buffer<float>(3);
    ctx.enqueue_memset(x, 1.0f);
    ctx.enqueue_memset(y, 1.0f);
    ctx.enqueue_function(fn, LaunchConfig{1, 32}, y.data(), x.data(), 0.5f, 3);
    std::vector<float> out(3);
    ctx.enqueue_copy(out, y);
    ctx.synchronize();
    for (float v : out) EXPECT_EQ(v, 1.5f);
  } catch (const UserError& e) {
    why = e.what();
  }
  if (why.find("NVRTC") != std::string::npos && why.find("not found") != std::string::npos)
    GTEST_SKIP() << why;
  EXPECT_EQ(why, "");
  KILN_EXPECT_THROW_MSG(ctx.compile_function(CudaSource{
                            "extern \"C\" __global__ void broken(int* x) { x[0] = ; }", "broken"}),
                        UserError, "broken", "expected an expression");
  std::filesystem::remove_all(cache);
}
#endif

INSTANTIATE_TEST_SUITE_P(FakeDriver, CudaBackend, ::testing::Values(false));
INSTANTIATE_TEST_SUITE_P(Gpu, CudaBackend, ::testing::Values(true));

}  // namespace
}  // namespace kiln
