// The decode experts on their own (docs/performance.md): every layer's routed experts (and the shared
// expert beside them) through moe_gemv.cu's kernels, the up pass then the down pass, back to back for all
// layers in one CUDA graph, for one weight type and several batch sizes; Qwen3-Next-80B-A3B's expert
// shapes by default (512 experts of 2048 x 512, top 10, a shared expert as wide). Each token's experts are
// drawn at random (distinct per token, the same for every layer); the weights are random bf16 or constant
// bytes of f8_e4m3_b128 (the numbers do not depend on the values). Reports microseconds per layer and GB/s
// over the expert weights the layer reads (the distinct experts the batch chose, the shared one once), and
// the fraction of the device's copy bandwidth as `infernix bench` measures it. With --norm, the
// residual add after the experts and the RMSNorm of the sum run as the down pass's epilogue, as in decode
// (up to 8 tokens). Needs a GPU.
//
//   moe_gemv_bench [--type bf16|f8_e4m3_b128] [--tokens 1,8] [--layers 8] [--experts 512] [--top-k 10] ...
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/cuda/backend.h"
#include "backend/cuda/check.h"
#include "backend/cuda/factory.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/memory.h"
#include "bench_util.h"
#include "base/error.h"
#include "base/int_list.h"
#include "tensor/dtype.h"

