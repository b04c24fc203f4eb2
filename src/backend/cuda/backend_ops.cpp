// The CUDA backend's ops: argument checks on the host, then queued launcher calls (kernels.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "backend/cuda/backend.h"
#include "backend/cuda/check.h"
#include "backend/cuda/state.h"
#include "base/check.h"
#include "base/error.h"

namespace infernix {
namespace {

static_assert(static_cast<int>(DType::kF32) == cuda::kF32 && static_cast<int>(DType::kF16) == cuda::kF16 &&
              static_cast<int>(DType::kBF16) == cuda::kBF16);
static_assert(static_cast<int>(DType::kQ4_0) == cuda::kQ4_0 && static_cast<int>(DType::kQ8_0) == cuda::kQ8_0 &&
              static_cast<int>(DType::kQ3_K) == cuda::kQ3_K &&
              static_cast<int>(DType::kQ4_K) == cuda::kQ4_K && static_cast<int>(DType::kQ5_K) == cuda::kQ5_K &&
              static_cast<int>(DType::kQ6_K) == cuda::kQ6_K &&
              static_cast<int>(DType::kF8E4M3B128) == cuda::kF8E4M3B128);

int Dt(const Tensor& t) { return static_cast<int>(t.dtype); }

bool IsAct(const Tensor& t) { return t.dtype == DType::kBF16 || t.dtype == DType::kF32; }
bool IsFloat(const Tensor& t) { return t.dtype == DType::kBF16 || t.dtype == DType::kF32 || t.dtype == DType::kF16; }
bool Aligned(const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

void CheckSameAct(const Tensor& a, const Tensor& b) {
  INFX_CHECK_MSG(a.numel() == b.numel() && a.dtype == b.dtype && IsAct(a), "{} vs {}", a.Describe(), b.Describe());
}

// Whether the bytes of p and q do not overlap.
bool Disjoint(const Tensor& p, const Tensor& q) {
  const char* pb = static_cast<const char*>(p.data);
  const char* qb = static_cast<const char*>(q.data);
  return pb + p.size_bytes() <= qb || qb + q.size_bytes() <= pb;
}

// Largest power of two <= 256 dividing p.
unsigned PointerAlignment(const void* p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  unsigned a = 256;
  while (a > 1 && (v & (a - 1)) != 0) a >>= 1;
  return a;
}

// fn(first, count) over n tokens in groups of `group` tokens, by default the quantized decode products'
// kQuantGemvMaxTokens (a dense product of up to kQuantSplitMaxTokens tokens in groups of the most tokens one
// launch takes; bf16 / FP8 experts up to kMoeGemvMaxTokens and block-type experts up to
// kQuantMoeGroupsMaxTokens per group of 8: each group reads the packed weights once).
template <typename Fn>
void ForEachDecodeGroup(int64_t n, Fn&& fn, int64_t group = cuda::kQuantGemvMaxTokens) {
  for (int64_t i = 0; i < n; i += group) fn(i, std::min<int64_t>(group, n - i));
}

}  // namespace

void CudaBackend::Embedding(const Tensor& ids, const Tensor& table, Tensor out) {
  int64_t n = ids.numel(), h = table.cols();
  if (IsBlockQuantized(table.dtype)) {
    INFX_CHECK(ids.dtype == DType::kI32 && out.rows() == n && out.cols() == h && IsAct(out));
    FlushGemv();
    FlushPending();
    Enqueue(cuda::LaunchDequantRows, Dt(table), static_cast<const void*>(table.data), ids.as<const int32_t>(),
            table.rows(), h, out.data, Dt(out), n);
    return;
  }
  INFX_CHECK(ids.dtype == DType::kI32 && out.rows() == n && out.cols() == h && IsAct(out) && IsFloat(table));
  Enqueue(cuda::LaunchEmbedding, ids.as<const int32_t>(), n, table.data, Dt(table), table.rows(), h, out.data, Dt(out));
}

void CudaBackend::RmsNorm(const Tensor& x, const Tensor& weight, float eps, bool unit_offset, Tensor out) {
  CheckSameAct(x, out);
  INFX_CHECK_MSG(weight.numel() == x.cols() && IsFloat(weight), "RmsNorm x {} weight {}", x.Describe(),
                 weight.Describe());
  const float w_offset = unit_offset ? 1.0f : 0.0f;
  // The norm of a residual sum that an epilogue makes joins that epilogue (cuda::GemvResidual).
  auto join = [&](cuda::GemvResidual& r) {
    r.norm_out = out.data;
    r.w = weight.data;
    r.w_dtype = Dt(weight);
    r.eps = eps;
    r.w_offset = w_offset;
    r.ss = static_cast<float*>(gemv_sums_.data());
    r.counter = static_cast<int32_t*>(gemv_counter_.data()) + 1;
  };
  if (MoeResidualNormFusable(x, weight, out)) {  // x = residual + the held experts' output
    join(pending_moe_.res);
    FlushPending();
    return;
  }
  if (ResidualNormFusable(x, weight, out)) {  // x = residual + the product of the pending GEMV
    join(gemv_.res);  // still pending: the GEMV that reads out may finish the norm (CanHoldProducer)
    return;
  }
  if (pending_ == Pending::kAdd && x.data == pending_out_.data && x.numel() == pending_out_.numel()) {
    // hidden = hidden + block_out; normed = RmsNorm(hidden): one pass, or the prologue of the GEMV that
    // reads normed.
    if (Disjoint(x, out) && NormFusable(pending_a_, &pending_b_, weight, out)) {
      HoldNorm(pending_a_, pending_b_, x, weight, eps, w_offset, out);
      return;
    }
    pending_ = Pending::kNone;
    recorder_.Launch(cuda::LaunchAddRmsNorm, Dt(x), pending_a_.data, pending_b_.data, x.data, weight.data, Dt(weight),
                     eps, w_offset, out.data, x.rows(), x.cols());
    return;
  }
  if (options_.fuse && x.data == out.data && x.dtype == DType::kBF16 && x.cols() <= 256) {
    // A per-head q/k norm: held back for RoPE and the KV-cache append of the attention that follows.
    if (pending_ != Pending::kHeads || pending_heads_.size() >= 2) {
      FlushGemv();
      FlushPending();
      pending_ = Pending::kHeads;
    }
    PendingHead h;
    h.x = x;
    h.w = weight;
    h.eps = eps;
    h.w_offset = w_offset;
    pending_heads_.push_back(h);
    return;
  }
  if (NormFusable(x, nullptr, weight, out)) {  // held back for the GEMV that reads out
    FlushGemv();
    FlushPending();
    HoldNorm(x, Tensor{}, Tensor{}, weight, eps, w_offset, out);
    return;
  }
  Enqueue(cuda::LaunchRmsNorm, Dt(x), x.data, weight.data, Dt(weight), eps, w_offset, out.data, x.rows(), x.cols());
}

void CudaBackend::HoldNorm(const Tensor& a, const Tensor& b, const Tensor& sum, const Tensor& weight, float eps,
                           float w_offset, const Tensor& out) {
  pending_ = Pending::kNorm;
  pending_a_ = a;
  pending_b_ = b;
  pending_sum_ = sum;
  pending_out_ = out;
  pending_norm_w_ = weight;
  pending_eps_ = eps;
  pending_w_offset_ = w_offset;
}

bool CudaBackend::NormFusable(const Tensor& x, const Tensor* b, const Tensor& weight, const Tensor& out) const {
  const int64_t n = x.rows(), k = x.cols();
  // Up to kGemvNormMaxTokens rows the bf16 GEMV's prologue (TakeGemvPrologue) or a quantized product's
  // rounding of x (RoundHeldForQuantized) takes the norm; beyond, up to kQuantGemvWideMaxTokens, only the
  // latter (the bf16 GEMV launches it first).
  const bool rows_fit = n <= cuda::kGemvNormMaxTokens
                            ? cuda::GemvNormSmemBytes(n, k) <= std::min<size_t>(smem_optin_ / 2, 96 << 10)
                            : n <= cuda::kQuantGemvWideMaxTokens && k % 256 == 0;
  return options_.fuse && options_.gemv && x.dtype == DType::kBF16 && n >= 1 && rows_fit && k % 8 == 0 &&
         Aligned(x.data, 16) && Aligned(out.data, 16) && Disjoint(x, out) &&
         (b == nullptr || (Aligned(b->data, 16) && Disjoint(*b, out))) &&
         (weight.dtype != DType::kBF16 || Aligned(weight.data, 16));
}

void CudaBackend::GatedRmsNorm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor out) {
  CheckSameAct(x, z);
  CheckSameAct(x, out);
  INFX_CHECK(weight.numel() == x.cols() && IsFloat(weight));
  const PendingGdn& held = pending_gdn_;
  if (pending_ == Pending::kDeltaRule && x.data == held.out.data && x.numel() == held.out.numel() &&
      x.cols() == held.dv && x.dtype == DType::kBF16 && Disjoint(out, x) && Disjoint(out, z)) {
    // The gated norm of the held decode delta rule's heads: its kernel's last block per head writes it.
    cuda::GdnDecodeFusion f{};
    f.z = z.data;
    f.norm_w = weight.data;
    f.norm_w_dtype = Dt(weight);
    f.norm_out = out.data;
    f.eps = eps;
    f.ss = static_cast<float*>(gdn_sums_.data());
    f.counter = static_cast<int32_t*>(gdn_counter_.data());
    LaunchHeldDeltaRule(&f);
    return;
  }
  Enqueue(cuda::LaunchGatedRmsNorm, Dt(x), x.data, z.data, weight.data, Dt(weight), eps, out.data, x.rows(), x.cols());
}

void CudaBackend::MatMul(const Tensor& x, const Tensor& w, Tensor out) {
  const int64_t n = x.rows(), k = x.cols(), m = w.rows();
  INFX_CHECK_MSG(w.cols() == k && out.rows() == n && out.cols() == m, "MatMul x {} w {} out {}", x.Describe(),
                 w.Describe(), out.Describe());
  if (IsBlockQuantized(w.dtype)) {
    INFX_CHECK(x.dtype == DType::kBF16 && IsAct(out));
    if (n == 0 || m == 0) return;
    if (options_.gemv && cuda::GemvTakesWeights(Dt(w), n, k) && Aligned(x.data, 16) && Aligned(w.data, 16)) {
      JoinGemv(x, w, out, TakeGemvPrologue(x));  // FP8: the bf16 GEMV's kernel and fusions
      return;
    }
    if (options_.gemv && cuda::QuantGemvMmaFits(Dt(w), n, k, m, x.data, w.data, smem_optin_)) {
      // 2-32 tokens: the held op that makes x (a norm, SiLU-and-multiply, the decode attention) rounds it to
      // int8 for the product, instead of every block of the product. A product after it that reads the same x
      // finds nothing held and joins the group with a plain prologue: it reads the group's int8 rows.
      const cuda::GemvPrologue pro = RoundHeldForQuantized(x, w);
      if (pro.kind == cuda::kGemvXPlain) FlushPending();
      JoinGemv(x, w, out, pro);
      return;
    }
    if (options_.gemv && n > cuda::kQuantGemvMaxTokens && n <= cuda::kQuantSplitMaxTokens) {
      // Per group of the most tokens a launch takes here; the held op that makes x rounds it for every group,
      // a block of rows per group (cuda::QuantXBytes of the group's rows).
      const int64_t group = cuda::QuantGemvMmaGroupTokens(Dt(w), n, k, m, x.data, w.data, smem_optin_);
      const cuda::GemvPrologue pro = cuda::QuantGemvMmaFits(Dt(w), group, k, m, x.data, w.data, smem_optin_)
                                         ? RoundHeldForQuantized(x, w, group)
                                         : cuda::GemvPrologue{};
      if (pro.kind == cuda::kGemvXInt8) {
        const int64_t block_bytes = cuda::QuantXBytes<int64_t>(group, k, cuda::QuantGroupValues(Dt(w)));
        ForEachDecodeGroup(
            n,
            [&](int64_t i, int64_t rows) {
              cuda::GemvPrologue p = pro;  // a last group of one token rounds its row itself (the one-token form)
              p.a = static_cast<const uint8_t*>(pro.a) + i / group * block_bytes;
              JoinGemv(x.SliceRows(i, rows), w, out.SliceRows(i, rows), rows > 1 ? p : cuda::GemvPrologue{});
            },
            group);
        return;
      }
      FlushPending();
      FlushGemv();
      ForEachDecodeGroup(
          n, [&](int64_t i, int64_t rows) { MatMul(x.SliceRows(i, rows), w, out.SliceRows(i, rows)); }, group);
      return;
    }
    FlushPending();
    FlushGemv();
    if (n <= cuda::kQuantGemvMaxTokens) {
      Enqueue(cuda::LaunchQuantGemv, Dt(w), static_cast<const void*>(x.data), static_cast<const void*>(w.data),
              out.data, Dt(out), n, m, k);
      return;
    }
    // Prefill: the weight dequantized to bf16 in the op workspace (not scratch, which would keep every
    // layer's until the pass ends: the whole model in bf16), then the bf16 product.
    Tensor dense = DenseWeight(m, k);
    Enqueue(cuda::LaunchDequantRows, Dt(w), static_cast<const void*>(w.data), static_cast<const int32_t*>(nullptr), m,
            k, dense.data, Dt(dense), m);
    MatMul(x, dense, out);
    return;
  }
  INFX_CHECK(IsAct(x) && IsAct(out) && IsFloat(w));
  if (n == 0 || m == 0) return;
  const bool bf16 = x.dtype == DType::kBF16 && w.dtype == DType::kBF16;
  if (bf16 && options_.gemv && n <= cuda::kGemvMaxTokens && k % 8 == 0 && Aligned(x.data, 16) &&
      Aligned(w.data, 16)) {
    JoinGemv(x, w, out, TakeGemvPrologue(x));
    return;
  }
  if (!bf16 && options_.gemv && cuda::FloatGemvFits(Dt(w), Dt(x), n, k, x.data, w.data)) {
    // f32 / f16 weights at decode (GGUF routers, F32 / F16 files): streamed on CUDA cores.
    Enqueue(cuda::LaunchGemvFloat, static_cast<const void*>(x.data), static_cast<const void*>(w.data), Dt(w), out.data,
            Dt(out), n, m, k);
    return;
  }
  if (w.dtype == DType::kF16 && x.dtype == DType::kBF16 && options_.cublas) {
    // f16 weights beyond the GEMV (prefill of an F16 file): rounded to bf16 in the op workspace, then the bf16
    // product (cuBLASLt), as for the block types.
    Tensor dense = DenseWeight(m, k);
    Enqueue(cuda::LaunchToBf16, static_cast<const void*>(w.data), Dt(w), dense.data, m * k);
    MatMul(x, dense, out);
    return;
  }
  FlushPending();
  if (bf16 && options_.cublas) {
    unsigned align = std::min({PointerAlignment(x.data), PointerAlignment(w.data), PointerAlignment(out.data)});
    if (const cuda::GemmPlan* plan = gemm_.Find(n, m, k, out.dtype, align)) {
      Enqueue(cuda::GemmLt::Run, plan, x.data, w.data, out.data);
      return;
    }
  }
  Enqueue(cuda::LaunchGemmSimt, x.data, Dt(x), w.data, Dt(w), out.data, Dt(out), n, m, k);
}

Tensor CudaBackend::DenseWeight(int64_t rows, int64_t k) {
  FlushGemv();  // a pending product may read the workspace (a weight made here before)
  return Tensor{Workspace(static_cast<size_t>(rows * k) * sizeof(uint16_t)), DType::kBF16, Shape{rows, k}};
}

// Adds x @ w^T to the pending group of decode products, which joins products that read the same x with
// weights of one type (and write nothing the group reads) into one launch.
// A prologue (the op that makes x, fused in) always starts a new group; the products that join it later
// read the x it makes.
void CudaBackend::JoinGemv(const Tensor& x, const Tensor& w, Tensor out, const cuda::GemvPrologue& pro) {
  const int64_t n = x.rows(), k = x.cols();
  INFX_CHECK(Disjoint(x, out));
  if (CanHoldProducer(x, w, pro)) {
    held_producer_ = gemv_;
    producer_held_ = true;
    gemv_ = cuda::GemvBatch{};
    deferred_x_ = Scratch(DType::kBF16, {n, k}).data;
  }
  if (gemv_.n_segments > 0 &&
      (gemv_.x != x.data || gemv_.n != n || gemv_.k != k || gemv_.w_type != Dt(w) || gemv_.n_segments == 4 ||
       pro.kind != cuda::kGemvXPlain || gemv_.silu_out != nullptr || gemv_.res.out != nullptr))
    FlushGemv();
  if (gemv_.n_segments == 0) gemv_.pro = pro;
  cuda::GemvSegment& sg = gemv_.seg[gemv_.n_segments++];
  sg.w = w.data;
  sg.out = out.data;
  sg.rows = w.rows();
  sg.out_dtype = Dt(out);
  sg.w_after_wait = w.data == workspace_.data() ? 1 : 0;  // DenseWeight: made by the kernel just before
  gemv_.x = x.data;
  gemv_.n = n;
  gemv_.k = k;
  gemv_.w_type = Dt(w);
}

void CudaBackend::Add(const Tensor& a, const Tensor& b, Tensor out) {
  CheckSameAct(a, b);
  CheckSameAct(a, out);
  if (ResidualFusable(a, b, out)) {  // the epilogue of the GEMV that makes a or b
    gemv_.res.in = gemv_.seg[0].out == a.data ? b.data : a.data;
    gemv_.res.out = out.data;
    return;
  }
  if (MoeResidualFusable(a, b, out)) {  // the epilogue of the held experts' down kernel, which makes a or b
    pending_moe_.res.in = pending_moe_.out.data == a.data ? b.data : a.data;
    pending_moe_.res.out = out.data;
    return;
  }
  FlushGemv();
  FlushPending();
  if (options_.fuse) {  // held back: the residual add usually feeds the next RmsNorm
    pending_ = Pending::kAdd;
    pending_a_ = a;
    pending_b_ = b;
    pending_out_ = out;
    return;
  }
  Enqueue(cuda::LaunchBinary, static_cast<int>(cuda::kOpAdd), Dt(a), a.data, b.data, out.data, a.numel());
}

bool CudaBackend::MoeResidualFusable(const Tensor& a, const Tensor& b, const Tensor& out) const {
  const PendingMoe& m = pending_moe_;
  if (pending_ != Pending::kMoe || m.res.out != nullptr || m.n > cuda::kGemvNormMaxTokens ||
      a.dtype != DType::kBF16 || a.numel() != m.out.numel())
    return false;
  const bool from_a = m.out.data == a.data, from_b = m.out.data == b.data;
  if (from_a == from_b) return false;
  const Tensor& product = from_a ? a : b;
  const Tensor& other = from_a ? b : a;
  return Disjoint(other, product) &&
         (out.data == other.data || out.data == product.data || (Disjoint(out, other) && Disjoint(out, product)));
}

bool CudaBackend::MoeResidualNormFusable(const Tensor& x, const Tensor& weight, const Tensor& out) const {
  const PendingMoe& m = pending_moe_;
  return pending_ == Pending::kMoe && m.res.out == x.data && m.res.norm_out == nullptr && x.numel() == m.out.numel() &&
         x.rows() == m.n && x.dtype == DType::kBF16 && x.cols() % 8 == 0 && Aligned(x.data, 16) &&
         Aligned(out.data, 16) && (out.data == x.data || Disjoint(x, out)) &&
         (weight.dtype != DType::kBF16 || Aligned(weight.data, 16)) &&
         x.rows() * ((x.cols() + 15) / 16) <= kGemvSumsCapacity;
}

bool CudaBackend::CanHoldProducer(const Tensor& x, const Tensor& w, const cuda::GemvPrologue& pro) const {
  const int64_t n = x.rows(), k = x.cols(), tiles = (k + 15) / 16;
  return options_.fuse && !producer_held_ && gemv_.n_segments == 1 && gemv_.res.norm_out == x.data &&
         gemv_.res.deferred == nullptr && gemv_.w_type == cuda::kBF16 && PendingGemvFuses() &&
         gemv_tail_.route.ids == nullptr && gemv_tail_.conv.out == nullptr && pro.kind == cuda::kGemvXPlain &&
         w.dtype == DType::kBF16 && n == gemv_.n && n <= cuda::kGemvNormMaxTokens && k == gemv_.seg[0].rows &&
         x.numel() == n * k && n * tiles <= cuda::kGemvScaledMaxSums && tiles % 4 == 0 && k % 8 == 0;
}

bool CudaBackend::ResidualNormFusable(const Tensor& x, const Tensor& weight, const Tensor& out) const {
  return gemv_.res.out == x.data && gemv_.res.norm_out == nullptr && x.numel() == gemv_.n * gemv_.seg[0].rows &&
         x.rows() == gemv_.n && x.dtype == DType::kBF16 && x.cols() % 8 == 0 && Aligned(x.data, 16) &&
         Aligned(out.data, 16) && (out.data == x.data || Disjoint(x, out)) &&
         (weight.dtype != DType::kBF16 || Aligned(weight.data, 16)) &&
         x.rows() * ((x.cols() + 15) / 16) <= kGemvSumsCapacity;
}

bool CudaBackend::ResidualFusable(const Tensor& a, const Tensor& b, const Tensor& out) const {
  if (!options_.fuse || gemv_.n_segments != 1 || !PendingGemvFuses() || gemv_.silu_out != nullptr ||
      gemv_.res.out != nullptr || gemv_.n > cuda::kGemvNormMaxTokens || gemv_.seg[0].out_dtype != cuda::kBF16 ||
      a.dtype != DType::kBF16 || a.numel() != gemv_.n * gemv_.seg[0].rows)
    return false;
  const bool from_a = gemv_.seg[0].out == a.data, from_b = gemv_.seg[0].out == b.data;
  if (from_a == from_b) return false;  // neither, or x + x
  const Tensor& product = from_a ? a : b;
  const Tensor& other = from_a ? b : a;
  // The GEMV's x, which its blocks read until the last one ends, must not be written; with a norm prologue
  // they read its a and b instead, and the last of them to read writes a + b to sum, which the epilogue
  // then must neither read nor write.
  auto rows_at = [&](const void* p) { return Tensor{const_cast<void*>(p), DType::kBF16, Shape{gemv_.n, gemv_.k}}; };
  if (gemv_.pro.kind == cuda::kGemvXNorm) {
    for (const void* p : {gemv_.pro.a, gemv_.pro.b, static_cast<const void*>(gemv_.pro.sum)})
      if (p != nullptr && !Disjoint(out, rows_at(p))) return false;
    if (gemv_.pro.sum != nullptr && !Disjoint(other, rows_at(gemv_.pro.sum))) return false;
  }
  return Disjoint(other, product) && Disjoint(out, rows_at(gemv_.x)) &&
         (out.data == other.data || out.data == product.data || (Disjoint(out, other) && Disjoint(out, product)));
}

void CudaBackend::SiluMul(const Tensor& gate, const Tensor& up, Tensor out) {
  CheckSameAct(gate, up);
  CheckSameAct(gate, out);
  // Right after the gate and up products of a decode step: their GEMV computes it (a block takes the
  // same rows of both).
  const bool in_place = out.data == gate.data || out.data == up.data;
  // The bf16 GEMV takes it at any batch, the block-quantized one (tensor cores) at one token: at 8 tokens
  // the paired tiles halve its work items, and Q8_0 lost 2.8% per step (Q4_K gained 3%: docs/performance.md).
  if (options_.fuse && gemv_.n_segments == 2 && gemv_.silu_out == nullptr && gemv_.res.out == nullptr &&
      (PendingGemvFuses() || gemv_.n == 1) && gemv_.seg[0].out == gate.data && gemv_.seg[1].out == up.data &&
      gemv_.seg[0].rows == gate.cols() && gemv_.seg[1].rows == up.cols() && gemv_.n == gate.rows() &&
      gate.dtype == DType::kBF16 && gemv_.seg[0].out_dtype == cuda::kBF16 && gemv_.seg[1].out_dtype == cuda::kBF16 &&
      (in_place || (Disjoint(out, gate) && Disjoint(out, up)))) {
    gemv_.silu_out = out.data;
    return;
  }
  const int64_t rows = gate.rows(), cols = gate.cols();
  if (options_.fuse && gate.dtype == DType::kBF16 && rows >= 2 && rows <= cuda::kQuantGemvWideMaxTokens &&
      cols <= kQuantXMaxCols && cuda::SiluMulInt8Fits(gate.data, up.data, out.data, rows, cols) &&
      (in_place || (Disjoint(out, gate) && Disjoint(out, up)))) {
    // Held: a quantized product that reads out next has it round out to int8 for it (RoundHeldForQuantized).
    FlushGemv();
    FlushPending();
    pending_ = Pending::kSiluMul;
    pending_a_ = gate;
    pending_b_ = up;
    pending_out_ = out;
    return;
  }
  Enqueue(cuda::LaunchBinary, static_cast<int>(cuda::kOpSiluMul), Dt(gate), gate.data, up.data, out.data,
          gate.numel());
}

void CudaBackend::SigmoidMul(const Tensor& x, const Tensor& gate, Tensor out) {
  CheckSameAct(x, gate);
  CheckSameAct(x, out);
  const PendingCombine& c = pending_combine_;
  if (pending_ == Pending::kCombine && x.data == c.out.data && out.data == x.data && x.numel() == c.out.numel() &&
      x.dtype == DType::kBF16 && Disjoint(gate, x)) {
    // The output gate of the attention whose combine is held: the combine multiplies as it writes.
    pending_ = Pending::kNone;
    recorder_.Launch(cuda::LaunchAttentionCombine, c.n, c.heads, c.head_dim, c.splits, c.ws_o, c.ws_ml,
                     static_cast<const void*>(gate.data), c.out.data);
    return;
  }
  const PendingAttention& a = pending_attention_;
  if (pending_ == Pending::kAttention && x.data == a.out.data && out.data == x.data && x.numel() == a.out.numel() &&
      x.dtype == DType::kBF16 && Disjoint(gate, x)) {
    LaunchHeldAttention(gate.data);  // the fused attention multiplies as it writes
    return;
  }
  Enqueue(cuda::LaunchBinary, static_cast<int>(cuda::kOpSigmoidMul), Dt(x), x.data, gate.data, out.data, x.numel());
}

void CudaBackend::Discard(const Tensor& x) {
  if (pending_ != Pending::kAttention) return;  // only the held attention's write-backs can still be left out
  cuda::DecodeAttentionFusion& f = pending_attention_.fusion;
  for (int i = 0; i < f.prep.n_tensors; ++i) {
    const cuda::HeadPrep& t = f.prep.t[i];
    const int64_t bytes = int64_t{pending_attention_.layout.n_tokens} * t.heads * f.prep.head_dim *
                          static_cast<int64_t>(sizeof(uint16_t));
    if (t.x == x.data && static_cast<int64_t>(x.size_bytes()) >= bytes) f.keep_rows &= ~(1 << i);
  }
}

void CudaBackend::LaunchHeldAttention(const void* gate) {
  pending_ = Pending::kNone;
  PendingAttention& a = pending_attention_;
  a.fusion.gate = gate;
  recorder_.Launch(cuda::LaunchAttentionDecodeFused, a.layout, a.kv, a.heads, a.scale, a.splits, a.ws_o, a.ws_ml,
                   a.out.data, a.fusion);
}

void CudaBackend::AddSigmoidGated(Tensor acc, const Tensor& x, const Tensor& gate_logit) {
  CheckSameAct(acc, x);
  INFX_CHECK(gate_logit.numel() == x.rows() && gate_logit.dtype == DType::kF32);
  Enqueue(cuda::LaunchAddSigmoidGated, Dt(acc), acc.data, x.data, gate_logit.as<const float>(), x.rows(), x.cols());
}

void CudaBackend::SliceColumns(const Tensor& x, int64_t col_begin, Tensor out) {
  const int64_t rows = x.rows(), cols = x.cols(), c = out.cols();
  INFX_CHECK(out.rows() == rows && col_begin >= 0 && col_begin + c <= cols && x.dtype == out.dtype);
  const size_t elem = DTypeSize(x.dtype);
  Enqueue(cuda::LaunchCopy2D, out.data, static_cast<size_t>(c) * elem,
          static_cast<const void*>(static_cast<const char*>(x.data) + static_cast<size_t>(col_begin) * elem),
          static_cast<size_t>(cols) * elem, static_cast<size_t>(c) * elem, static_cast<size_t>(rows));
}

void CudaBackend::GatherRows(const Tensor& x, const std::vector<int32_t>& rows, Tensor out) {
  const int64_t d = x.cols();
  INFX_CHECK(out.rows() == static_cast<int64_t>(rows.size()) && out.cols() == d && x.dtype == out.dtype);
  if (rows.empty()) return;
  for (int32_t r : rows) INFX_CHECK(r >= 0 && r < x.rows());
  auto* dev_rows = static_cast<const int32_t*>(Upload(rows.data(), rows.size() * sizeof(int32_t)));
  Enqueue(cuda::LaunchGatherRows, x.data, dev_rows, static_cast<int64_t>(rows.size()),
          static_cast<int64_t>(d * static_cast<int64_t>(DTypeSize(x.dtype))), out.data);
}

void CudaBackend::Rope(Tensor x, const BatchLayout& layout, const Tensor& inv_freq, float attention_scale) {
  INFX_CHECK(x.shape.ndim == 3 && IsAct(x) && inv_freq.dtype == DType::kF32);
  const int64_t n = x.dim(0), heads = x.dim(1), d = x.dim(2), half = inv_freq.numel();
  INFX_CHECK(n == layout.n_tokens && 2 * half <= d);
  if (n == 0) return;
  cuda::DeviceLayout dl = Layout(layout);
  if (pending_ == Pending::kHeads) {
    for (PendingHead& h : pending_heads_) {
      if (h.x.data == x.data && h.x.numel() == x.numel() && !h.rope) {
        h.rope = true;
        h.layout = dl;
        h.inv_freq = inv_freq.as<const float>();
        h.half = half;
        h.rope_scale = attention_scale;
        return;
      }
    }
  }
  Enqueue(cuda::LaunchRope, Dt(x), x.data, dl.token_pos, n, heads, d, inv_freq.as<const float>(), half,
          attention_scale);
}

void CudaBackend::Attention(const Tensor& q, const Tensor& k, const Tensor& v, SequenceState& state, int layer,
                            const BatchLayout& layout, float scale, Tensor out) {
  CudaState& st = AsCudaState(state, this);
  const StateSpec& spec = st.spec();
  const int64_t n = q.dim(0), hq = q.dim(1), d = q.dim(2), hkv = k.dim(1);
  INFX_CHECK(q.shape.ndim == 3 && k.shape.ndim == 3 && v.shape == k.shape && out.shape == q.shape);
  INFX_CHECK(hkv == spec.n_kv_heads && d == spec.head_dim && k.dim(2) == d && hq % hkv == 0 && n == layout.n_tokens);
  INFX_CHECK_MSG(q.dtype == DType::kBF16 && k.dtype == DType::kBF16 && v.dtype == DType::kBF16 &&
                     out.dtype == DType::kBF16,
                 "CUDA attention takes bf16 activations");
  if (n == 0) return;
  cuda::DeviceLayout dl = Layout(layout);
  cuda::KvCacheView kv = st.Kv(layer);
  const bool prep = pending_ == Pending::kHeads && pending_heads_.size() == 2 && pending_heads_[0].x.data == q.data &&
                    pending_heads_[1].x.data == k.data && pending_heads_[0].rope && pending_heads_[1].rope &&
                    pending_heads_[0].inv_freq == pending_heads_[1].inv_freq &&
                    pending_heads_[0].half == pending_heads_[1].half &&
                    pending_heads_[0].rope_scale == pending_heads_[1].rope_scale &&
                    pending_heads_[0].layout.token_pos == dl.token_pos && d <= 256;
  cuda::QkvPrep p{};  // with prep: q/k norms, RoPE and the cache append in one launch
  if (prep) {
    const Tensor* xs[3] = {&q, &k, &v};
    for (int i = 0; i < 3; ++i) {
      cuda::HeadPrep& t = p.t[i];
      t.x = xs[i]->data;
      t.heads = static_cast<int32_t>(xs[i]->dim(1));
      if (i < 2) {
        const PendingHead& h = pending_heads_[static_cast<size_t>(i)];
        t.norm_w = h.w.data;
        t.w_dtype = static_cast<int32_t>(h.w.dtype);
        t.eps = h.eps;
        t.w_offset = h.w_offset;
        t.rope = 1;
      }
      t.cache = i == 0 ? 0 : i;
    }
    p.inv_freq = pending_heads_[0].inv_freq;
    p.half = static_cast<int32_t>(pending_heads_[0].half);
    p.rope_scale = pending_heads_[0].rope_scale;
    p.head_dim = static_cast<int32_t>(d);
    p.n_tensors = 3;
    pending_ = Pending::kNone;
    pending_heads_.clear();
  }
  // The inputs' preparation (or the plain cache append) as a kernel of its own, before the attention.
  auto prepare = [&] {
    if (prep) {
      recorder_.Launch(cuda::LaunchQkvPrep, dl, kv, p);
    } else {
      Enqueue(cuda::LaunchKvAppend, dl, kv, k.data, v.data);
    }
  };
  bool flash = cuda::FlashAttentionFits(static_cast<int>(d), smem_optin_, kv.f8()) &&
               (options_.attention == CudaOptions::Attention::kFlash ||
                (options_.attention == CudaOptions::Attention::kAuto && dl.max_seq_tokens > 16));
  if (flash) {
    prepare();
    Enqueue(cuda::LaunchAttentionFlash, dl, kv, q.data, static_cast<int32_t>(hq), scale, out.data);
    return;
  }
  const int group = static_cast<int>(hq / hkv);
  INFX_CHECK_MSG(cuda::AttentionSplitSmemBytes(group, static_cast<int>(d)) <= std::min<size_t>(smem_optin_, 160 << 10),
                 "attention: {} query heads per KV head with head_dim {} exceed shared memory", group, d);
  // The number of splits depends only on the state's max_context and the batch (so that decode steps
  // keep the same launch shape and replay as one graph); the kernel spreads each token's actual
  // context over them (the CUDA-core kernel in sub-tiles of 32 keys, the tensor-core one in whole pages),
  // leaving the splits past it empty.
  const int64_t max_splits = std::max<int64_t>(1, (spec.max_context + 31) / 32);
  // Tensor cores where the shape allows (the query heads of a GQA group as the rows of one mma tile). Both
  // kernels get two blocks per SM; where fewer are resident (the tensor-core kernel at head_dim 256: one),
  // as many as are, rounding the splits down, so that every split streams its chunk in one wave.
  const bool mma = cuda::AttentionDecodeMmaFits(group, static_cast<int>(d), smem_optin_, kv.f8());
  const int64_t two_per_sm = 2 * static_cast<int64_t>(props_.multiProcessorCount);
  const int64_t target_blocks =
      mma ? std::min(two_per_sm, decode_mma_residency_.For(static_cast<int>(d), kv.f8())) : two_per_sm;
  const int64_t splits = std::clamp<int64_t>(
      target_blocks < two_per_sm ? target_blocks / (n * hkv) : (target_blocks + n * hkv - 1) / (n * hkv), 1,
      max_splits);
  // (The fused kernel stops at head_dim 128: AttentionDecodeFusedFits.)
  if (prep && mma && options_.fuse && dl.max_seq_tokens == 1 && n * hkv <= cuda::kAttentionFusedMaxCounters &&
      cuda::AttentionDecodeFusedFits(group, static_cast<int>(d), static_cast<int>(splits), smem_optin_, kv.f8())) {
    // A decode step: the preparation and the merge of the splits join the attention kernel, which is held
    // (Pending::kAttention) for the gated attention's SigmoidMul of its output.
    FlushGemv();
    FlushPending();
    PendingAttention& a = pending_attention_;
    a = PendingAttention{};
    a.layout = dl;
    a.kv = kv;
    a.heads = static_cast<int32_t>(hq);
    a.scale = scale;
    a.splits = static_cast<int32_t>(splits);
    if (splits > 1) {
      a.ws_o = Scratch(DType::kF32, {n, hq, splits, d}).as<float>();
      a.ws_ml = Scratch(DType::kF32, {n, hq, splits, 2}).as<float>();
    }
    a.out = out;
    a.fusion.prep = p;
    a.fusion.counter = static_cast<int32_t*>(attention_counter_.data());
    pending_ = Pending::kAttention;
    return;
  }
  prepare();
  const auto split_kernel = mma ? cuda::LaunchAttentionDecodeMma : cuda::LaunchAttentionSplit;
  if (splits == 1) {  // the split kernel writes the output itself
    Enqueue(split_kernel, dl, kv, q.data, static_cast<int32_t>(hq), scale, 1, static_cast<float*>(nullptr),
            static_cast<float*>(nullptr), out.data);
    return;
  }
  Tensor ws_o = Scratch(DType::kF32, {n, hq, splits, d});
  Tensor ws_ml = Scratch(DType::kF32, {n, hq, splits, 2});
  Enqueue(split_kernel, dl, kv, q.data, static_cast<int32_t>(hq), scale, static_cast<int32_t>(splits), ws_o.as<float>(),
          ws_ml.as<float>(), static_cast<void*>(nullptr));
  // The combine is held (Pending::kCombine) for the gated attention's SigmoidMul of its output.
  FlushGemv();
  FlushPending();
  pending_combine_ = PendingCombine{static_cast<int32_t>(n), static_cast<int32_t>(hq), static_cast<int32_t>(d),
                                    static_cast<int32_t>(splits), ws_o.as<const float>(), ws_ml.as<const float>(), out};
  pending_ = Pending::kCombine;
  if (!options_.fuse) FlushPending();
}

void CudaBackend::CausalConv1d(const Tensor& x, const Tensor& w, SequenceState& state, int layer,
                               const BatchLayout& layout, Tensor out) {
  CudaState& st = AsCudaState(state, this);
  const int64_t channels = x.cols(), kernel = w.numel() / std::max<int64_t>(1, channels);
  INFX_CHECK(kernel == st.spec().conv_kernel && channels == st.spec().conv_channels && out.numel() == x.numel());
  INFX_CHECK(x.dtype == DType::kBF16 && out.dtype == DType::kBF16 && IsFloat(w) && x.rows() == layout.n_tokens);
  if (x.rows() == 0) return;
  cuda::DeviceLayout dl = Layout(layout);
  if (options_.fuse && PendingGemvFuses() && gemv_.seg[0].out == x.data &&
      gemv_.seg[0].rows == channels && gemv_.seg[0].out_dtype == cuda::kBF16 && gemv_.n == x.rows() &&
      gemv_.n <= cuda::kGemvNormMaxTokens && gemv_.silu_out == nullptr && gemv_.res.out == nullptr &&
      gemv_tail_.route.ids == nullptr && dl.max_seq_tokens == 1 && kernel <= cuda::kGemvConvMaxKernel &&
      Disjoint(out, x)) {
    // A decode step's conv of the product that the pending GEMV makes: the GEMV computes it (GemvConv).
    gemv_tail_.conv = cuda::GemvConv{dl,          w.data, st.Conv(layer), out.data, st.ConvSlotStride(), Dt(w),
                                     static_cast<int32_t>(kernel)};
    FlushGemv();
    return;
  }
  Enqueue(cuda::LaunchCausalConv1d, dl, x.data, w.data, Dt(w), st.Conv(layer), st.ConvSlotStride(),
          static_cast<int32_t>(channels), static_cast<int32_t>(kernel), out.data);
}

void CudaBackend::GdnGates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, Tensor g,
                           Tensor beta) {
  const int64_t n = a.rows(), nv = a.cols();
  INFX_CHECK(b.numel() == a.numel() && a_log.numel() == nv && dt_bias.numel() == nv && g.numel() == a.numel() &&
             beta.numel() == a.numel());
  INFX_CHECK(a.dtype == DType::kBF16 && b.dtype == DType::kBF16 && g.dtype == DType::kF32 &&
             beta.dtype == DType::kF32 && IsFloat(a_log) && IsFloat(dt_bias));
  if (options_.fuse && n >= 1 && n <= cuda::kGdnFusedMaxRows / std::max<int64_t>(1, nv)) {
    // Held: a decode step's delta rule computes them itself (GatedDeltaRule).
    FlushGemv();
    FlushPending();
    pending_ = Pending::kGates;
    pending_gdn_ = PendingGdn{};
    pending_gdn_.a = a;
    pending_gdn_.b = b;
    pending_gdn_.a_log = a_log;
    pending_gdn_.dt_bias = dt_bias;
    pending_gdn_.g = g;
    pending_gdn_.beta = beta;
    return;
  }
  Enqueue(cuda::LaunchGdnGates, a.data, b.data, a_log.data, Dt(a_log), dt_bias.data, Dt(dt_bias), g.as<float>(),
          beta.as<float>(), n, nv);
}

