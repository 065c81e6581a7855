// server/http_server.cpp — see http_server.h.
#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <ctime>
#include <map>
#include <mutex>
#include <thread>
#include <variant>

#include "chat/output_parser.h"
#include "launch/agents.h"
#include "sample/sampler.h"
#include "server/api_adapter.h"
#include "server/json_fields.h"
#include "server/metrics.h"
#include "server/peer_watch.h"

namespace helium::server {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

// What the request log line says about one request.
struct RequestLog {
  std::string method, path, api;
  int status = 0;
  bool stream = false;
  int prompt_tokens = -1, cached_tokens = -1, generated_tokens = -1;
  double first_token_ms = -1;  // from submission: includes waiting in the queue
  double prefill_ms = -1;      // the engine's prefill (to the first token's logits)
  std::string finish_reason;
  std::string error;
  Clock::time_point start = Clock::now();
};

// How often a reply answered in one piece looks whether its client is still connected (PeerWatch).
constexpr std::chrono::milliseconds kPeerCheckInterval{100};

// Routes under /v1/messages answer in Anthropic's error shape; the rest in OpenAI's.
ApiFlavor flavor_for_path(const std::string& path) {
  return path.rfind("/v1/messages", 0) == 0 ? ApiFlavor::kAnthropic : ApiFlavor::kOpenAI;
}

std::string finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kStopSequence: return "stop_sequence";
    case FinishReason::kLength: return "length";
    case FinishReason::kToolCalls: return "tool_calls";
    case FinishReason::kCancelled: return "cancelled";
  }
  return "stop";
}

// The stop string that ended the output, if one did: the engine cuts the text before it, so it starts
// where the text ends in the decoded tokens.
std::optional<std::string> matched_stop_string(const GenerationResult& result, const std::vector<std::string>& stops,
                                               const Tokenizer& tokenizer) {
  if (stops.empty() || result.finish_reason != "stop") return std::nullopt;
  const std::string full = tokenizer.decode(result.tokens);
  if (full.size() <= result.text.size() || full.compare(0, result.text.size(), result.text) != 0) return std::nullopt;
  const std::string_view rest = std::string_view(full).substr(result.text.size());
  std::optional<std::string> best;
  for (const std::string& s : stops)
    if (rest.substr(0, s.size()) == s && (!best || s.size() > best->size())) best = s;
  return best;
}

// httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into Debian's library): a
// burst of new connections while the accept thread is busy overflows it, and the kernel resets the
// overflow. listen() on a listening socket sets a new backlog, which this subclass can reach.
class ListeningServer final : public httplib::Server {
 public:
  void raise_backlog(int backlog) {
    if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, backlog);
  }
};

}  // namespace

struct HttpServer::Impl {
  Impl(ServedModel m, GenerationQueue& q, ServerOptions o)
      : model(std::move(m)), queue(q), options(std::move(o)), renderer(model) {}

  // One streamed response: pulls the generation's text from its channel on the HTTP thread, runs it
  // through the output parser and the API's stream writer, and writes the events.
  struct StreamSession {
    Impl* server = nullptr;
    std::shared_ptr<ParsedRequest> request;
    ResponseContext context;
    std::unique_ptr<StreamWriter> writer;
    std::unique_ptr<OutputParser> parser;  // null for raw completions
    std::shared_ptr<GenerationChannel> channel;
    RequestId id = 0;
    RequestLog log;
    bool started = false;
    bool finished = false;

    bool pump(httplib::DataSink& sink);
    void release();
  };

  // Request handling.
  bool authorized(const httplib::Request& req) const;
  void send_error(httplib::Response& res, ApiFlavor flavor, const ApiError& error, RequestLog& log) const;
  void send_json(httplib::Response& res, const Json& body) const;
  void write_log(const RequestLog& log);
  void handle_generation(const ApiAdapter& api, const httplib::Request& req, httplib::Response& res, RequestLog& log);
  // How many tokens the request may generate, or why it cannot run in the context.
  std::variant<int64_t, ApiError> token_budget(const ParsedRequest& request, size_t prompt_tokens) const;
  SamplingParams sampling_for(const GenerationSettings& settings) const;
  Completion make_completion(const GenerationResult& result, ParsedMessage message, const ParsedRequest& request) const;
  ApiError refusal_error(const std::string& message) const;
  Json models_body(const httplib::Request& req) const;
  Json health_body() const;

