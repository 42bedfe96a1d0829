# Precompiled headers: the standard library, GoogleTest and Qt headers that most files include are
# parsed once per target instead of once per file. GoogleTest's header alone takes 2.3 s to parse;
# with it precompiled a sample of 7 test files compiled in 65 s instead of 97 s, and 6 engine
# files in 20 s instead of 28 s (release flags, 2-core machine). CI builds every lane from
# nothing, so this is most of what keeps it inside its time budget.
#
# The precompiled header is included before each file's own includes, so a file that forgets one
# of these headers still compiles here. The fuzz lane builds without them (FERRY_PCH OFF in its
# preset), and there the engine files that the fuzz targets compile must include what they use.
option(FERRY_PCH "Precompile the common standard, GoogleTest and Qt headers" ON)

# The standard headers that most engine files include.
set(ferry_pch_standard
  <algorithm> <array> <cmath> <cstddef> <cstdint> <cstring> <filesystem> <functional> <map>
  <memory> <optional> <span> <string> <string_view> <utility> <vector>)

# ferry_precompile(target KIND): KIND engine (the standard headers), tests (and GoogleTest and
# nlohmann/json, which the suites use) or qt (and the Qt Widgets headers the app includes).
function(ferry_precompile target kind)
  if(NOT FERRY_PCH)
    return()
  endif()
  set(headers ${ferry_pch_standard})
  if(kind STREQUAL "tests")
    list(APPEND headers <gtest/gtest.h> <atomic> <fstream> <random> <set> <thread>
                        <nlohmann/json.hpp>)
  elseif(kind STREQUAL "qt")
    list(APPEND headers <QtWidgets>)
  elseif(NOT kind STREQUAL "engine")
    message(FATAL_ERROR "ferry_precompile(${target} ${kind}): kind is engine, tests or qt")
  endif()
  # For C++ sources only (a target may also hold C or CUDA files); a '>' inside a generator
  # expression is written $<ANGLE-R>.
  list(TRANSFORM headers REPLACE ">$" "$<ANGLE-R>")
  list(TRANSFORM headers REPLACE "^(.+)$" "$<$<COMPILE_LANGUAGE:CXX>:\\1>")
  target_precompile_headers(${target} PRIVATE ${headers})
endfunction()
