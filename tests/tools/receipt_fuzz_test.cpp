// report and diff under 1,000 mutated receipts: bytes flipped, fields removed, values
// retyped, gate counts and verdicts made to contradict each other. Whatever the input,
// the commands answer 0, 1 or 2 and never crash or throw; a file refused with 2 prints
// nothing on standard output.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "tools/receipt_views.h"

namespace kc {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

std::vector<std::string> seed_receipts() {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(fs::path(KC_SOURCE_DIR) / "reports" / "h200"))
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

std::string read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Every value of the tree, as pointers the mutators can pick from.
void collect(json& v, std::vector<json*>* out) {
  out->push_back(&v);
  if (v.is_object())
    for (auto it = v.begin(); it != v.end(); ++it) collect(it.value(), out);
  else if (v.is_array())
    for (auto& x : v) collect(x, out);
}

json retyped(std::mt19937_64& rng) {
  switch (rng() % 8) {
    case 0: return nullptr;
    case 1: return "x";
    case 2: return -1;
    case 3: return 1.5;
    case 4: return json::array({1, "a"});
    case 5: return json::object({{"k", 1}});
    case 6: return true;
    default: return 18446744073709551615ull;
  }
}

// One structural mutation of a parsed receipt.
void mutate_tree(json& r, std::mt19937_64& rng) {
  std::vector<json*> all;
  collect(r, &all);
  json& v = *all[rng() % all.size()];
  switch (rng() % 5) {
    case 0:  // remove a field or an element
      if (v.is_object() && !v.empty()) {
        auto it = v.begin();
        std::advance(it, rng() % v.size());
        v.erase(it);
      } else if (v.is_array() && !v.empty()) {
        v.erase(v.begin() + long(rng() % v.size()));
      }
      break;
    case 1: v = retyped(rng); break;  // retype a value
    case 2:                           // contradict: flip a boolean, bump a count
      if (v.is_boolean()) v = !v.get<bool>();
      else if (v.is_number_integer()) v = v.get<int64_t>() + 1;
      else if (v.is_string()) v = v.get<std::string>() == "pass" ? "fail" : "pass";
      break;
    case 3:  // verdict pass over whatever the gates say (the root may itself be retyped)
      if (r.is_object()) r["verdict"] = "pass";
      break;
    default:  // a worst ratio as text
      if (r.contains("gates") && r["gates"].is_array() && !r["gates"].empty() && r["gates"][0].is_object())
        r["gates"][0]["worst"] = {{"ratio", "x"}, {"case", 1}};
      break;
  }
}

TEST(ReceiptFuzz, ReportAndDiffAnswerZeroOneOrTwoOnAThousandMutatedReceipts) {
  const std::vector<std::string> seeds = seed_receipts();
  ASSERT_GE(seeds.size(), 3u);
  std::mt19937_64 rng(20261201);
  const fs::path dir = fs::temp_directory_path() / ("kc-fuzz-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  int by_rc[3] = {0, 0, 0};
  for (int i = 0; i < 1000; ++i) {
    const std::string& src = seeds[size_t(i) % seeds.size()];
    std::string text = read_all(src);
    if (i % 3 == 0) {  // bytes flipped in the text
      const int flips = 1 + int(rng() % 4);
      for (int k = 0; k < flips; ++k) text[rng() % text.size()] ^= char(1u << (rng() % 8));
    } else {  // fields removed or retyped, counts and verdicts contradicted
      json r = json::parse(text);
      const int edits = 1 + int(rng() % 3);
      for (int k = 0; k < edits; ++k) mutate_tree(r, rng);
      text = r.dump(1);
    }
    const std::string file = (dir / ("m" + std::to_string(i) + ".json")).string();
    std::ofstream(file, std::ios::binary) << text;
    std::ostringstream out, err, dout, derr, rout, rerr;
    int rc = -1, drc = -1, rrc = -1;
    EXPECT_NO_THROW(rc = report_command({file}, i % 2 ? ViewFormat::text : ViewFormat::md, out, err)) << file;
    EXPECT_NO_THROW(drc = diff_command(src, file, dout, derr)) << file;
    EXPECT_NO_THROW(rrc = diff_command(file, src, rout, rerr)) << file;
    for (int x : {rc, drc, rrc}) EXPECT_TRUE(x == 0 || x == 1 || x == 2) << file << " answered " << x;
    if (rc == 2) {
      EXPECT_TRUE(out.str().empty()) << file << ": refused but printed";
      EXPECT_NE(err.str().find(file), std::string::npos) << "the message names the file: " << err.str();
    }
    if (rc >= 0 && rc <= 2) ++by_rc[rc];
    if (!HasFailure()) fs::remove(file);
  }
  // The mutations reach both sides: some receipts stay readable, many are refused.
  EXPECT_GT(by_rc[2], 300) << "refused";
  EXPECT_GT(by_rc[0] + by_rc[1], 50) << "still readable";
  std::cout << "report answered 0: " << by_rc[0] << ", 1: " << by_rc[1] << ", 2: " << by_rc[2] << "\n";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kc
