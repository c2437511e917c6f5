#include "lexer.h"

#include <cctype>

namespace npu::isa::assembler {
namespace {

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

}  // namespace

bool tokenize_line(const std::string& line, std::vector<Token>* tokens, LexError* error) {
  tokens->clear();
  size_t i = 0;
  const size_t n = line.size();
  while (i < n) {
    const char c = line[i];
    const int column = static_cast<int>(i) + 1;
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      continue;
    }
    if (c == '#' || (c == '/' && i + 1 < n && line[i + 1] == '/')) break;
    if (is_ident_start(c)) {
      size_t j = i + 1;
      while (j < n && is_ident_char(line[j])) ++j;
      tokens->push_back({TokenKind::Identifier, line.substr(i, j - i), column});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool is_float = false;
      if (c == '0' && i + 1 < n && (line[i + 1] == 'x' || line[i + 1] == 'X' || line[i + 1] == 'b' || line[i + 1] == 'B')) {
        j = i + 2;
        while (j < n && (std::isalnum(static_cast<unsigned char>(line[j])) || line[j] == '_')) ++j;
      } else {
        while (j < n && (std::isalnum(static_cast<unsigned char>(line[j])) || line[j] == '_' || line[j] == '.' ||
                         ((line[j] == '+' || line[j] == '-') && (line[j - 1] == 'e' || line[j - 1] == 'E')))) {
          if (line[j] == '.' || line[j] == 'e' || line[j] == 'E') is_float = true;
          ++j;
        }
      }
      tokens->push_back({is_float ? TokenKind::Float : TokenKind::Integer, line.substr(i, j - i), column});
      i = j;
      continue;
    }
    if (c == '"') {
      std::string value;
      size_t j = i + 1;
      bool closed = false;
      while (j < n) {
        if (line[j] == '\\' && j + 1 < n) {
          const char escaped = line[j + 1];
          if (escaped == 'n') value += '\n';
          else if (escaped == 't') value += '\t';
          else if (escaped == 'r') value += '\r';
          else if (escaped == 'x' && j + 3 < n && std::isxdigit(static_cast<unsigned char>(line[j + 2])) &&
                   std::isxdigit(static_cast<unsigned char>(line[j + 3]))) {
            value += static_cast<char>(std::stoi(line.substr(j + 2, 2), nullptr, 16));
            j += 2;
          } else value += escaped;
          j += 2;
          continue;
        }
        if (line[j] == '"') {
          closed = true;
          ++j;
          break;
        }
        value += line[j++];
      }
      if (!closed) {
        *error = {column, "unterminated string"};
        return false;
      }
      tokens->push_back({TokenKind::String, value, column});
      i = j;
      continue;
    }
    if ((c == '<' || c == '>') && i + 1 < n && line[i + 1] == c) {
      tokens->push_back({TokenKind::Punct, line.substr(i, 2), column});
      i += 2;
      continue;
    }
    static const std::string kPunct = ",:()+-*/%&|^~";
    if (kPunct.find(c) != std::string::npos) {
      tokens->push_back({TokenKind::Punct, std::string(1, c), column});
      ++i;
      continue;
    }
    *error = {column, std::string("unexpected character '") + (std::isprint(static_cast<unsigned char>(c)) ? std::string(1, c) : "\\x" + std::to_string(static_cast<unsigned char>(c))) + "'"};
    return false;
  }
  tokens->push_back({TokenKind::End, "", static_cast<int>(n) + 1});
  return true;
}

}  // namespace npu::isa::assembler
