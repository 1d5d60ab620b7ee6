# Run by shardc_catch_tests (CatchTests.cmake) after a Catch2 binary links:
# writes CTEST_FILE with one add_test per test case of TEST_EXECUTABLE.
execute_process(
  COMMAND "${TEST_EXECUTABLE}" --list-test-names-only
  OUTPUT_VARIABLE output
  RESULT_VARIABLE result)
# --list-test-names-only exits with the number of tests listed; a negative
# or non-numeric result means the binary did not run.
if(NOT result MATCHES "^[0-9]+$")
  message(FATAL_ERROR "Error running '${TEST_EXECUTABLE}' --list-test-names-only: ${result}\n${output}")
endif()

# A string for a quoted CMake argument (a function: a macro would re-read
# the value's backslashes as escapes).
function(quote var value)
  string(REPLACE "\\" "\\\\" value "${value}")
  string(REPLACE "\"" "\\\"" value "${value}")
  string(REPLACE "$" "\\$" value "${value}")
  string(REPLACE ";" "\\;" value "${value}")
  set(${var} "${value}" PARENT_SCOPE)
endfunction()

set(script "")
set(count 0)
while(NOT output STREQUAL "")
  string(FIND "${output}" "\n" end)
  if(end EQUAL -1)
    set(name "${output}")
    set(output "")
  else()
    string(SUBSTRING "${output}" 0 ${end} name)
    math(EXPR next "${end} + 1")
    string(SUBSTRING "${output}" ${next} -1 output)
  endif()
  string(STRIP "${name}" stripped)
  if(stripped STREQUAL "")
    continue()
  endif()
  # The Catch2 test spec that selects exactly this name: escape its
  # control characters (backslash, comma, brackets, wildcards, negation).
  set(spec "${name}")
  foreach(char "\\" "," "[" "]" "*" "~" "\"")
    string(REPLACE "${char}" "\\${char}" spec "${spec}")
  endforeach()
  quote(q_name "${TEST_PREFIX}: ${name}")
  quote(q_exe "${TEST_EXECUTABLE}")
  quote(q_spec "${spec}")
  # -w NoTests: a spec that selects nothing fails instead of passing.
  string(APPEND script "add_test(\"${q_name}\" \"${q_exe}\" \"${q_spec}\" -w NoTests)\n")
  math(EXPR count "${count} + 1")
endwhile()
if(count EQUAL 0)
  message(FATAL_ERROR "'${TEST_EXECUTABLE}' lists no test cases")
endif()
file(WRITE "${CTEST_FILE}" "${script}")
