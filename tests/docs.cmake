# The tutorial's code snippets are lines of its program (examples/tutorial/), which the
# install test builds and runs.
add_test(NAME docs_tutorial_snippets COMMAND ${KJIT_BASH} ${PROJECT_SOURCE_DIR}/tools/check_tutorial.sh)