void CudaBackend::GatedDeltaRule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                 const Tensor& beta, GdnHeadMapping mapping, SequenceState& state, int layer,
                                 const BatchLayout& layout, Tensor out) {
  CudaState& st = AsCudaState(state, this);
  const StateSpec& spec = st.spec();
  const int64_t nk = q.dim(1), dk = q.dim(2), nv = v.dim(1), dv = v.dim(2), n = q.dim(0);
  INFX_CHECK(nk == spec.n_k_heads && nv == spec.n_v_heads && dk == spec.k_head_dim && dv == spec.v_head_dim);
  INFX_CHECK(nv % nk == 0 && out.numel() == v.numel() && k.shape == q.shape && n == layout.n_tokens);
  INFX_CHECK(q.dtype == DType::kBF16 && k.dtype == DType::kBF16 && v.dtype == DType::kBF16 &&
             out.dtype == DType::kBF16 && g.dtype == DType::kF32 && beta.dtype == DType::kF32);
  if (n == 0) return;
  cuda::DeviceLayout dl = Layout(layout);
  const auto tiled = static_cast<int32_t>(mapping == GdnHeadMapping::kTiled);
  if (dl.max_seq_tokens >= cuda::kGdnChunkedMinTokens &&
      cuda::GdnChunkedFits(static_cast<int>(dk), static_cast<int>(dv), smem_optin_)) {
    // 4 * n * nv * (dk + dv + 68) bytes: 85 MB for 2,048 tokens of Qwen3-Next, in the op workspace.
    const auto part = [&](int64_t cols) {
      return (static_cast<size_t>(n * nv * cols) * sizeof(float) + 255) / 256 * 256;
    };
    auto* base = static_cast<unsigned char*>(Workspace(part(dk) + part(dv) + part(cuda::kGdnChunk) + part(4)));
    cuda::GdnChunkScratch ws;
    ws.w = reinterpret_cast<float*>(base);
    ws.u = reinterpret_cast<float*>(base + part(dk));
    ws.p = reinterpret_cast<float*>(base + part(dk) + part(dv));
    ws.coef = reinterpret_cast<float*>(base + part(dk) + part(dv) + part(cuda::kGdnChunk));
    Enqueue(cuda::LaunchGatedDeltaRuleChunked, dl, q.data, k.data, v.data, g.as<const float>(), beta.as<const float>(),
            st.Recurrent(layer), st.RecurrentSlotStride(), static_cast<int32_t>(nk), static_cast<int32_t>(nv),
            static_cast<int32_t>(dk), static_cast<int32_t>(dv), tiled, ws, out.data, smem_optin_);
    return;
  }
  if (pending_ == Pending::kGates && pending_gdn_.g.data == g.data && pending_gdn_.beta.data == beta.data &&
      pending_gdn_.g.numel() == n * nv && cuda::GdnDecodeFusionFits(dl.n_seqs, dl.max_seq_tokens, nv, dk, dv) &&
      Disjoint(out, pending_gdn_.a) && Disjoint(out, pending_gdn_.b)) {
    // A decode step: the held gates join this delta rule, which is held in turn for the gated norm after it.
    PendingGdn& p = pending_gdn_;
    pending_ = Pending::kDeltaRule;
    p.layout = dl;
    p.q = q.data;
    p.k = k.data;
    p.v = v.data;
    p.state = st.Recurrent(layer);
    p.slot_stride = st.RecurrentSlotStride();
    p.nk = static_cast<int32_t>(nk);
    p.nv = static_cast<int32_t>(nv);
    p.dk = static_cast<int32_t>(dk);
    p.dv = static_cast<int32_t>(dv);
    p.tiled = tiled;
    p.out = out;
    return;
  }
  Enqueue(cuda::LaunchGatedDeltaRule, dl, q.data, k.data, v.data, g.as<const float>(), beta.as<const float>(),
          st.Recurrent(layer), st.RecurrentSlotStride(), static_cast<int32_t>(nk), static_cast<int32_t>(nv),
          static_cast<int32_t>(dk), static_cast<int32_t>(dv), tiled, out.data);
}

