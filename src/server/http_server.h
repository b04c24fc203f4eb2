// The HTTP server: the routes of every API onto one ModelService, API-key checks, body-size limits,
// errors in each API's shape, /health and Prometheus /metrics.
#pragma once

#include <memory>
#include <string>

#include "server/service.h"

namespace httplib {
class Server;
}

namespace infernix {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                    // 0: any free port (Bind returns it)
  std::string api_key;                // empty: no authentication
  size_t max_body_bytes = 16u << 20;  // larger bodies get 413
  size_t http_threads = 0;            // 0: enough for every running and queued request
};

class HttpServer {
 public:
  HttpServer(ModelService& service, ServerOptions options);
  ~HttpServer();
  // Binds the socket; returns the port. Throws Error(kIo) when it cannot.
  int Bind();
  // Serves until Stop(); call after Bind().
  void Serve();
  // Thread-safe.
  void Stop();

 private:
  void RegisterRoutes();
  ModelService& service_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
};

// The Prometheus text exposition of the engine's counters.
std::string MetricsText(const ModelService& service);

}  // namespace infernix