  void track(RequestId id, const std::shared_ptr<GenerationChannel>& channel);
  void untrack(RequestId id);

  ServedModel model;
  GenerationQueue& queue;
  ServerOptions options;
  PromptRenderer renderer;
  ListeningServer http;
  std::unique_ptr<ApiAdapter> chat = make_openai_chat_adapter();
  std::unique_ptr<ApiAdapter> completions = make_openai_completions_adapter();
  std::unique_ptr<ApiAdapter> responses = make_openai_responses_adapter();
  std::unique_ptr<ApiAdapter> messages = make_anthropic_messages_adapter();
  std::unique_ptr<ApiAdapter> count_tokens = make_anthropic_count_tokens_adapter();

  std::atomic<bool> stopping{false};
  std::atomic<bool> listening{false};  // run() is in (or entering) the listener
  std::mutex inflight_mutex;
  std::map<RequestId, std::weak_ptr<GenerationChannel>> inflight;
  std::mutex log_mutex;
  HttpCounters counters;
  int bound_port = -1;
};

bool HttpServer::Impl::authorized(const httplib::Request& req) const {
  if (options.api_key.empty()) return true;
  const std::string bearer = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (bearer.size() > prefix.size() && bearer.compare(0, prefix.size(), prefix) == 0 &&
      bearer.substr(prefix.size()) == options.api_key)
    return true;
  return req.has_header("x-api-key") && req.get_header_value("x-api-key") == options.api_key;
}

void HttpServer::Impl::send_json(httplib::Response& res, const Json& body) const {
  res.set_content(dump_json(body), "application/json");
}

void HttpServer::Impl::send_error(httplib::Response& res, ApiFlavor flavor, const ApiError& error, RequestLog& log) const {
  res.status = error.http_status();
  send_json(res, error.body(flavor));
  if (error.kind == ErrorKind::kQueueFull || error.kind == ErrorKind::kUnavailable) res.set_header("Retry-After", "1");
  log.error = error.message;
}

void HttpServer::Impl::write_log(const RequestLog& log) {
  counters.count(log.status);
  if (!options.log) return;
  Json line = {{"time", utc_timestamp()}, {"method", log.method}, {"path", log.path}, {"status", log.status}};
  if (!log.api.empty()) {
    line["api"] = log.api;
    line["stream"] = log.stream;
  }
  if (log.prompt_tokens >= 0) line["prompt_tokens"] = log.prompt_tokens;
  if (log.cached_tokens >= 0) line["cached_tokens"] = log.cached_tokens;
  if (log.generated_tokens >= 0) line["generated_tokens"] = log.generated_tokens;
  if (log.first_token_ms >= 0) line["first_token_ms"] = std::round(log.first_token_ms * 10) / 10;
  if (log.prefill_ms >= 0) line["prefill_ms"] = std::round(log.prefill_ms * 10) / 10;
  line["ms"] = std::round(ms_since(log.start) * 10) / 10;
  if (!log.finish_reason.empty()) line["finish_reason"] = log.finish_reason;
  if (!log.error.empty()) line["error"] = log.error;
  const std::string text = dump_json(line) + "\n";
  std::lock_guard lock(log_mutex);
  std::fwrite(text.data(), 1, text.size(), options.log);
  std::fflush(options.log);
}

void HttpServer::Impl::track(RequestId id, const std::shared_ptr<GenerationChannel>& channel) {
  std::lock_guard lock(inflight_mutex);
  inflight[id] = channel;
}

void HttpServer::Impl::untrack(RequestId id) {
  std::lock_guard lock(inflight_mutex);
  inflight.erase(id);
}

// The scheduler refuses with a message only; its wording tells the cause.
ApiError HttpServer::Impl::refusal_error(const std::string& message) const {
  if (message.find("shutting down") != std::string::npos) return {ErrorKind::kUnavailable, message, {}};
  if (message.find("context") != std::string::npos) return ApiError::invalid_request(message, "context_length_exceeded");
  return {ErrorKind::kQueueFull, message, {}};
}

