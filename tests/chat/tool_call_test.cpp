// Tests of chat/tool_call.h: the request's tools and schema conversion, argument normalisation, the
// JSON extent scanner, and randomised properties of every content parser: any chunking gives what one
// chunk gives, no non-space input byte is lost (text plus the raw markup of the calls is the input),
// output without calls is the input exactly, and every call has object arguments and re-parses alone
// to itself.
#include "chat/tool_call.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "chat/output_parser_harmony.h"

namespace helium {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

ToolSet tool_set(const json& tools) {
  Result<ToolSet> set = ToolSet::from_request_tools(tools);
  EXPECT_TRUE(set.is_ok()) << set.status().message();
  return set.is_ok() ? std::move(set).value() : ToolSet();
}

TEST(ToolSet, ReadsTheThreeRequestShapesAndSkipsUnnamedTools) {
  ToolSet set = tool_set(json::parse(R"([
    {"type": "function", "function": {"name": "chat_shape", "parameters": {"properties": {"a": {"type": "integer"}}}}},
    {"type": "function", "name": "responses_shape", "parameters": {"properties": {"b": {"type": "boolean"}}}},
    {"name": "anthropic_shape", "input_schema": {"properties": {"c": {"type": "array"}}}},
    {"type": "custom", "name": "apply_patch"},
    {"type": "web_search"}, 7, {"function": {"name": ""}}
  ])"));
  EXPECT_TRUE(set.restricts_names());
  for (const char* name : {"chat_shape", "responses_shape", "anthropic_shape", "apply_patch"}) {
    EXPECT_TRUE(set.accepts(name)) << name;
  }
  EXPECT_FALSE(set.accepts("web_search"));
  EXPECT_FALSE(set.accepts(""));
  EXPECT_EQ(set.convert_parameter("chat_shape", "a", "12"), ordered_json(12));
  EXPECT_EQ(set.convert_parameter("responses_shape", "b", "false"), ordered_json(false));
  EXPECT_EQ(set.convert_parameter("anthropic_shape", "c", "[1]"), ordered_json::parse("[1]"));
  EXPECT_EQ(set.convert_parameter("apply_patch", "input", "*** Begin Patch"), ordered_json("*** Begin Patch"));
}

TEST(ToolSet, NullIsUnrestrictedAndOtherValuesAreErrors) {
  EXPECT_FALSE(tool_set(nullptr).restricts_names());
  EXPECT_TRUE(tool_set(nullptr).accepts("anything"));
  EXPECT_FALSE(tool_set(json::array()).accepts("anything"));
  Result<ToolSet> bad = ToolSet::from_request_tools(json("tools"));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.error_message().find("expected an array"), std::string::npos) << bad.error_message();
}

TEST(ToolSet, ConvertsBySchemaType) {
  ToolSet set = tool_set(json::parse(R"([{"name": "f", "input_schema": {"properties": {
    "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"},
    "o": {"type": "object"}, "a": {"type": "array"}, "sn": {"type": ["string", "null"]},
    "any": {"anyOf": [{"type": "integer"}, {"type": "array"}]}, "e": {"enum": [1, 2]}, "free": {}}}}])"));
  EXPECT_EQ(set.convert_parameter("f", "s", " 12 "), ordered_json(" 12 "));  // strings are raw, spaces kept
  EXPECT_EQ(set.convert_parameter("f", "i", " 12 "), ordered_json(12));
  EXPECT_EQ(set.convert_parameter("f", "i", "twelve"), ordered_json("twelve"));
  EXPECT_EQ(set.convert_parameter("f", "n", "-1.5e3"), ordered_json(-1500.0));
  EXPECT_EQ(set.convert_parameter("f", "b", "FALSE"), ordered_json(false));
  EXPECT_EQ(set.convert_parameter("f", "b", "1"), ordered_json("1"));
  EXPECT_EQ(set.convert_parameter("f", "o", "{\"k\": [1, {}]}"), ordered_json::parse("{\"k\": [1, {}]}"));
  EXPECT_EQ(set.convert_parameter("f", "o", "[1]"), ordered_json("[1]"));  // an array is not an object
  EXPECT_EQ(set.convert_parameter("f", "a", "[\"x\"]"), ordered_json::parse("[\"x\"]"));
  EXPECT_EQ(set.convert_parameter("f", "sn", "null"), ordered_json(nullptr));
  EXPECT_EQ(set.convert_parameter("f", "sn", "42"), ordered_json("42"));
  EXPECT_EQ(set.convert_parameter("f", "any", "[2]"), ordered_json::parse("[2]"));
  EXPECT_EQ(set.convert_parameter("f", "e", "2"), ordered_json(2));
  EXPECT_EQ(set.convert_parameter("f", "free", "2"), ordered_json(2));         // no type: JSON if it parses
  EXPECT_EQ(set.convert_parameter("f", "free", "two"), ordered_json("two"));  // else the text
  EXPECT_EQ(set.convert_parameter("f", "unknown", "{\"x\": 1}"), ordered_json::parse("{\"x\": 1}"));
  EXPECT_EQ(set.convert_parameter("g", "s", "x"), ordered_json("x"));
}

