#include "engine/make_model.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/checkpoint.h"
#include "engine/safetensors.h"
#include "kernels/layout/bits.h"  // fnv1a

namespace kc::engine {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxLayers = 64;
constexpr int kDefaultLayers = 2;

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform on [center - half_width, center + half_width), from the stream of (seed, name).
std::function<void(float*, uint64_t)> uniform(uint64_t seed, const std::string& name, double center,
                                              double half_width) {
  return [=](float* out, uint64_t n) {
    uint64_t s = seed ^ fnv1a(name.data(), name.size());
    splitmix64(s);
    for (uint64_t i = 0; i < n; ++i) {
      const double u = static_cast<double>(splitmix64(s) >> 11) * 0x1p-53;  // [0, 1)
      out[i] = static_cast<float>(center + (2 * u - 1) * half_width);
    }
  };
}

// A uniform variable with standard deviation sigma has half-width sigma * sqrt(3).
double half_width_for_std(double sigma) { return sigma * std::sqrt(3.0); }

Status write_text_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream os(tmp, std::ios::binary | std::ios::trunc);
    if (!os) return Status::Error(path + ": (file): cannot create: " + std::strerror(errno));
    os << text;
    os.flush();
    if (!os) {
      os.close();
      std::error_code ec;
      fs::remove(tmp, ec);
      return Status::Error(path + ": (file): write failed");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::Error(path + ": (file): cannot rename: " + ec.message());
  return Status::Ok();
}

}  // namespace

const std::vector<std::string>& qwen3_preset_names() {
  static const std::vector<std::string> names = {"tiny", "qwen35-27b-attn"};
  return names;
}

Status qwen3_preset(const std::string& preset, int layers, Qwen3Config* out) {
  if (layers < 0 || layers > kMaxLayers)
    return Status::Error("--layers: " + std::to_string(layers) + " is not in 1.." + std::to_string(kMaxLayers) +
                         " (0 takes the preset's default)");
  Qwen3Config c;
  c.vocab_size = 260;
  c.rms_norm_eps = 1e-6;
  c.dtype = "bfloat16";
  c.num_hidden_layers = layers == 0 ? kDefaultLayers : layers;
  if (preset == "tiny") {
    c.hidden_size = 128;
    c.intermediate_size = 384;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 32;
    c.rope_theta = 1e6;
    c.partial_rotary_factor = 1.0;
    c.max_position_embeddings = 4096;
    c.tie_word_embeddings = true;
  } else if (preset == "qwen35-27b-attn") {
    c.hidden_size = 5120;
    c.intermediate_size = 1024;
    c.num_attention_heads = 24;
    c.num_key_value_heads = 4;
    c.head_dim = 256;
    c.rope_theta = 1e7;
    c.partial_rotary_factor = 0.25;
    c.max_position_embeddings = 262144;
    c.tie_word_embeddings = false;
  } else {
    std::string known;
    for (const std::string& n : qwen3_preset_names()) known += (known.empty() ? "" : ", ") + n;
    return Status::Error("--preset: '" + preset + "' is not a preset (known: " + known + ")");
  }
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
  KC_RETURN_IF_ERROR(check_qwen3_config(c, "preset " + preset));
  *out = c;
  return Status::Ok();
}

namespace {

// What make-model / make-draft would create for `out_dir`, read from the path as given, one
// component at a time and without resolving it lexically (`missing/..` is not the current
// folder until `missing` exists, and `x/../y` names y only through x): *first_missing is the
// first prefix where nothing exists, not even a symbolic link ("" when the whole path is
// there). A `..` after a missing folder is refused: creating the folders would make the path
// name a folder that exists (one the run must not touch). So is a symbolic link that points
// nowhere, as the output or on the way to it.
Status checkpoint_dir_plan(const std::string& out_dir, std::string* first_missing) {
  first_missing->clear();
  std::error_code ec;
  fs::path cur;
  for (const fs::path& part : fs::path(out_dir)) {
    if (part.empty()) continue;  // a trailing slash
    cur /= part;
    if (!first_missing->empty()) {
      if (part == "..")
        return Status::Error(out_dir + ": (output directory): '..' after " + *first_missing +
                             ", which does not exist: give the folder's path without it");
      continue;
    }
    if (part == "." || part == ".." || part == cur.root_path()) continue;
    const fs::file_status ls = fs::symlink_status(cur, ec);
    if (ls.type() == fs::file_type::not_found) {
      *first_missing = cur.string();
      continue;
    }
    if (ec) return Status::Error(out_dir + ": (output directory): " + cur.string() + ": " + ec.message());
    if (fs::is_symlink(ls) && !fs::exists(fs::status(cur, ec)))
      return Status::Error(out_dir + ": (output directory): " + cur.string() +
                           " is a symbolic link to nothing (its target does not exist)");
  }
  return Status::Ok();
}

// Whether the folder holds nothing but a make-model / make-draft lock (kCheckpointLock).
bool holds_only_the_lock(const std::string& dir, std::error_code& ec) {
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename() != kCheckpointLock) return false;
  return true;
}

}  // namespace

