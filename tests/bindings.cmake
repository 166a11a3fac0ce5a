# Language bindings: Rust (cargo test), Go (go vet + go test), the Julia package's static
# checks (tree-sitter parse + ccall/header/export/struct checks under Node), and the
# cross-language cache scenario (C, Rust and Go share one cache directory: identical PTX,
# disk hits for the second and third language). bindings/test_bindings.sh installs the
# built tree into <build>/bindings-test/prefix and runs each part against it through
# pkg-config. A part whose toolchain is missing (cargo, go, node/npm) prints why and
# returns 77, which ctest reports as skipped; any test failure fails the entry.
find_program(KJIT_BASH_PROGRAM bash REQUIRED)
foreach(part rust go julia-check crosslang)
  add_test(NAME bindings_${part}
    COMMAND ${KJIT_BASH_PROGRAM} ${PROJECT_SOURCE_DIR}/bindings/test_bindings.sh ${part}
            ${CMAKE_BINARY_DIR})
  set_tests_properties(bindings_${part} PROPERTIES
    SKIP_RETURN_CODE 77
    TIMEOUT 1800
    LABELS bindings
    ENVIRONMENT "KJIT_LIB_BUILD_DIR=$<TARGET_FILE_DIR:kjit>")
endforeach()
