#pragma once
/// \file
/// `DeviceBuffer<T>` (device memory) and `HostBuffer<T>` (host memory the device copies to
/// and from fast; pinned on CUDA), both made by a `DeviceContext`.

#include <cstddef>
#include <memory>
#include <span>

#include "kiln/core/device.hpp"
#include "kiln/core/dtype.hpp"

namespace kiln {

namespace detail {
class StreamBackend;

/// Owns one allocation of a backend. Released in stream order: memory still used by
/// enqueued work is freed only after that work has run.
class Allocation {
 public:
  Allocation() = default;
  Allocation(std::shared_ptr<StreamBackend> owner, void* ptr, std::size_t bytes, bool host)
      : owner_(std::move(owner)), ptr_(ptr), bytes_(bytes), host_(host) {}
  Allocation(Allocation&& other) noexcept { swap(other); }
  Allocation& operator=(Allocation&& other) noexcept {
    Allocation(std::move(other)).swap(*this);
    return *this;
  }
  ~Allocation();

  void* get() const noexcept { return ptr_; }
  std::size_t bytes() const noexcept { return bytes_; }
  Device device() const noexcept;

 private:
  void swap(Allocation& other) noexcept {
    std::swap(owner_, other.owner_);
    std::swap(ptr_, other.ptr_);
    std::swap(bytes_, other.bytes_);
    std::swap(host_, other.host_);
  }
  std::shared_ptr<StreamBackend> owner_;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  bool host_ = false;
};
}  // namespace detail

namespace detail {
/// What device and host buffers share: an owned allocation viewed as \p T elements.
template <Element T>
class BufferBase {
 public:
  using value_type = T;

  /// Address of element 0 (nullptr for an empty buffer).
  T* data() const noexcept { return static_cast<T*>(alloc_.get()); }
  /// Number of elements.
  std::size_t size() const noexcept { return alloc_.bytes() / sizeof(T); }
  std::size_t size_bytes() const noexcept { return alloc_.bytes(); }
  bool empty() const noexcept { return size() == 0; }
  DType dtype() const noexcept { return dtype_of<T>; }
  /// The device of the context that made the buffer.
  Device device() const noexcept { return alloc_.device(); }

 protected:
  BufferBase() = default;
  explicit BufferBase(Allocation alloc) : alloc_(std::move(alloc)) {}

 private:
  Allocation alloc_;
};
}  // namespace detail

/// An owning, movable, non-copyable array of \p T in a device's memory, aligned to 64
/// bytes. Made by `DeviceContext::enqueue_create_buffer<T>(n)`.
///
/// `data()` is a device address: pass it to kernels and copies. On the CPU device it is
/// ordinary memory, but portable code reads results through `enqueue_copy` into a
/// `HostBuffer`. Destroying the buffer is stream-ordered: work already enqueued that uses
/// it finishes first. The buffer keeps its context alive.
template <Element T>
class DeviceBuffer : public detail::BufferBase<T> {
 public:
  DeviceBuffer() = default;

 private:
  friend class DeviceContext;
  using detail::BufferBase<T>::BufferBase;
};

/// Like `DeviceBuffer`, but in host memory that the host may read and write directly
/// (after `synchronize()` for data a device wrote). Made by
/// `DeviceContext::enqueue_create_host_buffer<T>(n)`.
template <Element T>
class HostBuffer : public detail::BufferBase<T> {
 public:
  HostBuffer() = default;

  T& operator[](std::size_t i) const noexcept { return this->data()[i]; }
  T* begin() const noexcept { return this->data(); }
  T* end() const noexcept { return this->data() + this->size(); }
  std::span<T> span() const noexcept { return {this->data(), this->size()}; }

 private:
  friend class DeviceContext;
  using detail::BufferBase<T>::BufferBase;
};

}  // namespace kiln
