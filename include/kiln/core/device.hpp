#pragma once
/// \file
/// `Device`: which device a buffer, kernel or context lives on (`cpu:0`, `cuda:1`).

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

namespace kiln {

/// The kinds of device kiln knows.
enum class DeviceKind : std::uint8_t { cpu, cuda };

/// A device: a kind plus an index. Cheap value type; prints as `cpu:0` / `cuda:1`.
class Device {
 public:
  /// `cpu:0`.
  Device() = default;
  /// \throws UserError if \p index is negative.
  Device(DeviceKind kind, int index);

  /// `cpu:index`. \throws UserError if \p index is negative.
  static Device cpu(int index = 0) { return {DeviceKind::cpu, index}; }
  /// `cuda:index`. \throws UserError if \p index is negative.
  static Device cuda(int index = 0) { return {DeviceKind::cuda, index}; }
  /// Parses `cpu`, `cpu:N`, `cuda`, `cuda:N` (no index means 0).
  /// \throws UserError naming the text and the expected form.
  static Device parse(std::string_view text);

  DeviceKind kind() const noexcept { return kind_; }
  int index() const noexcept { return index_; }
  bool is_cpu() const noexcept { return kind_ == DeviceKind::cpu; }
  bool is_cuda() const noexcept { return kind_ == DeviceKind::cuda; }
  /// `cpu:0`.
  std::string str() const;

  friend bool operator==(const Device&, const Device&) = default;

 private:
  DeviceKind kind_ = DeviceKind::cpu;
  int index_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Device& device);

}  // namespace kiln
