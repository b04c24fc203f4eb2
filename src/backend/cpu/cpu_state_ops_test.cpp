// Tests of the CPU backend's stateful ops (attention with its KV cache, causal conv1d, the gated
// delta rule) and of its determinism, against values derived by hand or by a double-precision
// re-implementation written here.
#include "backend/cpu/cpu_test_util.h"
#include "quant/kv_f8.h"

namespace infernix {
namespace {

using namespace cpu_test;

// ---- Attention ----

StateSpec AttentionSpec(int n_kv_heads, int head_dim, int max_slots = 2, int layers = 1) {
  StateSpec spec;
  spec.max_slots = max_slots;
  spec.max_context = 64;
  spec.n_attention_layers = layers;
  spec.n_kv_heads = n_kv_heads;
  spec.head_dim = head_dim;
  return spec;
}

// Reference causal GQA attention of one sequence whose tokens are at positions 0..n-1.
std::vector<double> RefAttention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                                 int64_t n, int64_t hq, int64_t hkv, int64_t d, double scale) {
  std::vector<double> out(static_cast<size_t>(n * hq * d), 0.0);
  int64_t group = hq / hkv;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < hq; ++h) {
      int64_t kvh = h / group;
      std::vector<double> s(static_cast<size_t>(t + 1));
      double mx = -INFINITY;
      for (int64_t j = 0; j <= t; ++j) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i)
          dot += double(q[size_t((t * hq + h) * d + i)]) * k[size_t((j * hkv + kvh) * d + i)];
        s[size_t(j)] = dot * scale;
        mx = std::max(mx, s[size_t(j)]);
      }
      double sum = 0;
      for (auto& e : s) sum += (e = std::exp(e - mx));
      for (int64_t j = 0; j <= t; ++j)
        for (int64_t i = 0; i < d; ++i)
          out[size_t((t * hq + h) * d + i)] += s[size_t(j)] / sum * v[size_t((j * hkv + kvh) * d + i)];
    }
  }
  return out;
}

TEST(CpuAttention, SingleTokenOutputIsItsValue) {
  CpuBackend backend(1);
  auto state = backend.CreateState(AttentionSpec(1, 4));
  HostBuffer q = MakeF32(Shape{1, 2, 4}, {5, -3, 2, 9, 1, 1, 1, 1});
  HostBuffer k = MakeF32(Shape{1, 1, 4}, {0.3f, 7, -1, 2});
  HostBuffer v = MakeF32(Shape{1, 1, 4}, {1, 2, 3, 4});
  HostBuffer out = MakeOut(Shape{1, 2, 4});
  backend.Attention(q.view(), k.view(), v.view(), *state, 0, OneSeq(1), 0.5f, out.view());
  EXPECT_EQ(Values(out.view()), (std::vector<float>{1, 2, 3, 4, 1, 2, 3, 4}));
}

TEST(CpuAttention, IdenticalKeysAverageValuesAndFirstTokenIsCausal) {
  CpuBackend backend(1);
  auto state = backend.CreateState(AttentionSpec(1, 2));
  HostBuffer q = MakeF32(Shape{2, 1, 2}, {1, 2, -3, 0.5f});
  HostBuffer k = MakeF32(Shape{2, 1, 2}, {0.5f, -1, 0.5f, -1});
  HostBuffer v = MakeF32(Shape{2, 1, 2}, {2, 4, 6, -8});
  HostBuffer out = MakeOut(Shape{2, 1, 2});
  backend.Attention(q.view(), k.view(), v.view(), *state, 0, OneSeq(2), 1.0f, out.view());
  // Token 0 sees only itself; token 1 weighs both equally: mean([2, 4], [6, -8]) = [4, -2].
  ExpectNearAll(Values(out.view()), {2, 4, 4, -2}, 1e-6);
}

TEST(CpuAttention, ScaleEntersTheSoftmax) {
  CpuBackend backend(1);
  auto state = backend.CreateState(AttentionSpec(1, 2));
  // Token 1: q = [1, 0], keys [0, 0] and [1, 0] -> scores [0, scale]; scale = ln 3 -> weights [1/4, 3/4].
  HostBuffer q = MakeF32(Shape{2, 1, 2}, {0, 0, 1, 0});
  HostBuffer k = MakeF32(Shape{2, 1, 2}, {0, 0, 1, 0});
  HostBuffer v = MakeF32(Shape{2, 1, 2}, {4, 0, 0, 8});
  HostBuffer out = MakeOut(Shape{2, 1, 2});
  backend.Attention(q.view(), k.view(), v.view(), *state, 0, OneSeq(2), std::log(3.0f), out.view());
  ExpectNearAll(Values(out.view()), {4, 0, 1, 6}, 1e-6);
}

TEST(CpuAttention, FirstTokenNeverSeesLaterTokens) {
  CpuBackend backend(1);
  auto s1 = backend.CreateState(AttentionSpec(1, 3));
  auto s2 = backend.CreateState(AttentionSpec(1, 3));
  std::vector<float> qv = Pseudo(6, 1), kv = Pseudo(6, 2), vv = Pseudo(6, 3);
  HostBuffer q = MakeF32(Shape{2, 1, 3}, qv);
  HostBuffer k = MakeF32(Shape{2, 1, 3}, kv);
  HostBuffer v = MakeF32(Shape{2, 1, 3}, vv);
  HostBuffer out1 = MakeOut(Shape{2, 1, 3});
  backend.Attention(q.view(), k.view(), v.view(), *s1, 0, OneSeq(2), 1.0f, out1.view());
  // Change the second token's key and value drastically: the first token's output must not move.
  std::vector<float> kv2 = kv, vv2 = vv;
  kv2[3] = 100;
  vv2[4] = -1000;
  HostBuffer k2 = MakeF32(Shape{2, 1, 3}, kv2);
  HostBuffer v2 = MakeF32(Shape{2, 1, 3}, vv2);
  HostBuffer out2 = MakeOut(Shape{2, 1, 3});
  backend.Attention(q.view(), k2.view(), v2.view(), *s2, 0, OneSeq(2), 1.0f, out2.view());
  std::vector<float> a = Values(out1.view()), b = Values(out2.view());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a[size_t(i)], vv[size_t(i)]);
    EXPECT_EQ(b[size_t(i)], vv[size_t(i)]);
  }
  EXPECT_NE(a[4], b[4]);  // the second token does see the change
}