namespace infernix {
namespace {

struct Options {
  std::string type = "bf16";
  std::string tokens = "1,8";
  int layers = 8, reps = 10;
  int64_t experts = 512, hidden = 2048, inter = 512, top_k = 10;
  bool shared = true, norm = false, early = true;
};

// One layer's expert weights: n_experts (+ 1 shared) experts' gate, up and down, in one buffer, and the
// device arrays of their addresses that an ExpertTable points to.
struct LayerExperts {
  cuda::DeviceBuffer weights, table;  // table: gate[E'], up[E'], down[E'] as const void*
  cuda::ExpertTable ex{};
};

// Experts per layer (the shared one as the table's last entry), and the bytes of one expert's gate (or up)
// and of all three of its matrices.
int64_t Entries(const Options& o) { return o.experts + (o.shared ? 1 : 0); }
size_t UpBytes(DType type, const Options& o) { return RowBytes(type, o.hidden) * static_cast<size_t>(o.inter); }
size_t ExpertBytes(DType type, const Options& o) {
  return 2 * UpBytes(type, o) + RowBytes(type, o.inter) * static_cast<size_t>(o.hidden);
}

LayerExperts MakeLayer(cudaStream_t s, DType type, const Options& o, int layer) {
  const int64_t entries = Entries(o);
  const size_t up_bytes = UpBytes(type, o), expert_bytes = ExpertBytes(type, o);
  LayerExperts l;
  l.weights = cuda::DeviceBuffer(expert_bytes * static_cast<size_t>(entries), "the expert benchmark's weights");
  if (type == DType::kBF16) {
    cuda::LaunchDummyBf16(s, l.weights.data(), static_cast<int64_t>(l.weights.size_bytes() / 2), 100 + layer, 0.02f);
  } else {  // every byte 0x3c: finite scales and E4M3 codes
    INFX_CUDA_CHECK(cudaMemsetAsync(l.weights.data(), 0x3c, l.weights.size_bytes(), s));
  }
  std::vector<const void*> ptrs(static_cast<size_t>(3 * entries));
  auto* base = static_cast<const char*>(l.weights.data());
  for (int64_t e = 0; e < entries; ++e) {
    const char* w = base + static_cast<size_t>(e) * expert_bytes;
    ptrs[static_cast<size_t>(e)] = w;                                        // gate
    ptrs[static_cast<size_t>(entries + e)] = w + up_bytes;                   // up
    ptrs[static_cast<size_t>(2 * entries + e)] = w + 2 * up_bytes;           // down
  }
  l.table = cuda::DeviceBuffer(ptrs.size() * sizeof(const void*), "the expert benchmark's tables");
  INFX_CUDA_CHECK(cudaMemcpyAsync(l.table.data(), ptrs.data(), l.table.size_bytes(), cudaMemcpyHostToDevice, s));
  INFX_CUDA_CHECK(cudaStreamSynchronize(s));  // ptrs leaves scope
  const auto* t = static_cast<const void* const*>(l.table.data());
  l.ex.gate = t;
  l.ex.up = t + entries;
  l.ex.down = t + 2 * entries;
  l.ex.dtype = static_cast<int32_t>(type);
  l.ex.n_experts = static_cast<int32_t>(o.experts);
  l.ex.inter = o.inter;
  l.ex.hidden = o.hidden;
  l.ex.aligned16 = expert_bytes % 16 == 0 && up_bytes % 16 == 0 ? 1 : 0;
  l.ex.shared = o.shared ? 1 : 0;
  return l;
}

int Run(const Options& o) {
  const std::optional<DType> parsed = DTypeFromName(o.type);
  if (!parsed || (*parsed != DType::kBF16 && *parsed != DType::kF8E4M3B128))
    ThrowError(ErrorCode::kInvalidArgument, "--type: '{}' is not one of bf16, f8_e4m3_b128", o.type);
  const DType type = *parsed;
  const std::vector<int64_t> tokens = ParseIntList(
      o.tokens, "--tokens", 1, fmt::format("a batch size from 1 to {}", cuda::kMoeGemvMaxTokens), "1,8",
      cuda::kMoeGemvMaxTokens);
  if (o.layers < 1 || o.reps < 1 || o.experts < 1 || o.hidden < 1 || o.inter < 1 || o.top_k < 1 ||
      o.top_k > o.experts)
    ThrowError(ErrorCode::kInvalidArgument, "--layers, --reps and the shapes must be positive, --top-k at most --experts");
  if (o.norm && *std::max_element(tokens.begin(), tokens.end()) > cuda::kGemvNormMaxTokens)
    ThrowError(ErrorCode::kInvalidArgument, "--norm: the epilogue takes up to {} tokens", cuda::kGemvNormMaxTokens);

  if (const std::string why = CudaUnavailableReason(0); !why.empty())
    ThrowError(ErrorCode::kUnsupported, "needs a GPU: {}", why);
  std::unique_ptr<Backend> backend = CreateCudaBackend(CudaOptions{});  // sets the kernels' attributes
  const CudaDeviceReport dev = MeasureCudaDevice(*backend);
  cudaStream_t s = nullptr;
  INFX_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  const size_t expert_bytes = ExpertBytes(type, o);
  const int layers = bench::LayersThatFit(expert_bytes * static_cast<size_t>(Entries(o)), o.layers);
  std::vector<LayerExperts> layer;
  for (int l = 0; l < layers; ++l) layer.push_back(MakeLayer(s, type, o, l));
  if (!cuda::MoeGemvFits(1, static_cast<int32_t>(o.top_k), o.shared, layer[0].ex))
    ThrowError(ErrorCode::kUnsupported, "these shapes do not take moe_gemv.cu's kernels (hidden and intermediate "
                                        "multiples of 32, FP8 of 128; top_k + shared <= {})",
               cuda::kMoeGemvMaxSlots);

  // Per token: top_k distinct experts, its routing weights and the shared expert's gate logit.
  const int64_t max_n = cuda::kMoeGemvMaxTokens;
  std::mt19937_64 rng(7);
  std::vector<int32_t> ids;
  for (int64_t t = 0; t < max_n; ++t) {
    std::vector<int32_t> all(static_cast<size_t>(o.experts));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    ids.insert(ids.end(), all.begin(), all.begin() + o.top_k);
  }
  std::vector<float> w(static_cast<size_t>(max_n * o.top_k), 1.0f / static_cast<float>(o.top_k));
  std::vector<float> logit(static_cast<size_t>(max_n), 0.5f);
  cuda::DeviceBuffer ids_d(ids.size() * 4, "ids"), w_d(w.size() * 4, "weights"), logit_d(logit.size() * 4, "logits"),
      x(static_cast<size_t>(max_n * o.hidden) * 2, "x"), act(static_cast<size_t>(max_n * (o.top_k + 1) * o.inter) * 2, "act"),
      out(x.size_bytes(), "out"), residual(x.size_bytes(), "residual"), normed(x.size_bytes(), "normed"),
      norm_w(static_cast<size_t>(o.hidden) * 2, "norm weight"),
      ss(static_cast<size_t>(max_n * ((o.hidden + 15) / 16)) * 4, "sums of squares"), counter(12, "counters");
  INFX_CUDA_CHECK(cudaMemcpyAsync(ids_d.data(), ids.data(), ids_d.size_bytes(), cudaMemcpyHostToDevice, s));
  INFX_CUDA_CHECK(cudaMemcpyAsync(w_d.data(), w.data(), w_d.size_bytes(), cudaMemcpyHostToDevice, s));
  INFX_CUDA_CHECK(cudaMemcpyAsync(logit_d.data(), logit.data(), logit_d.size_bytes(), cudaMemcpyHostToDevice, s));
  cuda::LaunchDummyBf16(s, x.data(), max_n * o.hidden, 1, 1.0f);
  cuda::LaunchDummyBf16(s, residual.data(), max_n * o.hidden, 2, 1.0f);
  cuda::LaunchDummyBf16(s, norm_w.data(), o.hidden, 3, 1.0f);
  INFX_CUDA_CHECK(cudaMemsetAsync(counter.data(), 0, counter.size_bytes(), s));
  INFX_CUDA_CHECK(cudaStreamSynchronize(s));


  std::printf("device: %s; measured copy bandwidth %.0f GB/s (read + write); %d layers of %lld %s experts "
              "%lld x %lld, top %lld%s%s\n",
              dev.name.c_str(), dev.copy_bytes_per_s / 1e9, layers, static_cast<long long>(o.experts),
              o.type.c_str(), static_cast<long long>(o.hidden), static_cast<long long>(o.inter),
              static_cast<long long>(o.top_k), o.shared ? ", a shared expert beside them" : "",
              o.norm ? ", the residual add and the norm as the down pass's epilogue" : "");
  std::printf("\n| tokens | experts read | us per layer | GB/s | of copy bandwidth |\n|---:|---:|---:|---:|---:|\n");
  for (int64_t n : tokens) {
    const std::set<int32_t> distinct(ids.begin(), ids.begin() + n * o.top_k);
    const size_t read = (distinct.size() + (o.shared ? 1 : 0)) * expert_bytes;
    auto experts = [&] {
      for (int l = 0; l < layers; ++l) {
        cuda::GemvResidual res{};
        if (o.norm) {
          res.in = residual.data();
          res.out = residual.data();
          res.norm_out = normed.data();
          res.w = norm_w.data();
          res.eps = 1e-6f;
          res.ss = static_cast<float*>(ss.data());
          res.counter = static_cast<int32_t*>(counter.data());
        }
        cuda::LaunchMoeGemv(s, x.data(), static_cast<const float*>(w_d.data()),
                            static_cast<const int32_t*>(ids_d.data()),
                            o.shared ? static_cast<const float*>(logit_d.data()) : nullptr, n,
                            static_cast<int32_t>(o.top_k), layer[static_cast<size_t>(l)].ex, act.data(), out.data(),
                            res, o.early ? static_cast<int32_t*>(counter.data()) + 1 : nullptr);
      }
    };
    const double ms = bench::GraphMedianMs(s, o.reps, experts) / layers;
    const double gbs = static_cast<double>(read) / (ms * 1e-3) / 1e9;
    std::printf("| %lld | %zu | %.1f | %.0f | %.1f%% |\n", static_cast<long long>(n),
                distinct.size() + (o.shared ? 1 : 0), ms * 1e3, gbs, 100.0 * gbs * 1e9 / dev.copy_bytes_per_s);
  }
  INFX_CUDA_CHECK(cudaStreamDestroy(s));
  return 0;
}

}  // namespace
}  // namespace infernix

