#include "server/grammar_cache.h"

namespace infernix {

std::shared_ptr<grammar::TokenGrammar> GrammarCache::Find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  Evict();  // masks grew since the last look
  return it->second->second;
}

std::shared_ptr<grammar::TokenGrammar> GrammarCache::Insert(const std::string& key,
                                                            std::shared_ptr<grammar::TokenGrammar> value) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(key);
  if (it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  lru_.emplace_front(key, std::move(value));
  index_.emplace(key, lru_.begin());
  Evict();
  return lru_.front().second;
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lru_.size();
}

void GrammarCache::Evict() {
  size_t bytes = 0;
  for (const Entry& e : lru_) bytes += e.second->memory_bytes();
  while (lru_.size() > 1 && (lru_.size() > max_entries_ || bytes > max_bytes_)) {
    bytes -= lru_.back().second->memory_bytes();
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

}  // namespace infernix
