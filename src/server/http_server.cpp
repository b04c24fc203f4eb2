#include "server/http_server.h"

#include <httplib.h>

#include "base/error.h"
#include "server/anthropic/anthropic_routes.h"
#include "server/http_util.h"
#include "server/openai/openai_routes.h"

namespace infernix {

HttpServer::HttpServer(ModelService& service, ServerOptions options)
    : service_(service), options_(std::move(options)), server_(std::make_unique<httplib::Server>()) {
  size_t threads = options_.http_threads;
  if (threads == 0) {  // a streaming request holds its worker thread until it ends
    const EngineOptions& e = service_.engine().options();
    threads = static_cast<size_t>(e.max_slots) + e.max_queue + 8;
  }
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_payload_max_length(options_.max_body_bytes);
  server_->set_read_timeout(60, 0);
  server_->set_write_timeout(60, 0);
  RegisterRoutes();
}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::Bind() {
  if (options_.port == 0) {
    int port = server_->bind_to_any_port(options_.host);
    if (port < 0) ThrowError(ErrorCode::kIo, "cannot listen on {} (any port)", options_.host);
    return port;
  }
  if (!server_->bind_to_port(options_.host, options_.port))
    ThrowError(ErrorCode::kIo, "cannot listen on {}:{} (in use, or not an address of this machine)", options_.host,
               options_.port);
  return options_.port;
}

void HttpServer::Serve() { server_->listen_after_bind(); }

void HttpServer::Stop() {
  if (server_ && server_->is_running()) server_->stop();
}

void HttpServer::RegisterRoutes() {
  httplib::Server& s = *server_;
  const std::string key = options_.api_key;
  s.set_pre_routing_handler([key](const httplib::Request& req, httplib::Response& res) {
    if (key.empty() || req.path == "/health" || req.path == "/metrics") return httplib::Server::HandlerResponse::Unhandled;
    std::string auth = req.get_header_value("Authorization");
    std::string given = auth.rfind("Bearer ", 0) == 0 ? auth.substr(7) : req.get_header_value("x-api-key");
    if (given == key) return httplib::Server::HandlerResponse::Unhandled;
    SendError(res, StyleOfPath(req.path),
              ApiError(ApiErrorKind::kAuthentication,
                       given.empty() ? "missing API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'"
                                     : "invalid API key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors httplib produces itself (unknown route, body too large, malformed request) get an API body.
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiStyle style = StyleOfPath(req.path);
    int status = res.status;
    if (status == 404) {
      SendError(res, style, ApiError(ApiErrorKind::kNotFound, "no route for " + req.method + " " + req.path));
    } else if (status == 413) {
      SendError(res, style, ApiError(ApiErrorKind::kTooLarge, "the request body is larger than this server accepts"));
    } else if (status >= 400 && status < 500) {
      SendError(res, style, ApiError(ApiErrorKind::kInvalidRequest, "malformed HTTP request"));
    }
    res.status = status;
  });
  s.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    SendError(res, StyleOfPath(req.path), ApiError(ApiErrorKind::kInternal, "internal error: " + what));
  });

  ModelService& svc = service_;
  auto route = [&svc](ApiStyle style, void (*handler)(ModelService&, const httplib::Request&, httplib::Response&)) {
    return [&svc, style, handler](const httplib::Request& req, httplib::Response& res) {
      Guard(style, res, [&] { handler(svc, req, res); });
    };
  };
  s.Get("/health", [&svc](const httplib::Request&, httplib::Response& res) {
    EngineStats st = svc.engine().Stats();
    SendJson(res, 200, {{"status", "ok"}, {"model", svc.model_id()}, {"running", st.running}, {"waiting", st.waiting}});
  });
  s.Get("/metrics", [&svc](const httplib::Request&, httplib::Response& res) {
    res.set_content(MetricsText(svc), "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", route(ApiStyle::kOpenAi, HandleModels));
  s.Post("/v1/chat/completions", route(ApiStyle::kOpenAi, HandleChatCompletions));
  s.Post("/v1/completions", route(ApiStyle::kOpenAi, HandleCompletions));
  s.Post("/v1/responses", route(ApiStyle::kOpenAi, HandleResponses));
  s.Post("/v1/messages", route(ApiStyle::kAnthropic, HandleMessages));
  s.Post("/v1/messages/count_tokens", route(ApiStyle::kAnthropic, HandleCountTokens));
}

void HandleModels(ModelService& service, const httplib::Request&, httplib::Response& res) {
  Json data = Json::array();
  for (const auto& name : service.names())
    data.push_back({{"id", name}, {"object", "model"}, {"created", service.created_unix()}, {"owned_by", "infernix"},
                    {"max_model_len", service.engine().options().max_context}});
  SendJson(res, 200, {{"object", "list"}, {"data", data}});
}

std::string MetricsText(const ModelService& service) {
  EngineStats s = service.engine().Stats();
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, double value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
  };
  metric("infernix_requests_total", "counter", "Requests accepted by the engine.",
         static_cast<double>(s.requests_accepted));
  metric("infernix_requests_rejected_total", "counter", "Requests refused (queue full, too long, invalid).",
         static_cast<double>(s.requests_rejected));
  metric("infernix_requests_finished_total", "counter", "Requests finished, whatever the reason.",
         static_cast<double>(s.requests_finished));
  metric("infernix_requests_cancelled_total", "counter", "Requests cancelled or abandoned by their client.",
         static_cast<double>(s.requests_cancelled));
  metric("infernix_prompt_tokens_total", "counter", "Prompt tokens processed.", static_cast<double>(s.prompt_tokens));
  metric("infernix_generation_tokens_total", "counter", "Tokens generated.", static_cast<double>(s.generated_tokens));
  metric("infernix_time_to_first_token_seconds_sum", "counter", "Sum of times from submission to the first token.",
         s.time_to_first_token_seconds_sum);
  metric("infernix_time_to_first_token_seconds_count", "counter", "Requests that produced a first token.",
         static_cast<double>(s.time_to_first_token_count));
  metric("infernix_engine_steps_total", "counter", "Forward steps run.", static_cast<double>(s.steps));
  metric("infernix_engine_step_seconds_sum", "counter", "Time spent in forward steps.", s.step_seconds_sum);
  metric("infernix_generation_tokens_per_second", "gauge", "Generated tokens per second of engine step time.",
         s.step_seconds_sum > 0 ? static_cast<double>(s.generated_tokens) / s.step_seconds_sum : 0.0);
  metric("infernix_queue_length", "gauge", "Requests waiting for a slot.", static_cast<double>(s.waiting));
  metric("infernix_running_requests", "gauge", "Requests holding a slot.", static_cast<double>(s.running));
  return out;
}

}  // namespace infernix
