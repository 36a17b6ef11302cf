// Every contract's definition; the registry lists them in contracts.cpp.
#pragma once
#include "contracts/framework.h"

namespace kc {
ContractDef fp8_rows_contract();
ContractDef qwen_pages_contract();
ContractDef scale_planes_contract();
ContractDef q4_rows_contract();
ContractDef mxfp4_rows_contract();
}  // namespace kc
