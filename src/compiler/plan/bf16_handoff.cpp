// Plan rewrite, after the CPU lowering prepared the launches: bf16 operands handed from the
// launch that makes them to the bf16 matmul that reads them (see rewrites.hpp).

#include <algorithm>

#include "compiler/plan/rewrites.hpp"

namespace kiln::compiler {

void hand_off_bf16(Plan& plan) {
  const std::vector<bool> is_output = plan.output_flags();
  for (std::size_t i = 0; i < plan.launches.size(); ++i) {
    Launch& producer = plan.launches[i];
    if (plan.absorbed[i] || plan.out(i).size() != 1) continue;
    const bool prepared_matmul =
        producer.prepared != nullptr && producer.prepared->kind == PreparedLaunch::Kind::matmul;
    if (!prepared_matmul) {  // a norm or softmax
      const std::size_t s = plan.out(i)[0];
      const Storage& out = plan.storage[s];
      if (is_output[s] || out.base >= 0 || out.arena_offset < 0) continue;
      // The launches that read it; an absorbed epilogue is listed among the readers of its
      // matmul's operands to keep them live, and may not read it itself.
      std::vector<Launch*> readers;
      bool others = false;
      for (std::size_t r : out.readers) {
        const std::span<const std::size_t> in = plan.in(r);
        if (!plan.absorbed[r] && plan.io[r].device == plan.io[i].device)
          readers.push_back(&plan.launches[r]);
        else if (std::any_of(in.begin(), in.end(),
                             [&](std::size_t v) { return plan.root(v) == s; }))
          others = true;
      }
      if (!others && compiler::hand_off_bf16(producer, readers)) ++plan.bf16_handoffs;
      continue;
    }
    const std::size_t s =
        producer.epilogue != nullptr ? plan.out(plan.next_launch(i))[0] : plan.out(i)[0];
    const Storage& out = plan.storage[s];
    if (is_output[s] || out.base >= 0 || out.arena_offset < 0 || out.readers.empty()) continue;
    // The one reader, and its absorbed epilogue (listed to keep the operand live).
    const std::size_t j = out.readers[0];
    const bool one_reader = std::all_of(out.readers.begin(), out.readers.end(), [&](std::size_t r) {
      return r == j ||
             (r == plan.next_launch(j) && plan.absorbed[r] && plan.launches[j].epilogue != nullptr);
    });
    if (!one_reader || plan.io[j].device != plan.io[i].device) continue;
    plan.bf16_handoffs += compiler::hand_off_bf16(producer, plan.launches[j]) ? 1 : 0;
  }
}

}  // namespace kiln::compiler