TEST(CpuAttention, GqaQueryHeadsShareKvHeads) {
  CpuBackend backend(1);
  const int64_t hq = 4, hkv = 2, d = 2;
  auto state = backend.CreateState(AttentionSpec(2, 2));
  // One token: each query head's output is the value of its KV head: heads 0, 1 -> kv 0; 2, 3 -> kv 1.
  HostBuffer q = MakeF32(Shape{1, hq, d}, Pseudo(8, 7));
  HostBuffer k = MakeF32(Shape{1, hkv, d}, Pseudo(4, 8));
  HostBuffer v = MakeF32(Shape{1, hkv, d}, {1, 2, 30, 40});
  HostBuffer out = MakeOut(Shape{1, hq, d});
  backend.Attention(q.view(), k.view(), v.view(), *state, 0, OneSeq(1), 1.0f, out.view());
  EXPECT_EQ(Values(out.view()), (std::vector<float>{1, 2, 1, 2, 30, 40, 30, 40}));
}

TEST(CpuAttention, GqaMultiTokenMatchesDoubleReference) {
  CpuBackend backend(2);
  const int64_t n = 5, hq = 4, hkv = 2, d = 3;
  auto state = backend.CreateState(AttentionSpec(2, 3));
  std::vector<float> qv = Pseudo(size_t(n * hq * d), 31, -2, 2), kv = Pseudo(size_t(n * hkv * d), 32, -2, 2),
                     vv = Pseudo(size_t(n * hkv * d), 33);
  HostBuffer q = MakeF32(Shape{n, hq, d}, qv);
  HostBuffer k = MakeF32(Shape{n, hkv, d}, kv);
  HostBuffer v = MakeF32(Shape{n, hkv, d}, vv);
  HostBuffer out = MakeOut(Shape{n, hq, d});
  const float scale = 1.0f / std::sqrt(3.0f);
  backend.Attention(q.view(), k.view(), v.view(), *state, 0, OneSeq(n), scale, out.view());
  ExpectNearAll(Values(out.view()), RefAttention(qv, kv, vv, n, hq, hkv, d, scale), 1e-5);
}

TEST(CpuAttention, DecodeAfterPrefillEqualsOneCall) {
  const int64_t n = 4, hq = 2, hkv = 1, d = 4;
  std::vector<float> qv = Pseudo(size_t(n * hq * d), 41, -2, 2), kv = Pseudo(size_t(n * hkv * d), 42, -2, 2),
                     vv = Pseudo(size_t(n * hkv * d), 43);
  HostBuffer q = MakeF32(Shape{n, hq, d}, qv);
  HostBuffer k = MakeF32(Shape{n, hkv, d}, kv);
  HostBuffer v = MakeF32(Shape{n, hkv, d}, vv);
  const float scale = 0.5f;
  CpuBackend backend(1);

  auto whole = backend.CreateState(AttentionSpec(1, 4));
  HostBuffer out_whole = MakeOut(Shape{n, hq, d});
  BatchLayout all = OneSeq(n);
  backend.Attention(q.view(), k.view(), v.view(), *whole, 0, all, scale, out_whole.view());
  whole->Advance(all);
  EXPECT_EQ(whole->SlotLength(0), n);

  // Prefill 3 tokens, then decode the 4th at position 3, in slot 1 of another state.
  auto split = backend.CreateState(AttentionSpec(1, 4));
  HostBuffer out_split = MakeOut(Shape{n, hq, d});
  BatchLayout prefill = OneSeq(3, 0, 1);
  backend.Attention(q.view().SliceRows(0, 3), k.view().SliceRows(0, 3), v.view().SliceRows(0, 3), *split, 0, prefill,
                    scale, out_split.view().SliceRows(0, 3));
  split->Advance(prefill);
  EXPECT_EQ(split->SlotLength(1), 3);
  BatchLayout decode = OneSeq(1, 3, 1);
  backend.Attention(q.view().SliceRows(3, 1), k.view().SliceRows(3, 1), v.view().SliceRows(3, 1), *split, 0, decode,
                    scale, out_split.view().SliceRows(3, 1));
  split->Advance(decode);
  EXPECT_EQ(split->SlotLength(1), 4);

  std::vector<float> a = Values(out_whole.view()), b = Values(out_split.view());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_FLOAT_EQ(a[i], b[i]) << i;
  ExpectNearAll(a, RefAttention(qv, kv, vv, n, hq, hkv, d, scale), 1e-5);
}

