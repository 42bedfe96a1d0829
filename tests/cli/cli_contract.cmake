# What every CLI contract script uses (include()d by each): run ferry-cli as a user would and check
# what it printed. Inputs the scripts get: CLI (the executable), EMULATOR (wine for the mingw lane,
# or empty).

# Runs ferry-cli with ARGN; fails unless it exits with `expected_code`. Sets `out` and `err`.
function(ferry_cli expected_code)
  execute_process(COMMAND ${EMULATOR} "${CLI}" ${ARGN}
    RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT code STREQUAL "${expected_code}")
    message(FATAL_ERROR "ferry-cli ${ARGN}: exit ${code}, expected ${expected_code}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

function(expect_in haystack needle)
  string(FIND "${haystack}" "${needle}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "expected '${needle}' in:\n${haystack}")
  endif()
endfunction()

function(expect_equal what got expected)
  if(NOT "${got}" STREQUAL "${expected}")
    message(FATAL_ERROR "${what}: ${got}, expected ${expected}")
  endif()
endfunction()

# The last ferry_cli call printed exactly one 'ferry-cli: error:' line on stderr.
function(expect_one_error_line)
  string(STRIP "${err}" e)
  string(FIND "${e}" "\n" newline)
  if(NOT newline EQUAL -1 OR NOT e MATCHES "^ferry-cli: error: ")
    message(FATAL_ERROR "expected one 'ferry-cli: error:' line on stderr, got:\n${err}")
  endif()
endfunction()
