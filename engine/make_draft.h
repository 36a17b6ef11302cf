// `tf-cuda-test make-draft --from DIR --layers N --out DIR`: a draft checkpoint of its
// own, made from a target checkpoint without the GPU: the target's embedding, its first N
// layers, its final norm and its head (lm_head, or the tied embedding), in the target's
// dtype with the same tensor bytes, and a config.json written from the target's parsed config
// (the fields engine/qwen3_config.h reads; others, such as token ids or layer_types, are not
// carried) with num_hidden_layers = N. It loads as any Qwen3 checkpoint (engine/checkpoint.h) and, as a
// draft, gives the same tokens as the target truncated in memory (make_draft_weights).
//
// Reproducible: the bytes depend only on the source checkpoint and N (the metadata names
// the source folder's last path element, N and the sha256 of the source's tensor file(s);
// no time stamp, no absolute path).
#pragma once
#include <cstdint>
#include <map>
#include <ostream>
#include <string>

#include "engine/checkpoint.h"

namespace kc::engine {

// Writes `w` (any Qwen3Weights whose tensors match its config) as config.json +
// model.safetensors into `out_dir` (created; refused when it exists and is not an empty
// folder), each tensor in the config's dtype; then reads it back and refuses (naming the
// tensor) if any value differs from `w`'s.
Status write_qwen3_checkpoint(const Qwen3Weights& w, const std::string& out_dir,
                              const std::map<std::string, std::string>& metadata);

// 0 written (one line on `out`), 2 with `make-draft: reason` on `err` (an unreadable
// source, --layers outside 1..(source layers - 1), an unusable --out); nothing is left
// in --out on failure.
int make_draft_command(const std::string& from_dir, int layers, const std::string& out_dir, std::ostream& out,
                       std::ostream& err);

}  // namespace kc::engine