Status prepare_checkpoint_dir(const Qwen3Config& c, const std::string& out_dir, Dtype* dtype) {
  KC_RETURN_IF_ERROR(check_qwen3_config(c, "config"));
  std::string missing;
  KC_RETURN_IF_ERROR(checkpoint_dir_plan(out_dir, &missing));
  std::error_code ec;
  if (missing.empty()) {
    const fs::file_status st = fs::status(out_dir, ec);
    if (ec) return Status::Error(out_dir + ": (output directory): " + ec.message());
    if (!fs::is_directory(st)) return Status::Error(out_dir + ": (output directory): exists and is not a directory");
    // Empty, or holding only this run's lock (CheckpointDirGuard::claim).
    const bool empty = holds_only_the_lock(out_dir, ec);
    if (ec) return Status::Error(out_dir + ": (output directory): " + ec.message());
    if (!empty) return Status::Error(out_dir + ": (output directory): exists and is not empty");
  } else {
    fs::create_directories(out_dir, ec);
    if (ec || !fs::is_directory(out_dir, ec))
      return Status::Error(out_dir + ": (output directory): cannot create" + (ec ? ": " + ec.message() : std::string()));
  }
  const Dtype d = c.dtype == "bfloat16" ? Dtype::bf16 : c.dtype == "float16" ? Dtype::f16 : Dtype::f32;
  *dtype = d;
  return Status::Ok();
}

Status CheckpointDirGuard::claim() {
  if (dir_.empty() || locked_) return Status::Ok();
  hold_ = std::make_unique<HoldSignals>();
  std::string missing;
  KC_RETURN_IF_ERROR(checkpoint_dir_plan(dir_, &missing));
  std::error_code ec;
  if (!missing.empty()) {
    // The folders from the first missing one down, one mkdir each: a folder another run made in
    // the meantime (EEXIST) is not ours.
    fs::path cur;
    bool below = false;
    for (const fs::path& part : fs::path(dir_)) {
      if (part.empty()) continue;
      cur /= part;
      below = below || cur.string() == missing;
      if (!below || part == "." || part == "..") continue;
      if (fs::create_directory(cur, ec)) made_.push_back(cur.string());
      else if (ec) {
        cleanup();
        return Status::Error(dir_ + ": (output directory): cannot create " + cur.string() + ": " + ec.message());
      }
    }
  }
  if (!fs::is_directory(dir_, ec)) {
    cleanup();
    return Status::Error(dir_ + ": (output directory): exists and is not a directory");
  }
  const std::string lock = (fs::path(dir_) / kCheckpointLock).string();
  const int fd = ::open(lock.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int e = errno;
    cleanup();
    return Status::Error(dir_ + ": (output directory): " +
                         (e == EEXIST ? std::string("another make-model or make-draft is writing it (") + kCheckpointLock +
                                            " exists; remove it if no run is)"
                                      : std::string("cannot take its lock: ") + std::strerror(e)));
  }
  ::close(fd);
  if (!holds_only_the_lock(dir_, ec) || ec) {
    // Another run filled the folder between this run's look and its lock (it wrote and released
    // in between): only this run's lock goes, never that run's files. (cleanup() with the lock
    // held removed config.json and model.safetensors: the loser of a race deleted the winner's
    // checkpoint, seen once in a loaded ctest run.)
    std::error_code rm;
    fs::remove(lock, rm);
    cleanup();
    return Status::Error(dir_ + ": (output directory): " + (ec ? ec.message() : "exists and is not empty"));
  }
  locked_ = true;
  return Status::Ok();
}

