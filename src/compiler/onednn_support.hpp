#pragma once
// Internal: what kiln's oneDNN primitives share: the CPU engine, and building a primitive
// for the one thread that will run it.

#include <omp.h>

#include <dnnl.hpp>

namespace kiln::compiler::onednn {

/// The process's CPU engine.
inline dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
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

}  // namespace kiln::compiler::onednn
