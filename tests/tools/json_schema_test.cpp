// contracts/json_schema.h: each keyword's rule at its edges, the keywords it refuses to half-check,
// and the project's three schemas, which must compile and accept what they ship. The same
// validator is checked against Python's jsonschema on thousands of mutated documents by
// cli.fixture_fuzz (tests/tools/fixture_fuzz.py).
#include "contracts/json_schema.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "contracts/receipt.h"

namespace kc {
namespace {

using json = nlohmann::json;

JsonSchema compiled(const char* text) {
  JsonSchema s;
  std::string why;
  EXPECT_TRUE(JsonSchema::compile(json::parse(text), &s, &why)) << why;
  return s;
}

std::string check(const char* schema, const char* doc) { return compiled(schema).validate(json::parse(doc)); }

TEST(JsonSchema, IntegersAreNumbersWithNoFraction) {
  const char* s = R"({"type": "integer"})";
  EXPECT_EQ(check(s, "3"), "");
  EXPECT_EQ(check(s, "3.0"), "");
  EXPECT_EQ(check(s, "1e2"), "");
  EXPECT_EQ(check(s, "18446744073709551615"), "");
  EXPECT_EQ(check(s, "3.5"), "(top level): expected an integer, got a number");
  EXPECT_EQ(check(s, "\"3\""), "(top level): expected an integer, got a string");
  EXPECT_EQ(check(R"({"type": ["integer", "null"]})", "true"), "(top level): expected an integer or null, got a boolean");
}

TEST(JsonSchema, BoundsAreExactForEveryInteger) {
  const char* s = R"({"minimum": 0, "maximum": 9223372036854775807})";
  EXPECT_EQ(check(s, "9223372036854775807"), "");
  EXPECT_NE(check(s, "9223372036854775808"), "");  // one past: a double compare would call them equal
  EXPECT_NE(check(s, "-1"), "");
  EXPECT_EQ(check(s, "0.0"), "");
  EXPECT_EQ(check(s, "\"x\""), "");  // bounds apply to numbers only
  EXPECT_NE(check(R"({"exclusiveMinimum": 0})", "0"), "");
  EXPECT_EQ(check(R"({"exclusiveMinimum": 0})", "1e-300"), "");
  EXPECT_NE(check(R"({"exclusiveMaximum": 1})", "1.0"), "");
}

TEST(JsonSchema, EnumConstAndUniqueItemsCompareNumbersByValue) {
  EXPECT_EQ(check(R"({"enum": [1, "a"]})", "1.0"), "");
  EXPECT_EQ(check(R"({"enum": [1, "a"]})", "\"b\""), "(top level): \"b\" is not one of 1, a");
  EXPECT_EQ(check(R"({"const": {"a": [1, 2]}})", R"({"a": [1.0, 2]})"), "");
  EXPECT_NE(check(R"({"const": {"a": [1, 2]}})", R"({"a": [2, 1]})"), "");
  EXPECT_EQ(check(R"({"uniqueItems": true})", "[1, 1.0]"), "(top level)[1]: 1.0 repeats item 0 (the items must be unique)");
  EXPECT_EQ(check(R"({"uniqueItems": true})", R"([{"a": 1}, {"a": 2}])"), "");
  // By value, exactly: nlohmann's == calls 2^64 - 1 equal to -1 (an unsigned cast to signed)
  // and 2^53 + 1 equal to 2^53 written as a float (an integer cast to double); JSON Schema does
  // not (mutation sweep round 13: uniqueItems through == survived).
  EXPECT_EQ(check(R"({"uniqueItems": true})", "[18446744073709551615, -1]"), "");
  EXPECT_EQ(check(R"({"uniqueItems": true})", "[9007199254740993, 9007199254740992.0]"), "");
  EXPECT_EQ(check(R"({"uniqueItems": true})", R"([{"a": 18446744073709551615}, {"a": -1}])"), "");
  EXPECT_NE(check(R"({"enum": [-1]})", "18446744073709551615"), "");
  EXPECT_NE(check(R"({"const": 9007199254740992.0})", "9007199254740993"), "");
}

TEST(JsonSchema, StringsCountCodePointsAndPatternsSearch) {
  EXPECT_EQ(check(R"({"maxLength": 2})", "\"\xC3\xA9\xC3\xA9\""), "");  // two code points, four bytes
  EXPECT_NE(check(R"({"minLength": 3})", "\"\xC3\xA9\xC3\xA9\""), "");
  EXPECT_EQ(check(R"({"pattern": "b"})", "\"abc\""), "");  // unanchored, as ECMAScript's search
  EXPECT_NE(check(R"({"pattern": "^b"})", "\"abc\""), "");
}

TEST(JsonSchema, ObjectsAndArraysNameThePathOfTheFirstViolation) {
  const char* s = R"({"type": "object", "required": ["a"], "additionalProperties": false,
    "properties": {"a": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {"n": {"minimum": 0}}}}},
    "patternProperties": {"^x_": {"type": "string"}}})";
  EXPECT_EQ(check(s, R"({"a": [{"n": 1}], "x_y": "z"})"), "");
  EXPECT_EQ(check(s, R"({})"), "a: missing");
  EXPECT_EQ(check(s, R"({"a": []})"), "a: holds 0 items, fewer than 1");
  EXPECT_EQ(check(s, R"({"a": [{"n": 1}, {"n": -1}]})"), "a[1].n: -1 is below the minimum 0");
  EXPECT_EQ(check(s, R"({"a": [{}], "b": 1})"), "b: not a field the schema allows here");
  EXPECT_EQ(check(s, R"({"a": [{}], "x_y": 1})"), "x_y: expected a string, got a number");
  EXPECT_NE(check(R"({"propertyNames": {"enum": ["a"]}})", R"({"b": 1})"), "");
  EXPECT_NE(check(R"({"minProperties": 1})", "{}"), "");
}

