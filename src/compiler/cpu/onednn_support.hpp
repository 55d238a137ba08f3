#pragma once
// Internal: what kiln's oneDNN primitives share: the CPU engine, and building a primitive
// for the one thread that will run it.

#include <omp.h>

#include <dnnl.hpp>
#include <utility>
#include <vector>

namespace kiln::compiler::onednn {

/// Caps oneDNN's instruction set at `kiln::cpu_isa()` (KILN_CPU_ISA), once per process,
/// before oneDNN picks any kernel. `cpu_engine()` calls it; so must any other first use of
/// oneDNN (sgemm).
void cap_isa();

/// The process's CPU engine (oneDNN's instruction set capped first).
inline dnnl::engine& cpu_engine() {
  static dnnl::engine engine = [] {
    cap_isa();
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return engine;
}

/// Runs the enclosing scope with one OpenMP thread on this thread: oneDNN sizes a
/// primitive's blocking for the threads it may use, and a tile runs on one.
class OneOpenMpThread {
 public:
  OneOpenMpThread() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneOpenMpThread() { omp_set_num_threads(saved_); }
  OneOpenMpThread(const OneOpenMpThread&) = delete;
  OneOpenMpThread& operator=(const OneOpenMpThread&) = delete;

 private:
  int saved_;
};

/// Attributes asking for the scratchpad as an argument (allocated with the plan, so that
/// executing the primitive does not allocate it).
inline dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

/// A primitive with everything one execution of it reads, made when a plan is prepared so
/// that running it builds nothing: its memory objects and the argument list over them.
struct Step {
  dnnl::primitive primitive;  // empty: nothing to run
  std::vector<dnnl::memory> memory;
  std::vector<dnnl_exec_arg_t> args;

  void add(int arg, dnnl::memory m) {
    memory.push_back(std::move(m));
    args.push_back({arg, memory.back().get()});
  }
  /// Adds the scratchpad \p desc asks for, if any.
  void add_scratchpad(const dnnl::memory::desc& desc, const dnnl::engine& engine) {
    if (desc.get_size() > 0) add(DNNL_ARG_SCRATCHPAD, dnnl::memory(desc, engine));
  }
  /// Enqueues the primitive on \p stream (a no-op for an empty step); false on failure.
  bool run(const dnnl::stream& stream) const {
    return !primitive ||
           dnnl_primitive_execute(primitive.get(), stream.get(), static_cast<int>(args.size()),
                                  args.data()) == dnnl_success;
  }
};

/// A reorder of \p from into \p to (user scratchpad, plus \p attr's settings).
inline Step reorder_step(const dnnl::memory& from, const dnnl::memory& to,
                         dnnl::primitive_attr attr = user_scratchpad()) {
  const dnnl::reorder::primitive_desc pd(from, to, attr);
  Step step;
  step.primitive = dnnl::reorder(pd);
  step.add(DNNL_ARG_FROM, from);
  step.add(DNNL_ARG_TO, to);
  step.add_scratchpad(pd.scratchpad_desc(), from.get_engine());
  return step;
}

}  // namespace kiln::compiler::onednn
