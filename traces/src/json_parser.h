// A strict JSON (RFC 8259) parser for the Chrome JSON validator and tests.
//
// Reader is a pull parser: the caller walks the outer structure and takes
// any value as a tree, so a trace's huge traceEvents array can be checked
// one event at a time instead of being held whole in memory.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace npu::trace::json {

// what() names the line and column of the fault.
class ParseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Value {
  enum class Type { Null, Bool, Number, String, Array, Object };

  Type type = Type::Null;
  bool boolean = false;
  double number = 0;
  std::string string;  // a String's text; for a Number, its text as written
  std::vector<Value> array;
  std::vector<std::pair<std::string, Value>> object;  // document order, duplicates kept

  // The last member named key (JSON readers commonly let a repeated key
  // win), or nullptr; also nullptr when this is not an object.
  const Value* find(std::string_view key) const;

  bool is_number() const { return type == Type::Number; }
  bool is_string() const { return type == Type::String; }
  bool is_object() const { return type == Type::Object; }
};

class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  // The type of the next value, without consuming it.
  Value::Type peek_type();
  Value read_value();

  // Enter an object / array; then next_member / next_element return true
  // before each member or element (whose value the caller must read) and
  // false once the container has closed.
  void begin_object();
  bool next_member(std::string& key);
  void begin_array();
  bool next_element();

  // Checks that nothing but whitespace follows the document.
  void finish();

 private:
  struct Container {
    char close;
    bool first;
  };

  [[noreturn]] void fail(const std::string& message) const;
  void skip_whitespace();
  char peek();  // after whitespace; '\0' at the end of input
  void expect(char c);
  void enter(char open, char close);
  bool next_in_container(char close);
  std::string read_string();
  void read_escape(std::string& out);
  unsigned read_hex4();
  double read_number();
  void read_literal(std::string_view word);

  std::string_view text_;
  size_t pos_ = 0;
  std::vector<Container> open_;
};

// Parses a whole document.
Value parse(std::string_view text);

}  // namespace npu::trace::json
