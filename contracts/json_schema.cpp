#include "contracts/json_schema.h"

#include <cmath>
#include <cstdint>
#include <set>

#include "contracts/json_type.h"

namespace kc {
namespace {

using json = nlohmann::json;

const std::set<std::string>& annotations() {
  static const std::set<std::string> a = {"$schema", "$id", "$defs", "$comment", "title", "description", "default",
                                          "examples"};
  return a;
}

bool is_integral(const json& v) {
  long long unused;
  return json_integer(v, &unused);
}

long double as_ld(const json& v) {
  if (v.is_number_unsigned()) return static_cast<long double>(v.get<uint64_t>());
  if (v.is_number_integer()) return static_cast<long double>(v.get<int64_t>());
  return static_cast<long double>(v.get<double>());
}

// -1, 0 or 1 as a < b, a == b, a > b (both numbers): exact for every integer either way.
int num_cmp(const json& a, const json& b) {
  if (a.is_number_integer() && b.is_number_integer()) {
    const __int128 x = a.is_number_unsigned() ? __int128(a.get<uint64_t>()) : __int128(a.get<int64_t>());
    const __int128 y = b.is_number_unsigned() ? __int128(b.get<uint64_t>()) : __int128(b.get<int64_t>());
    return (x > y) - (x < y);
  }
  const long double x = as_ld(a), y = as_ld(b);
  return (x > y) - (x < y);
}

bool type_is(const json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer") return is_integral(v);
  return false;
}

std::string type_article(const std::string& t) {
  if (t == "null") return "null";
  if (t == "integer" || t == "array" || t == "object") return "an " + t;
  return "a " + t;
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string shown(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

std::string child(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }
std::string item(const std::string& path, size_t i) { return (path.empty() ? "(top level)" : path) + "[" + std::to_string(i) + "]"; }
std::string where(const std::string& path) { return path.empty() ? "(top level)" : path; }

bool walk(const json& root, const json& s, const std::string& at, std::map<std::string, std::regex>* pats, std::string* why) {
  const auto bad = [&](const std::string& r) {
    *why = "at " + where(at) + ": " + r;
    return false;
  };
  if (s.is_boolean()) return true;
  if (!s.is_object()) return bad("a schema must be an object or a boolean");
  const auto each_schema = [&](const json& list, const std::string& k) {
    if (!list.is_array() || list.empty()) return bad(k + " must be a non-empty array of schemas");
    for (size_t i = 0; i < list.size(); ++i)
      if (!walk(root, list[i], child(at, k) + "[" + std::to_string(i) + "]", pats, why)) return false;
    return true;
  };
  const auto count = [&](const json& x, const std::string& k) {
    return is_integral(x) && x.get<double>() >= 0 ? true : bad(k + " must be a whole number >= 0");
  };
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    const json& x = it.value();
    if (k == "$defs") {
      if (!x.is_object()) return bad("$defs must be an object");
      for (auto d = x.begin(); d != x.end(); ++d)
        if (!walk(root, d.value(), child(at, "$defs." + d.key()), pats, why)) return false;
    } else if (annotations().count(k)) {
      continue;
    } else if (k == "type") {
      const json list = x.is_array() ? x : json::array({x});
      static const std::set<std::string> kTypes = {"null", "boolean", "object", "array", "string", "number", "integer"};
      for (const json& t : list)
        if (!t.is_string() || kTypes.count(t.get<std::string>()) == 0) return bad("type " + shown(t) + " is not a JSON Schema type");
    } else if (k == "enum") {
      if (!x.is_array()) return bad("enum must be an array");
    } else if (k == "const") {
      continue;
    } else if (k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum") {
      if (!x.is_number()) return bad(k + " must be a number");
    } else if (k == "minLength" || k == "maxLength" || k == "minItems" || k == "maxItems" || k == "minProperties" ||
               k == "maxProperties") {
      if (!count(x, k)) return false;
    } else if (k == "uniqueItems") {
      if (!x.is_boolean()) return bad("uniqueItems must be true or false");
    } else if (k == "pattern") {
      if (!x.is_string()) return bad("pattern must be a string");
      try {
        pats->emplace(x.get<std::string>(), std::regex(x.get<std::string>(), std::regex::ECMAScript));
      } catch (const std::regex_error& e) {
        return bad("pattern " + shown(x) + " does not compile: " + e.what());
      }
    } else if (k == "required") {
      if (!x.is_array()) return bad("required must be an array of names");
      for (const json& n : x)
        if (!n.is_string()) return bad("required must be an array of names");
    } else if (k == "items" || k == "additionalProperties" || k == "propertyNames" || k == "not" || k == "if" ||
               k == "then" || k == "else") {
      if (!walk(root, x, child(at, k), pats, why)) return false;
    } else if (k == "properties" || k == "patternProperties") {
      if (!x.is_object()) return bad(k + " must be an object of schemas");
      for (auto p = x.begin(); p != x.end(); ++p) {
        if (k == "patternProperties") {
          try {
            pats->emplace(p.key(), std::regex(p.key(), std::regex::ECMAScript));
          } catch (const std::regex_error& e) {
            return bad("patternProperties key " + shown(json(p.key())) + " does not compile: " + e.what());
          }
        }
        if (!walk(root, p.value(), child(at, k + "." + p.key()), pats, why)) return false;
      }
    } else if (k == "allOf" || k == "anyOf" || k == "oneOf") {
      if (!each_schema(x, k)) return false;
    } else if (k == "$ref") {
      if (!x.is_string() || x.get<std::string>().empty() || x.get<std::string>()[0] != '#')
        return bad("$ref must point into this schema (#...)");
      const std::string ptr = x.get<std::string>().substr(1);
      try {
        if (!ptr.empty() && !root.contains(json::json_pointer(ptr))) return bad("$ref " + shown(x) + " resolves to nothing");
      } catch (const json::exception&) {
        return bad("$ref " + shown(x) + " is not a JSON pointer");
      }
    } else {
      return bad("keyword '" + k + "' is not implemented by contracts/json_schema.cpp");
    }
  }
  return true;
}

}  // namespace

bool json_schema_equal(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) return num_cmp(a, b) == 0;
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!json_schema_equal(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it)
      if (!b.contains(it.key()) || !json_schema_equal(it.value(), b[it.key()])) return false;
    return true;
  }
  return a == b;
}