TEST(NormalizeArguments, ObjectsStringsAndEverythingElse) {
  EXPECT_EQ(normalize_arguments(ordered_json::parse(R"({"b": 1, "a": {"c": "é"}})")), R"({"b":1,"a":{"c":"é"}})");
  EXPECT_EQ(normalize_arguments(ordered_json(R"( {"a": [1, 2]} )")), R"({"a":[1,2]})");
  EXPECT_EQ(normalize_arguments(ordered_json()), "{}");
  EXPECT_FALSE(normalize_arguments(ordered_json("[1]")).has_value());
  EXPECT_FALSE(normalize_arguments(ordered_json("{oops")).has_value());
  EXPECT_FALSE(normalize_arguments(ordered_json(3)).has_value());
  EXPECT_FALSE(normalize_arguments(ordered_json::parse("[]")).has_value());
}

TEST(DumpCompactJson, ReplacesInvalidUtf8InsteadOfThrowing) {
  EXPECT_EQ(dump_compact_json(ordered_json(std::string("a\xFF") + "b")), "\"a\xEF\xBF\xBD" "b\"");
}

TEST(JsonValueScanner, FindsTheEndAcrossChunksAndRejectsEarly) {
  const std::string text = R"({"a": "}]\"{", "b": [1, {"c": null}]} trailing)";
  JsonValueScanner whole;
  EXPECT_EQ(whole.scan(text), JsonValueScanner::State::kComplete);
  EXPECT_EQ(text.substr(0, whole.length()), R"({"a": "}]\"{", "b": [1, {"c": null}]})");
  JsonValueScanner growing;
  for (size_t n = 0; n < whole.length(); ++n) {
    EXPECT_EQ(growing.scan(std::string_view(text).substr(0, n)), JsonValueScanner::State::kInside) << n;
  }
  EXPECT_EQ(growing.scan(text), JsonValueScanner::State::kComplete);
  EXPECT_EQ(growing.length(), whole.length());
  for (const char* invalid : {R"({"a": 1</tool_call>)", "{\"a\": \"line\nbreak\"}", R"({"a": [1}})", "x{}", "}"}) {
    JsonValueScanner scanner;
    EXPECT_EQ(scanner.scan(invalid), JsonValueScanner::State::kInvalid) << invalid;
  }
}

// ---------------------------------------------------------------------------------------------------
// Randomised properties

struct Item {
  enum Kind { kText, kReasoning, kCall } kind;
  std::string text;  // kText, kReasoning
  ParsedToolCall call;
  bool operator==(const Item&) const = default;
};

class RecordingSink final : public ContentSink {
 public:
  void on_text(std::string_view text) override { add(Item::kText, text); }
  void on_reasoning(std::string_view text) override { add(Item::kReasoning, text); }
  void on_tool_call(ParsedToolCall call) override { items.push_back(Item{Item::kCall, "", std::move(call)}); }
  std::vector<Item> items;

 private:
  void add(Item::Kind kind, std::string_view text) {
    ASSERT_FALSE(text.empty());
    if (!items.empty() && items.back().kind == kind) {
      items.back().text.append(text);
    } else {
      items.push_back(Item{kind, std::string(text), {}});
    }
  }
};

using ParserFactory = std::function<std::unique_ptr<ContentParser>(const ToolSet&)>;

