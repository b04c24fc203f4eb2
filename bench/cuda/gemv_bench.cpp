// The decode GEMVs on their own (docs/performance.md): the four products of every layer of a dense model
// (q/k/v, o_proj, gate/up, down; Qwen3-8B's shapes by default) streamed back to back in one CUDA graph
// with nothing between them ("chain"), and each product alone (one launch per layer, back to back), for
// one weight type and several batch sizes. Reports microseconds per pass, GB/s over the weight bytes and
// the fraction of the device's copy bandwidth, measured as `infernix bench` measures it. What a decode
// step of `infernix bench` takes beyond the chain is the cost of the kernels between the GEMVs (norms,
// attention) and of the host. Weights are random bf16 or constant bytes of a block type (valid, finite
// blocks); the numbers do not depend on the values. Needs a GPU.
//
// With --norm (bf16), the RMSNorms of the step are fused in as decode can fuse them: `staged`, each q/k/v
// and gate/up GEMV normalises its input itself first; `sums`, o_proj and down add the residual, sum the
// squares per tile, and their last block normalises (q/k/v and gate/up read x as it is).
//
//   gemv_bench [--type bf16|q8_0|q4_k|f8_e4m3_b128|...] [--tokens 1,8] [--layers 36] [--norm staged|sums] ...
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cuda/backend.h"
#include "backend/cuda/check.h"
#include "backend/cuda/factory.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/memory.h"
#include "base/error.h"
#include "base/int_list.h"
#include "bench_util.h"
#include "tensor/dtype.h"

