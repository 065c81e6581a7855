#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "engine/engine.h"
#include "engine/memory_plan.h"
#include "server/prompt_renderer.h"

namespace helium::cli {
namespace {

// One user turn (after an optional system message) rendered by the model's own chat template, as
// `helium serve` renders a conversation: the prompt tokens, with the assistant's turn next.
Result<std::vector<int32_t>> chat_prompt(const Engine& e, const std::string& system, const std::string& user) {
  const server::ServedModel model = server::describe_engine_model(e, "");
  const server::PromptRenderer renderer(model);
  if (!renderer.has_template()) return Status::error("--chat: " + renderer.template_error());
  server::Conversation conversation;
  if (!system.empty()) conversation.messages.push_back({.role = "system", .content = system});
  conversation.messages.push_back({.role = "user", .content = user});
  HELIUM_ASSIGN_OR_RETURN(server::RenderedPrompt rendered, renderer.render(conversation));
  return std::move(rendered.tokens);
}

}  // namespace

std::string default_model_path() { return std::string(HELIUM_SOURCE_DIR) + "/" + HELIUM_DEFAULT_MODEL; }

void add_run_command(CLI::App& app, RunOptions& o) {
  CLI::App* run = app.add_subcommand("run", "Generate text from a prompt, streaming it to stdout");
  o.command = run;
  run->add_option("-m,--model", o.model,
                  "Model: a directory, a catalog name (`helium models`), or a Hugging Face repo id org/name[@revision] "
                  "(downloaded on first use); default: the embedded model");
  run->add_flag("--offline", o.offline, "Never touch the network: use the Hugging Face cache only (also HF_HUB_OFFLINE=1)");
  run->add_option("-p,--prompt", o.prompt, "Prompt text")->required();
  run->add_flag("--chat", o.chat, "Render the prompt as one user turn with the model's chat template");
  run->add_option("--system", o.system, "With --chat: a system message before the user turn");
  run->add_option("-n,--max-tokens", o.max_new_tokens, "Tokens to generate at most")->check(CLI::NonNegativeNumber);
  run->add_option("--seed", o.seed, "Random seed (the token at position t uses philox(seed, t))");
  // Sampling flags not given take the model's generation_config.json values, then these defaults.
  run->add_option("--temp,--temperature", o.temperature, "Sampling temperature; 0 = greedy")->check(CLI::NonNegativeNumber);
  run->add_option("--top-p", o.top_p, "Nucleus sampling mass (1 = off)")->check(CLI::Range(0.0, 1.0));
  run->add_option("--top-k", o.top_k, "Keep the k most likely tokens (0 = off)")->check(CLI::NonNegativeNumber);
  run->add_option("--min-p", o.min_p, "Drop tokens below min-p times the top probability")->check(CLI::Range(0.0, 1.0));
  run->add_option("--repeat-penalty", o.repetition_penalty, "Repetition penalty over prompt and output (1 = off)");
  run->add_option("--presence-penalty", o.presence_penalty, "OpenAI presence penalty");
  run->add_option("--frequency-penalty", o.frequency_penalty, "OpenAI frequency penalty");
  run->add_option("--stop", o.stop, "Stop string (repeatable)");
  run->add_flag("--ignore-eos", o.ignore_eos, "Keep generating past end-of-sequence tokens");
  run->add_option("-t,--threads", o.threads, "CPU threads (0 = all)")->check(CLI::NonNegativeNumber);
  run->add_option("-c,--ctx-size", o.context, "Context length in tokens (0 = the model's, at most 32768)");
  run->add_option("--device", o.device, "Device to run on: auto (a GPU when present), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  add_load_format_option(run, o.load_format,
                         "weights: read the checkpoint; dummy: deterministic random weights of the config's shapes");
  add_pipeline_option(run, o.pipeline);
  run->add_flag("--show-ids", o.show_ids, "Print the prompt and generated token ids to stderr");
}

int run_command(const RunOptions& o) {
  EngineOptions eo;
  eo.device = o.device;
  eo.load_format = load_format_choice(o.load_format);
  eo.pipeline = pipeline_choice(o.pipeline);
  eo.threads = o.threads;
  eo.context = o.context;
  auto resolved = resolve_model_for_cli(o.model.empty() ? default_model_path() : o.model, o.offline);
  if (!resolved.is_ok()) {
    std::cerr << "helium: " << resolved.error_message() << "\n";
    return 1;
  }
  const std::string model = resolved->dir;
  auto engine = Engine::load(model, eo);
  if (!engine.is_ok()) {
    std::cerr << "helium: " << engine.error_message() << "\n";
    return 1;
  }
  Engine& e = *engine.value();
  for (const auto& w : e.checkpoint().warnings) std::cerr << "helium: warning: " << w << "\n";
  auto plan = plan_for_engine(e, o.model.empty() ? model : o.model, 0, host_memory_bytes());
  if (plan.is_ok()) print_memory_plan(stderr, plan.value());
  GenerationRequest req;
  if (o.chat) {
    auto chat = chat_prompt(e, o.system, o.prompt);
    if (!chat.is_ok()) {
      std::cerr << "helium: " << chat.error_message() << "\n";
      return 1;
    }
    req.prompt = std::move(chat).value();
  } else {
    if (!o.system.empty()) {
      std::cerr << "helium: --system needs --chat\n";
      return 1;
    }
    req.prompt = e.tokenizer().encode(o.prompt, /*add_special_tokens=*/true);
  }
  req.max_new_tokens = o.max_new_tokens;
  const GenerationConfig& g = e.checkpoint().generation;
  auto given = [&](const char* flag) { return o.command != nullptr && o.command->count(flag) > 0; };
  req.sampling.temperature = given("--temp") ? o.temperature : (g.do_sample == false ? 0.0f : g.temperature.value_or(o.temperature));
  req.sampling.top_p = given("--top-p") ? o.top_p : g.top_p.value_or(o.top_p);
  req.sampling.top_k = given("--top-k") ? o.top_k : g.top_k.value_or(o.top_k);
  req.sampling.min_p = given("--min-p") ? o.min_p : g.min_p.value_or(o.min_p);
  req.sampling.repetition_penalty =
      given("--repeat-penalty") ? o.repetition_penalty : g.repetition_penalty.value_or(o.repetition_penalty);
  req.sampling.presence_penalty = o.presence_penalty;
  req.sampling.frequency_penalty = o.frequency_penalty;
  req.sampling.seed = o.seed;
  req.stop_strings = o.stop;
  req.ignore_eos = o.ignore_eos;
  if (!o.chat) std::cout << o.prompt;
  std::cout.flush();
  auto result = e.generate(req, [](int32_t, std::string_view piece) {
    std::cout << piece;
    std::cout.flush();
    return true;
  });
  std::cout << "\n";
  if (!result.is_ok()) {
    std::cerr << "helium: " << result.error_message() << "\n";
    return 1;
  }
  const GenerationResult& r = result.value();
  if (o.show_ids) {
    std::cerr << "prompt ids:";
    for (int32_t t : req.prompt) std::cerr << ' ' << t;
    std::cerr << "\ngenerated ids:";
    for (int32_t t : r.tokens) std::cerr << ' ' << t;
    std::cerr << "\n";
  }
  std::fprintf(stderr, "prompt: %d tokens, %.1f tok/s | generation: %zu tokens, %.1f tok/s | finish: %s | %s\n",
               r.prompt_tokens, r.prefill_seconds > 0 ? r.prompt_tokens / r.prefill_seconds : 0.0, r.tokens.size(),
               r.decode_seconds > 0 ? r.tokens.size() / r.decode_seconds : 0.0, r.finish_reason.c_str(),
               e.backend_name().c_str());
  return 0;
}

}  // namespace helium::cli
