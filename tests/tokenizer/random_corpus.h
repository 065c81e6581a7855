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

// `count` lists of 1 to 24 ids below `vocab_size`, biased towards the low ids (where byte-level and
// <0xNN> byte tokens live, so that many lists hold broken UTF-8) and the high ids (where added and
// special tokens usually are).
std::vector<std::vector<int32_t>> random_id_lists(uint64_t seed, size_t count, int32_t vocab_size);

}  // namespace helium::test
