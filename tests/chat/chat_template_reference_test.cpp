// tests/chat/chat_template_reference_test.cpp — every committed real chat template (tests/data/chat/
// templates.json) rendered with every committed conversation (conversations.json) by helium and by
// @huggingface/jinja (tools/chat/render_reference.mjs under node), compared byte for byte.
//
// A pair matches when both render the same bytes or both raise. Two documented exceptions are checked
// against Python Jinja instead (tests/data/chat/python_goldens.json, made by tools/chat/render_python.py):
// pairs the reference cannot render because it lacks a feature (e.g. the `reject` filter of Llama 3.x),
// and pairs a conversation lists under "reference_differs" (a reference bug on a real template). For
// those the test also checks that the reference still raises or differs, so the list stays true.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "chat/chat_template.h"

namespace helium {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

const std::string kDataDir = std::string(HELIUM_SOURCE_DIR) + "/tests/data/chat";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Printable context around the first byte where two renderings differ.
std::string describe_difference(const std::string& expected, const std::string& actual) {
  size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i]) ++i;
  auto excerpt = [&](const std::string& s) {
    const size_t from = i > 60 ? i - 60 : 0;
    std::string out;
    for (char c : s.substr(from, 140)) {
      if (c == '\n')
        out += "\\n";
      else if (c == '\r')
        out += "\\r";
      else
        out.push_back(c);
    }
    return out;
  };
  return "first difference at byte " + std::to_string(i) + " (lengths " + std::to_string(expected.size()) +
         " and " + std::to_string(actual.size()) + ")\n  expected: ..." + excerpt(expected) +
         "\n  helium:   ..." + excerpt(actual);
}

ChatTemplateInputs inputs_for(const Json& fixture, const Json& conversation, const Json& template_entry) {
  ChatTemplateInputs inputs;
  inputs.messages = conversation["messages"];
  if (conversation.contains("tools")) {
    inputs.tools = Json::array();
    for (const Json& name : conversation["tools"])
      inputs.tools.push_back(fixture["tools"][name.get<std::string>()]);
  }
  inputs.add_generation_prompt = conversation.value("add_generation_prompt", true);
  if (conversation.contains("extra")) inputs.extra = conversation["extra"];
  if (!inputs.extra.contains("strftime_now")) inputs.extra["strftime_now"] = fixture["now"];
  inputs.bos_token = template_entry["bos_token"].get<std::string>();
  inputs.eos_token = template_entry["eos_token"].get<std::string>();
  return inputs;
}

// Why the reference could not be run, or empty when it can.
std::string reference_unavailable() {
  if (std::system("node --version > /dev/null 2>&1") != 0) return "node is not on PATH";
  const std::string package = std::string(HELIUM_NPM_TOOLS) + "/node_modules/@huggingface/jinja/package.json";
  if (!fs::exists(package)) return "@huggingface/jinja is not installed (" + package + ")";
  return {};
}

using PairKey = std::pair<std::string, std::string>;  // (template, conversation)

