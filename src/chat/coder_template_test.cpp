// Golden tests with templates written for these tests in the style of the published Qwen3-Coder /
// Qwen3.5 chat templates (tools described in XML, tool calls as <function=...> blocks), and a
// template built from macros and call blocks. The expected outputs are derived by hand from the
// Jinja2 documentation's rules.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "chat/jinja/test_util.h"

namespace infernix {
namespace {

constexpr const char* kCoderTemplate = R"TPL({#- Coder-style template: tools in XML, tool calls as <function=...> blocks. -#}
{%- macro render_extra(fields, skip) %}
    {%- if fields is mapping %}
        {%- for key, value in fields | items %}
            {%- if key not in skip %}
                {%- set text = value | tojson if value is mapping or (value is sequence and value is not string) else value | string %}
                {{- '\n<' ~ key ~ '>' ~ text ~ '</' ~ key ~ '>' }}
            {%- endif %}
        {%- endfor %}
    {%- endif %}
{%- endmacro %}
{%- set has_tools = tools is iterable and tools is not none and tools | length > 0 %}
{%- if messages and messages[0].role == 'system' %}
    {%- set system_text = messages[0].content | trim %}
    {%- set conversation = messages[1:] %}
{%- else %}
    {%- set conversation = messages %}
{%- endif %}
{%- if system_text is defined or has_tools %}
    {{- '<|im_start|>system\n' }}
    {{- system_text if system_text is defined else 'You are a coding assistant.' }}
    {%- if has_tools %}
        {{- '\n\n# Tools\n\n<tools>' }}
        {%- for tool in tools %}
            {%- set fn = tool.function if tool.function is defined else tool %}
            {{- '\n<function>\n<name>' ~ fn.name ~ '</name>' }}
            {%- if fn.description is defined and fn.description %}
                {{- '\n<description>' ~ fn.description | trim ~ '</description>' }}
            {%- endif %}
            {{- '\n<parameters>' }}
            {%- if fn.parameters is mapping and fn.parameters.properties is mapping %}
                {%- for name, spec in fn.parameters.properties.items() %}
                    {{- '\n<parameter>\n<name>' ~ name ~ '</name>' }}
                    {%- if spec.type is defined %}
                        {{- '\n<type>' ~ spec.type ~ '</type>' }}
                    {%- endif %}
                    {%- if spec.description is defined %}
                        {{- '\n<description>' ~ spec.description | trim ~ '</description>' }}
                    {%- endif %}
                    {{- render_extra(spec, ['type', 'description']) }}
                    {{- '\n</parameter>' }}
                {%- endfor %}
            {%- endif %}
            {%- if fn.parameters is mapping and fn.parameters.required is defined %}
                {{- '\n<required>' ~ fn.parameters.required | tojson ~ '</required>' }}
            {%- endif %}
            {{- '\n</parameters>\n</function>' }}
        {%- endfor %}
        {{- '\n</tools>\n\nTo call a function, reply with:\n<tool_call>\n<function=NAME>\n<parameter=NAME>\nVALUE\n</parameter>\n</function>\n</tool_call>' }}
    {%- endif %}
    {{- '<|im_end|>\n' }}
{%- endif %}
{%- set ns = namespace(last_user=-1, found=false) %}
{%- for message in conversation[::-1] %}
    {%- if not ns.found and message.role == 'user' and message.content is string and not message.content.startswith('<tool_response>') %}
        {%- set ns.found = true %}
        {%- set ns.last_user = (conversation | length) - 1 - loop.index0 %}
    {%- endif %}
{%- endfor %}
{%- for message in conversation %}
    {%- if message.role == 'assistant' %}
        {%- set content = message.content if message.content is string else '' %}
        {{- '<|im_start|>assistant' }}
        {%- if loop.index0 > ns.last_user and message.reasoning_content is defined and message.reasoning_content %}
            {{- '\n<think>\n' ~ message.reasoning_content | trim ~ '\n</think>\n' }}
        {%- endif %}
        {%- if content | trim %}
            {{- '\n' ~ content | trim }}
        {%- endif %}
        {%- for call in message.tool_calls | default([]) %}
            {%- set call = call.function if call.function is defined else call %}
            {{- '\n<tool_call>\n<function=' ~ call.name ~ '>\n' }}
            {%- if call.arguments is mapping %}
                {%- for arg, value in call.arguments | items %}
                    {{- '<parameter=' ~ arg ~ '>\n' }}
                    {{- value if value is string else value | tojson }}
                    {{- '\n</parameter>\n' }}
                {%- endfor %}
            {%- elif call.arguments is string %}
                {{- call.arguments ~ '\n' }}
            {%- endif %}
            {{- '</function>\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == 'tool' %}
        {%- if loop.first or loop.previtem.role != 'tool' %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' ~ message.content ~ '\n</tool_response>' }}
        {%- if loop.last or loop.nextitem.role != 'tool' %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- else %}
        {{- '<|im_start|>' ~ message.role ~ '\n' ~ message.content ~ '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)TPL";

const nlohmann::ordered_json kTools = nlohmann::ordered_json::parse(R"([
  {"type": "function", "function": {
    "name": "read_file", "description": "  Read a file.\n",
    "parameters": {"type": "object", "properties": {
      "path": {"type": "string", "description": "File path"},
      "lines": {"type": "array", "items": {"type": "integer"}, "description": "First and last line"}},
      "required": ["path"]}}},
  {"name": "run_tests", "description": "Run tests",
   "parameters": {"type": "object", "properties": {"pattern": {"type": "string", "enum": ["test_*", "all"]}}}}
])");

const nlohmann::ordered_json kConversation = nlohmann::ordered_json::parse(R"([
  {"role": "system", "content": "You write Python.\n"},
  {"role": "user", "content": "Hi"},
  {"role": "assistant", "content": "Hello! What do you need?", "reasoning_content": "greeting"},
  {"role": "user", "content": "Read main.py and list the tests."},
  {"role": "assistant", "content": "", "reasoning_content": "I should open the file.",
   "tool_calls": [{"type": "function", "function": {"name": "read_file", "arguments":
     {"path": "main.py", "lines": [1, 20], "options": {"follow": true, "encoding": "utf-8"}, "limit": 2.5,
      "note": "café ☕"}}}]},
  {"role": "tool", "content": "def test_a(): pass"},
  {"role": "tool", "content": "def test_b(): pass"},
  {"role": "assistant", "content": " Two tests: `test_a` and `test_b`.\n", "reasoning_content": "Both found.",
   "tool_calls": [{"function": {"name": "run_tests", "arguments": "{\"pattern\": \"test_*\"}"}}]}
])");

TEST(CoderTemplate, RendersToolsToolCallsAndReasoning) {
  auto tmpl = ChatTemplate::FromString(kCoderTemplate, "", "<|im_end|>");
  std::string expected =
      "<|im_start|>system\n"
      "You write Python.\n"
      "\n"
      "# Tools\n"
      "\n"
      "<tools>\n"
      "<function>\n"
      "<name>read_file</name>\n"
      "<description>Read a file.</description>\n"
      "<parameters>\n"
      "<parameter>\n"
      "<name>path</name>\n"
      "<type>string</type>\n"
      "<description>File path</description>\n"
      "</parameter>\n"
      "<parameter>\n"
      "<name>lines</name>\n"
      "<type>array</type>\n"
      "<description>First and last line</description>\n"
      "<items>{\"type\": \"integer\"}</items>\n"
      "</parameter>\n"
      "<required>[\"path\"]</required>\n"
      "</parameters>\n"
      "</function>\n"
      "<function>\n"
      "<name>run_tests</name>\n"
      "<description>Run tests</description>\n"
      "<parameters>\n"
      "<parameter>\n"
      "<name>pattern</name>\n"
      "<type>string</type>\n"
      "<enum>[\"test_*\", \"all\"]</enum>\n"
      "</parameter>\n"
      "</parameters>\n"
      "</function>\n"
      "</tools>\n"
      "\n"
      "To call a function, reply with:\n"
      "<tool_call>\n"
      "<function=NAME>\n"
      "<parameter=NAME>\n"
      "VALUE\n"
      "</parameter>\n"
      "</function>\n"
      "</tool_call><|im_end|>\n"
      "<|im_start|>user\nHi<|im_end|>\n"
      "<|im_start|>assistant\nHello! What do you need?<|im_end|>\n"
      "<|im_start|>user\nRead main.py and list the tests.<|im_end|>\n"
      "<|im_start|>assistant\n"
      "<think>\n"
      "I should open the file.\n"
      "</think>\n"
      "\n"
      "<tool_call>\n"
      "<function=read_file>\n"
      "<parameter=path>\nmain.py\n</parameter>\n"
      "<parameter=lines>\n[1, 20]\n</parameter>\n"
      "<parameter=options>\n{\"follow\": true, \"encoding\": \"utf-8\"}\n</parameter>\n"
      "<parameter=limit>\n2.5\n</parameter>\n"
      "<parameter=note>\ncafé ☕\n</parameter>\n"
      "</function>\n"
      "</tool_call><|im_end|>\n"
      "<|im_start|>user\n"
      "<tool_response>\ndef test_a(): pass\n</tool_response>\n"
      "<tool_response>\ndef test_b(): pass\n</tool_response><|im_end|>\n"
      "<|im_start|>assistant\n"
      "<think>\nBoth found.\n</think>\n"
      "\n"
      "Two tests: `test_a` and `test_b`.\n"
      "<tool_call>\n"
      "<function=run_tests>\n"
      "{\"pattern\": \"test_*\"}\n"
      "</function>\n"
      "</tool_call><|im_end|>\n"
      "<|im_start|>assistant\n";
  EXPECT_EQ(tmpl->Render(kConversation, kTools, {{"add_generation_prompt", true}}), expected);
}

TEST(CoderTemplate, WithoutToolsOrSystemStartsWithTheFirstMessage) {
  auto tmpl = ChatTemplate::FromString(kCoderTemplate, "", "<|im_end|>");
  nlohmann::ordered_json messages = {{{"role", "user"}, {"content", "2+2?"}},
                                     {{"role", "assistant"}, {"content", "4"}, {"reasoning_content", "easy"}}};
  EXPECT_EQ(tmpl->Render(messages, nullptr, nullptr),
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\neasy\n</think>\n\n4<|im_end|>\n");
  EXPECT_EQ(tmpl->Render(messages, nlohmann::ordered_json::array(), {{"add_generation_prompt", true}}),
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\neasy\n</think>\n\n4<|im_end|>\n"
            "<|im_start|>assistant\n");
}

// Macros with defaults and keyword arguments, call blocks passing arguments to caller(), and nested
// calls, under trim_blocks / lstrip_blocks and `-` markers.
TEST(MacroTemplate, SectionsAndListsThroughCallBlocks) {
  std::string source =
      "{%- macro section(title, level=1) -%}\n"
      "{{ '#' * level }} {{ title }}\n"
      "{{ caller() }}\n"
      "{% endmacro -%}\n"
      "{%- macro items(list, marker='-') -%}\n"
      "{% for entry in list -%}\n"
      "{{ marker }} {{ caller(entry, loop.index) }}\n"
      "{% endfor -%}\n"
      "{%- endmacro -%}\n"
      "{%- call section('Messages') -%}\n"
      "{% for m in messages -%}\n"
      "{{ m.role }}: {{ m.content }}\n"
      "{% endfor -%}\n"
      "{%- endcall -%}\n"
      "{% call section('Tools', level=2) -%}\n"
      "{% call(tool, n) items(tools, marker='*') %}{{ n }}. {{ tool.name | upper }}"
      "{% if tool.args %} ({{ tool.args | join(', ') }}){% endif %}{% endcall %}\n"
      "{%- endcall %}\n";
  nlohmann::ordered_json vars = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
    "tools": [{"name": "grep", "args": ["pattern", "path"]}, {"name": "ls"}]})");
  EXPECT_EQ(jinja::testing::Render(source, vars),
            "# Messages\nuser: hi\nassistant: yo\n\n## Tools\n* 1. GREP (pattern, path)\n* 2. LS\n\n");
}

TEST(MacroTemplate, RecursiveMacroRendersATree) {
  std::string source =
      "{%- macro tree(node, depth=0) -%}\n"
      "{{ '  ' * depth }}{{ node.name }}\n"
      "{% for child in node.children | default([]) %}{{ tree(child, depth + 1) }}{% endfor %}\n"
      "{%- endmacro -%}\n"
      "{{ tree(root) }}";
  nlohmann::ordered_json vars = nlohmann::ordered_json::parse(
      R"({"root": {"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}, {"name": "d"}]}})");
  EXPECT_EQ(jinja::testing::Render(source, vars), "a\n  b\n    c\n  d\n");
}

}  // namespace
}  // namespace infernix
