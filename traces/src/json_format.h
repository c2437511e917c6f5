// Pieces of JSON text for the Chrome JSON writer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace npu::trace {

// Appends text as a quoted JSON string. Quotes, backslashes and control
// characters are escaped; bytes that are not UTF-8 become U+FFFD, since a
// JSON document must be UTF-8 and trace names can come from anywhere.
void append_json_string(std::string& out, std::string_view text);

// Appends picoseconds as microseconds, exactly: up to six fractional digits,
// no trailing zeros ("1.5", "0.000001", "42").
void append_microseconds(std::string& out, uint64_t picoseconds);

// Appends a finite double in the shortest form that reads back exactly.
void append_json_number(std::string& out, double value);

}  // namespace npu::trace
