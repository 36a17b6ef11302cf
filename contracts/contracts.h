// The contract registry: every contract that contracts/CMakeLists.txt declares with
// kc_add_contract (contracts() and find_contract() in framework.h; the list in
// contracts.cpp).
#pragma once
#include "contracts/framework.h"
