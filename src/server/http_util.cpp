#include "server/http_util.h"

#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
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
    // httplib calls this outside the handler's exception handling: an exception escaping here would
    // end the process. Writers report their own errors in the stream; anything else cuts it.
    bool ok = false;
    try {
      ok = write(sink);
    } catch (const std::exception&) {
      ok = false;
    }
    if (!ok) return false;
    sink.done();
    return true;
  });
}

namespace {

// Whether a socket address is `ip` (as httplib writes it: getnameinfo, numeric) and `port`.
bool SameEndpoint(const sockaddr_storage& addr, socklen_t size, const std::string& ip, int port) {
  int addr_port = -1;
  if (addr.ss_family == AF_INET) addr_port = ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  if (addr.ss_family == AF_INET6) addr_port = ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  if (addr_port != port) return false;
  char host[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), size, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0)
    return false;
  return ip == host;
}

}  // namespace

ConnectionWatch::ConnectionWatch(const httplib::Request& req) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    sockaddr_storage peer{}, local{};
    socklen_t peer_size = sizeof(peer), local_size = sizeof(local);
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0) continue;
    if (!SameEndpoint(peer, peer_size, req.remote_addr, req.remote_port)) continue;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &local_size) != 0) continue;
    if (req.local_port >= 0 && !SameEndpoint(local, local_size, req.local_addr, req.local_port)) continue;
    fd_ = static_cast<int>(fd);
    break;
  }
  closedir(dir);
}

bool ConnectionWatch::alive() const {
  if (fd_ < 0) return true;
  char byte;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return true;    // more bytes from the client (a pipelined request): still there
  if (n == 0) return false;  // the client closed the connection
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

void SendClientGone(httplib::Response& res) {
  res.status = 499;
  res.set_content("client closed request", "text/plain");
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
