#include "contracts/contracts.h"

// kc_contract_list.h is generated from the kc_add_contract lines of contracts/CMakeLists.txt:
// one KC_CONTRACT(<name>_contract) per contract, in their order.
#define KC_CONTRACT(fn) ContractDef fn();
namespace kc {
#include "kc_contract_list.h"
}  // namespace kc
#undef KC_CONTRACT

namespace kc {

const std::vector<ContractDef>& contracts() {
#define KC_CONTRACT(fn) fn(),
  static const std::vector<ContractDef> all = {
#include "kc_contract_list.h"
  };
#undef KC_CONTRACT
  return all;
}

const ContractDef* find_contract(const std::string& name) {
  for (const ContractDef& c : contracts())
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace kc
