// `tf-cuda-test report --format html`: receipts as one self-contained HTML page (inline
// CSS and SVG; no script, no font, no image or style fetched from anywhere) with the
// receipt tables of `report` and plots drawn from the receipts:
//   bench attention  achieved / ceiling against context, one panel per shape and batch, a
//                    line per format and addressing; ours / SDPA per row;
//   bench pack       pack and unpack throughput against blob size, with the copy ceiling;
//   kv-gate          mean and worst-token KL per depth against the fixture's bar.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kc {

// The page for receipts already read and checked (Receipt::load), `paths` naming them.
std::string render_html_page(const std::vector<nlohmann::json>& receipts, const std::vector<std::string>& paths);

// The plots of one receipt as inline <svg> figures (empty for a receipt with nothing to
// plot: a contract, a serve-gate).
std::string receipt_plots(const nlohmann::json& receipt);

}  // namespace kc
