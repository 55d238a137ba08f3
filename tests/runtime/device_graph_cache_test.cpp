#include "kiln/runtime/device_graph_cache.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "kiln/core/shape.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::read_back;

enum class Mode { fast, exact };

void add_into(int* counter, int value) { *counter += value; }

// A user type made a DeviceGraphInput by one function found through ADL.
struct Tile {
  int rows;
  int cols;
};
void write_graph_key(DeviceGraphKey& key, const Tile& t) {
  key.add("Tile.rows", std::to_string(t.rows));
  key.add("Tile.cols", std::to_string(t.cols));
}

static_assert(DeviceGraphInput<int>);
static_assert(DeviceGraphInput<unsigned char>);
static_assert(DeviceGraphInput<bool>);
static_assert(DeviceGraphInput<double>);
static_assert(DeviceGraphInput<Mode>);
static_assert(DeviceGraphInput<std::string>);
static_assert(DeviceGraphInput<const char*>);
static_assert(DeviceGraphInput<Shape>);
static_assert(DeviceGraphInput<Dim3>);
static_assert(DeviceGraphInput<DType>);
static_assert(DeviceGraphInput<DeviceBuffer<float>>);
static_assert(DeviceGraphInput<std::tuple<int, Shape, std::tuple<bool, Mode>>>);
static_assert(DeviceGraphInput<std::pair<int, float>>);
static_assert(DeviceGraphInput<Tile>);
static_assert(!DeviceGraphInput<int*>, "a raw pointer must not silently become a key");
static_assert(!DeviceGraphInput<std::vector<int>>);

template <class... T>
std::vector<DeviceGraphKey::Field> key_of(const T&... values) {
  DeviceGraphKey key;
  (write_graph_key(key, values), ...);
  return key.fields();
}

TEST(DeviceGraphKey, BuiltInInputsWriteNamedCanonicalFields) {
  using F = DeviceGraphKey::Field;
  EXPECT_EQ(key_of(7), (std::vector<F>{{"i32", "7"}}));
  EXPECT_EQ(key_of(std::uint64_t{7}), (std::vector<F>{{"u64", "7"}}));
  EXPECT_EQ(key_of(true), (std::vector<F>{{"bool", "true"}}));
  EXPECT_EQ(key_of(0.1), (std::vector<F>{{"f64", "0.1"}}));
  EXPECT_EQ(key_of(Mode::exact), (std::vector<F>{{"enum", "1"}}));
  EXPECT_EQ(key_of(std::string("abc")), (std::vector<F>{{"string", "abc"}}));
  EXPECT_EQ(key_of(Shape{2, "batch"}), (std::vector<F>{{"Shape", "[2, batch]"}}));
  EXPECT_EQ(key_of(Dim3{4, 2}), (std::vector<F>{{"Dim3", "(4, 2, 1)"}}));
  EXPECT_EQ(key_of(std::make_tuple(1, std::make_tuple(false))),
            (std::vector<F>{{"[0]: i32", "1"}, {"[1][0]: bool", "false"}}));
}

TEST(DeviceGraphKey, FloatsKeyByExactValueAndBuffersByIdentity) {
  EXPECT_NE(key_of(0.1f), key_of(0.1f + 1e-8f * 2));
  EXPECT_NE(key_of(0.0), key_of(-0.0));
  DeviceContext ctx(Device::cpu(), {.num_threads = 1});
  auto a = ctx.enqueue_create_buffer<float>(8);
  auto b = ctx.enqueue_create_buffer<float>(8);
  auto c = ctx.enqueue_create_buffer<float>(4);
  EXPECT_NE(key_of(a), key_of(b));
  EXPECT_EQ(key_of(a), key_of(a));
  EXPECT_THAT(key_of(c)[0].value, HasSubstr("x 4 f32"));
}

class DeviceGraphCacheTest : public ::testing::Test {
 protected:
  DeviceContext ctx{Device::cpu(), {.num_threads = 2}};
  DeviceFunction<detail::StaticKernel<& add_into>> add = ctx.compile_function<&add_into>();
  DeviceBuffer<int> counter = ctx.enqueue_create_buffer<int>(1);
  int builds = 0;

  // One build callable type for every call (as a real caller's lambda would be).
  DeviceGraph make(DeviceGraphCache& cache, int value, const Shape& shape = Shape{4}) {
    return DeviceGraph::create(
        ctx,
        [&, value](DeviceGraphBuilder& b) {
          ++builds;
          b.add_function(add, LaunchConfig{1, 1}, {}, counter.data(), value);
        },
        cache, value, shape);
  }
};

