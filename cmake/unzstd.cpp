// Build helper: the fixtures' *.zst files are decompressed at build time (cmake/InfernixFixtures.cmake,
// tests/CMakeLists.txt) by `infernix_unzstd IN OUT`, one zstd file, streaming.
#include <zstd.h>

#include <cstdio>
#include <memory>
#include <vector>

namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

int Fail(const char* what, const char* path) {
  std::fprintf(stderr, "infernix_unzstd: %s: %s\n", what, path);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: infernix_unzstd IN OUT\n");
    return 2;
  }
  File in(std::fopen(argv[1], "rb"));
  if (!in) return Fail("cannot open", argv[1]);
  File out(std::fopen(argv[2], "wb"));
  if (!out) return Fail("cannot create", argv[2]);
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  std::vector<char> in_buf(ZSTD_DStreamInSize()), out_buf(ZSTD_DStreamOutSize());
  size_t last = 0;  // 0 once a frame is complete
  bool any = false;
  while (size_t n = std::fread(in_buf.data(), 1, in_buf.size(), in.get())) {
    any = true;
    ZSTD_inBuffer input{in_buf.data(), n, 0};
    while (input.pos < input.size) {
      ZSTD_outBuffer output{out_buf.data(), out_buf.size(), 0};
      last = ZSTD_decompressStream(ctx.get(), &output, &input);
      if (ZSTD_isError(last)) return Fail(ZSTD_getErrorName(last), argv[1]);
      if (std::fwrite(out_buf.data(), 1, output.pos, out.get()) != output.pos) return Fail("cannot write", argv[2]);
    }
  }
  if (std::ferror(in.get())) return Fail("cannot read", argv[1]);
  if (!any || last != 0) return Fail("truncated zstd data", argv[1]);
  return 0;
}
