// Tokens of one assembly line.
#pragma once

#include <string>
#include <vector>

namespace npu::isa::assembler {

enum class TokenKind { Identifier, Integer, Float, String, Punct, End };

struct Token {
  TokenKind kind = TokenKind::End;
  std::string text;  // identifier, literal text, punctuation, or decoded string
  int column = 1;    // 1-based column of the first character
};

struct LexError {
  int column;
  std::string message;
};

// Splits one line into tokens, dropping comments ('#' or '//' to end of
// line). The last token is always End. Returns false and sets *error on a
// character that starts no token or an unterminated string.
bool tokenize_line(const std::string& line, std::vector<Token>* tokens, LexError* error);

}  // namespace npu::isa::assembler
