// Values: Python's str() / repr() when printed, float formatting, truthiness and equality, JSON
// conversion, and the safety of deep structures.
#include "chat/jinja/json.h"
#include "chat/jinja/test_util.h"
#include "chat/jinja/value.h"

namespace infernix::jinja::testing {
namespace {

TEST(FloatFormat, MatchesPythonRepr) {
  EXPECT_EQ(FormatFloat(1.0), "1.0");
  EXPECT_EQ(FormatFloat(0.1), "0.1");
  EXPECT_EQ(FormatFloat(-2.5), "-2.5");
  EXPECT_EQ(FormatFloat(1e16), "1e+16");
  EXPECT_EQ(FormatFloat(1e15), "1000000000000000.0");
  EXPECT_EQ(FormatFloat(123456789012345678.0), "1.2345678901234568e+17");
  EXPECT_EQ(FormatFloat(0.0001), "0.0001");
  EXPECT_EQ(FormatFloat(0.00001), "1e-05");
  EXPECT_EQ(FormatFloat(1.5e-7), "1.5e-07");
  EXPECT_EQ(FormatFloat(1e100), "1e+100");
  EXPECT_EQ(FormatFloat(-0.0), "-0.0");
  EXPECT_EQ(FormatFloat(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(FormatFloat(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(FormatFloat(std::nan("")), "nan");
}

TEST(Printing, ScalarsPrintAsPythonStr) {
  nlohmann::ordered_json vars = {{"i", 3}, {"f", 2.0}, {"b", false}, {"n", nullptr}, {"u", 18446744073709551615ull}};
  EXPECT_EQ(Render("{{ i }} {{ f }} {{ b }} {{ n }} {{ u }}", vars), "3 2.0 False None 1.8446744073709552e+19");
}

TEST(Printing, ContainersPrintAsPythonRepr) {
  nlohmann::ordered_json vars = {{"m", {{"role", "user"}, {"n", 1}, {"ok", true}, {"x", nullptr}, {"l", {1.5, "s"}}}}};
  EXPECT_EQ(Render("{{ m }}", vars), "{'role': 'user', 'n': 1, 'ok': True, 'x': None, 'l': [1.5, 's']}");
  EXPECT_EQ(Render(R"({{ ["it's", 'say "x"', 'both \' "', 'a\\b', 'tab\there', 'nl\n', '\x01', 'é\xa0'] }})"),
            R"(["it's", 'say "x"', 'both \' "', 'a\\b', 'tab\there', 'nl\n', '\x01', 'é\xa0'])");
  EXPECT_EQ(Render("{{ namespace(a=1) }}"), "<Namespace {'a': 1}>");
}

TEST(Printing, DictKeepsInsertionOrder) {
  nlohmann::ordered_json vars = {{"d", {{"zebra", 1}, {"apple", 2}, {"mango", 3}}}};
  EXPECT_EQ(Render("{% for k in d %}{{ k }} {% endfor %}{{ d | tojson }}", vars),
            "zebra apple mango {\"zebra\": 1, \"apple\": 2, \"mango\": 3}");
  EXPECT_EQ(Render("{% set d = {'b': 1, 'a': 2} %}{% set _ = d.update %}{{ d }}"), "{'b': 1, 'a': 2}");
}

TEST(Values, TruthinessAndEquality) {
  EXPECT_FALSE(Truthy(Value()));
  EXPECT_FALSE(Truthy(Value::None()));
  EXPECT_FALSE(Truthy(Value::String("")));
  EXPECT_TRUE(Truthy(Value::String("0")));
  EXPECT_FALSE(Truthy(Value::Float(0.0)));
  EXPECT_FALSE(Truthy(Value::List()));
  EXPECT_TRUE(Truthy(Value::Namespace()));
  EXPECT_TRUE(Equals(Value::Int(1), Value::Float(1.0)));
  EXPECT_TRUE(Equals(Value::Bool(true), Value::Int(1)));
  EXPECT_FALSE(Equals(Value::String("1"), Value::Int(1)));
  EXPECT_FALSE(Equals(Value::List({Value::Int(1)}), Value::Tuple({Value::Int(1)})));
}

TEST(Values, ContainersAreShared) {
  Value list = Value::List();
  Value alias = list;
  alias.list().items.push_back(Value::Int(1));
  EXPECT_EQ(list.list().items.size(), 1u);
  EXPECT_TRUE(ContainsContainer(Value::List({list}), list.container()));
  EXPECT_FALSE(ContainsContainer(Value::List({Value::Int(1)}), list.container()));
}

TEST(Json, ConvertsObjectsInOrder) {
  Value v = FromJson(nlohmann::ordered_json::parse(R"({"b": [1, 2.5, "x", null, true], "a": {}})"));
  ASSERT_TRUE(v.is_dict());
  EXPECT_EQ(Repr(v), "{'b': [1, 2.5, 'x', None, True], 'a': {}}");
  EXPECT_EQ(ToJson(v, JsonDumpOptions{}), R"({"b": [1, 2.5, "x", null, true], "a": {}})");
}

TEST(Json, RejectsExcessiveNesting) {
  std::string deep(kMaxValueDepth + 10, '[');
  deep += std::string(kMaxValueDepth + 10, ']');
  EXPECT_THROW(FromJson(nlohmann::ordered_json::parse(deep)), EvalError);
}

TEST(Values, DeeplyNestedValuesAreReleasedWithoutRecursion) {
  Value root = Value::List();
  Value current = root;
  for (int i = 0; i < 200000; ++i) {
    Value next = Value::List();
    current.list().items.push_back(next);
    current = next;
  }
  current = Value();
  EXPECT_THROW(Repr(root), EvalError);  // printing gives up at kMaxValueDepth
  root = Value();                       // and destruction must not overflow the stack
  SUCCEED();
}

TEST(Values, TemplatesCannotBuildCycles) {
  EXPECT_TRUE(Contains(RenderError("{% set l = [] %}{% set _ = l.append(l) %}"), "cannot append a list to itself"));
  EXPECT_TRUE(Contains(RenderError("{% set ns = namespace() %}{% set ns.self = [ns] %}"), "contains the namespace itself"));
}

}  // namespace
}  // namespace infernix::jinja::testing
