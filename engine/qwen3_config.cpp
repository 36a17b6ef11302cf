#include "engine/qwen3_config.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "contracts/json_type.h"
#include "engine/files.h"

namespace kc::engine {
namespace {

using json = nlohmann::json;

// Sizes beyond these are not a Qwen3 checkpoint this engine could hold; they also keep
// every element count below 2^62 (so int64 products cannot overflow).
constexpr int64_t kMaxDim = int64_t{1} << 31;
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxTensorElements = int64_t{1} << 40;

std::string type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_float()) return "a non-integer number";
  if (v.is_number()) return "an integer";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

struct Reader {
  const json& j;
  const std::string& file;
  Status fail(const std::string& field, const std::string& why) const {
    return Status::Error(file + ": " + field + ": " + why);
  }
  Status positive_int(const char* key, int64_t* out) const {
    if (!j.contains(key)) return fail(key, "missing");
    const json& v = j[key];
    if (v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>()))
      return fail(key, "expected a positive integer, got " + v.dump() + ", a whole number written as a float (write it without the fraction)");
    if (!v.is_number_integer()) return fail(key, "expected a positive integer, got " + type_name(v));
    if (!v.is_number_unsigned() || v.get<uint64_t>() == 0) return fail(key, "expected a positive integer, got " + v.dump());
    if (v.get<uint64_t>() > static_cast<uint64_t>(kMaxDim))
      return fail(key, v.dump() + " is larger than " + std::to_string(kMaxDim));
    *out = static_cast<int64_t>(v.get<uint64_t>());
    return Status::Ok();
  }
  // A finite positive number at j[key] (or at o[key], named `field`).
  static Status positive_number(const json& o, const char* key, const std::string& field, const Reader& r,
                                double* out) {
    const json& v = o[key];
    if (!v.is_number()) return r.fail(field, "expected a positive number, got " + type_name(v));
    *out = v.get<double>();
    if (!(std::isfinite(*out) && *out > 0)) return r.fail(field, "expected a positive number, got " + v.dump());
    return Status::Ok();
  }
};

Status read_rope_type(const Reader& r, const json& block, const std::string& name) {
  for (const char* key : {"rope_type", "type"}) {
    if (!block.contains(key)) continue;
    const json& v = block[key];
    const std::string field = name + "." + key;
    if (!v.is_string()) return r.fail(field, "expected a string, got " + type_name(v));
    if (v.get<std::string>() != "default")
      return r.fail(field, "'" + v.get<std::string>() + "' is not supported (only \"default\" RoPE)");
  }
  return Status::Ok();
}

}  // namespace

Status check_qwen3_config(const Qwen3Config& c, const std::string& file) {
  auto fail = [&](const std::string& field, const std::string& why) {
    return Status::Error(file + ": " + field + ": " + why);
  };
  const std::pair<const char*, int64_t> sizes[] = {
      {"hidden_size", c.hidden_size},         {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_hidden_layers}, {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads}, {"head_dim", c.head_dim},
      {"vocab_size", c.vocab_size},           {"max_position_embeddings", c.max_position_embeddings}};
  for (const auto& [name, v] : sizes) {
    if (v <= 0) return fail(name, "expected a positive integer, got " + std::to_string(v));
    if (v > kMaxDim) return fail(name, std::to_string(v) + " is larger than " + std::to_string(kMaxDim));
  }
  if (c.num_hidden_layers > kMaxLayers)
    return fail("num_hidden_layers", std::to_string(c.num_hidden_layers) + " is more than " + std::to_string(kMaxLayers));
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    return fail("num_key_value_heads", std::to_string(c.num_key_value_heads) + " does not divide num_attention_heads " +
                                           std::to_string(c.num_attention_heads));
  if (c.head_dim % 2 != 0) return fail("head_dim", std::to_string(c.head_dim) + " is odd (RoPE rotates pairs)");
  // Each factor is below 2^31, so these products fit in 128 bits.
  const std::pair<const char*, __int128> products[] = {
      {"vocab_size", static_cast<__int128>(c.vocab_size) * c.hidden_size},
      {"intermediate_size", static_cast<__int128>(c.intermediate_size) * c.hidden_size},
      {"num_attention_heads", static_cast<__int128>(c.num_attention_heads) * c.head_dim * c.hidden_size}};
  for (const auto& [name, n] : products)
    if (n > kMaxTensorElements) return fail(name, "makes a tensor of more than 2^40 elements");
  if (!(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps > 0))
    return fail("rms_norm_eps", "expected a positive number, got " + std::to_string(c.rms_norm_eps));
  // The engine's RMSNorm takes eps as a float: 3.5e38 was finite here and inf there (exit 1, no
  // file or field named).
  if (!std::isfinite(static_cast<float>(c.rms_norm_eps)))
    return fail("rms_norm_eps", json(c.rms_norm_eps).dump() + " is past the largest float (the norm's eps is a float)");
  if (!(std::isfinite(c.rope_theta) && c.rope_theta > 0))
    return fail("rope_theta", "expected a positive number, got " + std::to_string(c.rope_theta));
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1))
    return fail("partial_rotary_factor", std::to_string(c.partial_rotary_factor) + " is not in (0, 1]");
  const double rot = static_cast<double>(c.head_dim) * c.partial_rotary_factor;
  if (rot != std::floor(rot))
    return fail("partial_rotary_factor", std::to_string(c.partial_rotary_factor) + " * head_dim " +
                                             std::to_string(c.head_dim) + " is not an integer");
  if (c.rotary_dim != static_cast<int64_t>(rot))
    return fail("partial_rotary_factor", "rotary_dim " + std::to_string(c.rotary_dim) + " is not head_dim * factor " +
                                             std::to_string(static_cast<int64_t>(rot)));
  if (c.rotary_dim % 2 != 0)
    return fail("partial_rotary_factor", "gives " + std::to_string(c.rotary_dim) + " rotary dims, an odd number");
  if (c.dtype != "bfloat16" && c.dtype != "float16" && c.dtype != "float32")
    return fail("dtype", "'" + c.dtype + "' is not one of bfloat16, float16, float32");
  return Status::Ok();
}

