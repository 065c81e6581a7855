// tests/server/adapters_test.cpp — the request adapters and the prompt renderer without HTTP: what each
// API's request becomes (messages, tools, tool results, flattened namespaces, dropped attribution
// blocks), the exact prompt text the default model's ChatML template and the Qwen3 template render from
// it, and stream writers on hand-made parser events.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "server/api_adapter.h"
#include "server/prompt_renderer.h"
#include "server_fixture.h"
#include "tokenizer/tokenizer.h"

namespace helium::server::testing {
namespace {

Result<ParsedRequest> parse(const ApiAdapter& adapter, const std::string& json_text) {
  ParseContext context;
  context.vocab_size = 8192;
  return adapter.parse(Json::parse(json_text), context);
}

ServedModel default_served_model() {
  auto tokenizer = Tokenizer::from_dir(default_model_dir());
  EXPECT_TRUE(tokenizer.is_ok()) << tokenizer.error_message();
  ServedModel model;
  model.id = "helium-code-12m";
  model.tokenizer = tokenizer.value();
  model.chat_template = tokenizer.value()->chat_template();
  model.model_type = "qwen3";
  model.context = 2048;
  return model;
}

TEST(AnthropicAdapter, SystemBlocksToolResultsAndThinking) {
  auto adapter = make_anthropic_messages_adapter();
  auto parsed = parse(*adapter, R"({
    "model": "claude-haiku-4-5", "max_tokens": 100,
    "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=1; cch=123;"},
               {"type": "text", "text": "You are Claude Code."}, {"type": "text", "text": "Be brief."}],
    "messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "call it", "signature": "s"},
                                        {"type": "text", "text": "Checking."},
                                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                                        {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                                   {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
                                    "content": [{"type": "text", "text": "no clock"}, {"type": "image", "source": {}}]},
                                   {"type": "text", "text": "thanks"}]}
    ],
    "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}, {"type": "web_search_20250305", "name": "web_search"}],
    "tool_choice": {"type": "any"}, "thinking": {"type": "disabled"}, "stop_sequences": ["END"]
  })");
  ASSERT_TRUE(parsed.is_ok()) << parsed.error_message();
  const Conversation& c = parsed->conversation;
  ASSERT_EQ(c.messages.size(), 6u);
  EXPECT_EQ(c.messages[0].role, "system");
  EXPECT_EQ(c.messages[0].content, "You are Claude Code.\n\nBe brief.");  // the attribution block is gone
  EXPECT_EQ(c.messages[2].role, "assistant");
  EXPECT_EQ(c.messages[2].reasoning, "call it");
  EXPECT_EQ(c.messages[2].content, "Checking.");
  ASSERT_EQ(c.messages[2].tool_calls.size(), 2u);
  EXPECT_EQ(c.messages[2].tool_calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(c.messages[2].tool_calls[1].arguments, "{}");
  EXPECT_EQ(c.messages[3].role, "tool");
  EXPECT_EQ(c.messages[3].tool_call_id, "toolu_1");
  EXPECT_EQ(c.messages[3].content, "sunny");
  EXPECT_EQ(c.messages[4].content, "Error: no clock\n[image omitted: this model takes text only]");
  EXPECT_EQ(c.messages[5].role, "user");
  EXPECT_EQ(c.messages[5].content, "thanks");
  ASSERT_EQ(c.tools.size(), 1u);  // the server tool is skipped
  EXPECT_EQ(c.tool_choice.mode, ToolChoiceMode::kRequired);
  EXPECT_EQ(c.enable_thinking, std::optional<bool>(false));
  EXPECT_EQ(parsed->settings.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(parsed->tool_call_id_prefix, "toolu_");
}

// Claude Code 2.1.332 sends its environment as a system message after the user's turn (captured from
// `claude -p`); Anthropic's API takes system messages anywhere, applying from where they stand.
TEST(AnthropicAdapter, SystemMessagesAmongTheOthersKeepTheirPlace) {
  auto adapter = make_anthropic_messages_adapter();
  auto parsed = parse(*adapter, R"({
    "model": "helium-code-12m", "max_tokens": 100, "system": "You are an agent.",
    "messages": [
      {"role": "user", "content": [{"type": "text", "text": "say hi"}]},
      {"role": "system", "content": [{"type": "text", "text": "x-anthropic-billing-header: cch=1;"},
                                     {"type": "text", "text": "# Environment", "cache_control": {"type": "ephemeral"}},
                                     {"type": "text", "text": "cwd: /tmp"}]}
    ]
  })");
  ASSERT_TRUE(parsed.is_ok()) << parsed.error_message();
  const Conversation& c = parsed->conversation;
  ASSERT_EQ(c.messages.size(), 3u);
  EXPECT_EQ(c.messages[1].role, "user");
  EXPECT_EQ(c.messages[2].role, "system");
  EXPECT_EQ(c.messages[2].content, "# Environment\n\ncwd: /tmp");

  PromptRenderer renderer(default_served_model());
  auto rendered = renderer.render(c, "2026-01-02");
  ASSERT_TRUE(rendered.is_ok()) << rendered.error_message();
  EXPECT_EQ(rendered->text,
            "<|im_start|>system\nYou are an agent.<|im_end|>\n<|im_start|>user\nsay hi<|im_end|>\n"
            "<|im_start|>system\n# Environment\n\ncwd: /tmp<|im_end|>\n<|im_start|>assistant\n");

  // Other roles are still refused, naming the field.
  auto tool_role = parse(*adapter, R"({"model": "m", "max_tokens": 5, "messages": [{"role": "tool", "content": "x"}]})");
  ASSERT_FALSE(tool_role.is_ok());
  EXPECT_NE(tool_role.error_message().find("`messages[0].role` must be \"user\", \"assistant\" or \"system\""),
            std::string::npos)
      << tool_role.error_message();
  auto bad_content = parse(*adapter, R"({"model": "m", "max_tokens": 5, "messages": [{"role": "system", "content": 3}]})");
  ASSERT_FALSE(bad_content.is_ok());
  EXPECT_NE(bad_content.error_message().find("`messages[0].content` must be a string or an array of text blocks"),
            std::string::npos)
      << bad_content.error_message();
}