void CheckpointDirGuard::cleanup() {
  std::error_code ec;
  if (locked_) {
    for (const char* f : {"config.json", "config.json.tmp", "model.safetensors", "model.safetensors.tmp", kCheckpointLock})
      fs::remove(fs::path(dir_) / f, ec);
    locked_ = false;
  }
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) fs::remove(*it, ec);  // only an empty folder goes
  made_.clear();
  hold_.reset();  // a held signal takes effect now, with the folder as it was
}

void CheckpointDirGuard::release() {
  if (locked_) {
    std::error_code ec;
    fs::remove(fs::path(dir_) / kCheckpointLock, ec);
    locked_ = false;
  }
  hold_.reset();
}

Status write_synthetic_checkpoint(const Qwen3Config& c, uint64_t seed, const std::string& out_dir,
                                  const std::string& preset) {
  Dtype dtype;
  KC_RETURN_IF_ERROR(prepare_checkpoint_dir(c, out_dir, &dtype));
  std::vector<TensorToWrite> tensors;
  for (const ExpectedTensor& e : qwen3_expected_tensors(c)) {
    TensorToWrite t;
    t.name = e.name;
    t.dtype = dtype;
    t.shape = e.shape;
    if (e.shape.size() == 1) {
      t.generate = uniform(seed, e.name, 1.0, 0.25);  // a norm weight
    } else {
      // Linear weights are [out, in]; the embedding is [vocab, hidden] and is scaled by
      // hidden so that tied logits (a dot product over hidden) stay O(1).
      const double fan_in = static_cast<double>(e.shape[1]);
      t.generate = uniform(seed, e.name, 0.0, half_width_for_std(1.0 / std::sqrt(fan_in)));
    }
    tensors.push_back(std::move(t));
  }
  KC_RETURN_IF_ERROR(write_text_atomically((fs::path(out_dir) / "config.json").string(), qwen3_config_json(c)));
  KC_RETURN_IF_ERROR(write_safetensors((fs::path(out_dir) / "model.safetensors").string(), tensors,
                                       {{"format", "pt"}, {"kc_preset", preset}, {"kc_seed", std::to_string(seed)}}));
  return Status::Ok();
}

int make_model_command(const std::string& preset, int layers, uint64_t seed, const std::string& out_dir,
                       std::ostream& out, std::ostream& err) {
  Qwen3Config c;
  Status st = qwen3_preset(preset, layers, &c);
  if (st.ok && out_dir.empty()) st = Status::Error("--out: a directory is required");
  CheckpointDirGuard guard(out_dir);
  if (st.ok) st = guard.claim();
  if (st.ok) st = write_synthetic_checkpoint(c, seed, out_dir, preset);
  // What was written must read back as a valid checkpoint of this config.
  Qwen3Config back;
  if (st.ok) st = check_qwen3_checkpoint(out_dir, &back);
  // A signal held off after the last tensor (during the rename or the read-back) also undoes the
  // folder, as the docs say: it ended the run with a whole checkpoint in place (session 63's review).
  if (st.ok && HoldSignals::held()) st = Status::Error("interrupted by signal " + std::to_string(HoldSignals::held()));
  if (!st.ok) {
    // An existing non-empty folder was refused untouched; anything this run wrote goes.
    guard.cleanup();
    err << "tf-cuda-test: error: make-model: " << st.message << "\n";
    return 2;
  }
  int64_t params = 0;
  for (const ExpectedTensor& e : qwen3_expected_tensors(c)) {
    int64_t n = 1;
    for (int64_t d : e.shape) n *= d;
    params += n;
  }
  guard.release();
  std::error_code ec;
  const auto bytes = fs::file_size(fs::path(out_dir) / "model.safetensors", ec);
  if (ec) {  // gone since the check (another process): not "18446744073709551615 bytes"
    err << "tf-cuda-test: error: make-model: " << out_dir << "/model.safetensors: " << ec.message() << " after the write\n";
    return 2;
  }
  out << "make-model: wrote " << out_dir << " (preset " << preset << ", " << c.num_hidden_layers << (c.num_hidden_layers == 1 ? " layer" : " layers") << ", seed "
      << seed << ", " << params << " parameters, " << bytes << " bytes of " << qwen3_tensor_dtype(c) << ")\n";
  return 0;
}

}  // namespace kc::engine