namespace infernix {
namespace {

struct Options {
  std::string type = "bf16";
  std::string tokens = "1,8";
  int layers = 36, reps = 10;
  int64_t hidden = 4096, inter = 12288, heads = 32, kv_heads = 8, head_dim = 128;
  std::string norm = "none";
};

// Products that share x: one launch.
struct Product {
  const char* name;
  int64_t k;
  std::vector<int64_t> rows;
};

// bf16 or a block type, by name.
DType ParseType(const std::string& name) {
  if (std::optional<DType> t = DTypeFromName(name); t && (*t == DType::kBF16 || IsBlockQuantized(*t))) return *t;
  ThrowError(ErrorCode::kInvalidArgument, "--type: '{}' is not one of bf16, {}", name, BlockQuantizedNames());
}

int Run(const Options& o) {
  const DType type = ParseType(o.type);
  const bool bf16 = type == DType::kBF16;
  const int64_t token_limit = bf16 ? cuda::kGemvMaxTokens : cuda::kQuantGemvWideMaxTokens;
  const std::vector<int64_t> tokens =
      ParseIntList(o.tokens, "--tokens", 1, fmt::format("a batch size from 1 to {}", token_limit), "1,8", token_limit);
  if (o.layers < 1 || o.reps < 1 || o.hidden < 1 || o.inter < 1 || o.heads < 1 || o.kv_heads < 1 || o.head_dim < 1)
    ThrowError(ErrorCode::kInvalidArgument, "--layers, --reps and the shapes must be positive");
  if (o.norm != "none" && o.norm != "staged" && o.norm != "sums")
    ThrowError(ErrorCode::kInvalidArgument, "--norm: '{}' is not one of none, staged, sums", o.norm);
  const bool norm = o.norm != "none", sums = o.norm == "sums";
  if (norm && !bf16) ThrowError(ErrorCode::kInvalidArgument, "--norm: only bf16 GEMVs take the norm prologue");

  if (const std::string why = CudaUnavailableReason(0); !why.empty())
    ThrowError(ErrorCode::kUnsupported, "needs a GPU: {}", why);
  std::unique_ptr<Backend> backend = CreateCudaBackend(CudaOptions{});  // sets the kernels' attributes
  const CudaDeviceReport dev = MeasureCudaDevice(*backend);
  const auto& props = static_cast<CudaBackend&>(*backend).properties();
  const size_t smem_optin = props.sharedMemPerBlockOptin;
  cudaStream_t s = nullptr;
  INFX_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  const int64_t q_rows = o.heads * o.head_dim, kv_rows = o.kv_heads * o.head_dim;
  const std::vector<Product> products = {{"q/k/v", o.hidden, {q_rows, kv_rows, kv_rows}},
                                         {"o_proj", q_rows, {o.hidden}},
                                         {"gate/up", o.hidden, {o.inter, o.inter}},
                                         {"down", o.inter, {o.hidden}}};
  int64_t max_k = 0, max_rows = 0;
  size_t layer_bytes = 0;
  std::vector<size_t> product_bytes;
  for (const Product& p : products) {
    size_t bytes = 0;
    int64_t rows = 0;
    for (int64_t r : p.rows) {
      bytes += RowBytes(type, p.k) * static_cast<size_t>(r);
      rows += r;
    }
    product_bytes.push_back(bytes);
    layer_bytes += bytes;
    max_k = std::max(max_k, p.k);
    max_rows = std::max(max_rows, rows);
  }
  const int layers = bench::LayersThatFit(layer_bytes, o.layers);

  // Weights, one buffer per layer; x, the norm's input and weight, and the outputs shared by all.
  std::vector<cuda::DeviceBuffer> weights;
  for (int l = 0; l < layers; ++l) {
    weights.emplace_back(layer_bytes, "the GEMV benchmark's weights");
    if (bf16) {
      cuda::LaunchDummyBf16(s, weights.back().data(), static_cast<int64_t>(layer_bytes / 2), 100 + l, 0.02f);
    } else {  // every byte 0x3c: finite scales and valid codes in every block type
      INFX_CUDA_CHECK(cudaMemsetAsync(weights.back().data(), 0x3c, layer_bytes, s));
    }
  }
  const int64_t max_tokens = std::max<int64_t>(cuda::kGemvMaxTokens, cuda::kQuantGemvWideMaxTokens);
  cuda::DeviceBuffer x(static_cast<size_t>(max_tokens * max_k) * 2, "x"), norm_in(x.size_bytes(), "x"),
      norm_w(static_cast<size_t>(max_k) * 2, "x"), out(static_cast<size_t>(max_tokens * max_rows) * 2, "out"),
      counter(sizeof(int32_t), "counter"), ss(static_cast<size_t>(max_tokens * max_k / 16) * 4, "sums of squares");
  cuda::LaunchDummyBf16(s, x.data(), max_tokens * max_k, 1, 1.0f);
  cuda::LaunchDummyBf16(s, norm_in.data(), max_tokens * max_k, 2, 1.0f);
  cuda::LaunchDummyBf16(s, norm_w.data(), max_k, 3, 1.0f);
  INFX_CUDA_CHECK(cudaMemsetAsync(counter.data(), 0, sizeof(int32_t), s));
  INFX_CUDA_CHECK(cudaStreamSynchronize(s));

  // The launch of product p of layer l for n tokens, from token first of x (block types: per group of the
  // most tokens one launch takes at that shape, as the backend runs them).
  auto launch_group = [&](int l, size_t p, int64_t n, int64_t first) {
    const Product& pr = products[p];
    cuda::GemvBatch b{};
    b.x = static_cast<const char*>(x.data()) + first * pr.k * 2;
    b.n = n;
    b.k = pr.k;
    b.w_type = static_cast<int32_t>(type);
    size_t offset = 0;
    for (size_t p2 = 0; p2 < p; ++p2) offset += product_bytes[p2];
    int64_t out_row = 0;
    for (int64_t rows : pr.rows) {
      cuda::GemvSegment& sg = b.seg[b.n_segments++];
      sg.w = static_cast<const char*>(weights[static_cast<size_t>(l)].data()) + offset;
      sg.out = static_cast<char*>(out.data()) + (out_row * max_tokens + first * rows) * 2;
      sg.rows = rows;
      sg.out_dtype = cuda::kBF16;
      offset += RowBytes(type, pr.k) * static_cast<size_t>(rows);
      out_row += rows;
      if (!bf16 && !cuda::QuantGemvMmaFits(b.w_type, n, pr.k, rows, b.x, sg.w, smem_optin))
        ThrowError(ErrorCode::kUnsupported, "{} x {} of {} for {} tokens does not take the tensor-core GEMV", rows,
                   pr.k, o.type, n);
    }
    if (bf16) {
      if (norm && !sums && pr.rows.size() > 1 && n <= cuda::kGemvNormMaxTokens) {  // q/k/v and gate/up
        b.pro.kind = cuda::kGemvXNorm;
        b.pro.a = norm_in.data();
        b.pro.w = norm_w.data();
        b.pro.out = x.data();
        b.pro.eps = 1e-6f;
        b.pro.counter = static_cast<int32_t*>(counter.data());
      } else if (sums && pr.rows.size() == 1 && n <= cuda::kGemvNormMaxTokens) {  // o_proj and down
        b.res.in = norm_in.data();
        b.res.out = norm_in.data();
        b.res.norm_out = x.data();
        b.res.w = norm_w.data();
        b.res.eps = 1e-6f;
        b.res.ss = static_cast<float*>(ss.data());
        b.res.counter = static_cast<int32_t*>(counter.data());
      }
      cuda::LaunchGemv(s, b);
    } else {
      cuda::LaunchQuantGemvMma(s, b, smem_optin);
    }
  };
  auto launch = [&](int l, size_t p, int64_t n) {
    int64_t group = n;
    if (!bf16) {  // per group of the most tokens one launch takes, as the backend runs them
      for (int64_t rows : products[p].rows)
        group = std::min(group, cuda::QuantGemvMmaGroupTokens(static_cast<int>(type), n, products[p].k, rows,
                                                              x.data(), weights[0].data(), smem_optin));
    }
    for (int64_t i = 0; i < n; i += group) launch_group(l, p, std::min(group, n - i), i);
  };

  std::printf("device: %s; measured copy bandwidth %.0f GB/s (read + write); %d layers of %s weights, %.2f GB%s\n",
              dev.name.c_str(), dev.copy_bytes_per_s / 1e9, layers, o.type.c_str(),
              static_cast<double>(layer_bytes) * layers / 1e9,
              !norm  ? ""
              : sums ? "; residual add and RMSNorm as the epilogue of o_proj and down"
                     : "; RMSNorm prologue on q/k/v and gate/up");
  std::printf("\n| tokens | pass | us | GB/s | of copy bandwidth |\n|---:|---|---:|---:|---:|\n");
  for (int64_t n : tokens) {
    auto row = [&](const std::string& name, double ms, double bytes) {
      std::printf("| %lld | %s | %.1f | %.0f | %.1f%% |\n", static_cast<long long>(n), name.c_str(), ms * 1e3,
                  bytes / (ms * 1e-3) / 1e9, 100.0 * bytes / (ms * 1e-3) / dev.copy_bytes_per_s);
    };
    auto chain = [&] {
      for (int l = 0; l < layers; ++l)
        for (size_t p = 0; p < products.size(); ++p) launch(l, p, n);
    };
    row(fmt::format("chain of {} layers", layers), bench::GraphMedianMs(s, o.reps, chain),
        static_cast<double>(layer_bytes) * layers);
    for (size_t p = 0; p < products.size(); ++p) {
      auto alone = [&] {
        for (int l = 0; l < layers; ++l) launch(l, p, n);
      };
      row(fmt::format("{} x {}", products[p].name, layers), bench::GraphMedianMs(s, o.reps, alone),
          static_cast<double>(product_bytes[p]) * layers);
    }
  }
  INFX_CUDA_CHECK(cudaStreamDestroy(s));
  return 0;
}

}  // namespace
}  // namespace infernix

