// The GPT-2 "byte-level" alphabet that byte-level BPE vocabularies are written in: every byte maps to
// one printable code point (printable Latin-1 bytes to themselves, the others to U+0100 + n), so any
// byte string becomes a string of vocabulary characters. Pure functions over constant tables.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace infernix::byte_level {

// The code point that stands for byte `b`.
char32_t ByteToChar(uint8_t b);

// The byte that code point `cp` stands for, if it is one of the 256 alphabet characters.
std::optional<uint8_t> CharToByte(char32_t cp);

// Appends the byte-level spelling of `bytes` (1 or 2 UTF-8 bytes per input byte) to `out`.
void Encode(std::string_view bytes, std::string* out);

// Hugging Face's ByteLevel decoder for one token: when every character of `token` is an alphabet
// character, appends the bytes they stand for; otherwise (an added token such as "<|im_end|> x" with
// a space) appends `token` unchanged. `token` must be valid UTF-8.
void DecodeToken(std::string_view token, std::string* out);

}  // namespace infernix::byte_level