std::variant<int64_t, ApiError> HttpServer::Impl::token_budget(const ParsedRequest& request, size_t prompt_size) const {
  const int64_t context = model.context;
  const int64_t prompt = static_cast<int64_t>(prompt_size);
  const int64_t room = context - prompt;
  if (room < 1)
    return ApiError::invalid_request("the prompt has " + std::to_string(prompt) + " tokens, but the context holds " +
                                         std::to_string(context) + " tokens (room for at least one generated token is needed)",
                                     "context_length_exceeded");
  if (request.settings.max_tokens) {
    const int64_t wanted = *request.settings.max_tokens;
    if (wanted <= room || options.clamp_max_tokens) return std::min(wanted, room);
    return ApiError::invalid_request("the prompt (" + std::to_string(prompt) + " tokens) plus the requested maximum of " +
                                         std::to_string(wanted) + " output tokens exceeds the context of " +
                                         std::to_string(context) + " tokens: at most " + std::to_string(room) +
                                         " output tokens fit (a larger --ctx-size, or `helium serve "
                                         "--clamp-max-tokens` to generate up to the end of the context instead)",
                                     "context_length_exceeded");
  }
  return std::min(request.default_max_tokens.value_or(options.default_max_tokens), room);
}

SamplingParams HttpServer::Impl::sampling_for(const GenerationSettings& s) const {
  // Settings the request leaves out come from the model's generation_config.json, then OpenAI's defaults.
  const GenerationConfig& g = model.generation;
  SamplingParams p;
  const float model_temperature = g.do_sample == false ? 0.0f : g.temperature.value_or(1.0f);
  p.temperature = s.temperature.value_or(model_temperature);
  p.top_p = s.top_p.value_or(g.top_p.value_or(1.0f));
  p.top_k = s.top_k.value_or(g.top_k.value_or(0));
  p.min_p = s.min_p.value_or(g.min_p.value_or(0.0f));
  p.repetition_penalty = s.repetition_penalty.value_or(g.repetition_penalty.value_or(1.0f));
  p.presence_penalty = s.presence_penalty.value_or(0.0f);
  p.frequency_penalty = s.frequency_penalty.value_or(0.0f);
  p.logit_bias = s.logit_bias;
  p.seed = s.seed ? *s.seed : random_seed();
  return p;
}

Completion HttpServer::Impl::make_completion(const GenerationResult& result, ParsedMessage message,
                                             const ParsedRequest& request) const {
  Completion c;
  c.prompt_tokens = result.prompt_tokens;
  c.cached_tokens = result.cached_tokens;
  c.completion_tokens = static_cast<int>(result.tokens.size());
  c.message = std::move(message);
  if (!c.message.reasoning.empty())
    c.reasoning_tokens = std::min<int>(c.completion_tokens,
                                       static_cast<int>(model.tokenizer->encode(c.message.reasoning, false).size()));
  if (result.finish_reason == "length") {
    c.reason = FinishReason::kLength;
  } else if (result.finish_reason == "cancelled") {
    c.reason = FinishReason::kCancelled;
  } else if (!c.message.tool_calls.empty()) {
    c.reason = FinishReason::kToolCalls;
  } else if (auto stop = matched_stop_string(result, request.settings.stop, *model.tokenizer)) {
    c.reason = FinishReason::kStopSequence;
    c.stop_sequence = *stop;
  } else {
    c.reason = FinishReason::kStop;
  }
  return c;
}

