#include "contracts/receipt.h"
#include "contracts/json_type.h"

#include <elf.h>
#include <link.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <set>

#include "contracts/input_file.h"
#include "contracts/json_schema.h"
#include "kc_contract_names.h"
#include "kc_git_info.h"
#include "kc_receipt_schema.h"

namespace kc {

namespace {
// A count: a whole number from 0 to 2^63 - 1 (an unsigned value above that is no negative number,
// and read as int64 it would turn into one).
bool count_ok(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= uint64_t(INT64_MAX);
  return v.get<int64_t>() >= 0;
}
std::string count_why(const nlohmann::json& v) {
  return v.is_number_unsigned() ? "count " + v.dump() + " out of range (at most 9223372036854775807)"
                                : "negative count " + v.dump();
}
}  // namespace

bool safe_file_name(const std::string& w) {
  return !w.empty() && w != "." && w != ".." && w.find_first_of(std::string("/\\\0", 3)) == std::string::npos;
}

const std::vector<std::string>& registered_contract_names() {
  static const std::vector<std::string> names(std::begin(kContractNames), std::end(kContractNames));
  return names;
}

Status check_known_contract(const nlohmann::json& r, const std::string& file) {
  if (!r.is_object() || r.value("kind", "") != "contract" || !r.contains("name") || !r["name"].is_string())
    return Status::Ok();
  const std::string name = r["name"].get<std::string>();
  std::string known;
  for (const std::string& n : registered_contract_names()) {
    if (n == name) return Status::Ok();
    known += (known.empty() ? "" : ", ") + n;
  }
  if (name == "oracle" || name == "sanitize") return Status::Ok();
  return Status::Error(file + ": name: '" + name + "' is not a known contract (known: " + known +
                       "; and oracle, sanitize: the receipts of tools/oracle_torch.py and tools/sanitize.py)");
}

bool from_contract_run(const nlohmann::json& r) {
  const nlohmann::json& a = r["argv"];
  if (a.size() < 2) return false;
  const std::string cmd = a[1].get<std::string>();
  return cmd == r["name"].get<std::string>() || cmd == "kernel-contract" || cmd == "premerge";
}

// A contract run's receipt (tf-cuda-test NAME, kernel-contract, premerge): its argv says so, or
// its name is a contract's (not oracle's or sanitize's, the two tools that write the contract
// kind) whatever its argv says, since argv is as editable as the rest.
static bool contract_run(const nlohmann::json& r) {
  const std::string name = r.value("name", "");
  return r.value("kind", "") == "contract" && (from_contract_run(r) || (name != "oracle" && name != "sanitize"));
}

std::string shell_quote(const std::string& w) {
  if (!w.empty() && w.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./=:,+-@%") ==
                        std::string::npos)
    return w;
  std::string q = "'";
  for (char ch : w) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}


using json = nlohmann::json;

// ---- writing ----

std::vector<std::string> gate_failure_reasons(const std::vector<GateStat>& gates) {
  std::vector<std::string> why;
  for (const GateStat& g : gates)
    if (g.failed > 0)
      why.push_back("gate " + g.name + " failed " + std::to_string(g.failed) + " of " + std::to_string(g.passed + g.failed) +
                    " checks");
  return why;
}

std::vector<std::string> control_and_error_reasons(const std::vector<ControlStat>& controls, size_t errors) {
  std::vector<std::string> why;
  for (const ControlStat& k : controls)
    if (!k.red) why.push_back("control " + k.name + " stayed green");
  if (errors > 0) why.push_back(std::to_string(errors) + " errors (listed in the receipt)");
  return why;
}

Receipt::Receipt(const Head& h) {
  doc_["schema"] = kReceiptSchema;
  doc_["kind"] = h.kind;
  doc_["name"] = h.name;
  doc_["verdict"] = "fail";  // until the writer decides
  doc_["backend"] = h.backend;
  doc_["device"] = h.device;
  doc_["git"] = {{"commit", KC_GIT_COMMIT}, {"dirty", KC_GIT_DIRTY}};
  doc_["build"] = {{"id", executable_build_id()}};
  doc_["seed"] = h.seed;
  doc_["argv"] = h.argv;
  doc_["gates"] = json::array();
  doc_["controls"] = json::array();
}

void Receipt::set_verdict(bool pass, const std::vector<std::string>& reasons) {
  doc_["verdict"] = pass ? "pass" : "fail";
  doc_["verdict_reasons"] = reasons;
}

void Receipt::set_cases(int64_t requested, int64_t run, int64_t filtered_out, const std::string& filter) {
  doc_["cases"] = {{"requested", requested}, {"run", run}, {"filtered_out", filtered_out}, {"filter", filter}};
}

void Receipt::add_gates(const std::vector<GateStat>& gates) {
  for (const GateStat& g : gates) {
    json j = {{"name", g.name},
              {"description", g.description},
              {"ok", g.failed == 0},
              {"status", gate_status(g.passed, g.failed, g.skipped)},
              {"passed", g.passed},
              {"failed", g.failed},
              {"skipped", g.skipped},
              {"total", g.passed + g.failed + g.skipped}};
    if (g.skipped) j["skip_reason"] = g.skip_reason;
    if (g.worst_ratio >= 0 || std::isnan(g.worst_ratio))
      j["worst"] = {{"case", g.worst_case},
                    {"ratio", std::isnan(g.worst_ratio) ? json("nan") : json(g.worst_ratio)},
                    {"detail", g.worst_detail}};
    if (!g.failures.empty()) j["failures"] = g.failures;
    j["time_s"] = g.time_s;
    doc_["gates"].push_back(std::move(j));
  }
}

void Receipt::add_controls(const std::vector<ControlStat>& controls, const json& seen) {
  for (const ControlStat& k : controls) {
    json j = {{"name", k.name}, {"description", k.description}, {"red", k.red},
              {"caught_by", k.caught_by}, {"time_s", k.time_s}};
    if (!k.errors.empty()) j["errors"] = k.errors;
    if (seen.contains(k.name)) j["seen"] = seen[k.name];
    doc_["controls"].push_back(std::move(j));
  }
}

void Receipt::set_errors(const std::vector<std::string>& errors) { doc_["errors"] = errors; }

void Receipt::set_total_s(double seconds) { doc_["timings"] = {{"total_s", seconds}}; }

// ---- reading ----

namespace {
// The GNU build-id note of the executable (the first object dl_iterate_phdr reports), in hex.
int find_build_id(dl_phdr_info* info, size_t, void* data) {
  std::string* out = static_cast<std::string*>(data);
  for (int i = 0; i < info->dlpi_phnum && out->empty(); ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const size_t align = ph.p_align == 8 ? 8 : 4;  // a note's name and description are padded to it
    const auto pad = [&](size_t n) { return (n + align - 1) / align * align; };
    const unsigned char* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
    const unsigned char* end = p + ph.p_memsz;
    while (size_t(end - p) >= sizeof(ElfW(Nhdr))) {
      ElfW(Nhdr) nh;
      std::memcpy(&nh, p, sizeof nh);
      const unsigned char* name = p + sizeof nh;
      if (size_t(end - name) < pad(nh.n_namesz)) break;
      const unsigned char* desc = name + pad(nh.n_namesz);
      if (size_t(end - desc) < nh.n_descsz) break;
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0 && nh.n_descsz > 0 &&
          nh.n_descsz <= 64) {
        static const char* hex = "0123456789abcdef";
        for (size_t k = 0; k < nh.n_descsz; ++k) *out += hex[desc[k] >> 4], *out += hex[desc[k] & 15];
        break;
      }
      if (size_t(end - desc) < pad(nh.n_descsz)) break;
      p = desc + pad(nh.n_descsz);
    }
  }
  return 1;  // the executable only
}
}  // namespace