TEST(CpuAttention, SequencesInDifferentSlotsAreIndependent) {
  const int64_t hq = 2, hkv = 1, d = 2;
  CpuBackend backend(2);
  // Sequence A: 3 tokens (rows 0-2) in slot 1; sequence B: 2 tokens (rows 3-4) in slot 0.
  std::vector<float> qa = Pseudo(6 * 2, 51, -2, 2), ka = Pseudo(3 * 2, 52, -2, 2), va = Pseudo(3 * 2, 53);
  std::vector<float> qb = Pseudo(4 * 2, 54, -2, 2), kb = Pseudo(2 * 2, 55, -2, 2), vb = Pseudo(2 * 2, 56);
  auto cat = [](std::vector<float> x, const std::vector<float>& y) {
    x.insert(x.end(), y.begin(), y.end());
    return x;
  };
  HostBuffer q = MakeF32(Shape{5, hq, d}, cat(qa, qb));
  HostBuffer k = MakeF32(Shape{5, hkv, d}, cat(ka, kb));
  HostBuffer v = MakeF32(Shape{5, hkv, d}, cat(va, vb));
  HostBuffer out = MakeOut(Shape{5, hq, d});
  auto state = backend.CreateState(AttentionSpec(1, 2));
  BatchLayout layout = Layout({BatchSeq{.slot = 1, .token_begin = 0, .n_tokens = 3, .pos_begin = 0},
                               BatchSeq{.slot = 0, .token_begin = 3, .n_tokens = 2, .pos_begin = 0}});
  backend.Attention(q.view(), k.view(), v.view(), *state, 0, layout, 1.0f, out.view());
  state->Advance(layout);
  EXPECT_EQ(state->SlotLength(1), 3);
  EXPECT_EQ(state->SlotLength(0), 2);
  std::vector<float> got = Values(out.view());
  std::vector<float> got_a(got.begin(), got.begin() + 12), got_b(got.begin() + 12, got.end());
  ExpectNearAll(got_a, RefAttention(qa, ka, va, 3, hq, hkv, d, 1.0), 1e-5);
  ExpectNearAll(got_b, RefAttention(qb, kb, vb, 2, hq, hkv, d, 1.0), 1e-5);
  // B's first token is alone in its slot, so its output is exactly its own value.
  EXPECT_EQ(got_b[0], vb[0]);
  EXPECT_EQ(got_b[1], vb[1]);

  // Continuing slot 0 with one more token sees B's two tokens, not A's three.
  std::vector<float> qc = Pseudo(2 * 2, 57, -2, 2), kc = Pseudo(2, 58, -2, 2), vc = Pseudo(2, 59);
  HostBuffer q1 = MakeF32(Shape{1, hq, d}, qc);
  HostBuffer k1 = MakeF32(Shape{1, hkv, d}, kc);
  HostBuffer v1 = MakeF32(Shape{1, hkv, d}, vc);
  HostBuffer out1 = MakeOut(Shape{1, hq, d});
  backend.Attention(q1.view(), k1.view(), v1.view(), *state, 0, OneSeq(1, 2, 0), 1.0f, out1.view());
  std::vector<double> want = RefAttention(cat(qb, qc), cat(kb, kc), cat(vb, vc), 3, hq, hkv, d, 1.0);
  ExpectNearAll(Values(out1.view()), std::vector<double>(want.end() - 4, want.end()), 1e-5);
}

TEST(CpuAttention, LayersHaveSeparateCachesAndClearSlotForgets) {
  CpuBackend backend(1);
  auto state = backend.CreateState(AttentionSpec(1, 2, 1, 2));
  HostBuffer q = MakeF32(Shape{1, 1, 2}, {1, 1});
  HostBuffer k = MakeF32(Shape{1, 1, 2}, {1, 0});
  HostBuffer v0 = MakeF32(Shape{1, 1, 2}, {2, 2});
  HostBuffer k1 = MakeF32(Shape{1, 1, 2}, {0, 5});  // layer 1's key differs too
  HostBuffer v1 = MakeF32(Shape{1, 1, 2}, {-6, 10});
  HostBuffer out = MakeOut(Shape{1, 1, 2});
  BatchLayout first = OneSeq(1);
  backend.Attention(q.view(), k.view(), v0.view(), *state, 0, first, 1.0f, out.view());
  backend.Attention(q.view(), k1.view(), v1.view(), *state, 1, first, 1.0f, out.view());
  state->Advance(first);
  // Second token on layer 0 with the same key: mean of layer 0's values only.
  HostBuffer v2 = MakeF32(Shape{1, 1, 2}, {4, 0});
  backend.Attention(q.view(), k.view(), v2.view(), *state, 0, OneSeq(1, 1), 1.0f, out.view());
  ExpectNearAll(Values(out.view()), {3, 1}, 1e-6);
  // After ClearSlot the slot is empty: a token at position 0 sees only itself.
  state->ClearSlot(0);
  EXPECT_EQ(state->SlotLength(0), 0);
  backend.Attention(q.view(), k.view(), v2.view(), *state, 0, OneSeq(1), 1.0f, out.view());
  EXPECT_EQ(Values(out.view()), (std::vector<float>{4, 0}));
}

// Keys and values [n, hkv, d] with every (token, KV head) row replaced by what an FP8 cache reads back.
std::vector<float> KvF8RoundTripped(std::vector<float> x, int64_t d) {
  for (size_t r = 0; r < x.size(); r += size_t(d)) quant::KvF8RoundTripRow(x.data() + r, d);
  return x;
}

TEST(CpuAttention, Fp8CacheEqualsRoundTrippedKvOverPrefillAndDecode) {
  const int64_t n_prefill = 5, n_decode = 3, n = n_prefill + n_decode, hq = 6, hkv = 3, d = 16;
  std::vector<float> qv = Pseudo(size_t(n * hq * d), 81, -2, 2), kv = Pseudo(size_t(n * hkv * d), 82, -3, 3),
                     vv = Pseudo(size_t(n * hkv * d), 83);
  HostBuffer q = MakeF32(Shape{n, hq, d}, qv);
  HostBuffer k = MakeF32(Shape{n, hkv, d}, kv), v = MakeF32(Shape{n, hkv, d}, vv);
  HostBuffer k_rt = MakeF32(Shape{n, hkv, d}, KvF8RoundTripped(kv, d));
  HostBuffer v_rt = MakeF32(Shape{n, hkv, d}, KvF8RoundTripped(vv, d));
  const float scale = 1.0f / std::sqrt(float(d));
  CpuBackend backend(2);
  StateSpec f8_spec = AttentionSpec(int(hkv), int(d));
  f8_spec.kv_type = KvCacheType::kF8E4M3;
  auto f8 = backend.CreateState(f8_spec);                                // fed k, v
  auto emulated = backend.CreateState(AttentionSpec(int(hkv), int(d)));  // fed k_rt, v_rt
  auto plain = backend.CreateState(AttentionSpec(int(hkv), int(d)));     // fed k, v
  HostBuffer out_f8 = MakeOut(Shape{n, hq, d}), out_emulated = MakeOut(Shape{n, hq, d}),
             out_plain = MakeOut(Shape{n, hq, d});
  // A prefill of n_prefill tokens, then one decode step per remaining token, all in slot 1.
  auto run = [&](SequenceState& state, const HostBuffer& keys, const HostBuffer& values, HostBuffer& out) {
    for (int64_t step = 0, begin = 0; step <= n_decode; ++step) {
      int64_t len = step == 0 ? n_prefill : 1;
      BatchLayout layout = OneSeq(len, begin, 1);
      backend.Attention(q.view().SliceRows(begin, len), keys.view().SliceRows(begin, len),
                        values.view().SliceRows(begin, len), state, 0, layout, scale, out.view().SliceRows(begin, len));
      state.Advance(layout);
      begin += len;
    }
    EXPECT_EQ(state.SlotLength(1), n);
  };
  run(*f8, k, v, out_f8);
  run(*emulated, k_rt, v_rt, out_emulated);
  run(*plain, k, v, out_plain);

  std::vector<float> a = Values(out_f8.view()), b = Values(out_emulated.view()), c = Values(out_plain.view());
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    uint32_t ba = 0, bb = 0;
    std::memcpy(&ba, &a[i], sizeof(ba));
    std::memcpy(&bb, &b[i], sizeof(bb));
    ASSERT_EQ(ba, bb) << "at index " << i << ": " << a[i] << " vs " << b[i];
  }
  // The cache itself holds the decoded rows.
  auto& f8_state = static_cast<CpuState&>(*f8);
  std::vector<float> cached(f8_state.Keys(0, 1, n), f8_state.Keys(0, 1, n) + n * hkv * d);
  EXPECT_EQ(cached, Values(k_rt.view()));
  // FP8 is close to the f32 cache, but not equal to it.
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff2 += (double(a[i]) - c[i]) * (double(a[i]) - c[i]);
    ref2 += double(c[i]) * c[i];
  }
  double rel = std::sqrt(diff2 / ref2);
  EXPECT_GT(rel, 0.0);
  EXPECT_LT(rel, 0.1);
}

