#include <string>

#include <gtest/gtest.h>

#include "json_parser.h"

namespace npu::trace::json {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const ParseError& error) {
    return error.what();
  }
  ADD_FAILURE() << "parsed: " << text;
  return {};
}

TEST(JsonParser, ParsesScalars) {
  EXPECT_EQ(parse("null").type, Value::Type::Null);
  EXPECT_TRUE(parse(" true ").boolean);
  EXPECT_FALSE(parse("false").boolean);
  EXPECT_EQ(parse("\"hi\"").string, "hi");
  EXPECT_EQ(parse("-0.5e2").number, -50.0);
  EXPECT_EQ(parse("1E+2").number, 100.0);
  EXPECT_EQ(parse("0").number, 0.0);
  EXPECT_EQ(parse("123.456").string, "123.456");  // numbers keep their text
}

TEST(JsonParser, ParsesContainersInOrder) {
  const Value value = parse(R"( {"a": [1, {"b": null}, []], "c": {}, "a": "last"} )");
  ASSERT_TRUE(value.is_object());
  ASSERT_EQ(value.object.size(), 3u);
  EXPECT_EQ(value.object[0].first, "a");
  EXPECT_EQ(value.object[0].second.array.size(), 3u);
  EXPECT_EQ(value.object[0].second.array[1].find("b")->type, Value::Type::Null);
  EXPECT_EQ(value.find("a")->string, "last");
  EXPECT_EQ(value.find("missing"), nullptr);
  EXPECT_EQ(parse("[1]").find("a"), nullptr);
}

TEST(JsonParser, DecodesEscapes) {
  EXPECT_EQ(parse(R"("\"\\\/\b\f\n\r\t")").string, "\"\\/\b\f\n\r\t");
  EXPECT_EQ(parse(R"("\u0041\u00e9\u20AC")").string, "A\xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(parse(R"("\ud83d\ude00")").string, "\xF0\x9F\x98\x80");
  EXPECT_EQ(parse(R"("\u0000")").string, std::string(1, '\0'));
  EXPECT_EQ(parse("\"caf\xC3\xA9\"").string, "caf\xC3\xA9");
}

TEST(JsonParser, RejectsBadStrings) {
  EXPECT_NE(error_of(R"("\ud83d")").find("surrogate"), std::string::npos);
  EXPECT_NE(error_of(R"("\ude00")").find("surrogate"), std::string::npos);
  EXPECT_NE(error_of(R"("\ud83d\u0041")").find("surrogate"), std::string::npos);
  EXPECT_NE(error_of(R"("\x")").find("escape"), std::string::npos);
  EXPECT_NE(error_of(R"("\u12g4")").find("hex"), std::string::npos);
  EXPECT_NE(error_of("\"a\nb\"").find("control character"), std::string::npos);
  EXPECT_NE(error_of("\"\xFF\"").find("UTF-8"), std::string::npos);
  EXPECT_NE(error_of("\"\xC0\xAF\"").find("UTF-8"), std::string::npos);
  EXPECT_NE(error_of("\"abc").find("unterminated"), std::string::npos);
}

TEST(JsonParser, RejectsNumbersOutsideTheGrammar) {
  for (const char* text : {"01", "1.", ".5", "+1", "-", "1e", "1e+", "0x10", "NaN", "Infinity", "-.5"})
    EXPECT_THROW(parse(text), ParseError) << text;
  EXPECT_NE(error_of("1e999").find("out of range"), std::string::npos);
}

TEST(JsonParser, RejectsBadStructure) {
  for (const char* text : {"", "   ", "[1,]", "[,1]", "[1 2]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "{\"a\":}", "[1]]",
                           "[1", "{\"a\":1", "tru", "nul", "[true false]", "1 2", "{} {}"})
    EXPECT_THROW(parse(text), ParseError) << text;
}

TEST(JsonParser, ReportsLineAndColumn) {
  const std::string message = error_of("{\n  \"a\": 1,\n  \"b\": ]\n}");
  EXPECT_NE(message.find("line 3, column 8"), std::string::npos) << message;
  EXPECT_NE(message.find("found ']'"), std::string::npos) << message;
}

TEST(JsonParser, RefusesExcessiveNesting) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(error_of(deep).find("nesting"), std::string::npos);
  const std::string fine = std::string(500, '[') + std::string(500, ']');
  EXPECT_NO_THROW(parse(fine));
}

TEST(JsonReader, WalksAnArrayOneElementAtATime) {
  Reader reader(R"({"skip": {"x": [1, 2]}, "items": [{"n": 1}, {"n": 2}, {"n": 3}]})");
  ASSERT_EQ(reader.peek_type(), Value::Type::Object);
  reader.begin_object();
  std::string key;
  double sum = 0;
  while (reader.next_member(key)) {
    if (key != "items") {
      reader.read_value();
      continue;
    }
    reader.begin_array();
    while (reader.next_element()) sum += reader.read_value().find("n")->number;
  }
  reader.finish();
  EXPECT_EQ(sum, 6.0);
}

}  // namespace
}  // namespace npu::trace::json
