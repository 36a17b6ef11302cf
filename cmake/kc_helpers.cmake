# One helper per kind of target.

# kc_add_kernel_lib(name SOURCES ... CUDA_SOURCES ...): host sources always, CUDA sources
# when the cuda backend is built.
function(kc_add_library name)
  cmake_parse_arguments(A "" "" "SOURCES;CUDA_SOURCES;DEPS" ${ARGN})
  set(srcs ${A_SOURCES})
  if(KC_HAVE_CUDA)
    list(APPEND srcs ${A_CUDA_SOURCES})
  endif()
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/generated)
  target_link_libraries(${name} PUBLIC ${A_DEPS})
  if(KC_HAVE_CUDA)
    target_compile_definitions(${name} PUBLIC KC_HAVE_CUDA=1)
    target_link_libraries(${name} PUBLIC CUDA::cudart_static)
    set_target_properties(${name} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
    # Contract builds never use fast math: the bounds assume IEEE expf and division.
    target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
  endif()
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
endfunction()

# kc_add_gtest(name SOURCES ... LABELS cpu|cuda): a GoogleTest binary whose tests are
# registered one by one; GTEST_SKIP shows as skipped in CTest, never as passed.
function(kc_add_gtest name)
  cmake_parse_arguments(A "" "" "SOURCES;LABELS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE kc_contracts GTest::gtest GTest::gtest_main rapidcheck)
  gtest_discover_tests(${name}
    PROPERTIES LABELS "${A_LABELS}" SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]"
    DISCOVERY_TIMEOUT 60)
endfunction()

# kc_add_contract_test(contract LABELS ...): runs `tf-cuda-test <contract>` under CTest.
function(kc_add_contract_test contract backend)
  add_test(NAME contract.${contract}.${backend}
           COMMAND tf-cuda-test ${contract} --backend ${backend}
                   --out ${CMAKE_BINARY_DIR}/receipts/${contract}.${backend}.json)
  set_tests_properties(contract.${contract}.${backend} PROPERTIES LABELS "${backend};contract"
                       SKIP_RETURN_CODE 77)
endfunction()