// ---- CausalConv1d ----

StateSpec ConvSpec(int channels, int kernel, int max_slots = 2) {
  StateSpec spec;
  spec.max_slots = max_slots;
  spec.n_linear_layers = 1;
  spec.conv_channels = channels;
  spec.conv_kernel = kernel;
  spec.n_k_heads = 1;
  spec.n_v_heads = 1;
  spec.k_head_dim = 1;
  spec.v_head_dim = 1;
  return spec;
}

// Reference: out[t, c] = silu(sum_j w[c, j] * x[t - (K-1) + j, c]), zeros before the sequence start.
std::vector<double> RefConv(const std::vector<float>& x, const std::vector<float>& w, int64_t n, int64_t c_count,
                            int64_t kernel) {
  std::vector<double> out(static_cast<size_t>(n * c_count));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < c_count; ++c) {
      double acc = 0;
      for (int64_t j = 0; j < kernel; ++j) {
        int64_t src = t - (kernel - 1) + j;
        if (src >= 0) acc += double(w[size_t(c * kernel + j)]) * x[size_t(src * c_count + c)];
      }
      out[size_t(t * c_count + c)] = SiluD(acc);
    }
  return out;
}

TEST(CpuCausalConv1d, KernelThreeHandComputed) {
  CpuBackend backend(1);
  auto state = backend.CreateState(ConvSpec(2, 3));
  // Channel 0: x = 1, 2, 3, 4 and w = [1, 2, 3]; channel 1: x = 1, 0, -1, 2 and w = [0.5, -1, 0.25].
  HostBuffer x = MakeF32(Shape{4, 2}, {1, 1, 2, 0, 3, -1, 4, 2});
  HostBuffer w = MakeF32(Shape{2, 1, 3}, {1, 2, 3, 0.5f, -1, 0.25f});
  HostBuffer out = MakeOut(Shape{4, 2});
  backend.CausalConv1d(x.view(), w.view(), *state, 0, OneSeq(4), out.view());
  // Pre-activations by hand: channel 0: 3*1 = 3; 2*1 + 3*2 = 8; 1 + 4 + 9 = 14; 2 + 6 + 12 = 20.
  // Channel 1: 0.25; -1 + 0 = -1; 0.5 + 0 - 0.25 = 0.25; 0 + 1 + 0.5 = 1.5.
  ExpectNearAll(Values(out.view()),
                {SiluD(3), SiluD(0.25), SiluD(8), SiluD(-1), SiluD(14), SiluD(0.25), SiluD(20), SiluD(1.5)}, 1e-5);
  // silu(3) = 3 / (1 + e^-3) = 2.8577223804673.
  EXPECT_NEAR(Values(out.view())[0], 2.8577223804673, 1e-5);
}

TEST(CpuCausalConv1d, SplitCallsEqualOneCallAndFreshSlotStartsFromZero) {
  const int64_t n = 6, c_count = 5, kernel = 4;
  std::vector<float> xv = Pseudo(size_t(n * c_count), 61, -2, 2), wv = Pseudo(size_t(c_count * kernel), 62);
  HostBuffer x = MakeF32(Shape{n, c_count}, xv);
  HostBuffer w = MakeF32(Shape{c_count, kernel}, wv);
  CpuBackend backend(2);
  std::vector<double> want = RefConv(xv, wv, n, c_count, kernel);

  auto whole = backend.CreateState(ConvSpec(int(c_count), int(kernel)));
  HostBuffer out_whole = MakeOut(Shape{n, c_count});
  backend.CausalConv1d(x.view(), w.view(), *whole, 0, OneSeq(n), out_whole.view());
  ExpectNearAll(Values(out_whole.view()), want, 1e-5);

  // Calls of 1, 2 and 3 tokens (fewer than kernel - 1 included) continuing slot 1.
  auto split = backend.CreateState(ConvSpec(int(c_count), int(kernel)));
  HostBuffer out_split = MakeOut(Shape{n, c_count});
  int64_t begin = 0;
  for (int64_t len : {1, 2, 3}) {
    BatchLayout layout = OneSeq(len, begin, 1);
    backend.CausalConv1d(x.view().SliceRows(begin, len), w.view(), *split, 0, layout,
                         out_split.view().SliceRows(begin, len));
    split->Advance(layout);
    begin += len;
  }
  std::vector<float> a = Values(out_whole.view()), b = Values(out_split.view());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_FLOAT_EQ(a[i], b[i]) << i;

  // Slot 0 of the split state was never used: it starts from zeros.
  HostBuffer out_fresh = MakeOut(Shape{n, c_count});
  backend.CausalConv1d(x.view(), w.view(), *split, 0, OneSeq(n, 0, 0), out_fresh.view());
  ExpectNearAll(Values(out_fresh.view()), want, 1e-5);
}

