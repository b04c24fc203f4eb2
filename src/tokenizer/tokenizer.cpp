#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <unordered_map>

#include "base/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/piece_cache.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/utf8.h"

namespace infernix {

struct Tokenizer::State {
  std::string source;
  Normalizer normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Bpe> bpe;
  std::vector<AddedToken> added_tokens;
  std::unordered_map<std::string_view, int32_t> added_by_content;  // views into added_tokens
  AddedTokenMatcher raw_matcher;         // added tokens with normalized == false, in the raw text
  AddedTokenMatcher normalized_matcher;  // the others, by their normalized content, in normalized text
  int32_t vocab_size = 0;
  std::vector<int32_t> added_index;  // id -> index into added_tokens, or -1
  std::vector<uint8_t> special;      // id -> 1 when Decode(skip_special) drops it
  std::string token_bytes;           // TokenBytes of every id, concatenated
  std::vector<uint32_t> token_bytes_end;  // id -> end of its bytes in token_bytes
  SpecialTokens special_tokens;
  mutable PieceCache cache;  // the only state Encode changes; thread-safe itself
};

Tokenizer::Tokenizer(std::unique_ptr<State> state) : state_(std::move(state)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::Load(const FileSet& files) { return Create(ReadTokenizerSpec(files)); }

std::unique_ptr<Tokenizer> Tokenizer::Create(TokenizerSpec spec) {
  auto s = std::make_unique<State>();
  s->source = spec.source;
  s->normalizer = Normalizer(spec.normalizer);
  s->pre_tokenizer = std::make_unique<PreTokenizer>(spec.split_patterns, spec.source);
  s->bpe = std::make_unique<Bpe>(std::move(spec.vocab), spec.merges, spec.bpe, spec.source);
  Bpe::Merges().swap(spec.merges);

  s->added_tokens = std::move(spec.added_tokens);
  s->vocab_size = s->bpe->id_limit();
  for (const AddedToken& token : s->added_tokens) {
    if (token.id < 0) {
      ThrowError(ErrorCode::kInvalidFormat, "{}: added_tokens: '{}' has negative id {}", s->source, token.content,
                 token.id);
    }
    if (utf8::FindInvalid(token.content) != utf8::kValid) {
      ThrowError(ErrorCode::kInvalidFormat, "{}: added_tokens: the content of id {} is not valid UTF-8", s->source,
                 token.id);
    }
    s->vocab_size = std::max(s->vocab_size, token.id + 1);
  }
  s->added_index.assign(s->vocab_size, -1);
  s->special.assign(s->vocab_size, 0);
  for (size_t i = 0; i < s->added_tokens.size(); ++i) {
    const AddedToken& token = s->added_tokens[i];
    if (s->added_index[token.id] >= 0) {
      ThrowError(ErrorCode::kInvalidFormat, "{}: added_tokens: '{}' and '{}' both have id {}", s->source,
                 s->added_tokens[s->added_index[token.id]].content, token.content, token.id);
    }
    s->added_index[token.id] = static_cast<int32_t>(i);
    s->added_by_content.emplace(token.content, token.id);
    if (token.special) {
      // Hugging Face skips by content: a vocabulary token spelled like a special token goes too.
      s->special[token.id] = 1;
      if (const std::optional<int32_t> id = s->bpe->TokenToId(token.content)) s->special[*id] = 1;
    }
  }
  // Special tokens first, then the others, each in file order (the order of Hugging Face's tries).
  std::string buffer;
  for (const bool special : {true, false}) {
    for (const AddedToken& token : s->added_tokens) {
      if (token.special != special || (special && spec.split_special_tokens)) continue;
      if (token.normalized) {
        s->normalized_matcher.Add(s->normalizer.Apply(token.content, &buffer), token);
      } else {
        s->raw_matcher.Add(token.content, token);
      }
    }
  }

  s->token_bytes_end.resize(s->vocab_size);
  auto tokenizer = std::unique_ptr<Tokenizer>(new Tokenizer(std::move(s)));
  State& st = *tokenizer->state_;
  for (int32_t id = 0; id < st.vocab_size; ++id) {
    const std::string_view token = tokenizer->IdToToken(id);
    if (utf8::FindInvalid(token) == utf8::kValid) {
      byte_level::DecodeToken(token, &st.token_bytes);
    } else {
      st.token_bytes.append(token);
    }
    st.token_bytes_end[id] = static_cast<uint32_t>(st.token_bytes.size());
  }
  st.special_tokens = std::move(spec.special_tokens);
  SpecialTokens& named = st.special_tokens;
  auto resolve = [&](const std::optional<std::string>& text) {
    return text ? tokenizer->TokenToId(*text) : std::nullopt;
  };
  named.bos_id = resolve(named.bos_token);
  named.eos_id = resolve(named.eos_token);
  named.pad_id = resolve(named.pad_token);
  named.unk_id = resolve(named.unk_token);
  return tokenizer;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text) const {
  if (const size_t bad = utf8::FindInvalid(text); bad != utf8::kValid) {
    ThrowError(ErrorCode::kInvalidArgument, "text to encode is not valid UTF-8: byte 0x{:02X} at offset {}",
               static_cast<unsigned char>(text[bad]), bad);
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  EncodeText(text, &ids);
  return ids;
}

void Tokenizer::EncodeText(std::string_view text, std::vector<int32_t>* ids) const {
  const State& s = *state_;
  std::vector<AddedTokenMatcher::Segment> raw, normalized;
  std::vector<std::string_view> pieces;
  std::string buffer;
  s.raw_matcher.Split(text, &raw);
  for (const AddedTokenMatcher::Segment& segment : raw) {
    if (segment.id >= 0) {
      ids->push_back(segment.id);
      continue;
    }
    normalized.clear();
    s.normalized_matcher.Split(s.normalizer.Apply(segment.text, &buffer), &normalized);
    for (const AddedTokenMatcher::Segment& part : normalized) {
      if (part.id >= 0) {
        ids->push_back(part.id);
        continue;
      }
      pieces.clear();
      s.pre_tokenizer->Split(part.text, &pieces);
      for (std::string_view piece : pieces) EncodePiece(piece, ids);
    }
  }
}

void Tokenizer::EncodePiece(std::string_view piece, std::vector<int32_t>* ids) const {
  const State& s = *state_;
  if (s.cache.Lookup(piece, ids)) return;
  const size_t mark = ids->size();
  std::string spelled;
  spelled.reserve(piece.size() * 2);
  byte_level::Encode(piece, &spelled);
  s.bpe->Encode(spelled, ids);
  s.cache.Insert(piece, std::span<const int32_t>(ids->data() + mark, ids->size() - mark));
}

std::string_view Tokenizer::TokenBytes(int32_t id) const {
  const State& s = *state_;
  if (id < 0 || id >= s.vocab_size) {
    ThrowError(ErrorCode::kOutOfRange, "token id {} is outside the vocabulary [0, {})", id, s.vocab_size);
  }
  const uint32_t begin = id == 0 ? 0 : s.token_bytes_end[id - 1];
  return std::string_view(s.token_bytes).substr(begin, s.token_bytes_end[id] - begin);
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  const State& s = *state_;
  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= s.vocab_size) {
      ThrowError(ErrorCode::kOutOfRange, "token id {} (at index {}) is outside the vocabulary [0, {})", id, i,
                 s.vocab_size);
    }
    if (skip_special && s.special[id]) continue;
    bytes.append(TokenBytes(id));
  }
  if (utf8::FindInvalid(bytes) == utf8::kValid) return bytes;
  std::string text;
  utf8::AppendLossy(bytes, /*final=*/true, &text);
  return text;
}

int32_t Tokenizer::vocab_size() const { return state_->vocab_size; }

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  const auto it = state_->added_by_content.find(token);
  if (it != state_->added_by_content.end()) return it->second;
  return state_->bpe->TokenToId(token);
}

std::string_view Tokenizer::IdToToken(int32_t id) const {
  const State& s = *state_;
  if (id < 0 || id >= s.vocab_size) return {};
  if (s.added_index[id] >= 0) return s.added_tokens[s.added_index[id]].content;
  return s.bpe->IdToToken(id);
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && id < state_->vocab_size && state_->special[id] != 0;
}

const SpecialTokens& Tokenizer::special_tokens() const { return state_->special_tokens; }

void Tokenizer::ClearCache() const { state_->cache.Clear(); }

}  // namespace infernix