void CudaBackend::MoeRouting(const Tensor& logits, int top_k, bool normalize, Tensor weights, Tensor ids) {
  const int64_t n = logits.rows(), n_experts = logits.cols();
  INFX_CHECK(top_k >= 1 && top_k <= n_experts && weights.numel() == n * top_k && ids.numel() == n * top_k);
  INFX_CHECK(logits.dtype == DType::kF32 && weights.dtype == DType::kF32 && ids.dtype == DType::kI32);
  if (options_.fuse && PendingGemvFuses() && gemv_.seg[0].out == logits.data &&
      gemv_.seg[0].out_dtype == cuda::kF32 && gemv_.seg[0].rows == n_experts && gemv_.n == n &&
      n <= cuda::kGemvNormMaxTokens && n_experts <= cuda::kGemvRoutingMaxExperts && top_k <= 32 &&
      gemv_.pro.kind == cuda::kGemvXPlain && gemv_.silu_out == nullptr && gemv_.res.out == nullptr &&
      Disjoint(weights, logits) && Disjoint(ids, logits)) {
    // The router's GEMV (with the shared expert's gate) is pending: its last block routes the tokens.
    gemv_tail_.route = cuda::GemvRouting{weights.as<float>(), ids.as<int32_t>(),
                                         static_cast<int32_t*>(gemv_counter_.data()) + 2, top_k, normalize ? 1 : 0};
    FlushGemv();
    return;
  }
  Enqueue(cuda::LaunchMoeRouting, logits.as<const float>(), n, static_cast<int32_t>(n_experts),
          static_cast<int32_t>(top_k), static_cast<int32_t>(normalize), weights.as<float>(), ids.as<int32_t>());
}

