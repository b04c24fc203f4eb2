// Test harness for the HTTP server: the embedded default model served on a backend that can be told
// what to generate (each logits row favours the next token of a script) and when to fail (a forward
// pass throws, as a device error would), an HttpServer on a free port, and requests through httplib's
// client, whole or as server-sent events.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "server/http_server.h"
#include "server/json_reader.h"
#include "server/service.h"

namespace infernix::testing {

// The CPU backend, with two controls for the test thread (the engine thread runs the ops):
//   - Script(ids): the next logits rows the model returns make ids[0], ids[1], ... the sampled tokens
//     (the scripted token 50 above every other, which is 0), one row each; past the end, the model's
//     own logits;
//   - FailFrom(n): the n-th forward pass from now on, and every later one, throws.
class ScriptedBackend final : public Backend {
 public:
  ScriptedBackend() : cpu_(2) {}

  void Script(std::vector<int32_t> ids) {
    std::lock_guard<std::mutex> lock(mutex_);
    script_ = std::move(ids);
    next_ = 0;
  }
  // Rows written from the script since Script(): the tokens generated under it.
  size_t scripted_rows() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return next_;
  }
  void FailFrom(int64_t n) { fail_at_ = forwards_ + n; }
  void Heal() { fail_at_ = -1; }
  void set_vocab_size(int64_t n) { vocab_size_ = n; }

  std::string_view name() const override { return "scripted-cpu"; }
  DType activation_dtype() const override { return cpu_.activation_dtype(); }
  Tensor UploadWeight(const Tensor& host) override { return cpu_.UploadWeight(host); }
  Tensor Scratch(DType dtype, Shape shape) override { return cpu_.Scratch(dtype, shape); }
  void ResetScratch() override { cpu_.ResetScratch(); }
  void CopyToBackend(const void* host, Tensor dst) override { cpu_.CopyToBackend(host, dst); }
  void CopyToHost(const Tensor& src, void* host) override {
    cpu_.CopyToHost(src, host);
    ApplyScript(src, static_cast<float*>(host));
  }
  std::span<float> ReadToHost(const Tensor& src) override {
    std::span<float> values = cpu_.ReadToHost(src);
    ApplyScript(src, values.data());
    return values;
  }
  std::unique_ptr<SequenceState> CreateState(const StateSpec& spec) override { return cpu_.CreateState(spec); }
  void Embedding(const Tensor& ids, const Tensor& table, Tensor out) override {
    // Once per forward pass.
    if (const int64_t n = ++forwards_; fail_at_ >= 0 && n >= fail_at_) throw std::runtime_error("injected device fault");
    cpu_.Embedding(ids, table, out);
  }
  void RmsNorm(const Tensor& x, const Tensor& weight, float eps, bool unit_offset, Tensor out) override {
    cpu_.RmsNorm(x, weight, eps, unit_offset, out);
  }
  void MatMul(const Tensor& x, const Tensor& w, Tensor out) override { cpu_.MatMul(x, w, out); }
  void Add(const Tensor& a, const Tensor& b, Tensor out) override { cpu_.Add(a, b, out); }
  void SiluMul(const Tensor& gate, const Tensor& up, Tensor out) override { cpu_.SiluMul(gate, up, out); }
  void SigmoidMul(const Tensor& x, const Tensor& gate, Tensor out) override { cpu_.SigmoidMul(x, gate, out); }
  void SliceColumns(const Tensor& x, int64_t col_begin, Tensor out) override { cpu_.SliceColumns(x, col_begin, out); }
  void Rope(Tensor x, const BatchLayout& layout, const Tensor& inv_freq, float attention_scale) override {
    cpu_.Rope(x, layout, inv_freq, attention_scale);
  }
  void Attention(const Tensor& q, const Tensor& k, const Tensor& v, SequenceState& state, int layer,
                 const BatchLayout& layout, float scale, Tensor out) override {
    cpu_.Attention(q, k, v, state, layer, layout, scale, out);
  }
  void CausalConv1d(const Tensor& x, const Tensor& w, SequenceState& state, int layer, const BatchLayout& layout,
                    Tensor out) override {
    cpu_.CausalConv1d(x, w, state, layer, layout, out);
  }
  void GdnGates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, Tensor g,
                Tensor beta) override {
    cpu_.GdnGates(a, b, a_log, dt_bias, g, beta);
  }
  void GatedDeltaRule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                      GdnHeadMapping mapping, SequenceState& state, int layer, const BatchLayout& layout,
                      Tensor out) override {
    cpu_.GatedDeltaRule(q, k, v, g, beta, mapping, state, layer, layout, out);
  }
  void GatedRmsNorm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor out) override {
    cpu_.GatedRmsNorm(x, z, weight, eps, out);
  }
  void MoeRouting(const Tensor& logits, int top_k, bool normalize, Tensor weights, Tensor ids) override {
    cpu_.MoeRouting(logits, top_k, normalize, weights, ids);
  }
  void MoeExperts(const Tensor& x, const Tensor& weights, const Tensor& ids, const ExpertWeights& experts,
                  Tensor out) override {
    cpu_.MoeExperts(x, weights, ids, experts, out);
  }
  void AddSigmoidGated(Tensor acc, const Tensor& x, const Tensor& gate_logit) override {
    cpu_.AddSigmoidGated(acc, x, gate_logit);
  }
  void GatherRows(const Tensor& x, const std::vector<int32_t>& rows, Tensor out) override {
    cpu_.GatherRows(x, rows, out);
  }

 private:
  // The model reads one thing per forward pass to the host: its logits [rows, vocab].
  void ApplyScript(const Tensor& src, float* logits) {
    if (src.dtype != DType::kF32 || src.shape.ndim != 2 || src.cols() != vocab_size_) return;
    std::lock_guard<std::mutex> lock(mutex_);
    for (int64_t r = 0; r < src.rows() && next_ < script_.size(); ++r) {
      float* row = logits + r * vocab_size_;
      std::fill(row, row + vocab_size_, 0.0f);
      row[script_[next_++]] = 50.0f;
    }
  }

  CpuBackend cpu_;
  std::atomic<int64_t> forwards_{0};
  std::atomic<int64_t> fail_at_{-1};
  int64_t vocab_size_ = -1;
  mutable std::mutex mutex_;  // guards script_, next_
  std::vector<int32_t> script_;
  size_t next_ = 0;
};

