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
// sent; `write` returns false when the client went away (the connection is then dropped). An exception
// out of `write` drops the connection too (the status is long sent; `write` should report errors in
// the stream itself).
void SendChunked(httplib::Response& res, const std::string& content_type,
                 std::function<bool(httplib::DataSink& sink)> write);

// Whether the client of a request is still connected, for a handler that answers only once its work is
// done (a non-streaming generation: its status depends on how the work ends, so nothing may be sent
// before) and must stop that work when the client leaves. httplib 0.11 shows a handler neither its
// socket nor the connection's state, so the socket is found once among the process's descriptors
// (/proc/self/fd) by the request's local and peer address and port; alive() then peeks at it without
// blocking: false once the peer has closed the connection or it failed. When the socket cannot be
// found, alive() is always true. Use on the handler's thread, while the handler runs (the socket is
// the request's until then).
class ConnectionWatch {
 public:
  explicit ConnectionWatch(const httplib::Request& req);
  bool alive() const;

 private:
  int fd_ = -1;
};

// The answer to a client that went away before its non-streaming answer was ready (nobody reads it):
// 499, nginx's "client closed request".
void SendClientGone(httplib::Response& res);

// A unique id with a prefix: prefix + 24 random alphanumerics.
std::string RandomId(const std::string& prefix);
int64_t UnixNow();

}  // namespace infernix
