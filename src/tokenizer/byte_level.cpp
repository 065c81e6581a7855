// tokenizer/byte_level.cpp — the GPT-2 byte <-> character table (see byte_level.h).
#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/unicode.h"

namespace helium::tokenizer_json::byte_level {

namespace {

bool stands_for_itself(unsigned char b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

// The 68 bytes that do not stand for themselves are given U+0100.. in byte order.
constexpr char32_t kShiftedEnd = 0x100 + 68;

struct Table {
  std::array<char32_t, 256> char_of_byte{};
  std::array<std::string, 256> utf8_of_byte{};
  std::array<int, kShiftedEnd> byte_of_char{};  // -1 where the character is not in the table
  Table() {
    byte_of_char.fill(-1);
    char32_t shifted = 0x100;
    for (int b = 0; b < 256; ++b) {
      const auto byte = static_cast<unsigned char>(b);
      char_of_byte[byte] = stands_for_itself(byte) ? byte : shifted++;
      unicode::append_utf8(utf8_of_byte[byte], char_of_byte[byte]);
      byte_of_char[char_of_byte[byte]] = b;
    }
  }
};

// Built once from constants and never written after, so sharing it is safe.
const Table& table() {
  static const Table instance;
  return instance;
}

}  // namespace

char32_t char_for_byte(unsigned char byte) {
  return table().char_of_byte[byte];
}

std::optional<unsigned char> byte_for_char(char32_t cp) {
  if (cp >= kShiftedEnd) return std::nullopt;
  const int b = table().byte_of_char[cp];
  if (b < 0) return std::nullopt;
  return static_cast<unsigned char>(b);
}

std::string encode(std::string_view text) {
  const Table& t = table();
  std::string out;
  out.reserve(text.size() * 2);
  for (char c : text) out += t.utf8_of_byte[static_cast<unsigned char>(c)];
  return out;
}

}  // namespace helium::tokenizer_json::byte_level
