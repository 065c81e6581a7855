// tests/chat/jinja_errors_test.cpp — what a broken or hostile chat template gets: syntax errors that name
// line:column, unknown filters and tests named, raise_exception's message, and the limits that stop
// endless loops, runaway recursion, memory bombs and stack exhaustion. Through the public ChatTemplate
// API (the messages it returns are what a server reports), and through the interpreter for small limits.
#include <gtest/gtest.h>
#include <pthread.h>

#include <chrono>
#include <string>

#include "chat/chat_template.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_parser.h"

namespace helium {
namespace {

std::string parse_error(const std::string& source) {
  const Result<ChatTemplate> parsed = ChatTemplate::parse(source);
  if (parsed.is_ok()) return "(parsed without error)";
  return parsed.error_message();
}

std::string render_error(const std::string& source, ChatTemplateInputs inputs = {}) {
  const Result<ChatTemplate> parsed = ChatTemplate::parse(source);
  if (!parsed.is_ok()) return "(parse failed: " + parsed.error_message() + ")";
  const Result<std::string> rendered = parsed->render(inputs);
  if (rendered.is_ok()) return "(rendered without error: " + *rendered + ")";
  return rendered.error_message();
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

TEST(JinjaSyntaxErrorTest, NamesLineAndColumn) {
  const std::string message = parse_error("Hello\n{% if x %}\n  {{ x + }}\n{% endif %}");
  EXPECT_CONTAINS(message, "line 3:10");
  EXPECT_CONTAINS(message, "expected an expression, found '}}'");
}

TEST(JinjaSyntaxErrorTest, ColumnsCountCharactersNotBytes) {
  EXPECT_CONTAINS(parse_error("héllo {{ 1 + }}"), "line 1:14");
}

TEST(JinjaSyntaxErrorTest, UnknownFilterIsNamed) {
  const std::string message = parse_error("a\n{{ x | frobnicate }}");
  EXPECT_CONTAINS(message, "unknown filter 'frobnicate'");
  EXPECT_CONTAINS(message, "line 2:8");
}

TEST(JinjaSyntaxErrorTest, UnknownTestIsNamed) {
  EXPECT_CONTAINS(parse_error("{{ x is frobnicated }}"), "unknown test 'frobnicated'");
}

TEST(JinjaSyntaxErrorTest, UnclosedBlockNamesItsStart) {
  const std::string message = parse_error("x\n\n{% for m in messages %}{{ m }}");
  EXPECT_CONTAINS(message, "'for' block is never closed");
  EXPECT_CONTAINS(message, "line 3:1");
}

TEST(JinjaSyntaxErrorTest, StrayEndTag) {
  EXPECT_CONTAINS(parse_error("{% endif %}"), "unexpected '{% endif %}'");
}

TEST(JinjaSyntaxErrorTest, UnsupportedStatementIsNamed) {
  EXPECT_CONTAINS(parse_error("{% include 'other.jinja' %}"), "unsupported statement 'include'");
}

TEST(JinjaSyntaxErrorTest, UnterminatedStringAndComment) {
  EXPECT_CONTAINS(parse_error("{{ 'abc }}"), "unterminated string literal");
  EXPECT_CONTAINS(parse_error("ok {# never closed"), "unterminated comment");
}

TEST(JinjaSyntaxErrorTest, BreakOutsideLoop) {
  EXPECT_CONTAINS(parse_error("{% break %}"), "'break' outside a for loop");
  EXPECT_CONTAINS(parse_error("{% for x in y %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}"),
                  "'continue' outside a for loop");
}

TEST(JinjaSyntaxErrorTest, BadMacroParameters) {
  EXPECT_CONTAINS(parse_error("{% macro m(a=1, b) %}{% endmacro %}"), "without a default follows");
  EXPECT_CONTAINS(parse_error("{% macro m(a, a) %}{% endmacro %}"), "duplicate parameter 'a'");
}

TEST(JinjaRenderErrorTest, RaiseExceptionCarriesTheTemplatesMessage) {
  ChatTemplateInputs inputs;
  inputs.messages = nlohmann::ordered_json::parse(R"([{"role": "tool", "content": "x"}])");
  const std::string message = render_error(
      "{% for m in messages %}{% if m.role == 'tool' %}"
      "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
      "{% endif %}{% endfor %}",
      inputs);
  EXPECT_CONTAINS(message,
                  "raised an exception: Conversation roles must alternate user/assistant/user/assistant/...");
}

TEST(JinjaRenderErrorTest, NamesTheLineOfTheFailingExpression) {
  const std::string message = render_error("line one\n{{ 'a' - 1 }}");
  EXPECT_CONTAINS(message, "line 2:");
  EXPECT_CONTAINS(message, "unsupported operand types for -: string and integer");
}

TEST(JinjaRenderErrorTest, CallingAnUndefinedName) {
  EXPECT_CONTAINS(render_error("{{ no_such_macro(1) }}"), "'no_such_macro' is undefined");
  EXPECT_CONTAINS(render_error("{{ 'abc'.no_such_method() }}"), "has no method 'no_such_method'");
}

TEST(JinjaRenderErrorTest, MacroArgumentErrors) {
  EXPECT_CONTAINS(render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
                  "takes not more than 1 argument");
  EXPECT_CONTAINS(render_error("{% macro m(a) %}{% endmacro %}{{ m(b=1) }}"), "has no parameter 'b'");
}

TEST(JinjaRenderErrorTest, BadInputsAreRefused) {
  ChatTemplateInputs inputs;
  inputs.messages = "not a list";
  EXPECT_CONTAINS(render_error("{{ messages }}", inputs), "messages must be a list");
  inputs.messages = nlohmann::ordered_json::array();
  inputs.extra["strftime_now"] = "14 March 2025";
  EXPECT_CONTAINS(render_error("{{ strftime_now('%Y') }}", inputs), "strftime_now must be a local time");
}

// ----- limits --------------------------------------------------------------------------------------

TEST(JinjaLimitTest, EndlessRecursionStopsWithAnError) {
  EXPECT_CONTAINS(render_error("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}"),
                  "macro calls nested deeper than 64");
}

// A macro that recurses through deeply nested statements reaches the evaluation-depth limit long before
// it could exhaust even a small (1 MiB) thread stack.
TEST(JinjaLimitTest, DeepEvaluationFitsASmallStack) {
  std::string body;
  for (int i = 0; i < 60; ++i) body += "{% if true %}";
  body += "{{ r(n + 1) }}";
  for (int i = 0; i < 60; ++i) body += "{% endif %}";
  struct Job {
    std::string source;
    std::string message;
  } job{"{% macro r(n) %}" + body + "{% endmacro %}{{ r(0) }}", ""};
  pthread_attr_t attributes;
  ASSERT_EQ(pthread_attr_init(&attributes), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attributes, 1 << 20), 0);
  pthread_t thread;
  ASSERT_EQ(pthread_create(
                &thread, &attributes,
                [](void* arg) -> void* {
                  auto* j = static_cast<Job*>(arg);
                  j->message = render_error(j->source);
                  return nullptr;
                },
                &job),
            0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attributes);
  EXPECT_CONTAINS(job.message, "template evaluation nested deeper than 1000 levels");
}

TEST(JinjaLimitTest, HugeRangeFailsBeforeAllocating) {
  EXPECT_CONTAINS(render_error("{{ range(10 ** 12)|length }}"), "exceeded its work limit");
}

TEST(JinjaLimitTest, StringDoublingStopsAtTheSizeLimit) {
  EXPECT_CONTAINS(
      render_error("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
                   "{% endfor %}{{ ns.s|length }}"),
      "over the limit of 67108864");
}

TEST(JinjaLimitTest, DeepNestingIsRefusedAtParse) {
  const std::string deep = "{{ " + std::string(500, '(') + "1" + std::string(500, ')') + " }}";
  EXPECT_CONTAINS(parse_error(deep), "nested deeper than 100 levels");
  std::string deep_ifs;
  for (int i = 0; i < 500; ++i) deep_ifs += "{% if true %}";
  EXPECT_CONTAINS(parse_error(deep_ifs), "nested deeper than 100 levels");
}

TEST(JinjaLimitTest, DeepInputIsRefused) {
  std::string deep = "[{\"role\": \"user\", \"content\": ";
  for (int i = 0; i < 1000; ++i) deep += "[";
  for (int i = 0; i < 1000; ++i) deep += "]";
  deep += "}]";
  ChatTemplateInputs inputs;
  inputs.messages = nlohmann::ordered_json::parse(deep);
  EXPECT_CONTAINS(render_error("{{ messages|length }}", inputs), "nested deeper than 256 levels");
}

TEST(JinjaLimitTest, ValuesBuiltDeeperThanTheLimitAreRefused) {
  EXPECT_CONTAINS(
      render_error(
          "{% set ns = namespace(v=1) %}{% for i in range(1000) %}{% set ns.v = [ns.v] %}{% endfor %}"),
      "nested deeper than 256 levels");
}

TEST(JinjaLimitTest, SelfReferentialNamespaceCannotRecurseForever) {
  EXPECT_CONTAINS(render_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns|tojson }}"),
                  "nested deeper than 256");
  const Result<ChatTemplate> parsed = ChatTemplate::parse(
      "{% set ns = namespace() %}{% set ns.me = [ns] %}{{ ns.me[0].me[0].me is defined }}");
  ASSERT_TRUE(parsed.is_ok());
  const Result<std::string> rendered = parsed->render({});
  ASSERT_TRUE(rendered.is_ok()) << rendered.error_message();
  EXPECT_EQ(*rendered, "True");
}