void CudaBackend::CheckMoeArgs(const Tensor& x, const Tensor& weights, const Tensor& ids, const Tensor& out) const {
  const int64_t n = x.rows(), top_k = weights.cols();
  INFX_CHECK(out.rows() == n && out.cols() == x.cols() && ids.numel() == n * top_k && weights.numel() == n * top_k);
  INFX_CHECK(x.dtype == DType::kBF16 && out.dtype == DType::kBF16 && weights.dtype == DType::kF32 &&
             ids.dtype == DType::kI32);
}

void CudaBackend::MoeExperts(const Tensor& x, const Tensor& weights, const Tensor& ids, const ExpertWeights& experts,
                             Tensor out) {
  CheckMoeArgs(x, weights, ids, out);
  const int64_t n = x.rows(), top_k = weights.cols();
  if (n == 0) return;
  const cuda::ExpertTable& table = ExpertTableFor(experts);
  INFX_CHECK(table.hidden == x.cols());
  const auto k32 = static_cast<int32_t>(top_k);
  const bool quantized = IsBlockQuantized(static_cast<DType>(table.dtype));
  // Block-type experts of 9 to kQuantMoeGroupsMaxTokens tokens: the decode kernels per group of 8 tokens, where
  // a group of 8 takes them (else the f32 kernels would read the experts per token).
  constexpr int64_t kGroup = cuda::kQuantGemvMaxTokens;
  const bool per_group = quantized && options_.gemv && n > kGroup && n <= cuda::kQuantMoeGroupsMaxTokens &&
                         (cuda::MoeGemvFits(kGroup, k32, false, table) ||
                          cuda::QuantMoeMmaFits(kGroup, k32, table, smem_optin_));
  if (!per_group && n >= cuda::kMoeGroupedMinTokens && cuda::MoeGroupedFits(table)) {
    void* ws = Workspace(cuda::MoeGroupedScratchBytes(n, k32, table));
    Enqueue(cuda::LaunchMoeGrouped, x.data, weights.as<const float>(), ids.as<const int32_t>(), n, k32, table, ws,
            out.data);
    return;
  }
  if (options_.gemv && cuda::MoeGemvFits(n, k32, false, table)) {
    Tensor act = Scratch(DType::kBF16, {n, top_k, table.inter});
    HoldMoe(PendingMoe{x.data, weights.as<const float>(), ids.as<const int32_t>(), nullptr, n, k32, table, act.data,
                       out});
    return;
  }
  if (per_group) {
    // The tensor-core kernels per group of 8 tokens (each group reads its experts' rows once) instead of the
    // f32 kernels, which read a selected expert's rows once per token, or the grouped GEMMs (see above).
    ForEachDecodeGroup(n, [&](int64_t i, int64_t rows) {
      MoeExperts(x.SliceRows(i, rows), weights.SliceRows(i, rows), ids.SliceRows(i, rows), experts,
                 out.SliceRows(i, rows));
    });
    return;
  }
  Tensor act = Scratch(DType::kF32, {n, top_k, table.inter});
  if (quantized) {
    Enqueue(cuda::LaunchQuantMoeExperts, x.data, weights.as<const float>(), ids.as<const int32_t>(),
            static_cast<const float*>(nullptr), n, k32, table, act.as<float>(), out.data, smem_optin_);
    return;
  }
  Enqueue(cuda::LaunchMoeExperts, x.data, weights.as<const float>(), ids.as<const int32_t>(), n, k32, table,
          act.as<float>(), out.data);
}