TEST(CpuCausalConv1d, ClearSlotResetsTheWindow) {
  CpuBackend backend(1);
  auto state = backend.CreateState(ConvSpec(1, 3, 1));
  HostBuffer w = MakeF32(Shape{1, 3}, {1, 1, 1});
  HostBuffer x = MakeF32(Shape{2, 1}, {5, 7});
  HostBuffer out = MakeOut(Shape{2, 1});
  BatchLayout layout = OneSeq(2);
  backend.CausalConv1d(x.view(), w.view(), *state, 0, layout, out.view());
  state->Advance(layout);
  HostBuffer x1 = MakeF32(Shape{1, 1}, {-1});
  HostBuffer out1 = MakeOut(Shape{1, 1});
  backend.CausalConv1d(x1.view(), w.view(), *state, 0, OneSeq(1, 2), out1.view());
  EXPECT_NEAR(Values(out1.view())[0], SiluD(5 + 7 - 1), 1e-5);  // the window held 5, 7
  state->ClearSlot(0);
  EXPECT_EQ(state->SlotLength(0), 0);
  backend.CausalConv1d(x1.view(), w.view(), *state, 0, OneSeq(1), out1.view());
  EXPECT_NEAR(Values(out1.view())[0], SiluD(-1), 1e-6);  // zeros before it
}

TEST(CpuCausalConv1d, TwoSequencesInOneCallAndBf16Weights) {
  const int64_t c_count = 3, kernel = 3;
  std::vector<float> wv = Grid(size_t(c_count * kernel), 70);
  HostBuffer w = MakeHalf(DType::kBF16, Shape{c_count, 1, kernel}, wv);
  std::vector<float> xa = Pseudo(size_t(4 * c_count), 71), xb = Pseudo(size_t(2 * c_count), 72);
  std::vector<float> xv = xa;
  xv.insert(xv.end(), xb.begin(), xb.end());
  HostBuffer x = MakeF32(Shape{6, c_count}, xv);
  HostBuffer out = MakeOut(Shape{6, c_count});
  CpuBackend backend(2);
  auto state = backend.CreateState(ConvSpec(int(c_count), int(kernel)));
  BatchLayout layout = Layout({BatchSeq{.slot = 0, .token_begin = 0, .n_tokens = 4, .pos_begin = 0},
                               BatchSeq{.slot = 1, .token_begin = 4, .n_tokens = 2, .pos_begin = 0}});
  backend.CausalConv1d(x.view(), w.view(), *state, 0, layout, out.view());
  std::vector<double> want = RefConv(xa, wv, 4, c_count, kernel), want_b = RefConv(xb, wv, 2, c_count, kernel);
  want.insert(want.end(), want_b.begin(), want_b.end());
  ExpectNearAll(Values(out.view()), want, 1e-5);
}

// ---- GdnGates ----

TEST(CpuGdnGates, SoftplusWithThresholdAndSigmoid) {
  CpuBackend backend(1);
  // Head 0: a_log = 0 (exp = 1), dt_bias = 0; head 1: a_log = ln 2 (exp = 2), dt_bias = 5.
  HostBuffer a = MakeF32(Shape{3, 2}, {0, -5, 1, 20, -30, 0});
  HostBuffer b = MakeF32(Shape{3, 2}, {0, std::log(3.0f), -std::log(3.0f), 50, 2, -2});
  HostBuffer a_log = MakeF32(Shape{2}, {0, std::log(2.0f)});
  HostBuffer dt_bias = MakeF32(Shape{2}, {0, 5});
  HostBuffer g = MakeOut(Shape{3, 2}), beta = MakeOut(Shape{3, 2});
  backend.GdnGates(a.view(), b.view(), a_log.view(), dt_bias.view(), g.view(), beta.view());
  // softplus(0) = ln 2; softplus(-5 + 5) = ln 2; softplus(1) = ln(1 + e); softplus(25) = 25 (threshold 20);
  // softplus(-30) = ln(1 + e^-30) ~ e^-30; softplus(5) = ln(1 + e^5).
  ExpectNearAll(Values(g.view()),
                {-std::log(2.0), -2 * std::log(2.0), -std::log1p(std::exp(1.0)), -2 * 25.0,
                 -std::log1p(std::exp(-30.0)), -2 * std::log1p(std::exp(5.0))},
                1e-6, 1e-6);
  EXPECT_NEAR(Values(g.view())[3], -50.0, 1e-5);
  EXPECT_GT(Values(g.view())[4], -1e-12);  // tiny, not clamped or flipped
  EXPECT_LT(Values(g.view())[4], 0.0f);
  ExpectNearAll(Values(beta.view()), {0.5, 0.75, 0.25, 1.0, SigmoidD(2), SigmoidD(-2)}, 1e-6);
}

TEST(CpuGdnGates, Bf16ParametersAreRead) {
  CpuBackend backend(1);
  HostBuffer a = MakeF32(Shape{1, 2}, {0.5f, 0.5f});
  HostBuffer b = MakeF32(Shape{1, 2}, {0, 0});
  HostBuffer a_log = MakeHalf(DType::kBF16, Shape{2}, {0, 1});
  HostBuffer dt_bias = MakeHalf(DType::kBF16, Shape{2}, {-0.5f, 1.5f});
  HostBuffer g = MakeOut(Shape{1, 2}), beta = MakeOut(Shape{1, 2});
  backend.GdnGates(a.view(), b.view(), a_log.view(), dt_bias.view(), g.view(), beta.view());
  ExpectNearAll(Values(g.view()), {-std::log(2.0), -std::exp(1.0) * std::log1p(std::exp(2.0))}, 1e-6, 1e-6);
}

// ---- GatedDeltaRule ----

StateSpec GdnSpec(int nk, int nv, int dk, int dv, int max_slots = 2) {
  StateSpec spec;
  spec.max_slots = max_slots;
  spec.n_linear_layers = 1;
  spec.conv_channels = 1;
  spec.conv_kernel = 2;
  spec.n_k_heads = nk;
  spec.n_v_heads = nv;
  spec.k_head_dim = dk;
  spec.v_head_dim = dv;
  return spec;
}

