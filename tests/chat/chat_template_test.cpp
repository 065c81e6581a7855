// tests/chat/chat_template_test.cpp — the public ChatTemplate API on the real templates committed in
// tests/data/chat/templates: every one parses, a parsed template renders the same prompt from many threads
// at once, the inputs reach the template the way transformers passes them, and a known Qwen3 prompt is
// rendered exactly (the full comparison with the reference is chat_template_reference_test.cpp).
#include "chat/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace helium {
namespace {

std::string read_fixture(const std::string& name) {
  std::ifstream in(std::string(HELIUM_SOURCE_DIR) + "/tests/data/chat/" + name, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

ChatTemplate parse_fixture(const std::string& file) {
  const std::string source = read_fixture("templates/" + file);
  EXPECT_FALSE(source.empty()) << "missing fixture " << file;
  Result<ChatTemplate> parsed = ChatTemplate::parse(source);
  EXPECT_TRUE(parsed.is_ok()) << file << ": " << parsed.error_message();
  return std::move(parsed).value();
}

TEST(ChatTemplateTest, EveryFixtureTemplateParses) {
  const auto templates = nlohmann::ordered_json::parse(read_fixture("templates.json"));
  ASSERT_GE(templates.size(), 6u);
  for (const auto& entry : templates) {
    const std::string file = entry["file"].get<std::string>().substr(std::string("templates/").size());
    const Result<ChatTemplate> parsed = ChatTemplate::parse(read_fixture("templates/" + file));
    EXPECT_TRUE(parsed.is_ok()) << file << ": " << parsed.error_message();
  }
}

TEST(ChatTemplateTest, Qwen3ToolCallPrompt) {
  const ChatTemplate chat = parse_fixture("Qwen-Qwen3.jinja");
  ChatTemplateInputs inputs;
  inputs.messages = nlohmann::ordered_json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "18C"}])");
  inputs.extra["enable_thinking"] = false;
  const Result<std::string> prompt = chat.render(inputs);
  ASSERT_TRUE(prompt.is_ok()) << prompt.error_message();
  EXPECT_EQ(*prompt,
            "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
            "\"Paris\"}}\n"
            "</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n18C\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplateTest, InputsReachTheTemplateAsTransformersPassesThem) {
  const Result<ChatTemplate> chat = ChatTemplate::parse(
      "{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ tools is none }}|{{ messages|length }}|"
      "{{ custom }}|{{ strftime_now('%d %b %Y %H:%M:%S') }}|{{ strftime_now is defined }}");
  ASSERT_TRUE(chat.is_ok()) << chat.error_message();
  ChatTemplateInputs inputs;
  inputs.bos_token = "<s>";
  inputs.eos_token = "</s>";
  inputs.add_generation_prompt = false;
  inputs.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  inputs.extra = nlohmann::ordered_json::parse(R"({"custom": "x", "strftime_now": "2024-07-26T08:05:09"})");
  const Result<std::string> out = chat->render(inputs);
  ASSERT_TRUE(out.is_ok()) << out.error_message();
  EXPECT_EQ(*out, "<s>|</s>|False|True|1|x|26 Jul 2024 08:05:09|True");
}

TEST(ChatTemplateTest, ExtraVariablesReplaceTheStandardOnes) {
  const Result<ChatTemplate> chat = ChatTemplate::parse("{{ add_generation_prompt }}{{ tools|length }}");
  ASSERT_TRUE(chat.is_ok());
  ChatTemplateInputs inputs;
  inputs.extra = nlohmann::ordered_json::parse(R"({"add_generation_prompt": "yes", "tools": [1, 2]})");
  const Result<std::string> out = chat->render(inputs);
  ASSERT_TRUE(out.is_ok()) << out.error_message();
  EXPECT_EQ(*out, "yes2");
}

// The server renders one parsed template for many requests at once.
TEST(ChatTemplateTest, ConcurrentRendersAgree) {
  const ChatTemplate chat = parse_fixture("openai-gpt-oss-120b.jinja");
  const auto fixture = nlohmann::ordered_json::parse(read_fixture("conversations.json"));
  ChatTemplateInputs inputs;
  inputs.messages = nlohmann::ordered_json::parse(R"([{"role": "system", "content": "Be brief."},
                                                      {"role": "user", "content": "Hi"}])");
  inputs.tools =
      nlohmann::ordered_json::array({fixture["tools"]["get_weather"], fixture["tools"]["search_files"]});
  inputs.extra["strftime_now"] = "2025-01-02";
  const Result<std::string> expected = chat.render(inputs);
  ASSERT_TRUE(expected.is_ok()) << expected.error_message();
  EXPECT_NE(expected->find("Current date: 2025-01-02"), std::string::npos);

  std::vector<std::string> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const Result<std::string> r = chat.render(inputs);
        results[t] = r.is_ok() ? *r : r.error_message();
        if (results[t] != *expected) return;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::string& r : results) EXPECT_EQ(r, *expected);
}

}  // namespace
}  // namespace helium