void CudaBackend::MoeExpertsWithShared(const Tensor& x, const Tensor& weights, const Tensor& ids,
                                       const ExpertWeights& experts, const SharedExpert& shared, Tensor out) {
  CheckMoeArgs(x, weights, ids, out);
  const int64_t n = x.rows(), top_k = weights.cols();
  INFX_CHECK(shared.gate_logit.numel() == n && shared.gate_logit.dtype == DType::kF32 && !experts.gate.empty() &&
             !experts.down.empty());
  const Tensor& g0 = experts.gate[0];
  const bool same = shared.gate.shape == g0.shape && shared.up.shape == g0.shape &&
                    shared.down.shape == experts.down[0].shape && shared.gate.dtype == g0.dtype &&
                    shared.up.dtype == g0.dtype && shared.down.dtype == g0.dtype;
  const bool quantized = IsBlockQuantized(g0.dtype);
  // A group of 8 tokens takes the tensor-core kernels with the shared expert (checked at 8: the most shared
  // memory), and n tokens are too many for one launch of them.
  const auto group_fits = [&] {
    const cuda::ExpertTable& t = ExpertTableFor(experts, &shared);
    const auto k32 = static_cast<int32_t>(top_k);
    constexpr int64_t kGroup = cuda::kQuantGemvMaxTokens;
    return !cuda::MoeGemvFits(n, k32, true, t) &&
           (cuda::MoeGemvFits(kGroup, k32, true, t) || cuda::QuantMoeSharedFits(kGroup, k32, t, smem_optin_));
  };
  if (n > cuda::kQuantGemvMaxTokens && n <= cuda::kQuantMoeGroupsMaxTokens && same && quantized && options_.gemv &&
      options_.fuse && group_fits()) {
    // 9 to kQuantMoeGroupsMaxTokens tokens of block-type experts (FP8 from 16): per group of 8 tokens, which
    // the tensor-core kernels take with the shared expert as every token's last slot (else the ops' default
    // composition below).
    ForEachDecodeGroup(n, [&](int64_t i, int64_t rows) {
      MoeExpertsWithShared(x.SliceRows(i, rows), weights.SliceRows(i, rows), ids.SliceRows(i, rows), experts,
                           SharedExpert{shared.gate, shared.up, shared.down, shared.gate_logit.SliceRows(i, rows)},
                           out.SliceRows(i, rows));
    });
    return;
  }
  if (n > 0 && same && options_.gemv && options_.fuse && (g0.dtype == DType::kBF16 || quantized) &&
      n <= cuda::kMoeGemvMaxTokens) {
    const cuda::ExpertTable& table = ExpertTableFor(experts, &shared);
    const auto k32 = static_cast<int32_t>(top_k);
    const float* logit = shared.gate_logit.as<const float>();
    if (table.hidden == x.cols() && cuda::MoeGemvFits(n, k32, true, table)) {  // bf16 or FP8
      Tensor act = Scratch(DType::kBF16, {n, top_k + 1, table.inter});
      HoldMoe(PendingMoe{x.data, weights.as<const float>(), ids.as<const int32_t>(), logit, n, k32, table, act.data,
                         out});
      return;
    }
    if (table.hidden == x.cols() && quantized && cuda::QuantMoeSharedFits(n, k32, table, smem_optin_)) {
      Tensor act = Scratch(DType::kF32, {n, top_k + 1, table.inter});
      Enqueue(cuda::LaunchQuantMoeExperts, x.data, weights.as<const float>(), ids.as<const int32_t>(), logit, n, k32,
              table, act.as<float>(), out.data, smem_optin_);
      return;
    }
  }
  Backend::MoeExpertsWithShared(x, weights, ids, experts, shared, out);
}