std::vector<Item> parse_in_chunks(const ParserFactory& factory, const ToolSet& tools, std::string_view input,
                                  const std::vector<size_t>& cuts) {
  std::unique_ptr<ContentParser> parser = factory(tools);
  RecordingSink sink;
  size_t pos = 0;
  for (size_t cut : cuts) {
    parser->feed(input.substr(pos, cut - pos), sink);
    pos = cut;
  }
  parser->feed(input.substr(pos), sink);
  parser->finish(sink);
  return sink.items;
}

std::string without_space(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c != ' ' && c != '\n' && c != '\t' && c != '\r') out.push_back(c);
  }
  return out;
}

struct FuzzFormat {
  const char* name;
  ParserFactory factory;
  std::vector<std::string> valid_calls;  // each parses alone to exactly one or more calls
  std::vector<std::string> fragments;    // text and broken markup
  bool whole_message_call;               // Llama 3: a call is the whole message, never mixed with text
};

json fuzz_tools() {
  return json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "write_file", "parameters": {"properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}
  ])");
}

std::vector<std::string> common_text_fragments() {
  return {"Hello", " ", "\n", "\n\n", "a < b", "<", "<tool", "</", "{", "}", "\"", "é", "東京", "🌧", ">",
          "<think>", "</think>", "x=1;", "<|", "|>", "\\", "]", "<tool_call", "</tool_call>", "<function=", "="};
}

std::vector<FuzzFormat> fuzz_formats() {
  std::vector<std::string> text = common_text_fragments();
  FuzzFormat hermes{"hermes", make_hermes_tool_call_parser,
                    {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>",
                     "<tool_call>{\"name\": \"write_file\", \"arguments\": {\"path\": \"a\", \"content\": \"} </tool_call> "
                     "<tool_call> \\\" 東京\"}}</tool_call>",
                     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}\n</tool_call>"},
                    text, false};
  for (std::string broken : {"<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>",
                             "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }}\n</tool_call>",
                             "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}\n</tool_call>",
                             "<tool_call>", "<tool_call>\n{\"name\": \"get_weather\"", "<tool_call> {\"a\": \""}) {
    hermes.fragments.push_back(broken);
  }
  FuzzFormat coder{"qwen3_coder", make_qwen3_coder_tool_call_parser,
                   {"<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n"
                    "</parameter>\n</function>\n</tool_call>",
                    "<tool_call><function=write_file><parameter=content>\n</function> <parameter=x> </tool_call>\n"
                    "</parameter></function></tool_call>",
                    "<tool_call>\n<function=get_weather>\n</function>\n<function=write_file>\n</function>\n</tool_call>"},
                   text, false};
  for (std::string broken : {"<tool_call>\n<function=nope>\n</function>\n</tool_call>",
                             "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</tool_call>",
                             "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis", "<tool_call>\n<function=",
                             "<tool_call>\n{\"name\": \"get_weather\"}\n</tool_call>", "<parameter=city>"}) {
    coder.fragments.push_back(broken);
  }
  FuzzFormat llama{"llama3_json", make_llama3_tool_call_parser,
                   {"{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
                    "<|python_tag|>{\"name\": \"write_file\", \"parameters\": {\"content\": \"{;}\"}}",
                    "{\"name\": \"get_weather\", \"parameters\": {}}; {\"name\": \"write_file\", \"arguments\": {}}"},
                   text, true};
  for (std::string broken : {"{\"name\": \"nope\", \"parameters\": {}}", "{\"name\": \"get_weather\"}", "{\"a\": [",
                             "<|python_tag|>", ";", "{}"}) {
    llama.fragments.push_back(broken);
  }
  return {hermes, coder, llama};
}

