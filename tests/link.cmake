# `kjit link` (nvJitLink through the cache): a script test that needs no GPU.
if(TARGET kjit-cli)
  add_test(NAME cli_link
    COMMAND ${KJIT_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/cli/link.sh $<TARGET_FILE:kjit-cli>)
  set_tests_properties(cli_link PROPERTIES TIMEOUT 600 LABELS cli)
endif()
