# Language bindings: Rust (cargo test), Go (go vet + go test), the Julia package's static
# checks (tree-sitter parse + ccall/header/export/struct checks under Node), the Python
# package's CPU tests (unittest with Debian's python3, the cache shared with C and the
# CLI, pip install) and the cross-language cache scenario (C, Rust, Go and Python share
# one cache directory: identical PTX, disk hits for every language after the first).
# bindings/test_bindings.sh installs the built tree into <build>/bindings-test/prefix and
# runs each part against it through pkg-config. A part whose toolchain is missing (cargo,
# go, node/npm, python3) prints why and returns 77, which ctest reports as skipped; any
# test failure fails the entry.
find_program(KJIT_BASH_PROGRAM bash REQUIRED)
foreach(part rust go julia-check python crosslang)
  add_test(NAME bindings_${part}
    COMMAND ${KJIT_BASH_PROGRAM} ${PROJECT_SOURCE_DIR}/bindings/test_bindings.sh ${part}
            ${CMAKE_BINARY_DIR})
  set_tests_properties(bindings_${part} PROPERTIES
    SKIP_RETURN_CODE 77
    TIMEOUT 1800
    COST 20000  # builds and installs first: started early, beside the short tests
    LABELS bindings
    ENVIRONMENT "KJIT_LIB_BUILD_DIR=$<TARGET_FILE_DIR:kjit>")
endforeach()
