# check_layers.cmake on a fixture tree with deliberate upward includes: it must fail, naming each
# of them, and must not name the fixture's allowed includes.
cmake_minimum_required(VERSION 3.25)
execute_process(
  COMMAND "${CMAKE_COMMAND}" -DROOT=${CMAKE_CURRENT_LIST_DIR}/upward_fixture
          -P "${CMAKE_CURRENT_LIST_DIR}/check_layers.cmake"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(APPEND out "${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the upward includes passed the check:\n${out}")
endif()
foreach(expected "core/io/reads_a_plan.h includes core/offload/plan.h: io may not include offload"
                 "core/models/umt5/knows_a_family.h includes core/models/wan/dit.h")
  string(FIND "${out}" "${expected}" at)
  if(at LESS 0)
    message(FATAL_ERROR "not reported: ${expected}\n${out}")
  endif()
endforeach()
string(FIND "${out}" "uses_a_shared_part" at)
if(at GREATER_EQUAL 0)
  message(FATAL_ERROR "an allowed include was reported:\n${out}")
endif()
message(STATUS "the fixture's two upward includes were refused")
