// Helpers shared by the API handlers: JSON responses, errors in each API's shape, server-sent events,
// and the wrapper that turns every exception of a handler into a proper error response.
#pragma once

#include <functional>
#include <string>

#include <httplib.h>

#include "server/api_error.h"
#include "server/json_reader.h"

namespace infernix {

enum class ApiStyle { kOpenAi, kAnthropic };

void SendJson(httplib::Response& res, int status, const Json& body);
void SendError(httplib::Response& res, ApiStyle style, const ApiError& error);
// Runs `handler`, answering any ApiError / infernix::Error / other exception in `style`'s shape.
void Guard(ApiStyle style, httplib::Response& res, const std::function<void()>& handler);
// The ApiStyle of a request path (/v1/messages... -> Anthropic).
ApiStyle StyleOfPath(const std::string& path);

// Writes to a chunked response. Every write reports whether the client is still there; once a
// write fails the writer stays failed.
class SseWriter {
 public:
  explicit SseWriter(httplib::DataSink& sink) : sink_(sink) {}
  bool Data(const Json& payload);                            // data: {...}\n\n
  bool Event(const std::string& name, const Json& payload);  // event: name\ndata: {...}\n\n
  bool Raw(const std::string& text);
  bool alive() const;

 private:
  httplib::DataSink& sink_;
  bool failed_ = false;
};

// Answers with a chunked body produced by `write` on the server's worker thread once headers are
// sent; `write` returns false when the client went away (the connection is then dropped).
void SendChunked(httplib::Response& res, const std::string& content_type,
                 std::function<bool(httplib::DataSink& sink)> write);

// A unique id with a prefix: prefix + 24 random alphanumerics.
std::string RandomId(const std::string& prefix);
int64_t UnixNow();

}  // namespace infernix