struct GdnInput {
  int64_t n, nk, nv, dk, dv;
  std::vector<float> q, k, v, g, beta;
};

GdnInput MakeGdnInput(int64_t n, int64_t nk, int64_t nv, int64_t dk, int64_t dv, uint32_t seed) {
  GdnInput in{n, nk, nv, dk, dv, {}, {}, {}, {}, {}};
  in.q = Pseudo(size_t(n * nk * dk), seed, -1, 1);
  in.k = Pseudo(size_t(n * nk * dk), seed + 1, -1, 1);
  in.v = Pseudo(size_t(n * nv * dv), seed + 2, -2, 2);
  in.g = Pseudo(size_t(n * nv), seed + 3, -1.5f, -0.01f);
  in.beta = Pseudo(size_t(n * nv), seed + 4, 0.05f, 0.95f);
  return in;
}

// Straightforward recurrence in double over tokens [begin, begin + count) of `in`, continuing `state`
// ([nv, dk, dv], updated). Returns out [count, nv, dv].
std::vector<double> RefGdn(const GdnInput& in, int64_t begin, int64_t count, std::vector<double>& state,
                           GdnHeadMapping mapping = GdnHeadMapping::kGrouped) {
  const int64_t ratio = in.nv / in.nk;
  std::vector<double> out(static_cast<size_t>(count * in.nv * in.dv), 0.0);
  for (int64_t t = begin; t < begin + count; ++t) {
    for (int64_t h = 0; h < in.nv; ++h) {
      int64_t kh = mapping == GdnHeadMapping::kTiled ? h % in.nk : h / ratio;
      std::vector<double> qn(static_cast<size_t>(in.dk)), kn(static_cast<size_t>(in.dk));
      double qs = 0, ks = 0;
      for (int64_t i = 0; i < in.dk; ++i) {
        qs += double(in.q[size_t((t * in.nk + kh) * in.dk + i)]) * in.q[size_t((t * in.nk + kh) * in.dk + i)];
        ks += double(in.k[size_t((t * in.nk + kh) * in.dk + i)]) * in.k[size_t((t * in.nk + kh) * in.dk + i)];
      }
      for (int64_t i = 0; i < in.dk; ++i) {
        qn[size_t(i)] = in.q[size_t((t * in.nk + kh) * in.dk + i)] / std::sqrt(qs + 1e-6) / std::sqrt(double(in.dk));
        kn[size_t(i)] = in.k[size_t((t * in.nk + kh) * in.dk + i)] / std::sqrt(ks + 1e-6);
      }
      double* s = state.data() + h * in.dk * in.dv;
      double decay = std::exp(double(in.g[size_t(t * in.nv + h)]));
      double b = in.beta[size_t(t * in.nv + h)];
      for (int64_t i = 0; i < in.dk * in.dv; ++i) s[i] *= decay;
      for (int64_t c = 0; c < in.dv; ++c) {
        double sk = 0;
        for (int64_t r = 0; r < in.dk; ++r) sk += s[r * in.dv + c] * kn[size_t(r)];
        double delta = b * (in.v[size_t((t * in.nv + h) * in.dv + c)] - sk);
        for (int64_t r = 0; r < in.dk; ++r) s[r * in.dv + c] += kn[size_t(r)] * delta;
      }
      for (int64_t c = 0; c < in.dv; ++c) {
        double o = 0;
        for (int64_t r = 0; r < in.dk; ++r) o += s[r * in.dv + c] * qn[size_t(r)];
        out[size_t(((t - begin) * in.nv + h) * in.dv + c)] = o;
      }
    }
  }
  return out;
}

// Runs the op on tokens [begin, begin + count) of `in` as one sequence in `slot` at pos_begin = begin.
std::vector<float> RunGdn(CpuBackend& backend, SequenceState& state, const GdnInput& in, int64_t begin, int64_t count,
                          int slot, GdnHeadMapping mapping = GdnHeadMapping::kGrouped) {
  auto slice = [&](const std::vector<float>& all, int64_t per_token) {
    return std::vector<float>(all.begin() + begin * per_token, all.begin() + (begin + count) * per_token);
  };
  HostBuffer q = MakeF32(Shape{count, in.nk, in.dk}, slice(in.q, in.nk * in.dk));
  HostBuffer k = MakeF32(Shape{count, in.nk, in.dk}, slice(in.k, in.nk * in.dk));
  HostBuffer v = MakeF32(Shape{count, in.nv, in.dv}, slice(in.v, in.nv * in.dv));
  HostBuffer g = MakeF32(Shape{count, in.nv}, slice(in.g, in.nv));
  HostBuffer beta = MakeF32(Shape{count, in.nv}, slice(in.beta, in.nv));
  HostBuffer out = MakeOut(Shape{count, in.nv, in.dv});
  BatchLayout layout = OneSeq(count, begin, slot);
  backend.GatedDeltaRule(q.view(), k.view(), v.view(), g.view(), beta.view(), mapping, state, 0, layout, out.view());
  state.Advance(layout);
  return Values(out.view());
}

TEST(CpuGatedDeltaRule, OneStepFromZeroStateClosedForm) {
  CpuBackend backend(1);
  auto state = backend.CreateState(GdnSpec(1, 1, 2, 3));
  // k = [3, 4] (|k| = 5), q = [4, 3] (|q| = 5): k_n . q_n = 24/25; q scaled by 1/sqrt(2).
  // S = k_n (x) (beta v), out = S^T q_n = beta * v * (24/25) / sqrt(2). g is irrelevant on a zero state.
  GdnInput in{1, 1, 1, 2, 3, {4, 3}, {3, 4}, {1, -2, 10}, {-0.7f}, {0.5f}};
  std::vector<float> got = RunGdn(backend, *state, in, 0, 1, 0);
  double f = 0.5 * 0.96 / std::sqrt(2.0);
  ExpectNearAll(got, {1 * f, -2 * f, 10 * f}, 1e-6);
  // The stored state is k_n (x) (beta v): row r = k_n[r] * 0.5 * v.
  const float* s = static_cast<CpuState&>(*state).Recurrent(0, 0);
  ExpectNearAll(std::vector<float>(s, s + 6), {0.6 * 0.5, 0.6 * -1, 0.6 * 5, 0.8 * 0.5, 0.8 * -1, 0.8 * 5}, 1e-6);
}