TEST(ContentParserProperties, ChunkingInvariantLosslessAndCallsReparse) {
  const ToolSet tools = tool_set(fuzz_tools());
  std::mt19937 rng(20240611);
  for (const FuzzFormat& format : fuzz_formats()) {
    int inputs_with_calls = 0, inputs_without_calls = 0;
    for (int trial = 0; trial < 400; ++trial) {
      std::string input;
      if (format.whole_message_call && trial % 3 == 0) {
        input = " " + format.valid_calls[rng() % format.valid_calls.size()] + "\n";
      } else {
        const int pieces = 1 + static_cast<int>(rng() % 8);
        for (int p = 0; p < pieces; ++p) {
          const bool call = !format.whole_message_call && rng() % 4 == 0;
          const auto& pool = call ? format.valid_calls : format.fragments;
          input += pool[rng() % pool.size()];
        }
      }
      SCOPED_TRACE(std::string(format.name) + " input: " + json(input).dump());
      const std::vector<Item> whole = parse_in_chunks(format.factory, tools, input, {});

      std::vector<size_t> every_byte;
      for (size_t i = 1; i < input.size(); ++i) every_byte.push_back(i);
      ASSERT_EQ(parse_in_chunks(format.factory, tools, input, every_byte), whole) << "byte by byte";
      for (int r = 0; r < 3; ++r) {
        std::vector<size_t> cuts;
        for (size_t i = 1; i < input.size(); ++i) {
          if (rng() % 4 == 0) cuts.push_back(i);
        }
        ASSERT_EQ(parse_in_chunks(format.factory, tools, input, cuts), whole) << "random cuts " << r;
      }

      std::string reconstructed, text;
      size_t calls = 0;
      for (const Item& item : whole) {
        ASSERT_NE(item.kind, Item::kReasoning);
        if (item.kind == Item::kText) {
          reconstructed += item.text;
          text += item.text;
          continue;
        }
        ++calls;
        reconstructed += item.call.raw;
        EXPECT_TRUE(tools.accepts(item.call.name));
        std::optional<ordered_json> arguments = parse_json_text(item.call.arguments);
        ASSERT_TRUE(arguments && arguments->is_object()) << item.call.arguments;
        if (!item.call.raw.empty()) {
          // A call's own markup, parsed alone, gives the call again (first of its block).
          std::vector<Item> alone = parse_in_chunks(format.factory, tools, item.call.raw, {});
          ASSERT_FALSE(alone.empty());
          EXPECT_EQ(alone.front(), item);
        }
      }
      EXPECT_EQ(without_space(reconstructed), without_space(input));
      if (calls == 0) {
        EXPECT_EQ(text, input);  // failing closed gives back every byte
        ++inputs_without_calls;
      } else {
        ++inputs_with_calls;
      }
    }
    // The generator must exercise both sides of the property.
    EXPECT_GT(inputs_with_calls, 50) << format.name;
    EXPECT_GT(inputs_without_calls, 50) << format.name;
  }
}

TEST(ContentParserProperties, HarmonyChunkingInvariantAndMarkerFreeTextExact) {
  const ToolSet tools = tool_set(fuzz_tools());
  const std::vector<std::string> fragments = {
      "<|channel|>analysis<|message|>", "<|channel|>final<|message|>", "<|start|>assistant",
      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>", "{\"city\": \"Paris\"}",
      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
      "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\":\"Paris\"}<|end|>",
      "<|end|>", "<|call|>", "<|return|>", "<|channel|>commentary to=functions.nope<|message|>", "<|channel|>",
      "<|message|>", "Hello", " ", "東京", "<|", "|>", "{", "<|channel|>bogus<|message|>", "<|constrain|>"};
  std::mt19937 rng(99);
  int with_calls = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string input;
    const int pieces = 1 + static_cast<int>(rng() % 8);
    for (int p = 0; p < pieces; ++p) input += fragments[rng() % fragments.size()];
    SCOPED_TRACE("input: " + json(input).dump());
    const std::vector<Item> whole = parse_in_chunks(make_harmony_parser, tools, input, {});
    std::vector<size_t> every_byte;
    for (size_t i = 1; i < input.size(); ++i) every_byte.push_back(i);
    ASSERT_EQ(parse_in_chunks(make_harmony_parser, tools, input, every_byte), whole);
    for (const Item& item : whole) {
      if (item.kind != Item::kCall) continue;
      ++with_calls;
      EXPECT_EQ(item.call.name, "get_weather");
      EXPECT_EQ(item.call.arguments, R"({"city":"Paris"})");
    }
    if (input.find("<|") == std::string::npos) {
      ASSERT_EQ(whole.size(), 1u);
      EXPECT_EQ(whole[0].text, input);
    }
  }
  EXPECT_GT(with_calls, 50);
}

}  // namespace
}  // namespace helium