void HttpServer::Impl::handle_generation(const ApiAdapter& api, const httplib::Request& req, httplib::Response& res,
                                         RequestLog& log) {
  log.api = std::string(api.name());
  const ApiFlavor flavor = api.flavor();
  Result<Json> body = parse_request_json(req.body);
  if (!body.is_ok()) return send_error(res, flavor, ApiError::invalid_request(body.error_message()), log);
  ParseContext parse_context;
  parse_context.vocab_size = model.tokenizer->vocab_size();
  Result<ParsedRequest> parsed = api.parse(body.value(), parse_context);
  if (!parsed.is_ok()) return send_error(res, flavor, ApiError::invalid_request(parsed.error_message()), log);
  auto request = std::make_shared<ParsedRequest>(std::move(parsed).value());
  log.stream = request->stream;

  const uint64_t response_seed = random_seed();
  std::vector<int32_t> prompt;
  std::optional<OutputParserOptions> parser_options;
  if (request->kind == RequestKind::kCompletion) {
    if (request->prompt_is_tokens) {
      prompt = request->prompt_tokens;
      if (request->echo) request->prompt_text = model.tokenizer->decode(prompt);
    } else {
      prompt = model.tokenizer->encode(request->prompt_text, /*add_special_tokens=*/true);
    }
  } else {
    Result<RenderedPrompt> rendered = renderer.render(request->conversation, options.template_time);
    if (!rendered.is_ok()) return send_error(res, flavor, ApiError::invalid_request(rendered.error_message()), log);
    prompt = std::move(rendered->tokens);
    parser_options = std::move(rendered->parser);
    parser_options->tool_call_id_prefix = request->tool_call_id_prefix;
    parser_options->tool_call_id_seed = response_seed;
  }
  log.prompt_tokens = static_cast<int>(prompt.size());
  if (request->kind == RequestKind::kCountTokens) {
    send_json(res, {{"input_tokens", prompt.size()}});
    return;
  }
  if (prompt.empty()) return send_error(res, flavor, ApiError::invalid_request("the prompt is empty"), log);

  ResponseContext context;
  context.model = model.id;
  context.created_unix = static_cast<int64_t>(std::time(nullptr));
  context.id_seed = response_seed;
  context.prompt_tokens = static_cast<int>(prompt.size());
  context.request = request.get();

  const std::variant<int64_t, ApiError> budget = token_budget(*request, prompt.size());
  if (const ApiError* budget_error = std::get_if<ApiError>(&budget)) {
    // Codex learns about a full context only from an in-stream response.failed with code
    // context_length_exceeded (it then compacts the conversation); a plain 400 would end its turn.
    if (request->stream && &api == responses.get()) {
      std::unique_ptr<StreamWriter> writer = api.make_stream_writer(context);
      std::string events = writer->start();
      events += writer->fail(*budget_error);
      res.set_content(events, "text/event-stream");
      log.error = budget_error->message;
      return;
    }
    return send_error(res, flavor, *budget_error, log);
  }

  GenerationRequest generation;
  generation.prompt = std::move(prompt);
  generation.max_new_tokens = static_cast<int>(std::get<int64_t>(budget));
  generation.sampling = sampling_for(request->settings);
  generation.stop_strings = request->settings.stop;
  if (std::string bad = validate_sampling(generation.sampling, model.tokenizer->vocab_size()); !bad.empty())
    return send_error(res, flavor, ApiError::invalid_request(bad), log);

  std::unique_ptr<OutputParser> parser;
  if (parser_options) {
    Result<std::unique_ptr<OutputParser>> made = OutputParser::create(*parser_options);
    if (!made.is_ok()) return send_error(res, flavor, ApiError::internal(made.error_message()), log);
    parser = std::move(made).value();
  }

  auto channel = std::make_shared<GenerationChannel>();
  Result<RequestId> id = queue.submit(
      std::move(generation), [channel](int32_t token, std::string_view text) { return channel->push_token(token, text); },
      [channel](Result<GenerationResult> result) { channel->push_done(std::move(result)); });
  if (!id.is_ok()) return send_error(res, flavor, refusal_error(id.error_message()), log);
  track(id.value(), channel);
  if (stopping) {  // stop() may have swept the in-flight set just before this request joined it
    channel->cancel();
    queue.cancel(id.value());
  }

  if (request->stream) {
    auto session = std::make_shared<StreamSession>();
    session->server = this;
    session->request = request;
    session->context = context;
    session->writer = api.make_stream_writer(context);
    session->parser = std::move(parser);
    session->channel = channel;
    session->id = id.value();
    session->log = log;
    log.status = -1;  // the session writes the log line when the stream ends
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream", [session](size_t, httplib::DataSink& sink) { return session->pump(sink); },
        [session](bool) { session->release(); });
    return;
  }

  // Answered in one piece: nothing is written until the end, so the connection itself is watched, and a
  // client that went away stops its generation as a streamed one does (its reply goes nowhere).
  std::optional<PeerWatch> peer;  // found once a wait runs out: a reply that comes sooner never looks
  bool client_closed = false;
  std::optional<Result<GenerationResult>> done;
  while (!(done = channel->wait_done_for(kPeerCheckInterval))) {
    if (!peer) peer.emplace(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
    if (!client_closed && peer->closed()) {
      client_closed = true;
      channel->cancel();
      queue.cancel(id.value());
    }
  }
  Result<GenerationResult> result = std::move(*done);
  untrack(id.value());
  log.first_token_ms = channel->first_token_ms();
  if (!result.is_ok()) return send_error(res, flavor, ApiError::internal("generation failed: " + result.error_message()), log);
  log.cached_tokens = result->cached_tokens;
  log.generated_tokens = static_cast<int>(result->tokens.size());
  log.prefill_ms = result->prefill_seconds * 1000;
  log.finish_reason = result->finish_reason;
  if (client_closed) {  // no one to answer: the log line says so (499, nginx's "client closed request")
    log.finish_reason = "client_closed";
    log.error = "the client closed the connection before the reply";
    send_json(res, Json{{"error", {{"message", log.error}}}});
    res.status = 499;
    return;
  }
  if (result->finish_reason == "cancelled")
    return send_error(res, flavor, {ErrorKind::kUnavailable, "the request was cancelled: the server is shutting down", {}}, log);
  ParsedMessage message;
  if (parser) {
    (void)parser->feed(result->text);  // the events matter to streams only; the message sums them up
    (void)parser->finish();
    message = parser->message();
  } else {
    message.text = result->text;
  }
  Completion completion = make_completion(result.value(), std::move(message), *request);
  log.finish_reason = finish_reason_name(completion.reason);
  send_json(res, api.make_response(context, completion));
}