const std::string& executable_build_id() {
  static const std::string id = [] {
    std::string s;
    dl_iterate_phdr(find_build_id, &s);
    return s.empty() ? std::string("none") : s;
  }();
  return id;
}

bool build_id_ok(const std::string& id) {
  if (id == "none") return true;
  if (id.empty() || id.size() % 2 || id.size() > 128) return false;
  for (char ch : id)
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
  return true;
}

std::string Receipt::seed_text() const {
  const auto it = doc_.find("seed");
  if (it == doc_.end() || it->is_null()) return "none";
  if (it->is_number_unsigned()) return std::to_string(it->get<uint64_t>());
  return it->dump();
}

std::string Receipt::commit_label() const {
  return doc_.at("git").at("commit").get<std::string>() + (doc_.at("git").at("dirty").get<bool>() ? "-dirty" : "");
}

std::string Receipt::short_commit() const {
  const std::string c = doc_.at("git").at("commit").get<std::string>();
  return c.substr(0, 12) + (doc_.at("git").at("dirty").get<bool>() ? " (dirty)" : " (clean)");
}

std::string Receipt::device_line() const {
  const json& d = doc_.at("device");
  std::string s = doc_.at("backend").get<std::string>() + " on " + d.at("name").get<std::string>();
  std::string extra;  // empty fields (a cpu has no compute capability or driver) left out
  if (d.contains("compute_capability") && d["compute_capability"].is_string() &&
      !d["compute_capability"].get<std::string>().empty())
    extra = "compute " + d["compute_capability"].get<std::string>();
  if (d.contains("driver") && d["driver"].is_string() && !d["driver"].get<std::string>().empty())
    extra += (extra.empty() ? "" : ", ") + d["driver"].get<std::string>();
  return extra.empty() ? s : s + " (" + extra + ")";
}

