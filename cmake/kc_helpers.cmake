# One helper per kind of target. Each folder owns its sources, tests, contracts and mutants
# through these; the top-level CMakeLists.txt only adds the folders.
include(GoogleTest)

# kc_kernel_sources(SOURCES ... CUDA_SOURCES ...): a kernels/ or bench/ folder's sources of
# the kernels library: host sources always, CUDA sources when the cuda backend is built.
# The one source list: kc_kernels and every mutant build from it.
function(kc_kernel_sources)
  cmake_parse_arguments(A "" "" "SOURCES;CUDA_SOURCES;NO_CUDA_SOURCES" ${ARGN})
  set(srcs ${A_SOURCES})
  if(KC_HAVE_CUDA)
    list(APPEND srcs ${A_CUDA_SOURCES})
  else()
    list(APPEND srcs ${A_NO_CUDA_SOURCES})
  endif()
  list(TRANSFORM srcs PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
  set_property(GLOBAL APPEND PROPERTY KC_KERNEL_SOURCES ${srcs})
endfunction()

# Compile settings of the kernels' sources (the library and the mutants' planted copies).
function(kc_kernel_settings target)
  target_include_directories(${target} PUBLIC ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/generated)
  target_link_libraries(${target} PUBLIC Threads::Threads)
  if(KC_HAVE_CUDA)
    target_compile_definitions(${target} PUBLIC KC_HAVE_CUDA=1)
    target_link_libraries(${target} PUBLIC CUDA::cudart_static)
    set_target_properties(${target} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
    # Contract builds never use fast math: the bounds assume IEEE expf and division.
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
  endif()
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
endfunction()

# kc_add_gtest(name SOURCES ... LABELS cpu|cuda): a GoogleTest binary whose tests are
# registered one by one; GTEST_SKIP shows as skipped in CTest, never as passed (CMake's
# GoogleTest module sets that SKIP_REGULAR_EXPRESSION itself: passing it again made CMake 4
# write test files it could not read). RESOURCE_LOCK name: CTest never runs two of the binary's
# tests at once under `ctest -j` (for tests that each take most of a device's memory: two of them
# could both see enough free memory, and the second's allocation would fail).
function(kc_add_gtest name)
  cmake_parse_arguments(A "" "RESOURCE_LOCK" "SOURCES;LABELS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE kc_contracts GTest::gtest GTest::gtest_main rapidcheck)
  if(A_RESOURCE_LOCK)
    gtest_discover_tests(${name}
      PROPERTIES LABELS "${A_LABELS}" RESOURCE_LOCK "${A_RESOURCE_LOCK}" DISCOVERY_TIMEOUT 60)
  else()
    gtest_discover_tests(${name}
      PROPERTIES LABELS "${A_LABELS}" DISCOVERY_TIMEOUT 60)
  endif()
endfunction()

# kc_add_cuda_contract_run(run contract [ENV "VAR=value ..."] [ARGS "options ..."]): CTest
# contract.RUN, `tf-cuda-test <contract> --backend cuda ARGS --out receipts/RUN.json` with ENV
# set: one GPU asked of CTest (RESOURCE_GROUPS gpus:1), run through tools/ctest_gpu.sh, which
# makes the allotted GPU its device 0 (`ctest -L cuda -j N --resource-spec-file SPEC`, SPEC from
# tools/gpu_resource_spec.sh, spreads the runs over the GPUs); skipped (exit 77) without a device.
function(kc_add_cuda_contract_run run contract)
  cmake_parse_arguments(A "" "ENV;ARGS" "" ${ARGN})
  set(out ${CMAKE_BINARY_DIR}/receipts/${run}.json)
  add_test(NAME contract.${run}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tools/ctest_gpu.sh sh -c
                   "out=$(${A_ENV} \"$0\" ${contract} --backend cuda ${A_ARGS} --out \"${out}\" 2>&1); rc=$?; printf '%s\\n' \"$out\"; case \"$out\" in *'no CUDA device'*) exit 77;; esac; exit $rc"
                   $<TARGET_FILE:tf-cuda-test>)
  set_tests_properties(contract.${run} PROPERTIES RESOURCE_GROUPS "gpus:1" LABELS "cuda;contract" SKIP_RETURN_CODE 77)
endfunction()

# kc_add_contract_test(contract backend): the contract under CTest (cpu: its verdict in
# kernel-contract's run, below; cuda: `tf-cuda-test <contract> --backend cuda`, as
# kc_add_cuda_contract_run above).
function(kc_add_contract_test contract backend)
  if(backend STREQUAL "cuda")
    kc_add_cuda_contract_run(${contract}.cuda ${contract})
  else()
    set(out ${CMAKE_BINARY_DIR}/receipts/${contract}.${backend}.json)
    # On cpu the contract runs once, in kernel-contract's run (CTest cli.kernel_contract: the
    # same seed, cases and code path, every contract in turn); this test is that run's
    # verdict for the contract, read back through `report` (exit 0 only for a consistent
    # receipt whose verdict is pass). Running it a second time here cost CI about 100 s.
    add_test(NAME contract.${contract}.${backend}
             COMMAND sh -c "mkdir -p \"$(dirname \"$2\")\" && cp \"$1\" \"$2\" && \"$0\" report \"$2\""
                     $<TARGET_FILE:tf-cuda-test> ${CMAKE_BINARY_DIR}/receipts-all/${contract}.json ${out})
    # Its receipt is among those tests/tools/validate_receipts.py checks (cli.receipts_schema).
    set_tests_properties(contract.${contract}.${backend} PROPERTIES FIXTURES_SETUP contract_receipts
                         FIXTURES_REQUIRED kernel_contract_receipts LABELS "${backend};contract" SKIP_RETURN_CODE 77)
  endif()
endfunction()

# kc_add_contract(name SOURCE file): a contract. Its source defines `ContractDef
# <name with - as _>_contract()`; it joins the registry (`tf-cuda-test list`, and
# kernel-contract in the order of these calls) and runs on the cpu backend under CTest.
function(kc_add_contract name)
  cmake_parse_arguments(A "" "SOURCE" "" ${ARGN})
  string(REPLACE "-" "_" fn "${name}")
  set_property(GLOBAL APPEND PROPERTY KC_CONTRACT_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/${A_SOURCE})
  set_property(GLOBAL APPEND_STRING PROPERTY KC_CONTRACT_REGISTRY "KC_CONTRACT(${fn}_contract)\n")
  set_property(GLOBAL APPEND_STRING PROPERTY KC_CONTRACT_NAMES "\"${name}\",\n")
  kc_add_contract_test(${name} cpu)
  if(KC_HAVE_CUDA)
    kc_add_contract_test(${name} cuda)
  endif()
endfunction()

# kc_add_mutant(name DEFINE contract SOURCES file... [CUDA]): a planted bug, declared in
# the folder of the files its plant touches (SOURCES, relative to that folder). Those files
# are compiled again with DEFINE; every other object comes unplanted from kc_kernels_obj /
# kc_contracts_obj (and the tool's from kc_tool_obj, the objects tf-cuda-test links too).
# The contract run on the mutant must exit 1. On the cpu backend it runs --gates-only (no
# control: the contract's own test proves them) and must name a failed gate or errors.
# CUDA: a device-side plant, built with the cuda backend only and run with --backend cuda
# and its controls (exit 77, skipped, without a device). The target is made once every
# folder is read.
function(kc_add_mutant name define contract)
  cmake_parse_arguments(A "CUDA" "" "SOURCES" ${ARGN})
  if(A_CUDA AND NOT KC_HAVE_CUDA)
    return()
  endif()
  if(A_CUDA AND NOT KC_BUILD_DEVICE_MUTANTS)  # counted as skipped, with the reason
    add_test(NAME mutant.${name}
             COMMAND sh -c "echo 'mutant.${name}: device-side mutant not built (no GPU at configure time; -DKC_DEVICE_MUTANTS=ON builds it)'; exit 77")
    set_tests_properties(mutant.${name} PROPERTIES LABELS "cuda;mutant" SKIP_RETURN_CODE 77)
    return()
  endif()
  set(cuda OFF)
  if(A_CUDA)
    set(cuda ON)
  endif()
  kc_defer_mutant(${name} ${define} ${contract} ${cuda} ${A_SOURCES})
endfunction()

# kc_add_sanitizer_plant(name DEFINE SOURCES file...): a device-side defect that only a
# compute-sanitizer tool can see (a shared-memory race, a read past a buffer): the contract
# may stay green on it, so it has no test of its own. Built with the cuda backend only, as
# tf-cuda-test-plant-NAME; tools/sanitize.py runs it as a control that must be red.
function(kc_add_sanitizer_plant name define)
  cmake_parse_arguments(A "" "" "SOURCES" ${ARGN})
  if(NOT KC_BUILD_DEVICE_MUTANTS)  # built where the device-side mutants are (a GPU machine)
    return()
  endif()
  kc_defer_mutant(${name} ${define} - PLANT ${A_SOURCES})
endfunction()

# Shared by kc_add_mutant and kc_add_sanitizer_plant: the planted sources (relative to the
# calling folder) as paths from the top, and kc_define_mutant deferred to the end of the
# top-level directory, when every object library exists. DEFER would read the variables at
# the call; EVAL expands them now.
macro(kc_defer_mutant name define contract cuda)
  set(kc_rel "")
  foreach(src IN ITEMS ${ARGN})
    file(RELATIVE_PATH kc_r ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/${src})
    list(APPEND kc_rel ${kc_r})
  endforeach()
  list(JOIN kc_rel " " kc_rel)
  cmake_language(EVAL CODE
    "cmake_language(DEFER DIRECTORY \"${CMAKE_SOURCE_DIR}\" CALL kc_define_mutant ${name} ${define} ${contract} ${cuda} ${kc_rel})")
endmacro()

function(kc_define_mutant name define contract cuda)
  set(planted "")
  set(kernel_objs $<TARGET_OBJECTS:kc_kernels_obj>)
  set(contract_objs $<TARGET_OBJECTS:kc_contracts_obj>)
  foreach(src IN LISTS ARGN)
    list(APPEND planted ${CMAKE_SOURCE_DIR}/${src})
    string(REGEX REPLACE "[.+]" "\\\\\\0" rx "${src}")
    set(kernel_objs "$<FILTER:${kernel_objs},EXCLUDE,/${rx}\\.o$>")
    set(contract_objs "$<FILTER:${contract_objs},EXCLUDE,/${rx}\\.o$>")
  endforeach()
  # The planted objects come first on the link line: an inline helper of a planted header
  # is emitted in several objects, and the linker keeps the first copy it meets.
  set(exe tf-cuda-test-mutant-${name})
  if(cuda STREQUAL "PLANT")
    set(exe tf-cuda-test-plant-${name})
  endif()
  add_library(${exe}-planted OBJECT ${planted})
  kc_kernel_settings(${exe}-planted)
  target_compile_definitions(${exe}-planted PRIVATE ${define})
  target_link_libraries(${exe}-planted PRIVATE kc_reference nlohmann_json::nlohmann_json rapidcheck)
  add_dependencies(${exe}-planted kc_git_info)
  add_executable(${exe} $<TARGET_OBJECTS:${exe}-planted> ${kernel_objs} ${contract_objs}
                 $<TARGET_OBJECTS:kc_tool_obj>)
  kc_kernel_settings(${exe})
  target_link_libraries(${exe} PRIVATE kc_engine_run kc_reference kc_receipt_views kc_engine nlohmann_json::nlohmann_json rapidcheck
                        CLI11::CLI11 Threads::Threads)
  if(KC_HAVE_CUDA)
    set_target_properties(${exe} PROPERTIES LINKER_LANGUAGE CUDA)
  endif()
  if(cuda STREQUAL "PLANT")
    return()  # no test: a sanitizer control (tools/sanitize.py)
  elseif(cuda)
    add_test(NAME mutant.${name}
             COMMAND sh -c "out=$(\"$0\" ${contract} --backend cuda --cases 6 --quiet 2>&1); rc=$?; case \"$out\" in *'no CUDA device'*) exit 77;; esac; test $rc -eq 1"
                     $<TARGET_FILE:${exe}>)
    set_tests_properties(mutant.${name} PROPERTIES LABELS "cuda;mutant" SKIP_RETURN_CODE 77)
  else()
    # The gates alone (--gates-only): the contract's own test runs its controls, and a
    # mutant is caught when a gate fails or the backend errs, which the verdict reasons say.
    add_test(NAME mutant.${name}
             COMMAND sh -c "out=$(\"$0\" ${contract} --backend cpu --cases 6 --quiet --gates-only 2>&1); rc=$?; test $rc -eq 1 && case \"$out\" in *'because gate '*|*'errors (listed in the receipt)'*) true;; *) printf '%s\\n' \"$out\"; false;; esac"
                     $<TARGET_FILE:${exe}>)
    set_tests_properties(mutant.${name} PROPERTIES LABELS "cpu;mutant")
  endif()
endfunction()
