#pragma once
/// \file
/// The op registry: what each op of the IR takes, what it produces, and how to check it.
///
/// Adding an op is one `OpDef` registered in one place (see `src/ir/ops/`) plus its one
/// definition in the compiler (`src/compiler/ops/`: elementwise.cpp, or kernel_defs.cpp for
/// an op with a kernel of its own) and its reference evaluator; nothing else in the IR
/// switches on op names. Each op declares its
/// operand count, its attributes (name, kind, required or optional), what passes and the
/// compiler may assume of it (`OpTrait`: elementwise, collective) and a rule that infers
/// its result types from operand types and attributes. The same rule serves building
/// (results get inferred types), and verifying (stored result types must equal them).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/attribute.hpp"
#include "kiln/ir/type.hpp"

namespace kiln::ir {

/// What an inference rule sees: operand types and attributes of one op.
class InferContext {
 public:
  InferContext(std::string_view op, std::span<const TensorType> operands,
               std::span<const NamedAttribute> attributes)
      : op_(op), operands_(operands), attributes_(attributes) {}
  std::string_view op() const noexcept { return op_; }
  std::span<const TensorType> operands() const noexcept { return operands_; }
  const TensorType& operand(std::size_t i) const { return operands_[i]; }
  /// The attribute \p name, or nullptr. Specs are checked before a rule runs, so a
  /// required attribute is always there with the declared kind.
  const Attribute* find(std::string_view name) const;
  /// The attribute \p name (must be required by the spec).
  const Attribute& attr(std::string_view name) const;

 private:
  std::string_view op_;
  std::span<const TensorType> operands_;
  std::span<const NamedAttribute> attributes_;
};

/// Infers the result types, or throws UserError saying what is wrong with the operands
/// (shapes, dtypes) or attributes; the caller adds which op and where.
using InferFn = std::vector<TensorType> (*)(const InferContext&);

/// Checks the result types an op was created with; throws UserError saying what is wrong.
using VerifyFn = void (*)(const InferContext&, std::span<const TensorType> results);

/// One attribute an op accepts.
struct AttrSpec {
  std::string name;
  Attribute::Kind kind;
  bool required = true;
};

/// What passes and the compiler may assume of an op, declared with its definition so that
/// none of them keeps a list of op names of its own.
enum class OpTrait : std::uint8_t {
  /// Each result element is a function of the operands' elements at the same (broadcast)
  /// index, one scalar function per element: such ops fuse into one loop (`kiln.fused`),
  /// and the compiler has a scalar kernel for each.
  elementwise = 1u << 0,
  /// Runs between devices (one operand per device, or a transfer): the compiler gives each
  /// participating device a launch, and they meet.
  collective = 1u << 1,
};

/// One op of the IR.
struct OpDef {
  std::string name;      ///< "kiln.add"
  std::string summary;   ///< one line, for docs and `kiln ops`
  int min_operands = 0;  ///< inclusive
  int max_operands = 0;  ///< inclusive; -1 = unbounded
  std::vector<AttrSpec> attributes;
  /// Null for ops whose result types are given when they are created (weights, calls).
  InferFn infer = nullptr;
  /// Extra checks of given result types (for ops without `infer`); may be null.
  VerifyFn verify = nullptr;
  /// `OpTrait` bits.
  std::uint8_t traits = 0;

  /// Whether the op has trait \p t.
  bool has(OpTrait t) const noexcept { return (traits & static_cast<std::uint8_t>(t)) != 0; }

  /// Checks operand count and attributes against the spec; returns what is wrong or "".
  std::string check(std::size_t operands, std::span<const NamedAttribute> attributes) const;
};

/// Every registered op. The built-in ops are registered on first use; `add` registers
/// more (before any module uses them). Lookups are thread-safe.
class OpRegistry {
 public:
  static OpRegistry& global();
  /// \throws UserError if an op of that name exists.
  void add(OpDef def);
  /// The op named \p name, or nullptr.
  const OpDef* find(std::string_view name) const;
  /// All op names, sorted (for listings and for "did you mean").
  std::vector<std::string> names() const;

  OpRegistry();
  OpRegistry(const OpRegistry&) = delete;
  OpRegistry& operator=(const OpRegistry&) = delete;
  ~OpRegistry();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The op \p name from the global registry. \throws UserError naming the closest names.
const OpDef& lookup_op(std::string_view name);

}  // namespace kiln::ir