bool HttpServer::Impl::StreamSession::pump(httplib::DataSink& sink) {
  std::string out;
  if (!started) {
    started = true;
    out = writer->start();  // sent at once: the client sees the response begin before prefill ends
  } else {
    GenerationChannel::Update update = channel->wait(server->options.heartbeat);
    if (!update.text.empty()) {
      std::vector<ParserEvent> events;
      if (parser) events = parser->feed(update.text);
      else events.push_back({ParserEvent::kText, update.text, -1, {}, {}});
      out += writer->write(events);
    }
    if (update.done) {
      finished = true;
      Result<GenerationResult>& result = *update.done;
      log.first_token_ms = channel->first_token_ms();
      if (!result.is_ok()) {
        out += writer->fail(ApiError::internal("generation failed: " + result.error_message()));
        log.error = result.error_message();
        log.finish_reason = "error";
      } else if (result->finish_reason == "cancelled") {
        out += writer->fail({ErrorKind::kUnavailable, "the request was cancelled: the server is shutting down", {}});
        log.finish_reason = "cancelled";
      } else {
        ParsedMessage message;
        if (parser) {
          out += writer->write(parser->finish());
          message = parser->message();
        } else {
          message.text = result->text;
        }
        Completion completion = server->make_completion(result.value(), std::move(message), *request);
        out += writer->finish(completion);
        log.finish_reason = finish_reason_name(completion.reason);
      }
      if (result.is_ok()) {
        log.cached_tokens = result->cached_tokens;
        log.generated_tokens = static_cast<int>(result->tokens.size());
        log.prefill_ms = result->prefill_seconds * 1000;
      }
    }
    if (out.empty()) out = writer->heartbeat();
  }
  // Never an empty write: httplib takes a zero-length chunk as the end of the stream.
  if (!out.empty() && !sink.write(out.data(), out.size())) return false;  // the client is gone: release() cancels
  if (finished) sink.done();
  return true;
}

void HttpServer::Impl::StreamSession::release() {
  server->untrack(id);
  log.status = 200;
  if (!finished) {
    // The client went away (or the server is stopping) before the end: stop generating for it.
    channel->cancel();
    server->queue.cancel(id);
    log.finish_reason = "client_closed";
  }
  server->write_log(log);
}

Json HttpServer::Impl::models_body(const httplib::Request& req) const {
  // Claude Code's gateway model discovery expects Anthropic's list shape; it is told apart by its headers.
  if (req.has_header("anthropic-version") || req.has_header("x-api-key")) {
    char created[32];
    const std::time_t t = static_cast<std::time_t>(model.created_unix);
    std::tm utc{};
    gmtime_r(&t, &utc);
    std::strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return {{"data", {{{"type", "model"}, {"id", model.id}, {"display_name", model.id}, {"created_at", created}}}},
            {"has_more", false},
            {"first_id", model.id},
            {"last_id", model.id}};
  }
  Json openai_model = {{"id", model.id}, {"object", "model"}, {"created", model.created_unix}, {"owned_by", "helium"},
                       {"context_length", model.context}};
  // Codex reads `models` (its catalog entries) and ignores `data`; every other client reads `data`.
  const Json codex_model = launch::codex_catalog_entry(model.id, model.context);
  return {{"object", "list"}, {"data", {openai_model}}, {"models", {codex_model}}};
}

