# The versioned-struct policy from C: the 0.1.0 init symbols reached with dlvsym() write
# only the 0.1.0 structs, the sized ones carry KJIT_0.2, and the init macros compile in C.
# (tests/test_abi.cpp covers every entry point, under the sanitizers too.) An instrumented
# library cannot be loaded by this uninstrumented program, hence not in sanitizer builds.
if(NOT KJIT_SANITIZE)
  add_executable(abi_old_symbols ${CMAKE_CURRENT_SOURCE_DIR}/abi/old_symbols.c)
  target_include_directories(abi_old_symbols PRIVATE ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(abi_old_symbols PRIVATE kjit ${CMAKE_DL_LIBS})
  set_target_properties(abi_old_symbols PROPERTIES C_STANDARD 99 C_EXTENSIONS ON)
  target_compile_options(abi_old_symbols PRIVATE -Wall -Wextra -Werror)
  add_test(NAME abi_old_init_symbols
    COMMAND abi_old_symbols $<TARGET_FILE:kjit>)
  set_tests_properties(abi_old_init_symbols PROPERTIES LABELS abi)
endif()

# Function-pointer types for dlopen users (include/kjit/kjit_typedefs.h): one per exported
# function, each matching its prototype, and a KJIT_*_INIT macro for every versioned struct.
add_test(NAME api_typedefs
  COMMAND bash ${PROJECT_SOURCE_DIR}/tools/check_typedefs.sh ${CMAKE_C_COMPILER})
set_tests_properties(api_typedefs PROPERTIES LABELS abi)
# One release version everywhere (CMake, header, bindings), and every "since" mark in the
# headers true of it and of the version script's nodes (tools/check_version.sh).
add_test(NAME version_consistency COMMAND ${KJIT_BASH} ${PROJECT_SOURCE_DIR}/tools/check_version.sh)
set_tests_properties(version_consistency PROPERTIES LABELS abi)