Status parse_qwen3_config(std::string_view text, const std::string& file, Qwen3Config* out) {
  json j;
  if (std::string jwhy, at, reason; !parse_json_strict(text, &j, &jwhy, &at, &reason))
    return Status::Error(file + ": " + at + ": " + reason);
  const Reader r{j, file};
  if (!j.is_object()) return r.fail("(top level)", "expected an object, got " + type_name(j));

  // What model this is.
  if (!j.contains("architectures")) return r.fail("architectures", "missing");
  if (!j["architectures"].is_array())
    return r.fail("architectures", "expected an array, got " + type_name(j["architectures"]));
  bool qwen3 = false;
  for (size_t i = 0; i < j["architectures"].size(); ++i) {
    const json& a = j["architectures"][i];
    if (!a.is_string())
      return r.fail("architectures[" + std::to_string(i) + "]", "expected a string, got " + type_name(a));
    qwen3 = qwen3 || a.get<std::string>() == "Qwen3ForCausalLM";
  }
  if (!qwen3) return r.fail("architectures", j["architectures"].dump() + " does not name Qwen3ForCausalLM");
  if (j.contains("model_type")) {
    if (!j["model_type"].is_string()) return r.fail("model_type", "expected a string, got " + type_name(j["model_type"]));
    if (j["model_type"] != "qwen3") return r.fail("model_type", j["model_type"].dump() + " is not \"qwen3\"");
  }

  Qwen3Config c;
  KC_RETURN_IF_ERROR(r.positive_int("hidden_size", &c.hidden_size));
  KC_RETURN_IF_ERROR(r.positive_int("intermediate_size", &c.intermediate_size));
  KC_RETURN_IF_ERROR(r.positive_int("num_hidden_layers", &c.num_hidden_layers));
  KC_RETURN_IF_ERROR(r.positive_int("num_attention_heads", &c.num_attention_heads));
  KC_RETURN_IF_ERROR(r.positive_int("num_key_value_heads", &c.num_key_value_heads));
  KC_RETURN_IF_ERROR(r.positive_int("vocab_size", &c.vocab_size));
  KC_RETURN_IF_ERROR(r.positive_int("max_position_embeddings", &c.max_position_embeddings));
  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
    KC_RETURN_IF_ERROR(r.positive_int("head_dim", &c.head_dim));
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      return r.fail("head_dim", "missing, and hidden_size " + std::to_string(c.hidden_size) +
                                    " is not divisible by num_attention_heads " + std::to_string(c.num_attention_heads));
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (!j.contains("rms_norm_eps")) return r.fail("rms_norm_eps", "missing");
  KC_RETURN_IF_ERROR(Reader::positive_number(j, "rms_norm_eps", "rms_norm_eps", r, &c.rms_norm_eps));

  // RoPE base and rotary fraction: top level, rope_parameters, rope_scaling.
  bool have_theta = false, have_factor = false;
  std::string theta_from, factor_from;
  auto take = [&](const json& o, const char* key, const std::string& field, double* value, bool* have,
                  std::string* from) -> Status {
    if (!o.contains(key)) return Status::Ok();
    double v = 0;
    KC_RETURN_IF_ERROR(Reader::positive_number(o, key, field, r, &v));
    if (*have && v != *value) {
      std::ostringstream s;
      s.precision(17);
      s << v << " disagrees with " << *from << " " << *value;
      return r.fail(field, s.str());
    }
    *value = v;
    *have = true;
    *from = field;
    return Status::Ok();
  };
  KC_RETURN_IF_ERROR(take(j, "rope_theta", "rope_theta", &c.rope_theta, &have_theta, &theta_from));
  KC_RETURN_IF_ERROR(take(j, "partial_rotary_factor", "partial_rotary_factor", &c.partial_rotary_factor, &have_factor,
                          &factor_from));
  for (const char* block : {"rope_parameters", "rope_scaling"}) {
    if (!j.contains(block) || j[block].is_null()) continue;
    const json& b = j[block];
    if (!b.is_object()) return r.fail(block, "expected an object or null, got " + type_name(b));
    KC_RETURN_IF_ERROR(read_rope_type(r, b, block));
    KC_RETURN_IF_ERROR(take(b, "rope_theta", std::string(block) + ".rope_theta", &c.rope_theta, &have_theta, &theta_from));
    KC_RETURN_IF_ERROR(take(b, "partial_rotary_factor", std::string(block) + ".partial_rotary_factor",
                            &c.partial_rotary_factor, &have_factor, &factor_from));
  }
  if (!have_theta) return r.fail("rope_theta", "missing (looked at the top level, rope_parameters and rope_scaling)");
  if (c.partial_rotary_factor > 1)
    return r.fail(factor_from, std::to_string(c.partial_rotary_factor) + " is not in (0, 1]");

  if (!j.contains("tie_word_embeddings")) return r.fail("tie_word_embeddings", "missing");
  if (!j["tie_word_embeddings"].is_boolean())
    return r.fail("tie_word_embeddings", "expected a boolean, got " + type_name(j["tie_word_embeddings"]));
  c.tie_word_embeddings = j["tie_word_embeddings"].get<bool>();

  bool have_dtype = false;
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (!j.contains(key)) continue;
    const json& v = j[key];
    if (!v.is_string()) return r.fail(key, "expected a string, got " + type_name(v));
    const std::string s = v.get<std::string>();
    if (s != "bfloat16" && s != "float16" && s != "float32")
      return r.fail(key, "'" + s + "' is not one of bfloat16, float16, float32");
    if (have_dtype && s != c.dtype) return r.fail(key, "'" + s + "' disagrees with torch_dtype '" + c.dtype + "'");
    c.dtype = s;
    have_dtype = true;
  }
  if (!have_dtype) return r.fail("dtype", "missing (neither torch_dtype nor dtype is given)");

  // Features this engine does not implement: refused, never ignored.
  if (j.contains("hidden_act")) {
    if (!j["hidden_act"].is_string()) return r.fail("hidden_act", "expected a string, got " + type_name(j["hidden_act"]));
    if (j["hidden_act"] != "silu") return r.fail("hidden_act", j["hidden_act"].dump() + " is not supported (only \"silu\")");
  }
  for (const char* key : {"attention_bias", "use_sliding_window"}) {
    if (!j.contains(key) || j[key].is_null()) continue;
    if (!j[key].is_boolean()) return r.fail(key, "expected a boolean, got " + type_name(j[key]));
    if (j[key].get<bool>()) return r.fail(key, "true is not supported");
  }
  if (j.contains("layer_types") && !j["layer_types"].is_null()) {
    const json& lt = j["layer_types"];
    if (!lt.is_array()) return r.fail("layer_types", "expected an array, got " + type_name(lt));
    for (size_t i = 0; i < lt.size(); ++i)
      if (lt[i] != "full_attention")
        return r.fail("layer_types[" + std::to_string(i) + "]", lt[i].dump() + " is not supported (only \"full_attention\")");
  }

  const double rot = static_cast<double>(c.head_dim) * c.partial_rotary_factor;
  if (rot != std::floor(rot))
    return r.fail(have_factor ? factor_from : "partial_rotary_factor",
                  std::to_string(c.partial_rotary_factor) + " * head_dim " + std::to_string(c.head_dim) +
                      " is not an integer number of rotary dims");
  c.rotary_dim = static_cast<int64_t>(rot);
  if (c.rotary_dim % 2 != 0 && c.head_dim % 2 == 0)
    return r.fail(have_factor ? factor_from : "partial_rotary_factor",
                  "gives " + std::to_string(c.rotary_dim) + " rotary dims, an odd number");
  KC_RETURN_IF_ERROR(check_qwen3_config(c, file));
  *out = c;
  return Status::Ok();
}

Status read_model_text(const std::string& path, std::string* out) { return read_input_file(path, out); }

Status read_qwen3_config(const std::string& path, Qwen3Config* out) {
  std::string text;
  KC_RETURN_IF_ERROR(read_model_text(path, &text));
  return parse_qwen3_config(text, path, out);
}

std::string qwen3_config_json(const Qwen3Config& c) {
  json j = json::object();
  j["architectures"] = {"Qwen3ForCausalLM"};
  j["model_type"] = "qwen3";
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["vocab_size"] = c.vocab_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", c.rope_theta}};
  if (c.partial_rotary_factor != 1.0) j["partial_rotary_factor"] = c.partial_rotary_factor;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["torch_dtype"] = c.dtype;
  j["dtype"] = c.dtype;
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["use_sliding_window"] = false;
  j["sliding_window"] = nullptr;
  j["max_window_layers"] = c.num_hidden_layers;
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  return j.dump(2) + "\n";
}

}  // namespace kc::engine