TEST_F(DeviceGraphCacheTest, EveryBuiltInInputHitsWhenEqualAndMissesWhenNot) {
  // A lookup's key (no names) and the stored key (named) must be the same bytes for every
  // kind of input, or equal inputs would miss forever.
  DeviceGraphCache cache;
  auto buffer = ctx.enqueue_create_buffer<float>(8);
  const auto build = [&](DeviceGraphBuilder& b) {
    ++builds;
    b.add_function(add, LaunchConfig{1, 1}, {}, counter.data(), 1);
  };
  const auto get = [&](float f, const Shape& shape, std::string_view text) {
    return DeviceGraph::create(ctx, build, cache, std::make_tuple(3, f, false), Mode::exact, shape,
                               Dim3{2, 3}, buffer, DType::bf16, text, std::uint8_t{7}, -0.0);
  };
  get(0.5f, Shape{2, "batch", "seq + 1"}, "a");
  get(0.5f, Shape{2, "batch", "seq + 1"}, "a");
  EXPECT_EQ(builds, 1);
  get(0.25f, Shape{2, "batch", "seq + 1"}, "a");
  get(0.5f, Shape{2, "batch", "seq"}, "a");
  get(0.5f, Shape{2, "batch", "seq + 1"}, "b");
  EXPECT_EQ(builds, 4);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_THAT(cache.last_miss(), HasSubstr("input 6: string is b here but a"));
}

TEST_F(DeviceGraphCacheTest, HowInputsNestIsPartOfTheKey) {
  // (tuple(1, 2), 3) and (1, tuple(2, 3)) have the same fields in the same order: the
  // scopes keep them apart.
  DeviceGraphCache cache;
  const auto build = [&](DeviceGraphBuilder& b) {
    ++builds;
    b.add_function(add, LaunchConfig{1, 1}, {}, counter.data(), 1);
  };
  DeviceGraph::create(ctx, build, cache, std::make_tuple(1, 2), 3);
  DeviceGraph::create(ctx, build, cache, 1, std::make_tuple(2, 3));
  DeviceGraph::create(ctx, build, cache, 1, 2, 3);
  EXPECT_EQ(builds, 3);
  DeviceGraph::create(ctx, build, cache, 1, std::make_tuple(2, 3));
  EXPECT_EQ(builds, 3);
}

TEST_F(DeviceGraphCacheTest, LongKeysSpillToTheHeapAndStayExact) {
  // Keys beyond the 512 bytes kept inline: equal ones hit, ones differing in the last byte
  // miss.
  DeviceGraphCache cache;
  const auto build = [&](DeviceGraphBuilder& b) {
    ++builds;
    b.add_function(add, LaunchConfig{1, 1}, {}, counter.data(), 1);
  };
  const std::string long_a(2000, 'x');
  std::string long_b = long_a;
  long_b.back() = 'y';
  DeviceGraph::create(ctx, build, cache, long_a, 1);
  DeviceGraph::create(ctx, build, cache, long_a, 1);
  EXPECT_EQ(builds, 1);
  DeviceGraph::create(ctx, build, cache, long_b, 1);
  EXPECT_EQ(builds, 2);
  DeviceGraphKey copy;
  copy.add("string", long_a);
  const DeviceGraphKey again = copy;  // a copy of a spilled key keeps its bytes
  EXPECT_EQ(again.bytes(), copy.bytes());
  EXPECT_EQ(again.hash(), copy.hash());
}

TEST_F(DeviceGraphCacheTest, HitReturnsTheStoredGraphWithoutCallingBuild) {
  DeviceGraphCache cache;
  ctx.enqueue_memset(counter, 0);
  auto first = make(cache, 5);
  auto again = make(cache, 5);
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.misses(), 1u);
  EXPECT_EQ(cache.size(), 1u);
  again.replay();
  first.replay();
  EXPECT_EQ(read_back(ctx, counter)[0], 10);

  make(cache, 6);
  EXPECT_EQ(builds, 2);
  EXPECT_EQ(cache.size(), 2u);
}

