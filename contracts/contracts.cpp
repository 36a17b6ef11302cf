#include "contracts/contracts.h"

namespace kc {

const std::vector<ContractDef>& contracts() {
  static const std::vector<ContractDef> all = {fp8_rows_contract(), qwen_pages_contract(), q4_rows_contract(),
                                               scale_planes_contract(), mxfp4_rows_contract()};
  return all;
}

const ContractDef* find_contract(const std::string& name) {
  for (const ContractDef& c : contracts())
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace kc
