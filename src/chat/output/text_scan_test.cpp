#include "chat/output/text_scan.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/output/tool_schema.h"

namespace infernix::output {
namespace {

TEST(TextScan, MatchLiteral) {
  EXPECT_EQ(MatchLiteral("<think>x", "<think>"), Match::kYes);
  EXPECT_EQ(MatchLiteral("<thi", "<think>"), Match::kPartial);
  EXPECT_EQ(MatchLiteral("", "<think>"), Match::kPartial);
  EXPECT_EQ(MatchLiteral("<thx", "<think>"), Match::kNo);
}

TEST(TextScan, MatchToolCallStart) {
  ToolCallForm form = ToolCallForm::kXml;
  EXPECT_EQ(MatchToolCallStart("<tool_call>\n{\"name\"", false, &form), Match::kYes);
  EXPECT_EQ(form, ToolCallForm::kJson);
  EXPECT_EQ(MatchToolCallStart("<tool_call>\n<function=f>", false, &form), Match::kYes);
  EXPECT_EQ(form, ToolCallForm::kXml);
  EXPECT_EQ(MatchToolCallStart("<tool_call>{ \n \"", false, &form), Match::kYes);
  for (const char* partial :
       {"<", "<tool_ca", "<tool_call>", "<tool_call>\n ", "<tool_call>\n{", "<tool_call>\n<fun"}) {
    EXPECT_EQ(MatchToolCallStart(partial, false, &form), Match::kPartial) << partial;
    EXPECT_EQ(MatchToolCallStart(partial, true, &form), Match::kNo) << partial;
  }
  for (const char* no : {"<tool_call> tags", "<tool_call>{}", "<tool_call>\n<func>", "<tool>", "<tool_call>{x"})
    EXPECT_EQ(MatchToolCallStart(no, false, &form), Match::kNo) << no;
  EXPECT_EQ(MatchToolCallStart("<tool_call>" + std::string(100, ' '), false, &form), Match::kNo);
}

bool InFenceAfter(std::string_view text) {
  FenceTracker fence;
  fence.Feed(text);
  return fence.InFenceBeforeMarkup();
}

TEST(TextScan, FenceTracker) {
  EXPECT_FALSE(InFenceAfter(""));
  EXPECT_TRUE(InFenceAfter("```\n"));
  EXPECT_TRUE(InFenceAfter("text\n```json\n"));
  EXPECT_TRUE(InFenceAfter("```"));  // "```<" opens a fence whose info string starts with '<'
  EXPECT_TRUE(InFenceAfter("   ~~~\n"));
  EXPECT_FALSE(InFenceAfter("    ```\n"));  // four spaces: indented code, not a fence
  EXPECT_FALSE(InFenceAfter("a ```\n"));
  EXPECT_FALSE(InFenceAfter("``\n"));
  EXPECT_FALSE(InFenceAfter("```\ncode\n```\n"));
  EXPECT_TRUE(InFenceAfter("````\n```\n"));   // a shorter run does not close
  EXPECT_TRUE(InFenceAfter("```\n~~~\n"));    // nor does the other character
  EXPECT_FALSE(InFenceAfter("~~~\n~~~~~\n"));
  // Fed in pieces, the same.
  FenceTracker fence;
  for (char c : std::string_view("x\n`` `\n``")) fence.Feed(std::string_view(&c, 1));
  EXPECT_FALSE(fence.InFenceBeforeMarkup());
  fence.Feed("\n``");
  fence.Feed("`\n");
  EXPECT_TRUE(fence.InFenceBeforeMarkup());
}

TEST(TextScan, NewlineTrimmer) {
  NewlineTrimmer trimmer;
  EXPECT_EQ(trimmer.Add("\n\n"), "");
  EXPECT_EQ(trimmer.Add("\nab\n"), "ab");
  EXPECT_EQ(trimmer.Add("\n"), "");
  EXPECT_EQ(trimmer.Add("c"), "\n\nc");
  trimmer.StartSegment();
  EXPECT_EQ(trimmer.Add("\n\n"), "");
  EXPECT_EQ(trimmer.Add(" d\n"), " d");  // held newlines survive a segment start, leading ones do not
  EXPECT_EQ(trimmer.Add("\n"), "");
}

TEST(TextScan, JsonEscapingMatchesNlohmann) {
  std::string all;
  for (int c = 1; c < 128; ++c) all += static_cast<char>(c);
  all += "é日本\xF0\x9F\x98\x80";
  std::string escaped = "\"";
  AppendJsonEscaped(all, &escaped);
  escaped += '"';
  EXPECT_EQ(escaped, DumpJson(nlohmann::ordered_json(all)));
  EXPECT_EQ(nlohmann::json::parse(escaped).get<std::string>(), all);
}

}  // namespace
}  // namespace infernix::output