int main(int argc, char** argv) {
  infernix::Options o;
  CLI::App app{"The decode experts alone: every layer's routed (and shared) experts in one graph (needs a GPU)"};
  app.add_option("--type", o.type, "Weight type: bf16 or f8_e4m3_b128")->capture_default_str();
  app.add_option("--tokens", o.tokens, "Batch sizes, comma-separated (up to 15)")->capture_default_str();
  app.add_option("--layers", o.layers, "Layers (fewer when they do not fit)")->capture_default_str();
  app.add_option("--reps", o.reps, "Timed runs of the graph (the median is reported)")->capture_default_str();
  app.add_option("--experts", o.experts, "Routed experts per layer")->capture_default_str();
  app.add_option("--top-k", o.top_k, "Experts per token")->capture_default_str();
  app.add_option("--hidden", o.hidden, "Hidden size")->capture_default_str();
  app.add_option("--intermediate", o.inter, "Expert intermediate size")->capture_default_str();
  app.add_flag("!--no-shared", o.shared, "No shared expert");
  app.add_flag("!--no-early-loads", o.early,
               "The down kernel waits for the up kernel before it reads the routing (else its blocks that find "
               "the routing published load their first weights before they wait)");
  app.add_flag("--norm", o.norm, "The residual add and the RMSNorm of the sum as the down pass's epilogue");
  CLI11_PARSE(app, argc, argv);
  try {
    return infernix::Run(o);
  } catch (const infernix::Error& e) {
    std::fprintf(stderr, "moe_gemv_bench: %s\n", e.what());
    return 1;
  }
}
