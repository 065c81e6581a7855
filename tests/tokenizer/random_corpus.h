// tests/tokenizer/random_corpus.h — deterministic random strings for comparing helium's tokenizers with
// the reference implementation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace helium::test {

// `count` byte strings built from a fixed `seed`: ASCII words and code, whitespace runs, digits,
// contractions, Latin, Greek, Cyrillic, CJK, Hangul (precomposed and conjoining jamo), Arabic, Hebrew,
// Devanagari, Thai, combining marks, emoji with ZWJ sequences, skin tones, flags and keycaps, special
// tokens written as text, control characters, and random bytes (mostly invalid UTF-8). The same seed
// gives the same strings on every platform.
std::vector<std::string> random_corpus(uint64_t seed, size_t count);

}  // namespace helium::test
