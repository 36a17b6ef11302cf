// What a JSON value is, as an error message names it: "expected a string, got a number".
// Header-only: receipts (contracts/receipt.cpp) and the engine's config and checkpoint
// readers (engine/) say it the same way.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace kc {

inline std::string json_type_name(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

}  // namespace kc
