# No function of src/ is longer than 150 lines (tools/check_function_length.py); the
# functions listed in tools/function_length_allow.txt are still being split.
find_program(KJIT_PYTHON3 python3)
if(KJIT_PYTHON3)
  add_test(NAME function_length
    COMMAND ${KJIT_PYTHON3} ${PROJECT_SOURCE_DIR}/tools/check_function_length.py
      --root ${PROJECT_SOURCE_DIR} --limit 150
      --allow ${PROJECT_SOURCE_DIR}/tools/function_length_allow.txt src)
  set_tests_properties(function_length PROPERTIES LABELS lint)
  add_test(NAME function_length_checker
    COMMAND ${KJIT_PYTHON3} ${PROJECT_SOURCE_DIR}/tests/lint/test_function_length.py)
  set_tests_properties(function_length_checker PROPERTIES LABELS lint)
  # Dependencies between the rooms of src/ point down (tools/check_layers.py says how).
  add_test(NAME layers COMMAND ${KJIT_PYTHON3} ${PROJECT_SOURCE_DIR}/tools/check_layers.py
    --root ${PROJECT_SOURCE_DIR})
  set_tests_properties(layers PROPERTIES LABELS lint)
  add_test(NAME layers_checker
    COMMAND ${KJIT_PYTHON3} ${PROJECT_SOURCE_DIR}/tests/lint/test_check_layers.py)
  set_tests_properties(layers_checker PROPERTIES LABELS lint)
  # Every list of the cache counters (kjit_cache_stats, each binding's raw struct and its
  # idiomatic stats) has exactly those of KJIT_CACHE_COUNTERS (tools/check_counters.py).
  add_test(NAME cache_counters
    COMMAND ${KJIT_PYTHON3} ${PROJECT_SOURCE_DIR}/tools/check_counters.py
      --root ${PROJECT_SOURCE_DIR})
  set_tests_properties(cache_counters PROPERTIES LABELS "lint;abi")
  add_test(NAME cache_counters_checker
    COMMAND ${KJIT_PYTHON3} ${PROJECT_SOURCE_DIR}/tests/lint/test_check_counters.py)
  set_tests_properties(cache_counters_checker PROPERTIES LABELS "lint;abi")
endif()
