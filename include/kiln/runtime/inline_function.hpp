#pragma once
/// \file
/// Internal: a move-only type-erased callable with inline storage, so that enqueueing a
/// kernel or recording a graph node does not touch the heap for ordinary closures.

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace kiln::detail {

template <class Signature, std::size_t Capacity = 80>
class InlineFunction;

/// Like `std::move_only_function<R(Args...)>`, but callables up to \p Capacity bytes live
/// inside the object. Larger ones go to the heap (one allocation at construction).
/// Invocation is one indirect call. Not thread-safe; calls are const so that several
/// workers may invoke one shared callable (the callable itself must then be thread-safe).
template <class R, class... Args, std::size_t Capacity>
class InlineFunction<R(Args...), Capacity> {
 public:
  // User-provided, so that value-initialising a struct holding one does not zero the
  // storage (graphs hold one per node).
  InlineFunction() noexcept {}  // NOLINT(modernize-use-equals-default)

  template <class F>
  requires(!std::is_same_v<std::decay_t<F>, InlineFunction> &&
           std::is_invocable_r_v<R, const std::decay_t<F>&, Args...>)
      InlineFunction(F&& f) {  // NOLINT(google-explicit-constructor)
    construct(std::forward<F>(f));
  }

  /// Replaces the callable by \p f, built in place (no temporary InlineFunction moved in).
  template <class F>
  requires(!std::is_same_v<std::decay_t<F>, InlineFunction> &&
           std::is_invocable_r_v<R, const std::decay_t<F>&, Args...>) void emplace(F&& f) {
    reset();
    construct(std::forward<F>(f));
  }

  InlineFunction(InlineFunction&& other) noexcept : ops_(other.ops_) {
    if (ops_) ops_->move(storage_, other.storage_);
    other.ops_ = nullptr;
  }
  InlineFunction& operator=(InlineFunction&& other) noexcept {
    if (this != &other) {
      reset();
      ops_ = other.ops_;
      if (ops_) ops_->move(storage_, other.storage_);
      other.ops_ = nullptr;
    }
    return *this;
  }
  InlineFunction(const InlineFunction&) = delete;
  InlineFunction& operator=(const InlineFunction&) = delete;
  ~InlineFunction() { reset(); }

  R operator()(Args... args) const { return ops_->call(storage_, std::forward<Args>(args)...); }
  explicit operator bool() const noexcept { return ops_ != nullptr; }
  void reset() noexcept {
    if (ops_) ops_->destroy(storage_);
    ops_ = nullptr;
  }
  /// The stored callable if its type is exactly \p F, else nullptr (used to update node
  /// parameters in place).
  template <class F>
  F* target() noexcept {
    if (ops_ == &kInlineOps<F>) return std::launder(reinterpret_cast<F*>(storage_));
    if (ops_ == &kHeapOps<F>) return *reinterpret_cast<F**>(storage_);
    return nullptr;
  }

 private:
  template <class F>
  void construct(F&& f) {
    using Fn = std::decay_t<F>;
    if constexpr (kFitsInline<Fn>) {
      ::new (static_cast<void*>(storage_)) Fn(std::forward<F>(f));
      ops_ = &kInlineOps<Fn>;
    } else {
      *reinterpret_cast<Fn**>(storage_) = new Fn(std::forward<F>(f));
      ops_ = &kHeapOps<Fn>;
    }
  }

  struct Ops {
    R (*call)(const unsigned char*, Args...);
    void (*move)(unsigned char* dst, unsigned char* src) noexcept;
    void (*destroy)(unsigned char*) noexcept;
  };

  template <class Fn>
  static constexpr bool kFitsInline =
      sizeof(Fn) <= Capacity &&
      alignof(Fn) <= alignof(std::max_align_t) && std::is_nothrow_move_constructible_v<Fn>;

  template <class Fn>
  static constexpr Ops kInlineOps = {
      [](const unsigned char* s, Args... a) -> R {
        return (*std::launder(reinterpret_cast<const Fn*>(s)))(std::forward<Args>(a)...);
      },
      [](unsigned char* d, unsigned char* s) noexcept {
        Fn* src = std::launder(reinterpret_cast<Fn*>(s));
        ::new (static_cast<void*>(d)) Fn(std::move(*src));
        src->~Fn();
      },
      [](unsigned char* s) noexcept { std::launder(reinterpret_cast<Fn*>(s))->~Fn(); }};

  template <class Fn>
  static constexpr Ops kHeapOps = {
      [](const unsigned char* s, Args... a) -> R {
        return (**reinterpret_cast<Fn* const*>(s))(std::forward<Args>(a)...);
      },
      [](unsigned char* d, unsigned char* s) noexcept {
        *reinterpret_cast<Fn**>(d) = *reinterpret_cast<Fn**>(s);
      },
      [](unsigned char* s) noexcept { delete *reinterpret_cast<Fn**>(s); }};

  alignas(std::max_align_t) unsigned char storage_[Capacity];
  const Ops* ops_ = nullptr;
};

/// A host callback run in stream order (small enough to nest inside a BlockRunner).
using HostCallback = InlineFunction<void(), 64>;
/// Work another CUDA library enqueues on a stream it is given (a CUstream, as void*).
using CudaWork = InlineFunction<void(void*), 64>;

}  // namespace kiln::detail
