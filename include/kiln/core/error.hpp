#pragma once
/// \file
/// kiln's error hierarchy. Every failure the library reports is a `kiln::Error`.
///
/// - `UserError`: misuse or bad input (a negative dimension, a size mismatch). The message
///   names the offending value and says what to do instead.
/// - `DeviceError`: the OS, a driver, or a kernel running on a device failed. Carries the
///   backend's native error code where there is one (0 otherwise).
/// - `InternalError`: a bug in kiln itself; the message says so.
///
/// Exceptions are used (not error codes) because errors arise deep inside user code, e.g.
/// inside a kernel or while tracing `a + b`.

#include <stdexcept>
#include <string>
#include <string_view>

namespace kiln {

/// Base of every exception kiln throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The caller passed a bad value or used an API out of contract.
class UserError : public Error {
 public:
  using Error::Error;
};

/// A device, the OS, or a kernel failed while doing work the caller asked for.
class DeviceError : public Error {
 public:
  /// \p native_code is the backend's own error code (errno, CUresult, ...), 0 if none.
  explicit DeviceError(const std::string& message, long native_code = 0)
      : Error(message), native_code_(native_code) {}
  /// The backend's error code, or 0 when the failure has none (e.g. a kernel threw).
  long native_code() const noexcept { return native_code_; }

 private:
  long native_code_;
};

/// An invariant inside kiln was broken: a bug in kiln, not in the caller's code.
class InternalError : public Error {
 public:
  explicit InternalError(const std::string& message)
      : Error("kiln internal error (a bug in kiln, please report it): " + message) {}
};

/// \p name in single quotes, control bytes and backslashes escaped (`\x00`): for names
/// read from files in messages, which a NUL would otherwise cut short.
inline std::string quote_name(std::string_view name) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '\\') {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace kiln