TEST(CpuGatedDeltaRule, SecondStepDecaysAndCorrectsTheState) {
  CpuBackend backend(1);
  auto state = backend.CreateState(GdnSpec(1, 1, 2, 1));
  // dk = 2, dv = 1. Step 0: k = q = [1, 0], v = 2, beta = 1 -> S = [[2], [0]], out = 2 / sqrt(2).
  // Step 1: g = ln(1/2) -> S = [[1], [0]]; k = [1, 0], v = 5, beta = 0.5: delta = 0.5 * (5 - 1) = 2,
  // S = [[3], [0]]; q = [0, 1] -> out = 0.
  // Step 2: g = 0, k = [0, 1], v = 4, beta = 1: S = [[3], [4]]; q = [1, 1] -> q_n = [1, 1] / sqrt(2) / sqrt(2):
  // out = (3 + 4) / 2 = 3.5.
  GdnInput in{3, 1, 1, 2, 1, {1, 0, 0, 1, 1, 1}, {1, 0, 1, 0, 0, 1}, {2, 5, 4}, {-5, std::log(0.5f), 0}, {1, 0.5f, 1}};
  std::vector<float> got = RunGdn(backend, *state, in, 0, 3, 0);
  ExpectNearAll(got, {2 / std::sqrt(2.0), 0.0, 3.5}, 1e-5);
}

TEST(CpuGatedDeltaRule, MultiStepMatchesDoubleReference) {
  CpuBackend backend(2);
  GdnInput in = MakeGdnInput(7, 2, 4, 5, 3, 81);
  auto state = backend.CreateState(GdnSpec(2, 4, 5, 3));
  std::vector<float> got = RunGdn(backend, *state, in, 0, in.n, 0);
  std::vector<double> ref_state(size_t(in.nv * in.dk * in.dv), 0.0);
  ExpectNearAll(got, RefGdn(in, 0, in.n, ref_state), 1e-5);
  const float* s = static_cast<CpuState&>(*state).Recurrent(0, 0);
  ExpectNearAll(std::vector<float>(s, s + ref_state.size()), ref_state, 1e-5);
}

TEST(CpuGatedDeltaRule, ValueHeadsUseKeyHeadHOverRatio) {
  CpuBackend backend(1);
  // nk = 2, nv = 4: value heads 0, 1 use key head 0 (q = k = [1, 0]: k_n . q_n = 1);
  // value heads 2, 3 use key head 1 (q = [1, 0], k = [0, 1]: orthogonal, out = 0).
  // A mapping h % nk would give value head 1 key head 1 and value head 2 key head 0.
  auto state = backend.CreateState(GdnSpec(2, 4, 2, 1));
  GdnInput in{1, 2, 4, 2, 1, {1, 0, 1, 0}, {1, 0, 0, 1}, {1, 2, 3, 4}, {0, 0, 0, 0}, {1, 1, 1, 1}};
  std::vector<float> got = RunGdn(backend, *state, in, 0, 1, 0);
  double f = 1 / (1 + 1e-6) / std::sqrt(2.0);  // k_n . q_n = 1 / (1 + eps) with the 1e-6 of the L2 norm
  ExpectNearAll(got, {1 * f, 2 * f, 0.0, 0.0}, 1e-6);
}

TEST(CpuGatedDeltaRule, TiledValueHeadsUseKeyHeadHModNk) {
  CpuBackend backend(1);
  // The input of ValueHeadsUseKeyHeadHOverRatio, tiled: value heads 0, 2 use key head 0 (out = v * f),
  // value heads 1, 3 use key head 1 (orthogonal q and k: out = 0).
  auto state = backend.CreateState(GdnSpec(2, 4, 2, 1));
  GdnInput in{1, 2, 4, 2, 1, {1, 0, 1, 0}, {1, 0, 0, 1}, {1, 2, 3, 4}, {0, 0, 0, 0}, {1, 1, 1, 1}};
  std::vector<float> got = RunGdn(backend, *state, in, 0, 1, 0, GdnHeadMapping::kTiled);
  double f = 1 / (1 + 1e-6) / std::sqrt(2.0);
  ExpectNearAll(got, {1 * f, 0.0, 3 * f, 0.0}, 1e-6);
}

TEST(CpuGatedDeltaRule, TiledMultiStepMatchesDoubleReferenceAndPermutedGrouped) {
  CpuBackend backend(2);
  const int64_t nk = 2, nv = 6, dk = 5, dv = 3, r = nv / nk;
  GdnInput in = MakeGdnInput(7, nk, nv, dk, dv, 111);
  auto tiled_state = backend.CreateState(GdnSpec(2, 6, 5, 3));
  std::vector<float> tiled = RunGdn(backend, *tiled_state, in, 0, in.n, 0, GdnHeadMapping::kTiled);
  std::vector<double> ref_state(size_t(nv * dk * dv), 0.0);
  ExpectNearAll(tiled, RefGdn(in, 0, in.n, ref_state, GdnHeadMapping::kTiled), 1e-5);
  // Tiled head h = j * nk + g is grouped head g * r + j: reorder v, g, beta into grouped order, run
  // grouped, and the outputs must be the tiled outputs in that order, bit for bit (same arithmetic).
  auto grouped_head = [&](int64_t h) { return (h % nk) * r + h / nk; };
  GdnInput perm = in;
  for (int64_t t = 0; t < in.n; ++t)
    for (int64_t h = 0; h < nv; ++h) {
      int64_t gh = grouped_head(h);
      perm.g[size_t(t * nv + gh)] = in.g[size_t(t * nv + h)];
      perm.beta[size_t(t * nv + gh)] = in.beta[size_t(t * nv + h)];
      for (int64_t c = 0; c < dv; ++c) perm.v[size_t((t * nv + gh) * dv + c)] = in.v[size_t((t * nv + h) * dv + c)];
    }
  auto grouped_state = backend.CreateState(GdnSpec(2, 6, 5, 3));
  std::vector<float> grouped = RunGdn(backend, *grouped_state, perm, 0, in.n, 0);
  for (int64_t t = 0; t < in.n; ++t)
    for (int64_t h = 0; h < nv; ++h)
      for (int64_t c = 0; c < dv; ++c)
        ASSERT_EQ(tiled[size_t((t * nv + h) * dv + c)], grouped[size_t((t * nv + grouped_head(h)) * dv + c)])
            << t << " " << h << " " << c;
}