// With small limits (the interpreter's own API), an endless loop stops after its budget.
TEST(JinjaLimitTest, WorkBudgetStopsNestedLoops) {
  const auto program = jinja::parse_program(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  jinja::RenderOptions options;
  options.limits.max_work = 1'000'000;
  try {
    jinja::render_program(*program, {}, options);
    FAIL() << "the nested loops ran to completion";
  } catch (const jinja::JinjaError& error) {
    EXPECT_CONTAINS(error.what(), "exceeded its work limit (1000000 steps)");
  }
}

// The default budget bounds a hostile template's time too: 10^10 loop iterations (building `loop` each
// time, the costliest iteration) stop within seconds.
TEST(JinjaLimitTest, DefaultBudgetStopsAnEndlessTemplateQuickly) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_CONTAINS(
      render_error("{% for i in range(100000) %}{% for j in range(100000) %}{% set x = loop.index %}"
                   "{% endfor %}{% endfor %}"),
      "exceeded its work limit");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 20.0);
  std::printf("[ limits   ] default work budget exhausted in %.2f s\n", seconds);
}

TEST(JinjaLimitTest, OutputSizeIsBounded) {
  const auto program = jinja::parse_program("{% for i in range(1000) %}{{ 'x' * 1000 }}{% endfor %}");
  jinja::RenderOptions options;
  options.limits.max_string_bytes = 100'000;
  EXPECT_THROW(jinja::render_program(*program, {}, options), jinja::JinjaError);
}

}  // namespace
}  // namespace helium
