# The tutorial's code snippets are lines of its program (examples/tutorial/), which the
# install test builds and runs.
add_test(NAME docs_tutorial_snippets COMMAND ${KJIT_BASH} ${PROJECT_SOURCE_DIR}/tools/check_tutorial.sh)
# The README's quick start is an excerpt of examples/quickstart/quickstart.c, a complete
# program the build makes (kjit-quickstart) and tools/run.sh runs: every line of its C
# snippet must be a line of that program.
add_test(NAME docs_readme_quickstart
  COMMAND ${KJIT_BASH} ${PROJECT_SOURCE_DIR}/tools/check_tutorial.sh
    ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/examples/quickstart)
# The README's first screen (the two commands) and its one description of the store.
add_test(NAME docs_readme_store COMMAND ${KJIT_BASH} ${PROJECT_SOURCE_DIR}/tools/check_readme.sh)