TEST(ResponsesAdapter, ItemsToolsAndNamespaces) {
  auto adapter = make_openai_responses_adapter();
  auto parsed = parse(*adapter, R"({
    "instructions": "You are Codex.",
    "input": [
      {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sandbox: none"}]},
      {"role": "user", "content": "go"},
      {"type": "reasoning", "summary": [], "encrypted_content": "x"},
      {"type": "function_call", "call_id": "c1", "name": "read_file", "namespace": "mcp__files__", "arguments": "{\"path\":\"a\"}"},
      {"type": "function_call", "call_id": "c2", "name": "shell", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "A"}, {"type": "input_text", "text": "B"}]},
      {"type": "function_call_output", "call_id": "c2", "output": "ok"},
      {"type": "custom_tool_call", "call_id": "c3", "name": "apply_patch", "input": "patch"},
      {"type": "custom_tool_call_output", "call_id": "c3", "output": "done"},
      {"type": "local_shell_call", "call_id": "c4", "action": {}}
    ],
    "tools": [
      {"type": "function", "name": "shell", "parameters": {"type": "object"}},
      {"type": "namespace", "name": "mcp__files__", "tools": [{"type": "function", "name": "read_file"}]},
      {"type": "namespace", "name": "crm", "tools": [{"type": "function", "name": "lookup"}]},
      {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}},
      {"type": "web_search"}, {"type": "image_generation"}, {"type": "tool_search"}
    ],
    "tool_choice": {"type": "function", "name": "lookup", "namespace": "crm"},
    "text": {"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}}},
    "reasoning": {"effort": "none"}
  })");
  ASSERT_TRUE(parsed.is_ok()) << parsed.error_message();
  const Conversation& c = parsed->conversation;
  ASSERT_EQ(c.tools.size(), 4u);
  EXPECT_EQ(c.tools[1].name, "mcp__files__read_file");
  EXPECT_EQ(c.tools[1].client_name, "read_file");
  EXPECT_EQ(c.tools[1].client_namespace, "mcp__files__");
  EXPECT_EQ(c.tools[2].name, "crm__lookup");
  EXPECT_EQ(c.tools[3].kind, ToolKind::kCustom);
  EXPECT_NE(c.tools[3].description.find("start: x"), std::string::npos);
  EXPECT_EQ(c.tool_choice.mode, ToolChoiceMode::kNamed);
  EXPECT_EQ(c.tool_choice.name, "crm__lookup");
  EXPECT_NE(c.output_instruction.find("\"out\""), std::string::npos);
  EXPECT_EQ(c.enable_thinking, std::optional<bool>(false));
  // system (instructions), system (developer), user, assistant [c1, c2], tool, tool, assistant [c3], tool
  ASSERT_EQ(c.messages.size(), 8u);
  EXPECT_EQ(c.messages[1].role, "system");
  EXPECT_EQ(c.messages[3].role, "assistant");
  ASSERT_EQ(c.messages[3].tool_calls.size(), 2u);
  EXPECT_EQ(c.messages[3].tool_calls[0].name, "mcp__files__read_file");
  EXPECT_EQ(c.messages[4].content, "AB");
  EXPECT_EQ(c.messages[6].tool_calls[0].arguments, R"({"input":"patch"})");
  EXPECT_EQ(c.messages[7].content, "done");
}