void CudaBackend::PickRowsOnDevice(const Tensor& logits, int64_t sampleable, const cuda::DrawRow* draws, Tensor ids) {
  INFX_CHECK(logits.dtype == DType::kF32 && ids.dtype == DType::kI32 && ids.numel() == logits.rows());
  INFX_CHECK(sampleable >= 1 && sampleable <= logits.cols());
  const int64_t rows = logits.rows(), cols = logits.cols();
  auto* counters = static_cast<int32_t*>(greedy_counter_.data());
  for (int64_t r0 = 0; r0 < rows; r0 += cuda::kGreedyMaxRows) {  // the counters serve one launch at a time
    const int64_t n = std::min(cuda::kGreedyMaxRows, rows - r0);
    const float* l = logits.as<const float>() + r0 * cols;
    if (draws == nullptr) {
      Tensor parts = Scratch(DType::kI32, {n * cuda::kGreedySplits * 3});  // cuda::GreedyPart: 3 words
      Enqueue(cuda::LaunchGreedyRows, l, n, cols, sampleable, reinterpret_cast<cuda::GreedyPart*>(parts.as<int32_t>()),
              counters, ids.as<int32_t>() + r0);
    } else {
      Tensor parts = Scratch(DType::kI32, {n * cuda::kDrawSplits * cuda::kDrawPartWords});
      Enqueue(cuda::LaunchDrawRows, l, n, cols, sampleable, draws + r0, parts.as<int32_t>(), counters,
              ids.as<int32_t>() + r0);
    }
  }
}

