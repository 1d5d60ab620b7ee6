# shardc_catch_tests(TARGET PREFIX): every TEST_CASE of a Catch2 v2 test
# binary becomes its own ctest entry "<PREFIX>: <test case name>", discovered
# after each link (the list of names is written next to the binary and read
# by ctest).
#
# Catch2 v2's own catch_discover_tests splits the list of names with CMake
# list operations, so a name holding ';' or '[' ("uniform in [-1, 1)")
# merges several tests into one bogus entry. This reads the names line by
# line with string(FIND) and never forms a list of them.
set(SHARDC_CATCH_ADD_TESTS "${CMAKE_CURRENT_LIST_DIR}/CatchAddTests.cmake")

function(shardc_catch_tests target prefix)
  set(ctest_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_tests.cmake")
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_include.cmake")
  add_custom_command(TARGET ${target} POST_BUILD
    BYPRODUCTS "${ctest_file}"
    COMMAND "${CMAKE_COMMAND}" -D "TEST_EXECUTABLE=$<TARGET_FILE:${target}>"
            -D "TEST_PREFIX=${prefix}" -D "CTEST_FILE=${ctest_file}"
            -P "${SHARDC_CATCH_ADD_TESTS}"
    VERBATIM)
  file(WRITE "${include_file}"
    "if(EXISTS \"${ctest_file}\")\n"
    "  include(\"${ctest_file}\")\n"
    "else()\n"
    "  add_test(\"${prefix}NOT_BUILT\" \"${target}_NOT_BUILT\")\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()