Json HttpServer::Impl::health_body() const {
  const SchedulerStats stats = queue.stats();
  return {{"status", stopping ? "stopping" : "ok"},
          {"model", model.id},
          {"context", model.context},
          {"chat_template", renderer.has_template()},
          {"scheduling", queue.scheduling()},
          {"queue_depth", stats.queue_depth},
          {"running", stats.running}};
}

HttpServer::HttpServer(ServedModel model, GenerationQueue& queue, ServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(model), queue, std::move(options))) {
  Impl& s = *impl_;
  const int threads = std::max(1, s.options.http_threads);
  s.http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s.http.set_payload_max_length(s.options.max_body_bytes);
  s.http.set_keep_alive_max_count(1000);
  s.http.set_keep_alive_timeout(30);
  s.http.set_read_timeout(60);
  s.http.set_write_timeout(30);
  s.http.set_tcp_nodelay(true);  // server-sent events are small writes that must not wait
  // httplib's default also sets SO_REUSEPORT, which lets a second server bind the same port and share
  // its connections; a port in use must be an error instead. SO_REUSEADDR alone allows a quick restart.
  s.http.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });

  // httplib answers some requests itself (404, 413, a malformed request line): give those a body in the
  // route's error shape. Responses the handlers wrote already have one and are left alone.
  s.http.set_error_handler(httplib::Server::HandlerWithResponse([&s](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.content_provider_) return httplib::Server::HandlerResponse::Unhandled;
    RequestLog log;
    log.method = req.method;
    log.path = req.path;
    ApiError error{ErrorKind::kInvalidRequest, "bad request", {}};
    if (res.status == 404) error = {ErrorKind::kNotFound, "no route for " + req.method + " " + req.path, {}};
    else if (res.status == 413)
      error = {ErrorKind::kTooLarge,
               "the request body is larger than the server's limit of " + std::to_string(s.options.max_body_bytes) +
                   " bytes (--max-body-mb)",
               {}};
    else if (res.status == 415) error.message = "unsupported Content-Encoding";
    else if (res.status >= 500) error = ApiError::internal("internal error");
    const int status = res.status;
    s.send_json(res, error.body(flavor_for_path(req.path)));
    res.status = status;
    log.status = status;
    log.error = error.message;
    s.write_log(log);
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.http.set_exception_handler([&s](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    RequestLog log;
    log.method = req.method;
    log.path = req.path;
    s.send_error(res, flavor_for_path(req.path), ApiError::internal("internal error: " + what), log);
    log.status = res.status;
    s.write_log(log);
  });

  // Every route: authentication (except /health), the stopping check, then the handler; the log line is
  // written when the handler returns, or by the stream session when a stream ends.
  using Handler = std::function<void(const httplib::Request&, httplib::Response&, RequestLog&)>;
  auto route = [&s](bool needs_key, Handler handler) {
    return [&s, needs_key, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
      RequestLog log;
      log.method = req.method;
      log.path = req.path;
      const ApiFlavor flavor = flavor_for_path(req.path);
      if (needs_key && !s.authorized(req)) {
        s.send_error(res, flavor, {ErrorKind::kAuthentication, "invalid or missing API key (send `Authorization: Bearer <key>` or `x-api-key: <key>`)", {}}, log);
      } else if (s.stopping && req.path != "/health") {
        s.send_error(res, flavor, {ErrorKind::kUnavailable, "the server is shutting down", {}}, log);
      } else {
        handler(req, res, log);
      }
      if (log.status == -1) return;  // a stream: its session logs
      log.status = res.status == -1 ? 200 : res.status;
      s.write_log(log);
    };
  };
  auto generation = [&s, route](const std::unique_ptr<ApiAdapter>& adapter) {
    const ApiAdapter* api = adapter.get();
    return route(true, [&s, api](const httplib::Request& req, httplib::Response& res, RequestLog& log) {
      s.handle_generation(*api, req, res, log);
    });
  };

  s.http.Get("/health", route(false, [&s](const httplib::Request&, httplib::Response& res, RequestLog&) {
    s.send_json(res, s.health_body());
    if (s.stopping) res.status = 503;
  }));
  // HEAD / is Claude Code's connectivity probe (httplib answers HEAD with the GET handler, minus the body).
  s.http.Get("/", route(true, [&s](const httplib::Request&, httplib::Response& res, RequestLog&) {
    s.send_json(res, {{"status", "ok"}, {"server", "helium"}, {"model", s.model.id}});
  }));
  for (const char* path : {"/v1/models", "/models"}) {
    s.http.Get(path, route(true, [&s](const httplib::Request& req, httplib::Response& res, RequestLog&) {
      s.send_json(res, s.models_body(req));
    }));
  }
  s.http.Get(R"(/v1/models/([^/]+))", route(true, [&s](const httplib::Request& req, httplib::Response& res, RequestLog&) {
    // Any name is served by the one model (clients ask for names like claude-sonnet-4-5).
    const std::string name = req.matches[1].str();
    if (req.has_header("anthropic-version") || req.has_header("x-api-key")) {
      Json list = s.models_body(req);
      Json entry = list["data"][0];
      entry["id"] = name;
      s.send_json(res, entry);
    } else {
      s.send_json(res, {{"id", name}, {"object", "model"}, {"created", s.model.created_unix}, {"owned_by", "helium"}});
    }
  }));
  s.http.Get("/metrics", route(true, [&s](const httplib::Request&, httplib::Response& res, RequestLog&) {
    res.set_content(prometheus_metrics(s.queue.stats(), s.counters, s.model), "text/plain; version=0.0.4");
  }));
  for (const char* path : {"/v1/chat/completions", "/chat/completions"}) s.http.Post(path, generation(s.chat));
  for (const char* path : {"/v1/completions", "/completions"}) s.http.Post(path, generation(s.completions));
  for (const char* path : {"/v1/responses", "/responses"}) s.http.Post(path, generation(s.responses));
  s.http.Post("/v1/messages", generation(s.messages));
  s.http.Post("/v1/messages/count_tokens", generation(s.count_tokens));
}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::bind() {
  // A client that vanishes mid-write must not kill the process: writes to it fail with EPIPE instead.
  std::signal(SIGPIPE, SIG_IGN);
  Impl& s = *impl_;
  if (s.options.port == 0) {
    s.bound_port = s.http.bind_to_any_port(s.options.host);
    if (s.bound_port <= 0) return Status::error("cannot listen on " + s.options.host + " (any port)");
  } else {
    if (!s.http.bind_to_port(s.options.host, s.options.port))
      return Status::error("cannot listen on " + s.options.host + ":" + std::to_string(s.options.port) +
                           " (the port is in use, or the host is not an address of this machine)");
    s.bound_port = s.options.port;
  }
  s.http.raise_backlog(SOMAXCONN);
  return Status::ok();
}

int HttpServer::port() const { return impl_->bound_port; }

Status HttpServer::run() {
  Impl& s = *impl_;
  if (s.bound_port < 0) HELIUM_RETURN_IF_ERROR(bind());
  // Paired with stop(): either stop() sees listening set and waits for the listener to run before
  // stopping it, or this sees stopping set and does not start.
  s.listening = true;
  if (s.stopping) {
    s.listening = false;
    return Status::ok();
  }
  const bool served = s.http.listen_after_bind();
  s.listening = false;
  if (!served && !s.stopping) return Status::error("the HTTP listener failed");
  return Status::ok();
}

void HttpServer::stop() {
  Impl& s = *impl_;
  const bool again = s.stopping.exchange(true);
  // run() may be entering the listener on another thread: wait until it runs, or httplib's stop() would
  // find nothing to stop and the listener would start afterwards.
  while (s.listening && !s.http.is_running()) std::this_thread::yield();
  if (again) {
    s.http.stop();
    return;
  }
  std::vector<std::pair<RequestId, std::shared_ptr<GenerationChannel>>> running;
  {
    std::lock_guard lock(s.inflight_mutex);
    for (auto& [id, weak] : s.inflight)
      if (auto channel = weak.lock()) running.emplace_back(id, std::move(channel));
  }
  for (auto& [id, channel] : running) {
    channel->cancel();
    s.queue.cancel(id);
  }
  s.http.stop();
}

const ServedModel& HttpServer::model() const { return impl_->model; }
const std::string& HttpServer::chat_template_error() const { return impl_->renderer.template_error(); }

}  // namespace helium::server
