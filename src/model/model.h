// A loaded decoder-only Qwen model: its config, its weights on a backend, and the forward pass over a
// flattened batch of sequences (prefill chunks and decode tokens together).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/ops.h"
#include "base/file_set.h"
#include "formats/hf_config.h"
#include "formats/safetensors.h"
#include "model/layers.h"

namespace infernix {

// Input of one forward pass. seqs[i] covers tokens [token_begin, token_begin + n_tokens) and starts
// at position pos_begin, which must equal the tokens its slot already holds; slots are distinct.
// logit_rows names the token rows whose logits are returned, in that order.
struct ForwardBatch {
  std::vector<int32_t> tokens;
  std::vector<BatchSeq> seqs;
  std::vector<int32_t> logit_rows;

  // A batch of one sequence.
  static ForwardBatch Single(std::vector<int32_t> tokens, int slot, int64_t pos_begin, bool all_logits);
};

struct ModelWeights {
  Tensor embed;       // [V, H]
  Tensor final_norm;  // [H]
  Tensor lm_head;     // [V, H] (the embedding when tied)
  std::vector<DecoderLayerWeights> layers;
};

class WeightBinder;
class WeightSource;

class Model {
 public:
  // Binds the weights of `weights` (kept for the model's lifetime) onto `backend`.
  Model(ModelConfig config, std::unique_ptr<WeightSource> weights, Backend& backend);
  ~Model();

  const ModelConfig& config() const { return config_; }
  Backend& backend() { return backend_; }
  // State sizes for `max_slots` concurrent sequences of up to `max_context` tokens each, with the KV cache
  // holding keys and values as `kv_type` says.
  StateSpec MakeStateSpec(int max_slots, int64_t max_context, KvCacheType kv_type = KvCacheType::kActivation) const;

  // Runs the batch and appends its tokens to `state`. Returns the logits [logit_rows.size(), vocab_size]
  // (f32) in host memory of the backend that the caller may change, valid until the next Forward (the
  // backend's ReadToHost: no copy on the CPU, a page-locked buffer on the GPU).
  // Errors: kInvalidArgument for a token id outside the vocabulary (naming its index),
  // kOutOfRange when a sequence would exceed the state's max_context.
  std::span<float> Forward(const ForwardBatch& batch, SequenceState& state);
  // The same into `logits` (resized in place; after an error its contents are unspecified).
  void Forward(const ForwardBatch& batch, SequenceState& state, std::vector<float>& logits);
  // Runs the batch as Forward does and returns each logit row's greedy pick over the first `sampleable`
  // ids (Backend::PickGreedy: -1 where the row holds NaN or +inf there, or only -inf), without reading the
  // logits back where the backend picks on the device. Empty when the batch has no logit rows.
  std::vector<int32_t> ForwardGreedy(const ForwardBatch& batch, SequenceState& state, int64_t sampleable);
  // ForwardGreedy in two halves, and with draws (pipelined decode: a decode step can be queued before the
  // one it continues has been read). QueuePick queues the pass and its picks without waiting for them:
  // greedy where `draws` is empty, else one draw per logit row (Backend::QueuePick: greedy, or the sampler's
  // draw at its uniform; -1 as for greedy picks). TakePick waits for the oldest pass queued and not yet taken
  // and returns its picks. With `feed`, the pass's token ids are not batch.tokens (which must still hold one
  // value per token) but the picks of the pass queued last: token i is its pick at row feed[i] (0 where it
  // picked none, -1; the caller drops whatever follows from such a row). Every pass queued must be taken,
  // and ForwardGreedy refuses to run before. A pass without logit rows is refused.
  void QueuePick(const ForwardBatch& batch, SequenceState& state, int64_t sampleable,
                 std::span<const TokenDraw> draws = {}, std::span<const int32_t> feed = {});
  std::vector<int32_t> TakePick();
  // The logits of the last forward pass (Forward, ForwardGreedy or QueuePick), read to host memory as
  // Forward returns them, valid until the next forward pass. The pass must have had logit rows.
  std::span<float> LastLogits();

 private:
  // How a pass's logits are used: read back (Forward), greedy picks, or picks with draws (QueuePick).
  enum class Picks { kNone, kGreedy, kDrawn };
  // The forward pass of Forward, ForwardGreedy and QueuePick: the logits [logit rows, vocab] in the
  // backend's scratch, or nullopt when the batch has no logit rows. draws (with Picks::kDrawn) and feed:
  // QueuePick's.
  std::optional<Tensor> RunForward(const ForwardBatch& batch, SequenceState& state, Picks picks,
                                   std::span<const TokenDraw> draws = {}, std::span<const int32_t> feed = {});
  // Everything about a decode step's batch (one token per sequence) but its ids and positions, hashed;
  // nullopt for other batches. Backend::ReplayForward's `shape`.
  // picks: the pass's picks follow it (and their draws are staged before it), which a backend may record
  // with the step, so such steps are a shape apart from those whose logits are read, and greedy ones from
  // drawn ones. fed: its ids come from the last pick (QueuePick's feed), which the backend queues
  // differently from an upload.
  std::optional<uint64_t> DecodeShape(const ForwardBatch& batch, Picks picks, bool fed) const;

  ModelConfig config_;
  std::unique_ptr<WeightSource> files_;
  Backend& backend_;
  std::unique_ptr<WeightBinder> binder_;
  ModelWeights weights_;
  HostBuffer rope_inv_freq_host_;
  Tensor rope_inv_freq_;
  float rope_attention_scale_ = 1.0f;
  // Where the logits of the decode steps queued so far went, by shape (DecodeShape): a replay of such a step
  // leaves them there again. A shape's passes allocate the same scratch in the same order, so its logits
  // are where they were whichever of its passes the backend replays (the CUDA backend keeps one per staging
  // buffer; it stops replaying when its scratch is rearranged). Kept across other passes; cleared when it
  // holds kMaxReplayShapes, after which a shape is queued in full (and recorded) before it replays again
  // (Backend::ReplayForward's `known`).
  static constexpr size_t kMaxReplayShapes = 64;
  std::unordered_map<uint64_t, Tensor> replay_logits_;
  std::optional<Tensor> last_logits_;  // the last pass's logits (LastLogits), in the backend's scratch
  int64_t picks_queued_ = 0;           // QueuePick passes not yet taken
};

// Loads config.json and the safetensors weights of a model folder (or the embedded model) onto
// `backend`, which must outlive the model.
std::unique_ptr<Model> LoadModel(const FileSet& files, Backend& backend);
// The same with config.json already parsed (LoadModelConfig(files)).
std::unique_ptr<Model> LoadModel(ModelConfig config, const FileSet& files, Backend& backend);

// A model with random weights of the right dtypes and shapes, made up from `config` alone
// (model/dummy_weights.h), for benchmarks: same seed, same weights.
// `linear_dtype`: a block type quantizes the projection weights (see DummyWeightSource).
std::unique_ptr<Model> LoadModelWithDummyWeights(ModelConfig config, Backend& backend, uint64_t seed = 1,
                                                 DType linear_dtype = DType::kBF16);

}  // namespace infernix
