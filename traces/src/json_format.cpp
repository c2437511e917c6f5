#include "json_format.h"

#include <charconv>
#include <stdexcept>

#include "utf8.h"

namespace npu::trace {

void append_json_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (size_t pos = 0; pos < text.size();) {
    const auto byte = static_cast<unsigned char>(text[pos]);
    if (byte >= 0x80) {
      const size_t length = utf8_sequence_length(text, pos);
      if (length == 0) {
        out += "\\ufffd";
        ++pos;
      } else {
        out.append(text, pos, length);
        pos += length;
      }
      continue;
    }
    switch (byte) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (byte < 0x20) {
          out += "\\u00";
          out += kHex[byte >> 4];
          out += kHex[byte & 0xF];
        } else {
          out += static_cast<char>(byte);
        }
    }
    ++pos;
  }
  out += '"';
}

void append_microseconds(std::string& out, uint64_t picoseconds) {
  constexpr uint64_t kPerMicrosecond = 1'000'000;
  out += std::to_string(picoseconds / kPerMicrosecond);
  uint64_t fraction = picoseconds % kPerMicrosecond;
  if (fraction == 0) return;
  char digits[7] = "000000";
  for (int i = 5; i >= 0; --i, fraction /= 10) digits[i] = static_cast<char>('0' + fraction % 10);
  size_t used = 6;
  while (digits[used - 1] == '0') --used;
  out += '.';
  out.append(digits, used);
}

void append_json_number(std::string& out, double value) {
  char buffer[32];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  if (error != std::errc()) throw std::logic_error("append_json_number: cannot format a double");
  out.append(buffer, end);
}

}  // namespace npu::trace
