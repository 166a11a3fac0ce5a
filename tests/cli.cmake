# The kjit tool, the install story, the API reference and the ABI guard. Script tests that
# need no GPU; see tests/cli/*.sh and tools/*.sh.
find_program(KJIT_BASH bash REQUIRED)

if(TARGET kjit-cli)
  foreach(_t usage compile cache warm warm_grouped warm_grouped_fp8 include_edits mmap_edit worker exit_status json builtin_std
      nvcc_options hostile_dir)
    add_test(NAME cli_${_t}
      COMMAND ${KJIT_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/cli/${_t}.sh $<TARGET_FILE:kjit-cli>)
    set_tests_properties(cli_${_t} PROPERTIES TIMEOUT 600 LABELS cli)
  endforeach()
  # A header rewritten while NVRTC reads it (tests/race/): never stored under its key. An
  # interposer cannot be loaded into a sanitizer build's programs.
  if(NOT KJIT_SANITIZE)
    add_library(kjit_rewrite_race MODULE ${CMAKE_CURRENT_SOURCE_DIR}/race/rewrite_during_read.c)
    target_link_libraries(kjit_rewrite_race PRIVATE ${CMAKE_DL_LIBS})
    set_target_properties(kjit_rewrite_race PROPERTIES C_VISIBILITY_PRESET default)
    add_test(NAME cli_compile_window
      COMMAND ${KJIT_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/cli/compile_window.sh
              $<TARGET_FILE:kjit-cli> $<TARGET_FILE:kjit_rewrite_race>)
    set_tests_properties(cli_compile_window PROPERTIES TIMEOUT 600 LABELS cli)
    # The same race made by a real concurrent writer, many times: a soak, off by default.
    if(KJIT_SOAK_TESTS)
      add_test(NAME soak_compile_window
        COMMAND ${KJIT_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/cli/compile_window_soak.sh
                $<TARGET_FILE:kjit-cli>)
      set_tests_properties(soak_compile_window PROPERTIES TIMEOUT 1800 LABELS soak)
    endif()
  endif()
  # The CUTLASS example's kernel through kjit, its Params against the host's (nvcc, test data).
  add_test(NAME cli_cutlass_example
    COMMAND ${KJIT_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/cli/cutlass_example.sh $<TARGET_FILE:kjit>
            ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR})
  # Minutes of NVRTC on CI's cores: started early (COST), beside the short tests.
  set_tests_properties(cli_cutlass_example PROPERTIES TIMEOUT 900 COST 80000 LABELS cli)
  # Installs the build into a temporary prefix and builds the C examples against it. A
  # sanitizer build's library cannot be loaded by the uninstrumented examples.
  if(NOT KJIT_SANITIZE)
    add_test(NAME install_and_examples
      COMMAND ${KJIT_BASH} ${PROJECT_SOURCE_DIR}/tools/test_install.sh ${PROJECT_BINARY_DIR})
    set_tests_properties(install_and_examples PROPERTIES TIMEOUT 900 LABELS "cli;install")
  endif()
endif()

add_test(NAME api_docs_complete COMMAND ${KJIT_BASH} ${PROJECT_SOURCE_DIR}/tools/check_api_docs.sh)
set_tests_properties(api_docs_complete PROPERTIES LABELS abi)

add_test(NAME abi_exported_symbols
  COMMAND ${KJIT_BASH} ${PROJECT_SOURCE_DIR}/tools/check_symbols.sh $<TARGET_FILE:kjit>)
set_tests_properties(abi_exported_symbols PROPERTIES LABELS abi)

# The guard scripts themselves must catch leaks, unversioned symbols and ABI breaks.
add_test(NAME abi_guard_selftest
  COMMAND ${KJIT_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/cli/abi_guard.sh ${CMAKE_C_COMPILER})
set_tests_properties(abi_guard_selftest PROPERTIES TIMEOUT 300 LABELS abi)

# abidiff compares types only when the library has debug information.
string(TOUPPER "${CMAKE_BUILD_TYPE}" _kjit_bt)
if(_kjit_bt STREQUAL "DEBUG" OR _kjit_bt STREQUAL "RELWITHDEBINFO"
   OR CMAKE_C_FLAGS MATCHES "(^| )-g" OR CMAKE_CXX_FLAGS MATCHES "(^| )-g")
  add_test(NAME abi_baseline
    COMMAND ${KJIT_BASH} ${PROJECT_SOURCE_DIR}/tools/check_abi.sh $<TARGET_FILE:kjit>)
  set_tests_properties(abi_baseline PROPERTIES TIMEOUT 300 LABELS abi)
endif()