// Runs the reference over every pair; fails the test and returns an empty map when node fails.
std::map<PairKey, Json> run_reference() {
  const fs::path dir = fs::temp_directory_path() / ("helium_chat_reference_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string out_path = (dir / "reference.json").string();
  const std::string log_path = (dir / "reference.log").string();
  // Fixed time zone and locale: strftime_now's month names come from the locale in the reference.
  const std::string command = "TZ=UTC LC_ALL=C node '" + std::string(HELIUM_SOURCE_DIR) +
                              "/tools/chat/render_reference.mjs' '" + HELIUM_NPM_TOOLS + "' '" + kDataDir +
                              "/templates.json' '" + kDataDir + "/conversations.json' '" + out_path +
                              "' > '" + log_path + "' 2>&1";
  std::map<PairKey, Json> results;
  if (std::system(command.c_str()) != 0) {
    ADD_FAILURE() << "the reference failed:\n" << command << "\n" << read_text(log_path);
  } else {
    const Json out = Json::parse(read_text(out_path));
    for (const Json& r : out["results"]) {
      results[{r["template"].get<std::string>(), r["conversation"].get<std::string>()}] = r;
    }
  }
  fs::remove_all(dir);
  return results;
}

TEST(ChatTemplateReferenceTest, EveryTemplateAndConversationMatches) {
  if (const std::string why = reference_unavailable(); !why.empty()) {
    GTEST_SKIP() << "cannot compare with @huggingface/jinja: " << why
                 << "; run scripts/install-deps (it installs node packages into build/npm-tools)";
  }
  const Json templates = Json::parse(read_text(kDataDir + "/templates.json"));
  const Json fixture = Json::parse(read_text(kDataDir + "/conversations.json"));
  const Json goldens = Json::parse(read_text(kDataDir + "/python_goldens.json"));
  std::map<PairKey, Json> python;
  for (const Json& g : goldens["results"]) {
    python[{g["template"].get<std::string>(), g["conversation"].get<std::string>()}] = g;
  }
  const std::map<PairKey, Json> reference = run_reference();
  ASSERT_FALSE(reference.empty());

  int total = 0, identical = 0, both_raised = 0, checked_against_python = 0;
  for (const Json& t : templates) {
    const std::string template_name = t["name"].get<std::string>();
    const Result<ChatTemplate> chat =
        ChatTemplate::parse(read_text(kDataDir + "/" + t["file"].get<std::string>()));
    ASSERT_TRUE(chat.is_ok()) << template_name << ": " << chat.error_message();
    for (const Json& c : fixture["conversations"]) {
      const std::string conversation_name = c["name"].get<std::string>();
      const PairKey key{template_name, conversation_name};
      SCOPED_TRACE(template_name + " x " + conversation_name);
      ++total;
      const auto ref = reference.find(key);
      ASSERT_NE(ref, reference.end()) << "the reference returned no result for this pair";
      const Result<std::string> ours = chat->render(inputs_for(fixture, c, t));
      const bool listed_as_differing =
          c.contains("reference_differs") && c["reference_differs"].contains(template_name);
      const auto golden = python.find(key);

      if (listed_as_differing || (ref->second.contains("error") && ours.is_ok())) {
        // A documented reference gap or bug: helium must render what Python Jinja renders.
        ASSERT_NE(golden, python.end())
            << "no Python golden for this pair (regenerate python_goldens.json with "
               "tools/chat/render_python.py --goldens)";
        if (listed_as_differing) {
          ASSERT_TRUE(ref->second.contains("output")) << "the reference now raises: " << ref->second["error"];
          EXPECT_NE(ref->second["output"].get<std::string>(), golden->second["output"].get<std::string>())
              << "listed under reference_differs, but the reference now renders like Python: remove it";
        } else {
          EXPECT_EQ(ref->second["error"], golden->second["reference_error"])
              << "the reference fails differently now";
        }
        ASSERT_TRUE(ours.is_ok()) << "helium raised: " << ours.error_message();
        const std::string expected = golden->second["output"].get<std::string>();
        if (*ours == expected) {
          ++checked_against_python;
        } else {
          ADD_FAILURE() << "helium differs from Python Jinja: " << describe_difference(expected, *ours);
        }
        continue;
      }
      if (ref->second.contains("error")) {
        if (ours.is_ok()) {
          ADD_FAILURE() << "the reference raised (" << ref->second["error"] << ") but helium rendered";
        } else {
          ++both_raised;
          std::printf("[ both raise ] %s x %s\n    reference: %s\n    helium:    %s\n", template_name.c_str(),
                      conversation_name.c_str(), ref->second["error"].get<std::string>().c_str(),
                      ours.error_message().c_str());
        }
        continue;
      }
      const std::string expected = ref->second["output"].get<std::string>();
      if (!ours.is_ok()) {
        ADD_FAILURE() << "helium raised (" << ours.error_message() << ") but the reference rendered";
      } else if (*ours != expected) {
        ADD_FAILURE() << "helium differs from the reference: " << describe_difference(expected, *ours);
      } else {
        ++identical;
      }
    }
  }
  const int matched = identical + both_raised + checked_against_python;
  std::printf(
      "[ reference ] %d of %d (template x conversation) pairs match: %d byte-identical, %d raise in both, "
      "%d equal to Python Jinja where the reference lacks a feature or is wrong\n",
      matched, total, identical, both_raised, checked_against_python);
  EXPECT_EQ(matched, total);
  EXPECT_GE(total, 7 * 12);
}

}  // namespace
}  // namespace helium