TEST_F(DeviceGraphCacheTest, TheSeedExampleReusesTheGraphOfTheFirstCall) {
  DeviceGraphCache cache;
  int calls = 0;
  auto build = [&](DeviceGraphBuilder& b) {
    ++calls;
    b.add_function(add, LaunchConfig{1, 1}, {}, counter.data(), 1);
  };
  auto graph = DeviceGraph::create(ctx, build, cache);
  auto same = DeviceGraph::create(ctx, build, cache);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(same.to_dot(), graph.to_dot());
}

TEST_F(DeviceGraphCacheTest, DifferentBuildCallablesAndContextsNeverShareAGraph) {
  DeviceGraphCache cache;
  int a = 0;
  int b = 0;
  DeviceGraph::create(
      ctx, [&](DeviceGraphBuilder& g) { ++a, g.add_empty({}); }, cache, 1);
  DeviceGraph::create(
      ctx, [&](DeviceGraphBuilder& g) { ++b, g.add_empty({}); }, cache, 1);
  EXPECT_EQ(a + b, 2);
  DeviceContext other(Device::cpu(), {.num_threads = 1});
  auto build = [](DeviceGraphBuilder& g) { g.add_empty({}); };
  auto mine = DeviceGraph::create(ctx, build, cache);
  auto theirs = DeviceGraph::create(other, build, cache);
  EXPECT_EQ(cache.misses(), 4u);
  EXPECT_EQ(theirs.context().backend(), other.backend());
  EXPECT_EQ(mine.context().backend(), ctx.backend());
  EXPECT_THAT(cache.last_miss(), HasSubstr("for this context"));
}

int g_builds_a = 0, g_builds_b = 0;
void build_a(DeviceGraphBuilder& g) { ++g_builds_a, g.add_empty({}); }
void build_b(DeviceGraphBuilder& g) { ++g_builds_b, g.add_empty({}), g.add_empty({}); }

// Function pointers of one signature share a type: the cache keys them by address. A
// std::function by the callable it holds; a polymorphic functor by its dynamic type.
TEST_F(DeviceGraphCacheTest, DifferentFunctionsOfOneTypeNeverShareAGraph) {
  DeviceGraphCache cache;
  g_builds_a = g_builds_b = 0;
  const DeviceGraph a = DeviceGraph::create(ctx, build_a, cache, 7);
  const DeviceGraph b = DeviceGraph::create(ctx, build_b, cache, 7);
  EXPECT_EQ(g_builds_a, 1);
  EXPECT_EQ(g_builds_b, 1);
  EXPECT_EQ(a.size(), 1u);
  EXPECT_EQ(b.size(), 2u);
  EXPECT_THAT(cache.last_miss(), HasSubstr(" at 0x"));  // which function
  DeviceGraph::create(ctx, &build_a, cache, 7);         // the same function: a hit
  EXPECT_EQ(g_builds_a, 1);
  EXPECT_EQ(cache.hits(), 1u);

  int lambda_a = 0, lambda_b = 0;
  const std::function<void(DeviceGraphBuilder&)> fa = [&](DeviceGraphBuilder& g) {
    ++lambda_a, g.add_empty({});
  };
  const std::function<void(DeviceGraphBuilder&)> fb = [&](DeviceGraphBuilder& g) {
    ++lambda_b, g.add_empty({}), g.add_empty({});
  };
  EXPECT_EQ(DeviceGraph::create(ctx, fa, cache, 7).size(), 1u);
  EXPECT_EQ(DeviceGraph::create(ctx, fb, cache, 7).size(), 2u);
  EXPECT_EQ(lambda_a + lambda_b, 2);
  const std::function<void(DeviceGraphBuilder&)> fn_a = build_a, fn_b = build_b;
  EXPECT_EQ(DeviceGraph::create(ctx, fn_a, cache, 8).size(), 1u);
  EXPECT_EQ(DeviceGraph::create(ctx, fn_b, cache, 8).size(), 2u);
  EXPECT_EQ(DeviceGraph::create(ctx, fn_a, cache, 7).size(), 1u);  // build_a's graph for 7
  EXPECT_EQ(g_builds_a, 2);                                        // once more, for 8

  struct Build {
    virtual ~Build() = default;
    virtual void operator()(DeviceGraphBuilder& g) const = 0;
  };
  struct One : Build {
    void operator()(DeviceGraphBuilder& g) const override { g.add_empty({}); }
  };
  struct Three : Build {
    void operator()(DeviceGraphBuilder& g) const override {
      g.add_empty({}), g.add_empty({}), g.add_empty({});
    }
  };
  const One one;
  const Three three;
  const Build& first = one;
  const Build& second = three;
  EXPECT_EQ(DeviceGraph::create(ctx, first, cache, 7).size(), 1u);
  EXPECT_EQ(DeviceGraph::create(ctx, second, cache, 7).size(), 3u);
}

