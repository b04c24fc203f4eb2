#include "server/http_util.h"

#include <chrono>
#include <random>

#include "base/error.h"

namespace infernix {

void SendJson(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(DumpJson(body), "application/json");
}

void SendError(httplib::Response& res, ApiStyle style, const ApiError& error) {
  nlohmann::json body = style == ApiStyle::kAnthropic ? AnthropicErrorBody(error) : OpenAiErrorBody(error);
  res.status = error.status();
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

void Guard(ApiStyle style, httplib::Response& res, const std::function<void()>& handler) {
  try {
    handler();
  } catch (const ApiError& e) {
    SendError(res, style, e);
  } catch (const Error& e) {
    ApiErrorKind kind = e.code() == ErrorCode::kInternal ? ApiErrorKind::kInternal : ApiErrorKind::kInvalidRequest;
    SendError(res, style, ApiError(kind, e.what()));
  } catch (const std::exception& e) {
    SendError(res, style, ApiError(ApiErrorKind::kInternal, std::string("internal error: ") + e.what()));
  }
}

ApiStyle StyleOfPath(const std::string& path) {
  return path.rfind("/v1/messages", 0) == 0 ? ApiStyle::kAnthropic : ApiStyle::kOpenAi;
}

bool SseWriter::Raw(const std::string& text) {
  if (failed_) return false;
  if (!sink_.is_writable() || !sink_.write(text.data(), text.size())) failed_ = true;
  return !failed_;
}

bool SseWriter::Data(const Json& payload) { return Raw("data: " + DumpJson(payload) + "\n\n"); }

bool SseWriter::Event(const std::string& name, const Json& payload) {
  return Raw("event: " + name + "\ndata: " + DumpJson(payload) + "\n\n");
}

bool SseWriter::alive() const { return !failed_ && sink_.is_writable(); }

void SendChunked(httplib::Response& res, const std::string& content_type,
                 std::function<bool(httplib::DataSink& sink)> write) {
  if (content_type == "text/event-stream") res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(content_type, [write = std::move(write)](size_t, httplib::DataSink& sink) {
    if (!write(sink)) return false;
    sink.done();
    return true;
  });
}

std::string RandomId(const std::string& prefix) {
  std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += kChars[rng() % (sizeof(kChars) - 1)];
  return id;
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace infernix