std::vector<int32_t> CudaBackend::PickGreedy(const Tensor& logits, int64_t sampleable) {
  INFX_CHECK_MSG(queued_picks_.empty(), "PickGreedy with {} picks queued and not taken", queued_picks_.size());
  QueuePick(logits, sampleable, {});
  return TakePick();
}

void CudaBackend::StageDraws(std::span<const TokenDraw> draws) {
  static_assert(cuda::kDrawMaxTopK == kMaxPickTopK, "the draw kernel takes every top_k a pick may have");
  std::vector<cuda::DrawRow> packed(draws.size());
  for (size_t r = 0; r < draws.size(); ++r) {
    const TokenDraw& d = draws[r];
    cuda::DrawRow& p = packed[r];
    p = cuda::DrawRow{1, 1.0f, 0.0f, 0, 1.0, 0.0};  // greedy: the best of a top-1
    if (d.greedy) continue;
    INFX_CHECK_MSG(d.rule.top_k >= 1 && d.rule.top_k <= kMaxPickTopK, "a draw with top_k {} on the device",
                   d.rule.top_k);
    p.top_k = static_cast<int32_t>(d.rule.top_k);
    p.inv_temp = d.rule.inv_temp;
    p.min_weight = MinWeight(d.rule);
    p.top_p = d.rule.top_p;
    p.u = d.u;
  }
  staged_draws_ = static_cast<const cuda::DrawRow*>(Upload(packed.data(), packed.size() * sizeof(cuda::DrawRow)));
  staged_draw_rows_ = static_cast<int64_t>(draws.size());
}