struct Reply {
  int status = 0;  // 0: no answer (the client gave up)
  std::string body;
  Json json() const { return Json::parse(body); }
};

struct SseEvent {
  std::string name;  // the `event:` line, empty without one
  Json data;         // the `data:` line parsed; `data: [DONE]` is left out
};

// The embedded model on a ScriptedBackend behind an HttpServer on a free port, shared by a test suite.
class TestServer {
 public:
  TestServer() {
    ServiceOptions options;
    options.engine.max_slots = 2;
    options.engine.max_context = 1024;
    auto backend = std::make_unique<ScriptedBackend>();
    backend_ = backend.get();
    service_ = std::make_unique<ModelService>(options, std::move(backend));
    backend_->set_vocab_size(service_->config().vocab_size);
    ServerOptions server_options;
    server_options.port = 0;
    server_ = std::make_unique<HttpServer>(*service_, server_options);
    port_ = server_->Bind();
    thread_ = std::thread([this] { server_->Serve(); });
  }
  ~TestServer() {
    server_->Stop();
    thread_.join();
  }

  ScriptedBackend& backend() { return *backend_; }
  ModelService& service() { return *service_; }

  // POST `body`; a client that waits at most `timeout_ms` for the answer (then hangs up: status 0).
  Reply Post(const std::string& path, const Json& body, int timeout_ms = 60000) const {
    return PostRaw(path, DumpJson(body), timeout_ms);
  }
  // The same with the body's bytes as they are (malformed JSON, invalid UTF-8).
  Reply PostRaw(const std::string& path, const std::string& body, int timeout_ms = 60000) const {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(timeout_ms / 1000, (timeout_ms % 1000) * 1000);
    auto result = client.Post(path.c_str(), body, "application/json");
    if (!result) return {};
    return {result->status, result->body};
  }

  static std::vector<SseEvent> Events(const std::string& body) {
    std::vector<SseEvent> events;
    size_t begin = 0;
    while (begin < body.size()) {
      size_t end = body.find("\n\n", begin);
      if (end == std::string::npos) end = body.size();
      SseEvent e;
      bool any = false;
      for (size_t at = begin; at < end;) {
        size_t eol = std::min(body.find('\n', at), end);
        std::string line = body.substr(at, eol - at);
        if (line.rfind("event: ", 0) == 0) e.name = line.substr(7);
        if (line.rfind("data: ", 0) == 0 && line != "data: [DONE]") {
          e.data = Json::parse(line.substr(6));
          any = true;
        }
        at = eol + 1;
      }
      if (any) events.push_back(std::move(e));
      begin = end + 2;
    }
    return events;
  }

 private:
  ScriptedBackend* backend_ = nullptr;
  std::unique_ptr<ModelService> service_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace infernix::testing
