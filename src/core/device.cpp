#include "kiln/core/device.hpp"

#include <charconv>
#include <ostream>

#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln {

Device::Device(DeviceKind kind, int index) : kind_(kind), index_(index) {
  if (index < 0)
    throw UserError(detail::cat("device index ", index,
                                " is negative; device indices start at 0 "
                                "(e.g. cpu:0, cuda:1)"));
}

Device Device::parse(std::string_view text) {
  const std::size_t colon = text.find(':');
  const std::string_view kind_text = text.substr(0, colon);
  DeviceKind kind;
  if (kind_text == "cpu") {
    kind = DeviceKind::cpu;
  } else if (kind_text == "cuda" || kind_text == "gpu") {
    kind = DeviceKind::cuda;
  } else {
    throw UserError(detail::cat("unknown device '", text, "': the kind '", kind_text,
                                "' is not 'cpu' or 'cuda'; write e.g. cpu:0 or cuda:0"));
  }
  if (colon == std::string_view::npos) return {kind, 0};
  const std::string_view index_text = text.substr(colon + 1);
  int index = 0;
  const auto [end, ec] =
      std::from_chars(index_text.data(), index_text.data() + index_text.size(), index);
  if (index_text.empty() || ec != std::errc() || end != index_text.data() + index_text.size() ||
      index < 0)
    throw UserError(detail::cat("invalid device '", text, "': the index '", index_text,
                                "' is not a non-negative integer; write e.g. ", kind_text, ":0"));
  return {kind, index};
}

std::string Device::str() const {
  std::string out = kind_ == DeviceKind::cpu ? "cpu:" : "cuda:";
  return out.append(std::to_string(index_));  // no stream: keys and printers call this often
}

std::ostream& operator<<(std::ostream& os, const Device& device) { return os << device.str(); }

}  // namespace kiln