TEST(ResponsesAdapter, StatelessRequestsOnly) {
  auto adapter = make_openai_responses_adapter();
  auto parsed = parse(*adapter, R"({"input": "hi", "previous_response_id": "resp_1"})");
  ASSERT_FALSE(parsed.is_ok());
  EXPECT_NE(parsed.error_message().find("previous_response_id"), std::string::npos);
  // A probe with no input at all still makes a conversation.
  auto probe = parse(*adapter, R"({"max_output_tokens": 1})");
  ASSERT_TRUE(probe.is_ok()) << probe.error_message();
  EXPECT_EQ(probe->conversation.messages.size(), 1u);
}

TEST(ServerPromptRenderer, DefaultModelChatMLExactly) {
  PromptRenderer renderer(default_served_model());
  ASSERT_TRUE(renderer.has_template()) << renderer.template_error();
  Conversation c;
  c.messages = {{"system", "A", "", {}, "", ""}, {"system", "B", "", {}, "", ""}, {"user", "hi", "", {}, "", ""}};
  c.output_instruction = "Answer in JSON.";
  auto rendered = renderer.render(c, "2026-01-02");
  ASSERT_TRUE(rendered.is_ok()) << rendered.error_message();
  EXPECT_EQ(rendered->text,
            "<|im_start|>system\nA\n\nB\n\nAnswer in JSON.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  // No special tokens beyond those the template writes: the ids decode back to the text exactly.
  auto tokenizer = Tokenizer::from_dir(default_model_dir());
  ASSERT_TRUE(tokenizer.is_ok());
  EXPECT_EQ(tokenizer.value()->decode(rendered->tokens), rendered->text);
  EXPECT_EQ(rendered->tokens.front(), tokenizer.value()->token_to_id("<|im_start|>"));

  // A trailing assistant message is continued (prefill), not closed.
  c.messages.push_back({"assistant", "def f(", "", {}, "", ""});
  auto prefilled = renderer.render(c, "2026-01-02");
  ASSERT_TRUE(prefilled.is_ok());
  EXPECT_TRUE(prefilled->text.ends_with("<|im_start|>assistant\ndef f(")) << prefilled->text;
}

TEST(ServerPromptRenderer, NoTemplateRefusesChatWithTheReason) {
  ServedModel model = default_served_model();
  model.chat_template.clear();
  PromptRenderer renderer(model);
  EXPECT_FALSE(renderer.has_template());
  Conversation c;
  c.messages = {{"user", "hi", "", {}, "", ""}};
  auto rendered = renderer.render(c);
  ASSERT_FALSE(rendered.is_ok());
  EXPECT_NE(rendered.error_message().find("no chat template"), std::string::npos);
  EXPECT_NE(rendered.error_message().find("/v1/completions"), std::string::npos);
}

TEST(ServerPromptRenderer, Qwen3ToolsAndToolCallsReachTheTemplateAsObjects) {
  if (!std::filesystem::exists(qwen3_tokenizer_dir() + "/tokenizer.json"))
    GTEST_SKIP() << "the Qwen3 tokenizer is missing (" << qwen3_tokenizer_dir() << "); run scripts/install-deps";
  auto tokenizer = Tokenizer::from_dir(qwen3_tokenizer_dir());
  ASSERT_TRUE(tokenizer.is_ok()) << tokenizer.error_message();
  ServedModel model;
  model.id = "qwen3";
  model.tokenizer = tokenizer.value();
  model.chat_template = tokenizer.value()->chat_template();
  model.model_type = "qwen3";
  model.context = 32768;
  PromptRenderer renderer(model);
  ASSERT_TRUE(renderer.has_template()) << renderer.template_error();
  EXPECT_EQ(renderer.output_format().tool_calls, ToolCallFormat::kHermesJson);
  EXPECT_EQ(renderer.output_format().reasoning, ReasoningFormat::kThinkTags);

  Conversation c;
  ToolDefinition weather;
  weather.name = "get_weather";
  weather.description = "Weather";
  weather.parameters = Json::parse(R"({"type":"object","properties":{"city":{"type":"string"}}})");
  c.tools = {weather};
  c.messages = {{"user", "weather?", "", {}, "", ""},
                {"assistant", "", "think", {{"call_1", "get_weather", R"({"city":"Paris"})"}}, "", ""},
                {"tool", "sunny", "", {}, "call_1", ""}};
  c.enable_thinking = false;
  auto rendered = renderer.render(c, "2026-01-02");
  ASSERT_TRUE(rendered.is_ok()) << rendered.error_message();
  const std::string& text = rendered->text;
  // The tool's schema is in the system prompt, in the client's key order.
  EXPECT_NE(text.find(R"("name": "get_weather", "description": "Weather", "parameters": {"type": "object")"), std::string::npos) << text;
  // Arguments went in as an object: printed as JSON, not as a quoted string.
  EXPECT_NE(text.find(R"({"name": "get_weather", "arguments": {"city": "Paris"}})"), std::string::npos) << text;
  EXPECT_NE(text.find("<tool_response>\nsunny\n</tool_response>"), std::string::npos) << text;
  // enable_thinking=false reaches the template: it closes an empty think block for the model.
  EXPECT_TRUE(text.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n")) << text;
  EXPECT_EQ(rendered->parser.tools.size(), 1u);
  EXPECT_FALSE(rendered->parser.starts_in_reasoning);

  // tool_choice none: the template gets no tools, and the parser accepts no call.
  c.tool_choice.mode = ToolChoiceMode::kNone;
  auto no_tools = renderer.render(c, "2026-01-02");
  ASSERT_TRUE(no_tools.is_ok());
  EXPECT_EQ(no_tools->text.find("<tools>"), std::string::npos);
  EXPECT_TRUE(no_tools->parser.tools.is_array() && no_tools->parser.tools.empty());
}

// Stream writers on hand-made parser events.
std::string run_writer(const ApiAdapter& adapter, const ParsedRequest& request, const std::vector<ParserEvent>& events,
                       const Completion& completion) {
  ResponseContext context;
  context.model = "m";
  context.created_unix = 1;
  context.id_seed = 42;
  context.prompt_tokens = 5;
  context.request = &request;
  auto writer = adapter.make_stream_writer(context);
  std::string out = writer->start();
  out += writer->write(events);
  out += writer->finish(completion);
  return out;
}

std::vector<Json> sse_data(const std::string& stream) {
  std::vector<Json> out;
  size_t at = 0;
  while ((at = stream.find("data: ", at)) != std::string::npos) {
    const size_t end = stream.find('\n', at);
    const std::string data = stream.substr(at + 6, end - at - 6);
    if (data != "[DONE]") out.push_back(Json::parse(data));
    at = end;
  }
  return out;
}

TEST(ServerStreamWriters, AnthropicToolUseWithoutArgumentsStillGetsAnInputDelta) {
  auto adapter = make_anthropic_messages_adapter();
  ParsedRequest request;
  Completion completion;
  completion.reason = FinishReason::kToolCalls;
  completion.prompt_tokens = 5;
  completion.cached_tokens = 3;
  completion.completion_tokens = 7;
  const std::vector<ParserEvent> events = {
      {ParserEvent::kReasoning, "hmm", -1, "", ""},
      {ParserEvent::kToolCallBegin, "", 0, "list_files", "toolu_A"},
      {ParserEvent::kToolCallEnd, "", 0, "list_files", "toolu_A"},
  };
  const std::vector<Json> data = sse_data(run_writer(*adapter, request, events, completion));
  std::vector<std::string> types;
  for (const Json& d : data) types.push_back(d["type"].get<std::string>() + (d.contains("delta") && d["delta"].contains("type") ? ":" + d["delta"]["type"].get<std::string>() : ""));
  const std::vector<std::string> expected = {
      "message_start", "ping",
      "content_block_start", "content_block_delta:thinking_delta", "content_block_delta:signature_delta", "content_block_stop",
      "content_block_start", "content_block_delta:input_json_delta", "content_block_stop",
      "message_delta", "message_stop"};
  EXPECT_EQ(types, expected);
  EXPECT_EQ(data[7]["delta"]["partial_json"], "{}");
  EXPECT_EQ(data[6]["index"], 1);
  EXPECT_EQ(data[9]["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(data[9]["usage"]["input_tokens"], 2);
  EXPECT_EQ(data[9]["usage"]["cache_read_input_tokens"], 3);
  EXPECT_EQ(data[9]["usage"]["output_tokens"], 7);
}

TEST(ServerStreamWriters, ChatToolCallDeltasCarryIdAndNameOnce) {
  auto adapter = make_openai_chat_adapter();
  ParsedRequest request;
  request.include_usage = true;
  Completion completion;
  completion.reason = FinishReason::kToolCalls;
  const std::vector<ParserEvent> events = {
      {ParserEvent::kText, "Let me look.", -1, "", ""},
      {ParserEvent::kToolCallBegin, "", 0, "read", "call_X"},
      {ParserEvent::kToolCallArguments, R"({"path":)", 0, "read", "call_X"},
      {ParserEvent::kToolCallArguments, R"("a"})", 0, "read", "call_X"},
      {ParserEvent::kToolCallEnd, "", 0, "read", "call_X"},
      {ParserEvent::kToolCallBegin, "", 1, "read", "call_Y"},
      {ParserEvent::kToolCallArguments, "{}", 1, "read", "call_Y"},
      {ParserEvent::kToolCallEnd, "", 1, "read", "call_Y"},
  };
  const std::string stream = run_writer(*adapter, request, events, completion);
  EXPECT_TRUE(stream.ends_with("data: [DONE]\n\n"));
  const std::vector<Json> data = sse_data(stream);
  ASSERT_EQ(data.size(), 9u);
  EXPECT_EQ(data[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(data[1]["choices"][0]["delta"]["content"], "Let me look.");
  const Json first = data[2]["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(first["index"], 0);
  EXPECT_EQ(first["id"], "call_X");
  EXPECT_EQ(first["function"]["name"], "read");
  EXPECT_EQ(first["function"]["arguments"], "");
  const Json more = data[3]["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_FALSE(more.contains("id"));
  EXPECT_EQ(more["function"]["arguments"], R"({"path":)");
  EXPECT_EQ(data[5]["choices"][0]["delta"]["tool_calls"][0]["index"], 1);
  EXPECT_EQ(data[7]["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_TRUE(data[8]["choices"].empty());
  EXPECT_TRUE(data[8].contains("usage"));
}

}  // namespace
}  // namespace helium::server::testing

namespace helium::server::testing {
namespace {

// The HTTP threads render prompts and parse outputs concurrently: the results must not depend on it.
TEST(ServerConcurrency, RenderingAndParsingFromManyThreads) {
  ServedModel model = default_served_model();
  PromptRenderer renderer(model);
  ASSERT_TRUE(renderer.has_template());
  auto render = [&](int i) {
    Conversation c;
    c.messages = {{"user", "task " + std::to_string(i) + " def f" + std::to_string(i) + "(", "", {}, "", ""}};
    auto r = renderer.render(c, "2026-01-02");
    EXPECT_TRUE(r.is_ok());
    auto parser = OutputParser::create(r->parser);
    EXPECT_TRUE(parser.is_ok());
    (void)parser.value()->feed("some output text " + std::to_string(i));
    (void)parser.value()->finish();
    return r->text + "|" + parser.value()->message().text;
  };
  std::vector<std::string> alone;
  for (int i = 0; i < 50; ++i) alone.push_back(render(i));
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string> together(50);
    std::vector<std::thread> threads;
    for (int i = 0; i < 50; ++i) threads.emplace_back([&, i] { together[i] = render(i); });
    for (auto& t : threads) t.join();
    ASSERT_EQ(together, alone);
  }
}

}  // namespace
}  // namespace helium::server::testing
