// KC_CUDA_BACKEND_OR_SKIP(var): declares `var`, the cuda backend, or skips the test (counted as
// skipped, with the reason) where no device is present. For TEST bodies.
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "kernels/backend/backend.h"

#define KC_CUDA_BACKEND_OR_SKIP(var)                              \
  std::unique_ptr<::kc::Backend> var;                             \
  {                                                               \
    std::string why_;                                             \
    if (!::kc::cuda_device_present(&why_)) GTEST_SKIP() << why_;  \
    ::kc::Status st_;                                             \
    var = ::kc::make_cuda_backend(&st_);                          \
    ASSERT_TRUE(var) << st_.message;                              \
  }