bool JsonSchema::compile(const json& schema, JsonSchema* out, std::string* why) {
  auto pats = std::make_shared<std::map<std::string, std::regex>>();
  if (!walk(schema, schema, "", pats.get(), why)) return false;
  out->root_ = schema;
  out->patterns_ = std::move(pats);
  return true;
}

std::string JsonSchema::validate(const json& doc) const {
  std::string err;
  check(root_, doc, "", &err, 0);
  return err;
}

bool JsonSchema::check(const json& s, const json& v, const std::string& path, std::string* err, int depth) const {
  const auto fail = [&](const std::string& at, const std::string& why) {
    if (err->empty()) *err = where(at) + ": " + why;
    return false;
  };
  if (s.is_boolean()) return s.get<bool>() || fail(path, "no value is allowed here");
  if (depth > 256) return fail(path, "the schema's references nest deeper than 256 levels");
  if (s.contains("$ref")) {
    const std::string ptr = s["$ref"].get<std::string>().substr(1);
    if (!check(ptr.empty() ? root_ : root_.at(json::json_pointer(ptr)), v, path, err, depth + 1)) return false;
  }
  if (s.contains("type")) {
    const json list = s["type"].is_array() ? s["type"] : json::array({s["type"]});
    bool any = false;
    std::string names;
    for (const json& t : list) {
      any = any || type_is(v, t.get<std::string>());
      names += (names.empty() ? "" : " or ") + type_article(t.get<std::string>());
    }
    if (!any) return fail(path, "expected " + names + ", got " + json_type_name(v));
  }
  if (s.contains("enum")) {
    bool in = false;
    std::string names;
    for (const json& e : s["enum"]) {
      in = in || json_schema_equal(v, e);
      names += (names.empty() ? "" : ", ") + (e.is_string() ? e.get<std::string>() : shown(e));
    }
    if (!in) return fail(path, shown(v) + " is not one of " + names);
  }
  if (s.contains("const") && !json_schema_equal(v, s["const"]))
    return fail(path, shown(v) + " is not " + shown(s["const"]));
  if (v.is_number()) {
    if (s.contains("minimum") && num_cmp(v, s["minimum"]) < 0)
      return fail(path, shown(v) + " is below the minimum " + shown(s["minimum"]));
    if (s.contains("maximum") && num_cmp(v, s["maximum"]) > 0)
      return fail(path, shown(v) + " is above the maximum " + shown(s["maximum"]));
    if (s.contains("exclusiveMinimum") && num_cmp(v, s["exclusiveMinimum"]) <= 0)
      return fail(path, shown(v) + " is not above " + shown(s["exclusiveMinimum"]));
    if (s.contains("exclusiveMaximum") && num_cmp(v, s["exclusiveMaximum"]) >= 0)
      return fail(path, shown(v) + " is not below " + shown(s["exclusiveMaximum"]));
  }
  if (v.is_string()) {
    const std::string& x = v.get_ref<const std::string&>();
    if (s.contains("minLength") && code_points(x) < s["minLength"].get<double>())
      return fail(path, shown(v) + " is shorter than " + shown(s["minLength"]) + " characters");
    if (s.contains("maxLength") && code_points(x) > s["maxLength"].get<double>())
      return fail(path, shown(v) + " is longer than " + shown(s["maxLength"]) + " characters");
    if (s.contains("pattern") && !std::regex_search(x, patterns_->at(s["pattern"].get<std::string>())))
      return fail(path, shown(v) + " does not match " + s["pattern"].get<std::string>());
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<double>())
      return fail(path, "holds " + std::to_string(v.size()) + " items, fewer than " + shown(s["minItems"]));
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<double>())
      return fail(path, "holds " + std::to_string(v.size()) + " items, more than " + shown(s["maxItems"]));
    if (s.contains("uniqueItems") && s["uniqueItems"].get<bool>())
      for (size_t i = 1; i < v.size(); ++i)
        for (size_t j = 0; j < i; ++j)
          if (json_schema_equal(v[i], v[j]))
            return fail(item(path, i), shown(v[i]) + " repeats item " + std::to_string(j) + " (the items must be unique)");
    if (s.contains("items"))
      for (size_t i = 0; i < v.size(); ++i)
        if (!check(s["items"], v[i], item(path, i), err, depth + 1)) return false;
  }
  if (v.is_object()) {
    if (s.contains("required"))
      for (const json& k : s["required"])
        if (!v.contains(k.get<std::string>())) return fail(child(path, k.get<std::string>()), "missing");
    if (s.contains("minProperties") && v.size() < s["minProperties"].get<double>())
      return fail(path, "holds " + std::to_string(v.size()) + " fields, fewer than " + shown(s["minProperties"]));
    if (s.contains("maxProperties") && v.size() > s["maxProperties"].get<double>())
      return fail(path, "holds " + std::to_string(v.size()) + " fields, more than " + shown(s["maxProperties"]));
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string& k = it.key();
      const std::string at = child(path, k);
      if (s.contains("propertyNames") && !check(s["propertyNames"], json(k), at, err, depth + 1)) return false;
      bool matched = false;
      if (s.contains("properties") && s["properties"].contains(k)) {
        matched = true;
        if (!check(s["properties"][k], it.value(), at, err, depth + 1)) return false;
      }
      if (s.contains("patternProperties"))
        for (auto p = s["patternProperties"].begin(); p != s["patternProperties"].end(); ++p)
          if (std::regex_search(k, patterns_->at(p.key()))) {
            matched = true;
            if (!check(p.value(), it.value(), at, err, depth + 1)) return false;
          }
      if (!matched && s.contains("additionalProperties")) {
        const json& ap = s["additionalProperties"];
        if (ap.is_boolean() && !ap.get<bool>()) return fail(at, "not a field the schema allows here");
        if (!check(ap, it.value(), at, err, depth + 1)) return false;
      }
    }
  }
  if (s.contains("allOf"))
    for (const json& sub : s["allOf"])
      if (!check(sub, v, path, err, depth + 1)) return false;
  if (s.contains("anyOf")) {
    std::string first;
    bool any = false;
    for (const json& sub : s["anyOf"]) {
      std::string e;
      if (check(sub, v, path, &e, depth + 1)) {
        any = true;
        break;
      }
      if (first.empty()) first = e;
    }
    if (!any) return fail(path, "matches none of the " + std::to_string(s["anyOf"].size()) + " forms allowed (anyOf; the first: " + first + ")");
  }
  if (s.contains("oneOf")) {
    std::string first;
    size_t n = 0;
    for (const json& sub : s["oneOf"]) {
      std::string e;
      if (check(sub, v, path, &e, depth + 1)) ++n;
      else if (first.empty()) first = e;
    }
    if (n == 0) return fail(path, "matches none of the " + std::to_string(s["oneOf"].size()) + " forms allowed (oneOf; the first: " + first + ")");
    if (n > 1) return fail(path, "matches " + std::to_string(n) + " of the forms where exactly one is allowed (oneOf)");
  }
  if (s.contains("if")) {
    std::string e;
    const bool holds = check(s["if"], v, path, &e, depth + 1);
    if (holds && s.contains("then") && !check(s["then"], v, path, err, depth + 1)) return false;
    if (!holds && s.contains("else") && !check(s["else"], v, path, err, depth + 1)) return false;
  }
  if (s.contains("not")) {
    std::string e;
    if (check(s["not"], v, path, &e, depth + 1)) return fail(path, "matches a form the schema excludes (not)");
  }
  return true;
}

}  // namespace kc