TEST_F(DeviceGraphCacheTest, MissExplanationNamesTheFieldThatDifferedFromTheNearestKey) {
  DeviceGraphCache cache;
  EXPECT_EQ(cache.last_miss(), "");
  make(cache, 5, Shape{2, 3});
  EXPECT_THAT(cache.last_miss(), HasSubstr("no graph of this build callable is cached"));
  make(cache, 9, Shape{7, 7});
  make(cache, 5, Shape{2, 4});
  // Nearest stored key: (5, [2, 3]); only the shape differs.
  EXPECT_THAT(cache.last_miss(),
              AllOf(HasSubstr("DeviceGraphCache miss for build callable"),
                    HasSubstr("input 1: Shape is [2, 4] here but [2, 3] in the nearest"),
                    Not(HasSubstr("input 0"))));
}

TEST_F(DeviceGraphCacheTest, CustomAndTupleInputsTakePartInTheKey) {
  DeviceGraphCache cache;
  auto build = [](DeviceGraphBuilder& g) { g.add_empty({}); };
  DeviceGraph::create(ctx, build, cache, Tile{2, 3}, std::make_tuple(1, Mode::fast));
  DeviceGraph::create(ctx, build, cache, Tile{2, 3}, std::make_tuple(1, Mode::exact));
  EXPECT_THAT(cache.last_miss(), HasSubstr("input 1[1]: enum is 1 here but 0"));
  DeviceGraph::create(ctx, build, cache, Tile{2, 4}, std::make_tuple(1, Mode::exact));
  EXPECT_THAT(cache.last_miss(), HasSubstr("input 0: Tile.cols is 4 here but 3"));
  DeviceGraph::create(ctx, build, cache, Tile{2, 4}, std::make_tuple(1, Mode::exact));
  EXPECT_EQ(cache.hits(), 1u);
}

TEST_F(DeviceGraphCacheTest, BoundedCacheDropsTheLeastRecentlyUsedGraph) {
  DeviceGraphCache cache(2);
  make(cache, 1);
  make(cache, 2);
  make(cache, 1);  // hit: 1 is now the most recently used
  make(cache, 3);  // evicts 2
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_EQ(builds, 3);
  make(cache, 1);
  EXPECT_EQ(builds, 3);
  make(cache, 2);
  EXPECT_EQ(builds, 4);
  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.hits(), 2u);
}

TEST_F(DeviceGraphCacheTest, AGraphOutlivesItsEvictionAndTheCache) {
  ctx.enqueue_memset(counter, 0);
  DeviceGraph kept = [&] {
    DeviceGraphCache cache(1);
    auto graph = make(cache, 3);
    make(cache, 4);  // evicts the first graph
    return graph;
  }();
  kept.replay();
  EXPECT_EQ(read_back(ctx, counter)[0], 3);
}

TEST_F(DeviceGraphCacheTest, ConcurrentCallersShareOneGraphPerKey) {
  DeviceGraphCache cache;
  std::atomic<int> built{0};
  constexpr int kThreads = 4;
  constexpr int kKeys = 8;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int round = 0; round < 20; ++round)
        for (int k = 0; k < kKeys; ++k) {
          DeviceGraph::create(
              ctx,
              [&](DeviceGraphBuilder& b) {
                built.fetch_add(1);
                b.add_empty({});
              },
              cache, k);
        }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(cache.size(), static_cast<std::size_t>(kKeys));
  EXPECT_EQ(cache.hits() + cache.misses(), static_cast<std::size_t>(kThreads * 20 * kKeys));
  EXPECT_EQ(cache.misses(), static_cast<std::size_t>(built.load()));
  EXPECT_GE(built.load(), kKeys);
}

TEST_F(DeviceGraphCacheTest, ABuildThatThrowsStoresNothing) {
  DeviceGraphCache cache;
  auto build = [](DeviceGraphBuilder&) { throw std::runtime_error("no"); };
  EXPECT_THROW(DeviceGraph::create(ctx, build, cache, 1), std::runtime_error);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.misses(), 1u);
}

}  // namespace
}  // namespace kiln
