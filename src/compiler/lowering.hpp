#pragma once
// Internal: how a plan's launches become device work, behind one interface with one
// implementation per kind of device, chosen once per callable by the context it runs on:
// CPU kernels recorded as the kernel nodes of one CPU device graph per device
// (cpu/lowering.cpp), or CUDA kernels and cuBLAS GEMMs recorded into one CUDA graph
// (cuda/lowering.cpp). Everything above it (programs, plans, their rewrites, memory) is the
// same for both.

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compiler/plan/plan.hpp"
#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/runtime/device_context.hpp"

namespace kiln::compiler {

class Lowering {
 public:
  Lowering() = default;
  Lowering(const Lowering&) = delete;
  Lowering& operator=(const Lowering&) = delete;
  virtual ~Lowering() = default;

  /// Why \p op (a kernel or collective op) cannot run here; empty when it can. Quoted by
  /// the error for a module that uses it.
  virtual std::string unsupported(const ir::OpDef& op) const = 0;
  /// Whether plans run the launch rewrites (views and epilogues: what the CPU kernels read
  /// and run; CUDA kernels read neither).
  virtual bool rewrites_launches() const = 0;
  /// Where launches read the fixed bytes (a weight or a constant) at host address \p host:
  /// there, or a device copy kept for the callable's life.
  virtual std::byte* fixed_bytes(std::byte* host, std::size_t bytes) = 0;
  /// One arena of \p bytes for a plan, or null when it cannot be allocated.
  virtual std::shared_ptr<std::byte> allocate_arena(std::size_t bytes) = 0;
  /// The memory for the values of a call of a plan on device slot \p device: at least \p
  /// bytes (`Arena::bytes` says how many), or null memory when it cannot be allocated. A
  /// callable's calls never overlap, so a lowering may hand every plan the same memory: a
  /// new shape then reuses the pages earlier calls touched. By default each plan gets its
  /// own.
  virtual Arena call_arena(std::size_t device, std::size_t bytes) {
    (void)device;
    return {.bytes = bytes, .memory = allocate_arena(bytes)};
  }
  /// Prepares the placed plan's launches and records its graphs.
  virtual void record(Plan& plan) = 0;
  /// One call: copies \p inputs in, runs the plan and waits for every device. \throws
  /// what a launch threw (after every device finished), DeviceError, UserError.
  virtual void run(Plan& plan, const std::vector<Tensor>& inputs) = 0;
  /// Where output \p i of \p plan is readable on the host after `run`.
  virtual const std::byte* host_output(const Plan& plan, std::size_t i) const = 0;
};

/// CPU kernels on \p contexts (one per device of the callable, null for a device another
/// process drives), recorded as graphs (or, without \p replay_graph, enqueued launch by
/// launch on each call), with bf16 hand-offs in \p precision bf16.
std::unique_ptr<Lowering> cpu_lowering(std::vector<std::shared_ptr<DeviceContext>> contexts,
                                       bool replay_graph, MatmulPrecision precision);
/// CUDA kernels on the CUDA context \p ctx (one GPU).
std::unique_ptr<Lowering> cuda_lowering(std::shared_ptr<DeviceContext> ctx);

}  // namespace kiln::compiler