void CudaBackend::QueuePick(const Tensor& logits, int64_t sampleable, std::span<const TokenDraw> draws) {
  INFX_CHECK(logits.dtype == DType::kF32);
  const int64_t rows = logits.rows();
  const size_t bytes = static_cast<size_t>(rows) * sizeof(int32_t);
  const bool drawn = !draws.empty();
  INFX_CHECK_MSG(!drawn || (staged_draws_ != nullptr && staged_draw_rows_ == rows),
                 "a pick of {} rows with {} draws staged", rows, staged_draw_rows_);
  const cuda::DrawRow* staged = std::exchange(staged_draws_, nullptr);
  INFX_CHECK_MSG(queued_picks_.size() < static_cast<size_t>(kPickSlots), "{} picks queued and not taken",
                 queued_picks_.size());
  if (rows > kPickFeedRows)
    ThrowError(ErrorCode::kOutOfRange, "picks of {} logit rows at once (the CUDA backend takes up to {})", rows,
               kPickFeedRows);
  if (drawn && sampleable > cuda::kDrawMaxSampleable)
    ThrowError(ErrorCode::kUnsupported, "draws over a vocabulary of {} ids (the CUDA backend draws over up to {})",
               sampleable, cuda::kDrawMaxSampleable);
  const std::optional<RecordedPick> replayed = std::exchange(replayed_pick_, std::nullopt);
  const bool replay = replayed && replayed->logits == logits.data && replayed->sampleable == sampleable &&
                      replayed->rows == rows && replayed->drawn == drawn;
  if (!replay) {  // else the replayed unit has just made the picks and their copy to pick_feed_
    const bool recording = queuing_forward_.has_value();
    const int staging = recording ? queuing_forward_->staging : 0;
    Tensor ids = Scratch(DType::kI32, {rows});
    PickRowsOnDevice(logits, sampleable, drawn ? staged : nullptr, ids);
    Enqueue(cuda::LaunchMemcpy, pick_feed_.data(), static_cast<const void*>(ids.data), bytes);
    Submit();
    EndForward();  // last_forward_[staging] is now this pass's unit, or none
    if (recording) {
      last_forward_pick_[staging].reset();
      if (last_forward_[staging])
        last_forward_pick_[staging] = RecordedPick{logits.data, sampleable, rows, drawn, last_forward_[staging]->hash};
    } else {
      for (auto& p : last_forward_pick_) p.reset();
    }
  }
  // The ring's slot was last used kPickSlots picks ago, which has been taken (the check above).
  const int slot = next_pick_slot_;
  next_pick_slot_ = (slot + 1) % kPickSlots;
  INFX_CUDA_CHECK(cudaMemcpyAsync(pick_host_[slot].data(), pick_feed_.data(), bytes, cudaMemcpyDeviceToHost, stream_));
  INFX_CUDA_CHECK(cudaEventRecord(pick_done_[slot], stream_));
  queued_picks_.push_back(QueuedPick{slot, rows});
  pick_feed_rows_ = rows;
}

std::vector<int32_t> CudaBackend::TakePick() {
  INFX_CHECK_MSG(!queued_picks_.empty(), "no pick is queued");
  const QueuedPick q = queued_picks_.front();
  queued_picks_.pop_front();
  const auto t0 = std::chrono::steady_clock::now();
  INFX_CUDA_CHECK(cudaEventSynchronize(pick_done_[q.slot]));
  host_wait_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const auto* ids = static_cast<const int32_t*>(pick_host_[q.slot].data());
  return std::vector<int32_t>(ids, ids + q.rows);
}

void CudaBackend::FeedPickedTokens(std::span<const int32_t> rows, Tensor ids) {
  INFX_CHECK_MSG(pick_feed_rows_ > 0, "no pick to take token ids from");
  INFX_CHECK(ids.dtype == DType::kI32 && ids.numel() == static_cast<int64_t>(rows.size()));
  for (int32_t r : rows)
    INFX_CHECK_MSG(r >= 0 && r < pick_feed_rows_, "feed row {} of a pick of {} rows", r, pick_feed_rows_);
  const auto* map = static_cast<const int32_t*>(Upload(rows.data(), rows.size() * sizeof(int32_t)));
  Enqueue(cuda::LaunchFeedTokens, static_cast<const int32_t*>(pick_feed_.data()), map,
          static_cast<int64_t>(rows.size()), ids.as<int32_t>());
}

void CudaBackend::TopKRows(const Tensor& logits, int k, Tensor values, Tensor ids) {
  INFX_CHECK(logits.dtype == DType::kF32 && values.dtype == DType::kF32 && ids.dtype == DType::kI32);
  INFX_CHECK(k >= 1 && k <= 256 && k <= logits.cols() && values.numel() == logits.rows() * k &&
             ids.numel() == logits.rows() * k);
  Enqueue(cuda::LaunchTopKRows, logits.as<const float>(), logits.rows(), logits.cols(), static_cast<int32_t>(k),
          values.as<float>(), ids.as<int32_t>());
}

void CudaBackend::LogSumExpRows(const Tensor& logits, Tensor out) {
  INFX_CHECK(logits.dtype == DType::kF32 && out.dtype == DType::kF32 && out.numel() == logits.rows());
  Enqueue(cuda::LaunchLogSumExpRows, logits.as<const float>(), logits.rows(), logits.cols(), out.as<float>());
}

}  // namespace infernix
