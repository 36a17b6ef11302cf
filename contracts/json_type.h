// What a JSON value is, as an error message names it: "expected a string, got a number"; an
// integer as JSON Schema reads one (json_integer); and
// the strict parse every reader of a file a person may edit uses (fixtures, configs, receipts).
// Header-only: receipts (contracts/receipt.cpp) and the engine's config and checkpoint
// readers (engine/) say it the same way.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

namespace kc {

// A JSON Schema integer (2020-12: a number whose fractional part is zero, so 16, 16.0 and 1.6e1
// alike, as the fixture and receipt schemas accept): true with *x its value clamped to +-2^62 (a
// larger one fails every range check and never wraps); false for a fraction, a non-finite value
// or another type. The fixture validators read every integer field through it, and
// contracts/json_schema.h's "integer" is the same test.
inline bool json_integer(const nlohmann::json& v, long long* x) {
  constexpr long long kCap = 1LL << 62;
  if (v.is_number_unsigned()) {  // before is_number_integer, which is true for unsigned too
    const uint64_t u = v.get<uint64_t>();
    *x = u > uint64_t(kCap) ? kCap : static_cast<long long>(u);
    return true;
  }
  if (v.is_number_integer()) {
    *x = std::clamp(v.get<long long>(), -kCap, kCap);
    return true;
  }
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  if (!std::isfinite(d) || d != std::trunc(d)) return false;
  *x = d >= 0x1p62 ? kCap : d <= -0x1p62 ? -kCap : static_cast<long long>(d);
  return true;
}

inline std::string json_type_name(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

// Parses text into *out. On failure *why is the reason, ready to follow "FILE: ": "not JSON:
// <the parser's message>", or "field a.b: appears twice" where an object repeats a key (plain
// parsing keeps the last value, so {"rows": 0, "rows": 8} would pass a check that "rows": 0
// alone fails). The path names the keys of the enclosing objects ([] for an array's element).
// Nesting deeper than kJsonMaxDepth levels is refused too (no file of ours comes near it; a
// reader that walks the tree recursively would run out of stack on 50,000 levels).
constexpr int kJsonMaxDepth = 256;
// field / reason, where given, receive the two parts apart: the key path and "appears twice (each
// key once)", or "(file)" and "not JSON: ...".
inline bool parse_json_strict(std::string_view text, nlohmann::json* out, std::string* why,
                              std::string* field = nullptr, std::string* reason = nullptr) {
  struct Dup {
    std::string path;
  };
  struct Deep {};
  struct Level {
    bool object;
    std::string last;                     // the key being read (an object's)
    std::unordered_set<std::string> seen;  // its keys so far
  };
  std::vector<Level> stack;
  const auto path_to = [&](const std::string& key) {  // a.b[].key
    std::string p;
    for (size_t i = 0; i < stack.size(); ++i) {
      if (!stack[i].object) {
        p += "[]";
        continue;
      }
      p += (p.empty() ? "" : ".") + (i + 1 == stack.size() ? key : stack[i].last);
    }
    return p;
  };
  // nlohmann's parser stops at a NUL byte as at the input's end, so whatever followed one was
  // never read (a receipt or fixture with garbage after a NUL parsed). JSON text has no raw NUL
  // (inside a string it must be escaped): refused.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    if (field) *field = "(file)";
    *why = "not JSON: a NUL byte at offset " + std::to_string(nul) + " (JSON text holds none)";
    if (reason) *reason = *why;
    return false;
  }
  try {
    *out = nlohmann::json::parse(text, [&](int, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
      using E = nlohmann::json::parse_event_t;
      if ((ev == E::object_start || ev == E::array_start) && stack.size() >= size_t(kJsonMaxDepth)) throw Deep{};
      if (ev == E::object_start) stack.push_back({true, {}, {}});
      else if (ev == E::array_start) stack.push_back({false, {}, {}});
      else if ((ev == E::object_end || ev == E::array_end) && !stack.empty()) stack.pop_back();
      else if (ev == E::key && !stack.empty() && parsed.is_string()) {
        const std::string k = parsed.get<std::string>();
        if (!stack.back().seen.insert(k).second) throw Dup{path_to(k)};
        stack.back().last = k;
      }
      return true;
    });
  } catch (const Deep&) {
    if (field) *field = "(file)";
    *why = "nested deeper than " + std::to_string(kJsonMaxDepth) + " levels";
    if (reason) *reason = *why;
    return false;
  } catch (const Dup& d) {
    if (field) *field = d.path;
    if (reason) *reason = "appears twice (each key once)";
    *why = "field " + d.path + ": appears twice (each key once)";
    return false;
  } catch (const nlohmann::json::exception& e) {
    if (field) *field = "(file)";
    *why = std::string("not JSON: ") + e.what();
    if (reason) *reason = *why;
    return false;
  }
  return true;
}

}  // namespace kc
