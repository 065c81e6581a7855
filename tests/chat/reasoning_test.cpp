// Tests of chat/reasoning.h: the <think> splitter on its own (what each feed makes certain, what finish
// resolves), and a randomised check that any chunking splits reasoning and content the same way.
#include "chat/reasoning.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace helium {
namespace {

ReasoningSplit split_in_chunks(bool starts_in_reasoning, std::string_view input, const std::vector<size_t>& cuts) {
  ThinkTagSplitter splitter(starts_in_reasoning);
  ReasoningSplit total;
  auto add = [&](const ReasoningSplit& split) {
    // Reasoning is only at the start: once content has come, no reasoning may follow.
    if (!total.content.empty()) {
      EXPECT_TRUE(split.reasoning.empty());
    }
    total.reasoning += split.reasoning;
    total.content += split.content;
  };
  size_t pos = 0;
  for (size_t cut : cuts) {
    add(splitter.feed(input.substr(pos, cut - pos)));
    pos = cut;
  }
  add(splitter.feed(input.substr(pos)));
  add(splitter.finish());
  return total;
}

TEST(ThinkTagSplitter, EachFeedReleasesWhatIsCertain) {
  ThinkTagSplitter splitter(/*starts_in_reasoning=*/false);
  ReasoningSplit split = splitter.feed("\n<think>");
  EXPECT_EQ(split.reasoning, "");
  EXPECT_EQ(split.content, "");
  split = splitter.feed("\nFirst line.\n");
  EXPECT_EQ(split.reasoning, "First line.");  // the newline waits: it is dropped if </think> follows
  split = splitter.feed("Second.</th");
  EXPECT_EQ(split.reasoning, "\nSecond.");
  split = splitter.feed("ink>\n\n");
  EXPECT_EQ(split.reasoning, "");
  EXPECT_EQ(split.content, "");
  split = splitter.feed("Answer <think> stays");
  EXPECT_EQ(split.content, "Answer <think> stays");
  split = splitter.finish();
  EXPECT_EQ(split.reasoning, "");
  EXPECT_EQ(split.content, "");
}

TEST(ThinkTagSplitter, FinishResolvesWhatWasHeldBack) {
  ThinkTagSplitter partial_open(false);
  EXPECT_EQ(partial_open.feed("  <thi").content, "");
  EXPECT_EQ(partial_open.finish().content, "  <thi");

  ThinkTagSplitter unterminated(false);
  EXPECT_EQ(unterminated.feed("<think>abc </thi").reasoning, "abc");
  EXPECT_EQ(unterminated.finish().reasoning, " </thi");

  ThinkTagSplitter inside(true);
  EXPECT_EQ(inside.feed("\n\n").reasoning, "");
  EXPECT_EQ(inside.finish().reasoning, "");
}

TEST(ThinkTagSplitter, AnyChunkingSplitsTheSameWay) {
  const std::vector<std::string> fragments = {"<think>", "</think>", "<thi", "</th", "\n", " ", "a", "é", "東京",
                                              "<", ">", "think", "/"};
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::string input;
    const int pieces = 1 + static_cast<int>(rng() % 10);
    for (int p = 0; p < pieces; ++p) input += fragments[rng() % fragments.size()];
    const bool starts_in_reasoning = trial % 2 == 1;
    SCOPED_TRACE(input + (starts_in_reasoning ? " (starts in reasoning)" : ""));
    const ReasoningSplit whole = split_in_chunks(starts_in_reasoning, input, {});
    std::vector<size_t> every_byte;
    for (size_t i = 1; i < input.size(); ++i) every_byte.push_back(i);
    const ReasoningSplit bytes = split_in_chunks(starts_in_reasoning, input, every_byte);
    EXPECT_EQ(bytes.reasoning, whole.reasoning);
    EXPECT_EQ(bytes.content, whole.content);
    // Without an opening tag at the start, output that does not start inside reasoning is all content.
    const size_t first = input.find_first_not_of(" \n");
    if (!starts_in_reasoning && (first == std::string::npos || input.compare(first, 7, "<think>") != 0)) {
      EXPECT_EQ(whole.content, input);
      EXPECT_EQ(whole.reasoning, "");
    }
    // Reasoning never ends or starts with whitespace, and never contains the closing tag.
    if (!whole.reasoning.empty()) {
      EXPECT_NE(whole.reasoning.front(), '\n');
      EXPECT_NE(whole.reasoning.back(), ' ');
    }
    EXPECT_EQ(whole.reasoning.find("</think>"), std::string::npos);
  }
}

}  // namespace
}  // namespace helium