TEST(CpuGatedDeltaRule, StateContinuesAcrossCallsAndSlotsAreIndependent) {
  CpuBackend backend(2);
  GdnInput in = MakeGdnInput(6, 1, 2, 4, 3, 91);
  auto whole = backend.CreateState(GdnSpec(1, 2, 4, 3));
  std::vector<float> a = RunGdn(backend, *whole, in, 0, 6, 0);
  auto split = backend.CreateState(GdnSpec(1, 2, 4, 3));
  std::vector<float> b = RunGdn(backend, *split, in, 0, 4, 1);
  std::vector<float> b2 = RunGdn(backend, *split, in, 4, 2, 1);
  b.insert(b.end(), b2.begin(), b2.end());
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_FLOAT_EQ(a[i], b[i]) << i;
  // Slot 0 of `split` is untouched: a fresh run there equals the run from zero.
  std::vector<float> c = RunGdn(backend, *split, in, 0, 6, 0);
  EXPECT_EQ(a, c);
  // After ClearSlot(1), slot 1 starts from zero again.
  split->ClearSlot(1);
  std::vector<float> d = RunGdn(backend, *split, in, 0, 6, 1);
  EXPECT_EQ(a, d);
}

TEST(CpuGatedDeltaRule, TwoSequencesInOneCall) {
  CpuBackend backend(2);
  GdnInput in = MakeGdnInput(5, 1, 2, 3, 2, 101);  // rows 0-2: sequence A (slot 1), rows 3-4: B (slot 0)
  HostBuffer q = MakeF32(Shape{5, 1, 3}, in.q);
  HostBuffer k = MakeF32(Shape{5, 1, 3}, in.k);
  HostBuffer v = MakeF32(Shape{5, 2, 2}, in.v);
  HostBuffer g = MakeF32(Shape{5, 2}, in.g);
  HostBuffer beta = MakeF32(Shape{5, 2}, in.beta);
  HostBuffer out = MakeOut(Shape{5, 2, 2});
  auto state = backend.CreateState(GdnSpec(1, 2, 3, 2));
  BatchLayout layout = Layout({BatchSeq{.slot = 1, .token_begin = 0, .n_tokens = 3, .pos_begin = 0},
                               BatchSeq{.slot = 0, .token_begin = 3, .n_tokens = 2, .pos_begin = 0}});
  backend.GatedDeltaRule(q.view(), k.view(), v.view(), g.view(), beta.view(), GdnHeadMapping::kGrouped, *state, 0,
                         layout, out.view());
  std::vector<double> sa(size_t(2 * 3 * 2), 0.0), sb(sa.size(), 0.0);
  std::vector<double> want = RefGdn(in, 0, 3, sa), want_b = RefGdn(in, 3, 2, sb);
  want.insert(want.end(), want_b.begin(), want_b.end());
  ExpectNearAll(Values(out.view()), want, 1e-5);
}

// ---- determinism ----

TEST(CpuDeterminism, OneAndThreeThreadsGiveBitIdenticalResults) {
  CpuBackend one(1), three(3);
  // MatMul: enough weight rows to split over several tasks.
  const int64_t n = 7, k = 45, m = 300;
  HostBuffer x = MakeF32(Shape{n, k}, Pseudo(size_t(n * k), 601));
  HostBuffer w = MakeHalf(DType::kBF16, Shape{m, k}, Grid(size_t(m * k), 602));
  HostBuffer y1 = MakeOut(Shape{n, m}), y3 = MakeOut(Shape{n, m});
  one.MatMul(x.view(), w.view(), y1.view());
  three.MatMul(x.view(), w.view(), y3.view());
  EXPECT_EQ(std::memcmp(y1.view().data, y3.view().data, y1.size_bytes()), 0);

  // Attention over two sequences, many (token, head) tasks.
  const int64_t tokens = 12, hq = 8, hkv = 2, d = 16;
  HostBuffer q = MakeF32(Shape{tokens, hq, d}, Pseudo(size_t(tokens * hq * d), 603));
  HostBuffer kk = MakeF32(Shape{tokens, hkv, d}, Pseudo(size_t(tokens * hkv * d), 604));
  HostBuffer v = MakeF32(Shape{tokens, hkv, d}, Pseudo(size_t(tokens * hkv * d), 605));
  BatchLayout layout = Layout({BatchSeq{.slot = 0, .token_begin = 0, .n_tokens = 9, .pos_begin = 0},
                               BatchSeq{.slot = 1, .token_begin = 9, .n_tokens = 3, .pos_begin = 0}});
  auto s1 = one.CreateState(AttentionSpec(int(hkv), int(d)));
  auto s3 = three.CreateState(AttentionSpec(int(hkv), int(d)));
  HostBuffer a1 = MakeOut(Shape{tokens, hq, d}), a3 = MakeOut(Shape{tokens, hq, d});
  one.Attention(q.view(), kk.view(), v.view(), *s1, 0, layout, 0.25f, a1.view());
  three.Attention(q.view(), kk.view(), v.view(), *s3, 0, layout, 0.25f, a3.view());
  EXPECT_EQ(std::memcmp(a1.view().data, a3.view().data, a1.size_bytes()), 0);

  // Gated delta rule, several value heads.
  GdnInput in = MakeGdnInput(5, 2, 4, 8, 4, 606);
  auto g1 = one.CreateState(GdnSpec(2, 4, 8, 4));
  auto g3 = three.CreateState(GdnSpec(2, 4, 8, 4));
  std::vector<float> r1 = RunGdn(one, *g1, in, 0, 5, 0), r3 = RunGdn(three, *g3, in, 0, 5, 0);
  EXPECT_EQ(std::memcmp(r1.data(), r3.data(), r1.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace infernix