int main(int argc, char** argv) {
  infernix::Options o;
  CLI::App app{"The decode GEMVs alone: a chain of every layer's products, and each product alone (needs a GPU)"};
  app.add_option("--type", o.type, "Weight type: bf16, or a block type (q8_0, q4_k, f8_e4m3_b128, ...)")
      ->capture_default_str();
  app.add_option("--tokens", o.tokens,
                 "Batch sizes, comma-separated (bf16 up to 16, block types up to 32: beyond 8 in one launch where x "
                 "fits in shared memory, else per group as the backend runs them)")
      ->capture_default_str();
  app.add_option("--layers", o.layers, "Layers (fewer when they do not fit)")->capture_default_str();
  app.add_option("--reps", o.reps, "Timed runs of each graph (the median is reported)")->capture_default_str();
  app.add_option("--hidden", o.hidden, "Hidden size")->capture_default_str();
  app.add_option("--intermediate", o.inter, "MLP intermediate size")->capture_default_str();
  app.add_option("--heads", o.heads, "Query heads")->capture_default_str();
  app.add_option("--kv-heads", o.kv_heads, "Key/value heads")->capture_default_str();
  app.add_option("--head-dim", o.head_dim, "Head dimension")->capture_default_str();
  app.add_option("--norm", o.norm,
                 "bf16, the RMSNorms fused in as in decode: none; staged (q/k/v and gate/up normalise their "
                 "input first); sums (o_proj and down add the residual, sum the squares and normalise in "
                 "their last block)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    return infernix::Run(o);
  } catch (const infernix::Error& e) {
    std::fprintf(stderr, "gemv_bench: %s\n", e.what());
    return 1;
  }
}