namespace {

// ---- Validation: the first problem found, as "file: field: reason".
enum class Want { string, boolean, integer, number, object, array };
const char* want_name(Want w) {
  switch (w) {
    case Want::string: return "a string";
    case Want::boolean: return "a boolean";
    case Want::integer: return "an integer";
    case Want::number: return "a number";
    case Want::object: return "an object";
    case Want::array: return "an array";
  }
  return "?";
}
bool is(const json& v, Want w) {
  switch (w) {
    case Want::string: return v.is_string();
    case Want::boolean: return v.is_boolean();
    case Want::integer: return v.is_number_integer();
    case Want::number: return v.is_number();
    case Want::object: return v.is_object();
    case Want::array: return v.is_array();
  }
  return false;
}

struct Checker {
  std::string file, error;
  bool fail(const std::string& field, const std::string& why) {
    if (error.empty()) error = file + ": " + field + ": " + why;
    return false;
  }
  // o[key] exists (unless optional) and has the wanted type.
  bool field(const json& o, const std::string& at, const char* key, Want w, bool optional = false) {
    const std::string f = at.empty() ? key : at + "." + key;
    if (!o.contains(key)) return optional || fail(f, "missing");
    if (!is(o[key], w)) return fail(f, std::string("expected ") + want_name(w) + ", got " + json_type_name(o[key]));
    return true;
  }
  bool one_of(const json& o, const char* key, std::initializer_list<const char*> allowed, const std::string& at = "") {
    if (!field(o, at, key, Want::string)) return false;
    const std::string v = o[key].get<std::string>();
    std::string list;
    for (const char* a : allowed) {
      if (v == a) return true;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    return fail(at.empty() ? key : at + "." + key, "'" + v + "' is not one of " + list);
  }
  bool strings(const json& o, const std::string& at, const char* key, bool optional = false) {
    if (!field(o, at, key, Want::array, optional)) return false;
    if (!o.contains(key)) return true;
    const std::string f = at.empty() ? key : at + "." + key;
    for (size_t i = 0; i < o[key].size(); ++i)
      if (!o[key][i].is_string())
        return fail(f + "[" + std::to_string(i) + "]", "expected a string, got " + json_type_name(o[key][i]));
    return true;
  }
};

// Benches: kind bench (attention, pack) and bench-engine; both carry rows and targets.
bool is_bench_doc(const json& r) { return r["kind"] == "bench" || r["kind"] == "bench-engine"; }

std::string num_text(double x) {
  std::ostringstream o;
  o << std::setprecision(6) << x;
  return o.str();
}

bool check_receipt(const json& r, Checker& c) {
  if (!r.is_object()) return c.fail("(top level)", "expected an object, got " + json_type_name(r));
  if (!c.field(r, "", "schema", Want::string)) return false;
  if (r["schema"] != kReceiptSchema)
    return c.fail("schema", "'" + r["schema"].get<std::string>() + "' is not " + kReceiptSchema);
  if (!c.one_of(r, "kind", {"contract", "serve-gate", "serve-memory", "kv-gate", "bench", "bench-engine", "generate"}))
    return false;
  if (!c.field(r, "", "name", Want::string) || !c.one_of(r, "verdict", {"pass", "fail"}) ||
      !c.one_of(r, "backend", {"cpu", "cuda"}) || !c.field(r, "", "device", Want::object) ||
      !c.field(r["device"], "device", "name", Want::string) || !c.field(r, "", "git", Want::object) ||
      !c.field(r["git"], "git", "commit", Want::string) || !c.field(r["git"], "git", "dirty", Want::boolean) ||
      !c.field(r, "", "build", Want::object, true) ||
      (r.contains("build") && !c.field(r["build"], "build", "id", Want::string)) ||
      !c.strings(r, "", "argv") || !c.field(r, "", "timings", Want::object) ||
      !c.field(r["timings"], "timings", "total_s", Want::number) || !c.strings(r, "", "errors", true) ||
      !c.strings(r, "", "verdict_reasons", true) ||
      !c.field(r, "", "cases", Want::object, true) || !c.field(r, "", "numbers", Want::object, true))
    return false;
  // The name is a file name (report --merge-out writes DIR/<name>.json; a crafted "../../x" wrote
  // outside DIR): a kv-gate's is FIXTURE/FORMAT, each part one.
  {
    const std::string n = r["name"].get<std::string>();
    const size_t slash = n.find('/');
    const bool kv = r["kind"] == "kv-gate";
    const bool ok = kv ? slash != std::string::npos && safe_file_name(n.substr(0, slash)) &&
                             safe_file_name(n.substr(slash + 1))
                       : safe_file_name(n);
    if (!ok)
      return c.fail("name", json(n).dump(-1, ' ', false, json::error_handler_t::replace) +
                                (kv ? " is not FIXTURE/FORMAT, each part a file name" : " is not a file name") +
                                " (not empty, not . or .., no /, \\ or NUL: a receipt's name names its files)");
  }
  if (r.contains("build") && !build_id_ok(r["build"]["id"].get<std::string>()))
    return c.fail("build.id", json(r["build"]["id"]).dump(-1, ' ', false, json::error_handler_t::replace) +
                                  " is not the executable's GNU build id in lower-case hex (1 to 64 bytes) or none");
  if (!(r["timings"]["total_s"].get<double>() >= 0))
    return c.fail("timings.total_s", "a time below 0 (" + num_text(r["timings"]["total_s"].get<double>()) + ")");
  // seed: an unsigned integer; null only for a bench (no generator).
  if (!r.contains("seed")) return c.fail("seed", "missing");
  if (r["seed"].is_null() ? !is_bench_doc(r) : !r["seed"].is_number_unsigned())
    return c.fail("seed", r["seed"].is_number_integer() ? "expected an integer from 0 to 2^64 - 1, got " + r["seed"].dump()
                                                        : std::string("expected an integer") +
                                                              (is_bench_doc(r) ? " or null" : "") + ", got " +
                                                              json_type_name(r["seed"]));
  if (r.contains("cases")) {
    for (const char* k : {"requested", "run", "filtered_out"})
      if (!c.field(r["cases"], "cases", k, Want::integer, true)) return false;
    if (!c.field(r["cases"], "cases", "filter", Want::string, true) || !c.field(r["cases"], "cases", "case", Want::string, true))
      return false;
    for (const char* k : {"requested", "run", "filtered_out"})
      if (r["cases"].contains(k) && !count_ok(r["cases"][k]))
        return c.fail(std::string("cases.") + k, count_why(r["cases"][k]));
    if (r["cases"].contains("shard")) {  // i/n, as --shard takes it (premerge and merge read it so)
      const json& sh = r["cases"]["shard"];
      const std::string t = sh.is_string() ? sh.get<std::string>() : "";
      const size_t slash = t.find('/');
      auto whole = [](const std::string& x) {
        return !x.empty() && x[0] != '0' && x.find_first_not_of("0123456789") == std::string::npos;
      };
      if (slash == std::string::npos || !whole(t.substr(0, slash)) || !whole(t.substr(slash + 1)))
        return c.fail("cases.shard", "expected a string i/n, got " + sh.dump());
    }
    for (const char* k : {"matched", "other_shards"}) {  // a shard's account of the selection
      if (!c.field(r["cases"], "cases", k, Want::integer, true)) return false;
      if (r["cases"].contains(k) && !count_ok(r["cases"][k]))
        return c.fail(std::string("cases.") + k, count_why(r["cases"][k]));
    }
    if (!c.field(r["cases"], "cases", "every_case", Want::boolean, true)) return false;
    if (r["cases"].value("every_case", false) &&
        (!r["cases"].value("filter", std::string()).empty() || r["cases"].contains("case")))
      return c.fail("cases.every_case", std::string("true contradicts cases.") +
                                            (r["cases"].contains("case") ? "case" : "filter") +
                                            " (a selection is not a run of every case)");
    // cases.default (the contract's default count, written beside every_case since session 63):
    // every_case is then what the receipt's own fields say, so that an every_case edited to false
    // no longer escapes the rule that a run of every case has no gate at total 0. --gates-only
    // shows as controls_skipped (such a run never passes anyway).
    if (!c.field(r["cases"], "cases", "default", Want::integer, true)) return false;
    if (r["cases"].contains("default")) {
      const json& d = r["cases"]["default"];
      if (d.get<int64_t>() < 1) return c.fail("cases.default", "expected at least 1, got " + d.dump());
      if (!r["cases"].contains("every_case"))
        return c.fail("cases.every_case", "missing beside cases.default (the runner writes the two together)");
      const bool selection = !r["cases"].value("filter", std::string()).empty() || r["cases"].contains("case");
      const json& req = r["cases"].contains("requested") ? r["cases"]["requested"] : json();
      const bool enough = req.is_number_integer() && req.get<int64_t>() >= d.get<int64_t>();
      const bool every = !selection && enough && !r.contains("controls_skipped");
      if (r["cases"]["every_case"].get<bool>() != every)
        return c.fail("cases.every_case",
                      std::string(every ? "false" : "true") + " contradicts the receipt's selection (" +
                          (selection ? "a filter or case" : "no filter or case") + ", cases.requested " + req.dump() +
                          (enough ? " >= " : " < ") + "cases.default " + d.dump() +
                          (r.contains("controls_skipped") ? ", controls skipped" : "") + ")");
    }
    if (!c.field(r["cases"], "cases", "merged_shards", Want::integer, true)) return false;
    if (r["cases"].contains("merged_shards") && r["cases"]["merged_shards"].get<int64_t>() < 1)
      return c.fail("cases.merged_shards", "expected at least 1, got " + r["cases"]["merged_shards"].dump());
  }
  if (!c.strings(r, "", "replay", true) || !c.field(r, "", "controls_skipped", Want::integer, true)) return false;
  if (r.contains("controls_skipped") && r["controls_skipped"].get<int64_t>() < 1)
    return c.fail("controls_skipped", "expected at least 1 (written only when controls were skipped), got " +
                                          r["controls_skipped"].dump());
  if (!c.field(r["device"], "device", "compute_capability", Want::string, true) ||
      !c.field(r["device"], "device", "driver", Want::string, true))
    return false;
  if (!c.field(r, "", "gates", Want::array) || !c.field(r, "", "controls", Want::array)) return false;
  // Names are keys (diff and merge match gates and controls by name): each appears once.
  for (const char* list : {"gates", "controls"}) {
    std::set<std::string> seen;
    for (size_t i = 0; i < r[list].size(); ++i) {
      const json& x = r[list][i];
      if (x.is_object() && x.contains("name") && x["name"].is_string() && !seen.insert(x["name"].get<std::string>()).second)
        return c.fail(std::string(list) + "[" + std::to_string(i) + "].name",
                      "'" + x["name"].get<std::string>() + "' appears twice");
    }
  }
  for (size_t i = 0; i < r["gates"].size(); ++i) {
    const json& g = r["gates"][i];
    const std::string at = "gates[" + std::to_string(i) + "]";
    if (!g.is_object()) return c.fail(at, "expected an object, got " + json_type_name(g));
    if (!c.field(g, at, "name", Want::string) || !c.field(g, at, "ok", Want::boolean)) return false;
    for (const char* k : {"passed", "failed", "skipped", "total"}) {
      if (!c.field(g, at, k, Want::integer)) return false;
      if (!count_ok(g[k])) return c.fail(at + "." + k, count_why(g[k]));
    }
    const int64_t passed = g["passed"].get<int64_t>(), failed = g["failed"].get<int64_t>(),
                  skipped = g["skipped"].get<int64_t>();
    // The sum's range first: each count may be up to 2^63 - 1, and their sum in int64_t would
    // overflow (undefined behaviour, found by the fixture fuzz under UBSan).
    if (__int128(passed) + failed + skipped > __int128(INT64_MAX))
      return c.fail(at + ".total", "passed + failed + skipped is above 2^63 - 1");
    if (g["total"].get<int64_t>() != passed + failed + skipped)
      return c.fail(at + ".total", g["total"].dump() + " is not passed + failed + skipped (" +
                                       std::to_string(passed + failed + skipped) + ")");
    if (g["ok"].get<bool>() != (failed == 0))
      return c.fail(at + ".ok", std::string(g["ok"].get<bool>() ? "true" : "false") + " contradicts failed = " +
                                    std::to_string(failed));
    if (!c.field(g, at, "status", Want::string, true) || !c.field(g, at, "skip_reason", Want::string, true) ||
        !c.field(g, at, "description", Want::string, true) || !c.field(g, at, "time_s", Want::number, true))
      return false;
    if (g.contains("time_s") && !(g["time_s"].get<double>() >= 0))
      return c.fail(at + ".time_s", "a time below 0 (" + num_text(g["time_s"].get<double>()) + ")");
    if (g.contains("status") && g["status"] != gate_status(passed, failed, skipped))
      return c.fail(at + ".status", "'" + g["status"].get<std::string>() + "' contradicts its counts (which say '" +
                                        gate_status(passed, failed, skipped) + "')");
    if (!c.strings(g, at, "failures", true) || !c.field(g, at, "worst", Want::object, true)) return false;
    // The writers list failed checks only (at most 8 of them): more entries than failed checks
    // is a failure printed under a gate that says it held.
    if (g.contains("failures") && int64_t(g["failures"].size()) > failed)
      return c.fail(at + ".failures", std::to_string(g["failures"].size()) + " entries contradict failed = " +
                                          std::to_string(failed));
    if (g.contains("worst")) {
      const json& w = g["worst"];
      if (!c.field(w, at + ".worst", "case", Want::string, true) || !c.field(w, at + ".worst", "detail", Want::string, true))
        return false;
      if (w.contains("ratio") && !w["ratio"].is_number() && w["ratio"] != "nan")
        return c.fail(at + ".worst.ratio", "expected a number or \"nan\", got " +
                                               (w["ratio"].is_string() ? "\"" + w["ratio"].get<std::string>() + "\""
                                                                       : json_type_name(w["ratio"])));
      // A ratio is |error| / bound: a check whose ratio is above 1 (or NaN) fails (check_ratio),
      // so a gate with no failure has every ratio in [0, 1].
      if (w.contains("ratio") && failed == 0 &&
          (w["ratio"] == "nan" || !(w["ratio"].get<double>() >= 0 && w["ratio"].get<double>() <= 1)))
        return c.fail(at + ".worst.ratio", (w["ratio"].is_number() ? num_text(w["ratio"].get<double>()) : std::string("nan")) +
                                               " contradicts failed = 0 (a check above 1 or NaN fails)");
    }
  }
  for (size_t i = 0; i < r["controls"].size(); ++i) {
    const json& k = r["controls"][i];
    const std::string at = "controls[" + std::to_string(i) + "]";
    if (!k.is_object()) return c.fail(at, "expected an object, got " + json_type_name(k));
    if (!c.field(k, at, "name", Want::string) || !c.field(k, at, "red", Want::boolean) ||
        !c.strings(k, at, "caught_by") || !c.strings(k, at, "errors", true) ||
        !c.field(k, at, "description", Want::string, true) || !c.field(k, at, "time_s", Want::number, true))
      return false;
    if (k["red"].get<bool>() && k["caught_by"].empty())
      return c.fail(at + ".red", "true, but no gate caught it (caught_by is empty)");
    if (k.contains("time_s") && !(k["time_s"].get<double>() >= 0))
      return c.fail(at + ".time_s", "a time below 0 (" + num_text(k["time_s"].get<double>()) + ")");
    for (size_t j = 0; j < k["caught_by"].size(); ++j)
      for (size_t j2 = 0; j2 < j; ++j2)
        if (k["caught_by"][j2] == k["caught_by"][j])
          return c.fail(at + ".caught_by", k["caught_by"][j].dump() + " appears twice");
    if (k["red"].get<bool>() && k.contains("errors") && !k["errors"].empty())
      return c.fail(at + ".red", "true, but the control had errors (an error is not a catch)");
  }
  // A control is caught by gates of the run: each name in caught_by is one of the receipt's
  // gates. (tools/sanitize.py's receipts, of kind contract but no contract run, name the
  // sanitizer that caught each plant instead.)
  if (r["kind"] != "contract" || contract_run(r)) {
    std::set<std::string> gate_names;
    for (const json& g : r["gates"]) gate_names.insert(g["name"].get<std::string>());
    for (size_t i = 0; i < r["controls"].size(); ++i)
      for (const json& by : r["controls"][i]["caught_by"])
        if (!gate_names.count(by.get<std::string>()))
          return c.fail("controls[" + std::to_string(i) + "].caught_by",
                        "'" + by.get<std::string>() + "' is not a gate of this receipt");
  }
  if (is_bench_doc(r)) {
    if (!c.field(r, "", "rows", Want::array) || !c.field(r, "", "targets", Want::array)) return false;
    for (size_t i = 0; i < r["rows"].size(); ++i) {
      const json& row = r["rows"][i];
      const std::string at = "rows[" + std::to_string(i) + "]";
      if (!row.is_object()) return c.fail(at, "expected an object, got " + json_type_name(row));
      if (!c.field(row, at, "config", Want::string)) return false;
      // A row's times (*_us) are what diff and premerge compare: a number >= 0 each, so that
      // no row escapes the comparison; SDPA's may be null (not timed).
      for (auto it = row.begin(); it != row.end(); ++it) {
        const std::string& k = it.key();
        if (k.size() < 4 || k.compare(k.size() - 3, 3, "_us") != 0) continue;
        if (it->is_null() && k.rfind("sdpa_", 0) == 0) continue;
        if (!it->is_number()) return c.fail(at + "." + k, "expected a time in us (a number >= 0), got " + json_type_name(*it));
        if (!(it->get<double>() >= 0)) return c.fail(at + "." + k, "a time below 0 (" + num_text(it->get<double>()) + ")");
      }
    }
    std::set<std::string> target_names;  // keys too (diff and premerge match targets by name)
    for (size_t i = 0; i < r["targets"].size(); ++i) {
      const json& t = r["targets"][i];
      const std::string at = "targets[" + std::to_string(i) + "]";
      if (!t.is_object()) return c.fail(at, "expected an object, got " + json_type_name(t));
      if (t.contains("name") && t["name"].is_string() && !target_names.insert(t["name"].get<std::string>()).second)
        return c.fail(at + ".name", "'" + t["name"].get<std::string>() + "' appears twice");
      if (!c.field(t, at, "name", Want::string) || !c.field(t, at, "value", Want::number) ||
          !c.field(t, at, "limit", Want::number) || !c.field(t, at, "met", Want::boolean) ||
          !c.field(t, at, "measured", Want::boolean) || !c.field(t, at, "at_least", Want::boolean))
        return false;
      const double v = t["value"].get<double>(), lim = t["limit"].get<double>();
      const bool holds = t["measured"].get<bool>() && (t["at_least"].get<bool>() ? v >= lim : v <= lim);
      if (t["met"].get<bool>() != holds)
        return c.fail(at + ".met", std::string(t["met"].get<bool>() ? "true" : "false") + " contradicts value " + num_text(v) +
                                       (t["at_least"].get<bool>() ? " >= " : " <= ") + num_text(lim) +
                                       (t["measured"].get<bool>() ? "" : " (not measured)"));
    }
  }
  if (r["kind"] == "kv-gate") {  // what the per-depth view reads
    if (!c.field(r, "", "kv", Want::object)) return false;
    const json& kv = r["kv"];
    if (!c.field(kv, "kv", "format", Want::string) || !c.field(kv, "kv", "depths", Want::array) ||
        !c.field(kv, "kv", "recall", Want::array) || !c.field(kv, "kv", "memory", Want::object))
      return false;
    // The bar every depth's verdict is judged by (every kv-gate receipt writes it): without it
    // a depth's "pass" could not be checked (one with mean KL 50 once read as pass).
    if (!c.field(kv, "kv", "bar", Want::object) || !c.field(kv["bar"], "kv.bar", "mean_kl", Want::number) ||
        !c.field(kv["bar"], "kv.bar", "worst_token_kl", Want::number))
      return false;
    for (size_t i = 0; i < kv["depths"].size(); ++i) {
      const json& d = kv["depths"][i];
      const std::string at = "kv.depths[" + std::to_string(i) + "]";
      if (!d.is_object()) return c.fail(at, "expected an object, got " + json_type_name(d));
      for (const char* k : {"depth", "rows", "worst_pos"})
        if (!c.field(d, at, k, Want::integer)) return false;
      for (const char* k : {"mean_kl", "worst_kl", "top1_agreement"})
        if (!c.field(d, at, k, Want::number)) return false;
      // What diff compares per depth: one entry per depth (diff keys them by depth), a KL of 0
      // or more, an agreement that is a fraction.
      for (size_t i2 = 0; i2 < i; ++i2)
        if (kv["depths"][i2].is_object() && kv["depths"][i2].value("depth", json()) == d["depth"])
          return c.fail(at + ".depth", d["depth"].dump() + " appears twice");
      for (const char* k : {"mean_kl", "worst_kl"})
        if (!(d[k].get<double>() >= 0)) return c.fail(at + "." + k, "a KL below 0 (" + num_text(d[k].get<double>()) + ")");
      if (!(d["top1_agreement"].get<double>() >= 0 && d["top1_agreement"].get<double>() <= 1))
        return c.fail(at + ".top1_agreement", "expected a fraction in [0, 1], got " +
                                                  num_text(d["top1_agreement"].get<double>()));
      if (!c.field(d, at, "beyond_training", Want::boolean) || !c.field(d, at, "kl_percentiles", Want::object) ||
          !c.field(d, at, "perplexity", Want::object) || !c.field(d, at, "decode_tok_s", Want::object) ||
          !c.field(d, at, "top1_differences", Want::array) || !c.one_of(d, "verdict", {"pass", "fail"}, at) ||
          !c.field(d, at, "why", Want::string))
        return false;
      // A depth's verdict is its bar's: mean and worst-token KL at or under it (kv_bar_failure).
      {
        const double bm = kv["bar"]["mean_kl"].get<double>(), bw = kv["bar"]["worst_token_kl"].get<double>();
        const double m = d["mean_kl"].get<double>(), w = d["worst_kl"].get<double>();
        const bool holds = m <= bm && w <= bw;
        if ((d["verdict"] == "pass") != holds)
          return c.fail(at + ".verdict", "'" + d["verdict"].get<std::string>() + "' contradicts mean_kl " + num_text(m) +
                                             (m <= bm ? " <= " : " > ") + num_text(bm) + " and worst_kl " + num_text(w) +
                                             (w <= bw ? " <= " : " > ") + num_text(bw) + " (kv.bar)");
      }
      for (const char* k : {"p99.9", "p99", "p95", "p90", "p50"})
        if (!c.field(d["kl_percentiles"], at + ".kl_percentiles", k, Want::number)) return false;
      for (const char* k : {"bf16", "quant"})
        if (!c.field(d["perplexity"], at + ".perplexity", k, Want::number) ||
            !c.field(d["decode_tok_s"], at + ".decode_tok_s", k, Want::number))
          return false;
      for (size_t j = 0; j < d["top1_differences"].size(); ++j) {
        const json& x = d["top1_differences"][j];
        const std::string xa = at + ".top1_differences[" + std::to_string(j) + "]";
        if (!x.is_object()) return c.fail(xa, "expected an object, got " + json_type_name(x));
        for (const char* k : {"pos", "target", "bf16_top", "quant_top"})
          if (!c.field(x, xa, k, Want::integer)) return false;
        if (!c.field(x, xa, "bf16_margin", Want::number) || !c.field(x, xa, "quant_margin", Want::number)) return false;
      }
    }
    for (size_t i = 0; i < kv["recall"].size(); ++i) {
      const json& x = kv["recall"][i];
      const std::string at = "kv.recall[" + std::to_string(i) + "]";
      if (!x.is_object()) return c.fail(at, "expected an object, got " + json_type_name(x));
      if (!c.field(x, at, "probe", Want::string) || !c.field(x, at, "depth", Want::integer) ||
          !c.field(x, at, "outcome", Want::string) || !c.field(x, at, "bf16", Want::object) ||
          !c.field(x, at, "quant", Want::object) || !c.field(x["bf16"], at + ".bf16", "recalled", Want::boolean) ||
          !c.field(x["quant"], at + ".quant", "recalled", Want::boolean))
        return false;
      // The outcome follows from the two arms (check_recall): diff reads the outcome alone.
      const bool b = x["bf16"]["recalled"].get<bool>(), q = x["quant"]["recalled"].get<bool>();
      const std::string want = !b ? "uninformative" : q ? "recalled" : "lost";
      if (x["outcome"] != want)
        return c.fail(at + ".outcome", "'" + x["outcome"].get<std::string>() + "' contradicts bf16.recalled " +
                                           (b ? "true" : "false") + " and quant.recalled " + (q ? "true" : "false") +
                                           " (which say '" + want + "')");
    }
    if (!c.field(kv["memory"], "kv.memory", "bytes_per_position", Want::object)) return false;
    if (kv.contains("training_context")) {  // receipts since the long-context fixture model
      if (!c.field(kv, "kv", "training_context", Want::object) ||
          !c.field(kv["training_context"], "kv.training_context", "positions", Want::integer) ||
          !c.field(kv["training_context"], "kv.training_context", "source", Want::string))
        return false;
    }
    if (kv.contains("recall_summary")) {
      if (!c.field(kv, "kv", "recall_summary", Want::array)) return false;
      for (size_t i = 0; i < kv["recall_summary"].size(); ++i) {
        const json& x = kv["recall_summary"][i];
        const std::string at = "kv.recall_summary[" + std::to_string(i) + "]";
        if (!x.is_object()) return c.fail(at, "expected an object, got " + json_type_name(x));
        if (!c.field(x, at, "group", Want::string) || !c.field(x, at, "beyond_training", Want::boolean)) return false;
        for (const char* k : {"depth", "probes", "bf16_recalled", "quant_recalled", "lost", "gained"})
          if (!c.field(x, at, k, Want::integer)) return false;
      }
    }
  }
  if (r["kind"] == "serve-gate" || r["kind"] == "kv-gate") {
    // What diff and premerge read of a gate run: the fixture as the command named it, its content
    // (diff compares two runs' fixtures by fixture_sha256, as engine/serve_gate.cpp and
    // engine/kv_gate.cpp write it: 64 lowercase hex digits) and the model folder.
    if (!c.field(r, "", "fixture", Want::string) || !c.field(r, "", "fixture_sha256", Want::string) ||
        !c.field(r, "", "model", Want::string))
      return false;
    const std::string sha = r["fixture_sha256"].get<std::string>();
    if (sha.size() != 64 || sha.find_first_not_of("0123456789abcdef") != std::string::npos)
      return c.fail("fixture_sha256", "expected 64 lowercase hex digits (a sha256), got \"" + sha + "\"");
  }
  // A serve-gate's arms (engine/serve_gate.cpp, arm_json) are read by no view: the receipt
  // schema checks them (required fields, types, bounds), after these checks.
  if (r["kind"] == "serve-memory") {  // what the arms table reads
    if (!c.field(r, "", "memory", Want::object)) return false;
    const json& m = r["memory"];
    for (const char* k : {"parallel", "context", "page"}) {
      if (!c.field(m, "memory", k, Want::integer)) return false;
      if (!count_ok(m[k])) return c.fail(std::string("memory.") + k, count_why(m[k]));
    }
    if (!c.field(m, "memory", "preset", Want::string) || !c.field(m, "memory", "bytes_per_position", Want::object) ||
        !c.field(m, "memory", "arms", Want::array))
      return false;
    for (size_t i = 0; i < m["arms"].size(); ++i) {
      const json& a = m["arms"][i];
      const std::string at = "memory.arms[" + std::to_string(i) + "]";
      if (!a.is_object()) return c.fail(at, "expected an object, got " + json_type_name(a));
      if (!c.field(a, at, "arm", Want::string) || !c.field(a, at, "lanes", Want::array)) return false;
      // Counts, each from 0 to 2^63 - 1: bytes_in_use 2^64 - 1 once read as -1 (under arena_bytes).
      for (const char* k : {"page_stride", "arena_bytes", "bytes_fixed_per_lane", "pages_taken", "bytes_in_use",
                            "free_pages_after", "admitted"}) {
        if (!c.field(a, at, k, Want::integer)) return false;
        if (!count_ok(a[k])) return c.fail(at + "." + k, count_why(a[k]));
      }
      if (a["bytes_in_use"].get<int64_t>() > a["arena_bytes"].get<int64_t>())
        return c.fail(at + ".bytes_in_use", a["bytes_in_use"].dump() + " is more than arena_bytes " + a["arena_bytes"].dump());
    }
  }
  if (r["kind"] == "generate") {  // what the generate view reads
    if (!c.field(r, "", "generate", Want::object)) return false;
    const json& g = r["generate"];
    for (const char* k : {"model", "checkpoint_sha256", "kv_cache", "text"})
      if (!c.field(g, "generate", k, Want::string)) return false;
    for (const char* k : {"pages", "decode_tokens", "cache_bytes"}) {
      if (!c.field(g, "generate", k, Want::integer)) return false;
      if (!count_ok(g[k])) return c.fail(std::string("generate.") + k, count_why(g[k]));
    }
    for (const char* k : {"time_to_first_token_s", "decode_s", "decode_tok_s"}) {
      if (!c.field(g, "generate", k, Want::number)) return false;
      if (!(g[k].get<double>() >= 0))
        return c.fail(std::string("generate.") + k, "below 0 (" + num_text(g[k].get<double>()) + ")");
    }
    if (!c.field(g, "generate", "stopped_at_eos", Want::boolean) || !c.field(g, "generate", "tokens", Want::array) ||
        !c.field(g, "generate", "prompt_tokens", Want::array))
      return false;
    for (const char* k : {"tokens", "prompt_tokens"})
      for (size_t i = 0; i < g[k].size(); ++i)
        if (!g[k][i].is_number_integer() || !count_ok(g[k][i]))
          return c.fail(std::string("generate.") + k + "[" + std::to_string(i) + "]",
                        g[k][i].is_number_integer() ? "a token id below 0 or out of range (" + g[k][i].dump() + ")"
                                                    : "expected an integer, got " + json_type_name(g[k][i]));
  }
  if (r["kind"] == "bench-engine") {  // what the engine bench's extra tables read
    if (!c.field(r, "", "transformers", Want::object) || !c.field(r, "", "attention_share", Want::object, true))
      return false;
    if (r.contains("attention_share")) {
      const json& a = r["attention_share"];
      if (!c.field(a, "attention_share", "rows", Want::array)) return false;
      for (size_t i = 0; i < a["rows"].size(); ++i) {
        const json& x = a["rows"][i];
        const std::string at = "attention_share.rows[" + std::to_string(i) + "]";
        if (!x.is_object()) return c.fail(at, "expected an object, got " + json_type_name(x));
        if (!c.field(x, at, "parallel", Want::integer) || !c.field(x, at, "step_us", Want::number) ||
            !c.field(x, at, "attention_us_per_layer", Want::number) || !c.field(x, at, "share", Want::number))
          return false;
      }
    }
  }
  // The verdict must follow from the receipt's own gates, controls, errors and targets.
  if (r["verdict"] == "pass") {
    for (size_t i = 0; i < r["gates"].size(); ++i)
      if (!r["gates"][i]["ok"].get<bool>())
        return c.fail("verdict", "'pass' contradicts gates[" + std::to_string(i) + "] (" +
                                     r["gates"][i]["name"].get<std::string>() + ") failed");
    for (size_t i = 0; i < r["controls"].size(); ++i)
      if (!r["controls"][i]["red"].get<bool>())
        return c.fail("verdict", "'pass' contradicts controls[" + std::to_string(i) + "] (" +
                                     r["controls"][i]["name"].get<std::string>() + ") green");
    if (r.contains("errors") && !r["errors"].empty())
      return c.fail("verdict", "'pass' contradicts " + std::to_string(r["errors"].size()) + " errors");
    if (r.contains("verdict_reasons") && !r["verdict_reasons"].empty())
      return c.fail("verdict", "'pass' with " + std::to_string(r["verdict_reasons"].size()) +
                                   " reasons to fail (verdict_reasons is written for a fail)");
    if (r.contains("controls_skipped") && !(r["controls_skipped"].is_number_integer() && r["controls_skipped"] == 0))
      return c.fail("verdict", "'pass' contradicts controls_skipped " + r["controls_skipped"].dump() +
                                   " (a run without its controls never passes)");
    // The runners' own rule (a contract run, serve-gate, kv-gate): a pass needs a control that
    // ran and a check that passed. Other tools' contract-kind receipts (tools/sanitize.py) judge
    // their own runs.
    const std::string kind = r["kind"].get<std::string>();
    const bool runner = kind == "serve-gate" || kind == "kv-gate" || kind == "serve-memory" || contract_run(r);
    if (runner && r["controls"].empty())
      return c.fail("verdict", "'pass' with no control (a run without its controls never passes)");
    // A shard of refusal probes alone (numbers.refusal_probes: cases that cases.run leaves out in a
    // run with no --filter / --case) ran cases: shards 6 and 7 of fp8-rows --cases 5 are such.
    const bool probes_alone = r.contains("cases") && r["cases"].is_object() && r["cases"].contains("shard") &&
                              r.contains("numbers") &&
                              r["numbers"].is_object() && r["numbers"].contains("refusal_probes") &&
                              r["numbers"]["refusal_probes"].is_number_integer() &&
                              r["numbers"]["refusal_probes"].get<int64_t>() > 0;
    if (contract_run(r) && r.contains("cases") && r["cases"].contains("run") && r["cases"]["run"] == 0 && !probes_alone)
      return c.fail("verdict", "'pass' with cases.run 0 (a contract run that ran no case never passes)");
    // A run of every case (cases.every_case, unsharded: a shard's gates may miss cases that
    // other shards hold) reaches every gate: a gate that checked nothing there fails the run.
    if (contract_run(r) && r.contains("cases") && r["cases"].value("every_case", false) && !r["cases"].contains("shard"))
      for (size_t i = 0; i < r["gates"].size(); ++i)
        if (r["gates"][i]["total"].get<int64_t>() == 0)
          return c.fail("verdict", "'pass' with gates[" + std::to_string(i) + "] (" + r["gates"][i]["name"].get<std::string>() +
                                       ") at total 0 in a run of every case (a gate that checks nothing cannot fail)");
    // The runner writes cases.run into every contract receipt: without it a pass of a run that
    // ran no case (the filter matched none) read as a pass (session 62's audit).
    if (contract_run(r) && !(r.contains("cases") && r["cases"].contains("run")))
      return c.fail("verdict", "'pass' without cases.run (a contract run's pass says how many cases ran)");
    // A check that passed: every runner's rule, and every contract-kind receipt's whoever wrote
    // it (argv, which says who did, is as editable as the rest: a pass with no gates once
    // passed with argv emptied).
    if (runner || kind == "contract") {
      bool checked = false;
      for (const json& g : r["gates"]) checked = checked || g["passed"].get<int64_t>() > 0;
      if (!checked) return c.fail("verdict", "'pass' with no gate check passed (nothing was checked)");
    }
    if (is_bench_doc(r)) {
      if (r["targets"].empty())
        return c.fail("verdict", "'pass' with no target measured (a bench passes on its targets, never on none)");
      for (size_t i = 0; i < r["targets"].size(); ++i)
        if (!r["targets"][i]["met"].get<bool>())
          return c.fail("verdict", "'pass' contradicts targets[" + std::to_string(i) + "] (" +
                                       r["targets"][i]["name"].get<std::string>() + ") not met");
      // A row whose output was not verified (or that did not run) fails its bench.
      if (r.contains("rows") && r["rows"].is_array())
        for (size_t i = 0; i < r["rows"].size(); ++i) {
          const json& row = r["rows"][i];
          if (row.is_object() && (row.contains("error") || (row.contains("verified") && row["verified"] == false)))
            return c.fail("verdict", "'pass' contradicts rows[" + std::to_string(i) + "] " +
                                         (row.contains("error") ? "(an error)" : "(not verified)"));
        }
    }
    if (kind == "kv-gate" && r.contains("kv") && r["kv"].contains("depths") && r["kv"]["depths"].is_array())
      for (size_t i = 0; i < r["kv"]["depths"].size(); ++i)
        if (r["kv"]["depths"][i].value("verdict", std::string("pass")) != "pass")
          return c.fail("verdict", "'pass' contradicts kv.depths[" + std::to_string(i) + "].verdict " +
                                       r["kv"]["depths"][i]["verdict"].dump());
    // No recall lost: a probe the bf16 arm recalls and the quantized arm does not fails the gate.
    if (kind == "kv-gate" && r.contains("kv") && r["kv"].contains("recall") && r["kv"]["recall"].is_array())
      for (size_t i = 0; i < r["kv"]["recall"].size(); ++i)
        if (r["kv"]["recall"][i].value("outcome", std::string()) == "lost")
          return c.fail("verdict", "'pass' contradicts kv.recall[" + std::to_string(i) + "] (" +
                                       r["kv"]["recall"][i].value("probe", std::string("?")) + ") lost");
  }
  return true;
}

}  // namespace

// The compiled-in schema (reports/schema/receipt.schema.json), compiled once, or why it does not
// load.
struct LoadedSchema {
  JsonSchema schema;
  std::string error;  // empty when it loaded
};
static const LoadedSchema& receipt_schema() {
  static const LoadedSchema loaded = [] {
    LoadedSchema l;
    try {
      if (!JsonSchema::compile(json::parse(kReceiptSchemaText), &l.schema, &l.error) && l.error.empty())
        l.error = "no reason given";
    } catch (const json::exception& e) {
      l.error = e.what();
    }
    return l;
  }();
  return loaded;
}

Status Receipt::check(const json& doc, const std::string& file) {
  Checker c{file, ""};
  if (!check_receipt(doc, c)) return Status::Error(c.error);
  // Then every rule of the published schema that the checks above do not read (a field no view
  // prints, an enum, a bound): a receipt the schema refuses is refused here too.
  const LoadedSchema& s = receipt_schema();
  if (!s.error.empty()) return Status::Error(file + ": the compiled-in receipt schema does not load: " + s.error);
  if (const std::string e = s.schema.validate(doc); !e.empty()) return Status::Error(file + ": " + e + " (receipt schema)");
  return Status::Ok();
}

Status Receipt::load(const std::string& path, Receipt* out) {
  std::string text;
  int e = 0;
  if (const std::string why = read_regular_file(path, &text, &e); !why.empty())
    return Status::Error(path + ": " + (e == ENOENT ? "no such file" : e == EISDIR ? "is a folder, expected a receipt file" : why));
  json r;
  if (std::string jwhy; !parse_json_strict(text, &r, &jwhy)) return Status::Error(path + ": " + jwhy);
  KC_RETURN_IF_ERROR(check(r, path));
  *out = Receipt(std::move(r));
  return Status::Ok();
}

Status Receipt::load(const std::string& path, json* out) {
  Receipt r;
  KC_RETURN_IF_ERROR(load(path, &r));
  *out = std::move(r.doc());
  return Status::Ok();
}

}  // namespace kc