TEST(JsonSchema, CombinatorsRefsAndConditions) {
  const char* one = R"({"oneOf": [{"type": "integer"}, {"minimum": 0}]})";
  EXPECT_EQ(check(one, "-1"), "");                           // the first form only
  EXPECT_EQ(check(one, "0.5"), "");                          // the second only
  EXPECT_NE(check(one, "1"), "");                            // both: not exactly one
  EXPECT_EQ(check(R"({"anyOf": [{"type": "integer"}, {"const": "nan"}]})", "\"nan\""), "");
  EXPECT_NE(check(R"({"anyOf": [{"type": "integer"}, {"const": "nan"}]})", "\"inf\""), "");
  EXPECT_NE(check(R"({"allOf": [{"minimum": 0}, {"maximum": 1}]})", "2"), "");
  EXPECT_NE(check(R"({"not": {"type": "null"}})", "null"), "");
  const char* ref = R"({"$defs": {"h": {"type": "string", "pattern": "^[0-9a-f]{16}$"}}, "items": {"$ref": "#/$defs/h"}})";
  EXPECT_EQ(check(ref, R"(["0123456789abcdef"])"), "");
  EXPECT_NE(check(ref, R"(["0123"])"), "");
  const char* cond = R"({"if": {"properties": {"kind": {"const": "bench"}}}, "then": {"required": ["rows"]},
                         "else": {"properties": {"seed": {"type": "integer"}}}})";
  EXPECT_EQ(check(cond, R"({"kind": "bench", "rows": [], "seed": null})"), "");
  EXPECT_EQ(check(cond, R"({"kind": "bench"})"), "rows: missing");
  EXPECT_EQ(check(cond, R"({"kind": "contract", "seed": null})"), "seed: expected an integer, got null");
  EXPECT_EQ(check(R"(false)", "1"), "(top level): no value is allowed here");
}

TEST(JsonSchema, UnknownKeywordsAndBrokenRefsAreRefusedAtCompile) {
  JsonSchema s;
  std::string why;
  EXPECT_FALSE(JsonSchema::compile(json::parse(R"({"properties": {"a": {"prefixItems": []}}})"), &s, &why));
  EXPECT_EQ(why, "at properties.a: keyword 'prefixItems' is not implemented by contracts/json_schema.cpp");
  EXPECT_FALSE(JsonSchema::compile(json::parse(R"({"$ref": "#/$defs/none"})"), &s, &why));
  EXPECT_FALSE(JsonSchema::compile(json::parse(R"({"$ref": "other.json"})"), &s, &why));
  EXPECT_FALSE(JsonSchema::compile(json::parse(R"({"pattern": "("})"), &s, &why));
  EXPECT_FALSE(JsonSchema::compile(json::parse(R"({"type": "int"})"), &s, &why));
  EXPECT_FALSE(JsonSchema::compile(json::parse(R"({"minItems": -1})"), &s, &why));
}

// The project's schemas compile (every keyword implemented) and accept what they describe.
TEST(JsonSchema, TheProjectsSchemasCompileAndAcceptTheirFiles) {
  namespace fs = std::filesystem;
  const fs::path src(KC_SOURCE_DIR);
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"fixtures/schema/serve-fixture.schema.json", "fixtures/serve"},
      {"fixtures/schema/kv-fixture.schema.json", "fixtures/kv"},
      {"reports/schema/receipt.schema.json", "reports/h200"},
  };
  for (const auto& [schema_file, dir] : pairs) {
    JsonSchema s;
    std::string why;
    ASSERT_TRUE(JsonSchema::compile(json::parse(std::ifstream(src / schema_file)), &s, &why)) << schema_file << ": " << why;
    int n = 0;
    for (const auto& e : fs::directory_iterator(src / dir)) {
      if (e.path().extension() != ".json") continue;
      const json doc = json::parse(std::ifstream(e.path()));
      if (dir == "reports/h200" && doc.value("schema", "") != "kernel-contracts/receipt/1") continue;
      EXPECT_EQ(s.validate(doc), "") << e.path();
      ++n;
    }
    EXPECT_GE(n, 2) << dir;
  }
}

// Receipt::check applies the whole schema: a field no view reads (host) is still checked, and the
// message names the field and says which rule refused it.
TEST(JsonSchema, ReceiptCheckRefusesWhatTheSchemaRefuses) {
  const std::string file = std::string(KC_SOURCE_DIR) + "/reports/h200/fp8-rows.json";
  json r = json::parse(std::ifstream(file));
  ASSERT_TRUE(Receipt::check(r, "r.json").ok) << Receipt::check(r, "r.json").message;
  r["host"] = 5;
  const Status st = Receipt::check(r, "r.json");
  EXPECT_FALSE(st.ok);
  EXPECT_EQ(st.message, "r.json: host: expected a string, got a number (receipt schema)");
}

}  // namespace
}  // namespace kc
