#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace infernix::byte_level {
namespace {

constexpr bool IsPrintable(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

constexpr std::array<char32_t, 256> MakeByteToChar() {
  std::array<char32_t, 256> table{};
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) table[b] = IsPrintable(b) ? char32_t(b) : next++;
  return table;
}

constexpr std::array<char32_t, 256> kByteToChar = MakeByteToChar();
constexpr char32_t kCharLimit = 0x100 + 68;  // 68 bytes are not printable: U+0100..U+0143

constexpr std::array<int16_t, kCharLimit> MakeCharToByte() {
  std::array<int16_t, kCharLimit> table{};
  for (auto& entry : table) entry = -1;
  for (int b = 0; b < 256; ++b) table[kByteToChar[b]] = static_cast<int16_t>(b);
  return table;
}

constexpr std::array<int16_t, kCharLimit> kCharToByte = MakeCharToByte();

}  // namespace

char32_t ByteToChar(uint8_t b) { return kByteToChar[b]; }

std::optional<uint8_t> CharToByte(char32_t cp) {
  if (cp >= kCharLimit || kCharToByte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(kCharToByte[cp]);
}

void Encode(std::string_view bytes, std::string* out) {
  for (char c : bytes) utf8::Append(kByteToChar[static_cast<uint8_t>(c)], out);
}

void DecodeToken(std::string_view token, std::string* out) {
  const size_t mark = out->size();
  size_t pos = 0;
  while (pos < token.size()) {
    const std::optional<uint8_t> b = CharToByte(utf8::DecodeAt(token, &pos));
    if (!b) {
      out->resize(mark);
      out->append(token);
      return;
    }
    out->push_back(static_cast<char>(*b));
  }
}

}  // namespace infernix::byte_level
