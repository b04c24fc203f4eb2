// Writes the fuzzers' seed corpora: small valid GGUF files (every metadata type, arrays, nested arrays,
// tensors of plain, block and unsupported types) into DIR/gguf and small safetensors files into
// DIR/safetensors. Usage: fuzz_make_seeds DIR
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "formats/gguf_test_builder.h"

namespace {

using infernix::testing_gguf::Builder;

void Write(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

std::string Safetensors(const std::string& header, size_t data_bytes) {
  uint64_t n = header.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + header + std::string(data_bytes, '\x3f');
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir / "gguf");
  std::filesystem::create_directories(dir / "safetensors");

  Builder meta;
  meta.KvString("general.architecture", "qwen3")
      .KvU32("qwen3.block_count", 2)
      .KvF32("qwen3.rope.freq_base", 10000.0f)
      .KvBool("tokenizer.ggml.add_bos_token", false)
      .Kv("u8", 0, std::string(1, '\x07'))
      .Kv("i16", 3, std::string("\x01\x80", 2))
      .Kv("u64", 10, Builder::U64(123456789))
      .Kv("i64", 11, Builder::U64(~uint64_t{0}))
      .Kv("f64", 12, Builder::U64(0x3ff0000000000000ull))
      .KvStrings("tokenizer.ggml.tokens", {"a", "b", "ab"})
      .KvI32s("tokenizer.ggml.token_type", {1, 1, 3})
      .Kv("nested", 9, Builder::U32(9) + Builder::U64(1) + Builder::U32(0) + Builder::U64(2) + "xy");
  Write(dir / "gguf" / "metadata.gguf", meta.Build());

  Builder tensors;
  tensors.KvString("general.architecture", "qwen3");
  tensors.Tensor("f32", {4, 2}, 0, 32).Tensor("q8", {32, 2}, 8, 68).Tensor("bf16", {8}, 30, 16);
  tensors.Tensor("q4k", {256}, 12, 144).Tensor("iq2xxs", {256}, 16, 66);
  Write(dir / "gguf" / "tensors.gguf", tensors.Build());

  Builder aligned;
  aligned.alignment = 64;
  aligned.KvU32("general.alignment", 64).Tensor("a", {16}, 1, 32).Tensor("b", {4, 1, 1, 2}, 0, 32);
  Write(dir / "gguf" / "aligned.gguf", aligned.Build());

  Builder v2;
  v2.version = 2;
  v2.KvString("general.name", "v2");
  Write(dir / "gguf" / "v2.gguf", v2.Build());

  Write(dir / "safetensors" / "two.safetensors",
        Safetensors(R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                    R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[16,20]}})",
                    20));
  Write(dir / "safetensors" / "fp8.safetensors",
        Safetensors(R"({"w":{"dtype":"F8_E4M3","shape":[4,4],"data_offsets":[0,16]},)"
                    R"("s":{"dtype":"F32","shape":[1],"data_offsets":[16,20]},"e":{"dtype":"I64","shape":[0],"data_offsets":[20,20]}})",
                    20));
  return 0;
}
