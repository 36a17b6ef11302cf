// A JSON Schema (Draft 2020-12) validator for this project's own schemas
// (reports/schema/receipt.schema.json, fixtures/schema/*.schema.json), so that the readers
// refuse what the published schemas refuse, with no dependency beyond nlohmann/json.
//
// It implements the keywords those schemas use, with 2020-12's meaning:
//   type (an integer is any number with no fraction: 3 and 3.0), enum, const (numbers equal
//   by value), minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength (in
//   code points), pattern (ECMAScript, unanchored), items, minItems, maxItems, uniqueItems,
//   properties, patternProperties, additionalProperties, required, propertyNames,
//   minProperties, maxProperties, allOf, anyOf, oneOf, not, if / then / else, $ref (to "#" or "#/json/pointer"),
//   and the annotations $schema, $id, $defs, $comment, title, description, default, examples.
// Any other keyword makes compile() fail, so a schema that grows a keyword this file does not
// know is refused at once instead of being half-checked (tests/tools/fixture_fuzz.py checks
// this validator against Python's jsonschema on thousands of documents).
#pragma once
#include <map>
#include <memory>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

namespace kc {

class JsonSchema {
 public:
  // Checks that every keyword is known, every $ref resolves and every pattern compiles;
  // false with *why ("at properties.x: unknown keyword 'if'") otherwise.
  static bool compile(const nlohmann::json& schema, JsonSchema* out, std::string* why);
  // Empty when doc is valid; else the first violation found: "PATH: reason", PATH as the
  // receipt checks write it (gates[2].total, (top level)).
  std::string validate(const nlohmann::json& doc) const;

 private:
  bool check(const nlohmann::json& s, const nlohmann::json& v, const std::string& path, std::string* err,
             int depth) const;
  nlohmann::json root_;
  std::shared_ptr<std::map<std::string, std::regex>> patterns_;
};

// JSON equality as JSON Schema defines it (enum, const, uniqueItems): numbers by value (1 == 1.0),
// arrays item by item, objects key by key.
bool json_schema_equal(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace kc
