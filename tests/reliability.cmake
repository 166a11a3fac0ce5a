# Reliability checks beyond the GoogleTest programs (test_reliability, from
# tests/reliability/, and test_crash are picked up like every test program):
#  - reliability_sanitizers: tools/sanitize.sh builds build-asan and build-tsan at the
#    repository root with clang and runs the CPU suites under ASan+UBSan and the
#    concurrency tests under TSan;
#  - reliability_fuzz: tools/fuzz.sh builds the libFuzzer targets in the same build-asan
#    and runs each for 20 s, two at a time; KJIT_FUZZ_SECONDS makes it longer;
#  - reliability_stress: bench_stress, 8 processes x 8 threads x 400 mixed operations on one
#    cache; fails on any error or busy/locked database reaching a caller.
# The first two are mostly compiling: they start first (COST), run beside the other tests
# (their builds at the lowest CPU priority, so timing-sensitive tests keep their share),
# and never at once (one build tree). The stress run needs the machine and runs alone. None is registered in
# a sanitizer build (that is what the scripts make).
find_program(KJIT_RELIABILITY_BASH bash REQUIRED)
get_filename_component(_kjit_root ${CMAKE_CURRENT_LIST_DIR}/.. ABSOLUTE)

if(NOT KJIT_SANITIZE)
  add_test(NAME reliability_sanitizers
    COMMAND ${KJIT_RELIABILITY_BASH} ${_kjit_root}/tools/sanitize.sh
    WORKING_DIRECTORY ${_kjit_root})
  set_tests_properties(reliability_sanitizers PROPERTIES
    TIMEOUT 2400 COST 100000 RESOURCE_LOCK build-asan LABELS "reliability;sanitizers")

  add_test(NAME reliability_fuzz
    COMMAND ${KJIT_RELIABILITY_BASH} ${_kjit_root}/tools/fuzz.sh
    WORKING_DIRECTORY ${_kjit_root})
  set_tests_properties(reliability_fuzz PROPERTIES
    TIMEOUT 1800 COST 90000 RESOURCE_LOCK build-asan LABELS "reliability;fuzz")
endif()

# bench/ is added after tests/: refer to the target by generator expression.
if(KJIT_BUILD_BENCH AND EXISTS ${_kjit_root}/bench/bench_stress.cpp)
  add_test(NAME reliability_stress COMMAND $<TARGET_FILE:bench_stress>)
  set_tests_properties(reliability_stress PROPERTIES
    TIMEOUT 900 RUN_SERIAL TRUE LABELS "reliability;stress")
endif()
