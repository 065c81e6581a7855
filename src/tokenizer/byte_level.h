// tokenizer/byte_level.h — GPT-2's reversible map between bytes and printable characters.
// Owns: the byte <-> character table that byte-level BPE vocabularies are written in. Must not: split
// text or know vocabularies.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace helium::tokenizer_json::byte_level {

// The character standing for `byte`: printable Latin-1 bytes stand for themselves, the other 68 bytes
// are shifted to U+0100.. (so " " is written "Ġ" and "\n" is "Ċ").
char32_t char_for_byte(unsigned char byte);
// The byte a character stands for, or nothing when it is not one of the 256 characters of the table.
std::optional<unsigned char> byte_for_char(char32_t cp);

// Every byte of `text` written as its character, in UTF-8.
std::string encode(std::string_view text);

}  // namespace helium::tokenizer_json::byte_level
