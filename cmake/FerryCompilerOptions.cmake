# Warnings, sanitizers and platform definitions shared by every Ferry target, through the
# interface target ferry_options.
add_library(ferry_options INTERFACE)

if(MSVC)
  target_compile_options(ferry_options INTERFACE /W4 /permissive- /utf-8 /Zc:__cplusplus)
  if(FERRY_WERROR)
    target_compile_options(ferry_options INTERFACE /WX)
  endif()
else()
  target_compile_options(ferry_options INTERFACE -Wall -Wextra -Wpedantic -Wshadow
                                                 -Wnon-virtual-dtor)
  if(FERRY_WERROR)
    target_compile_options(ferry_options INTERFACE -Werror)
  endif()
  # GCC 12 at -O3 misreads the inlined std::string concatenations of libstdc++ 12 as out-of-bounds
  # copies (GCC bug 105651: "forming offset [32, 33] is out of the bounds [0, 32]"), more often
  # with the precompiled headers' inlining; it stays a warning there instead of failing the build.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12
     AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(ferry_options INTERFACE -Wno-error=array-bounds)
  endif()
  # clang 19 (the fuzz lane's) reports libstdc++ 12's own std::stable_sort, which still calls the
  # get_temporary_buffer that C++17 deprecated: a warning about the library, not about Ferry.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 19)
    target_compile_options(ferry_options INTERFACE -Wno-error=deprecated-declarations)
  endif()
endif()

if(WIN32)
  # Windows 10 APIs (PrefetchVirtualMemory, GetFileInformationByHandleEx); no min/max macros.
  target_compile_definitions(ferry_options INTERFACE _WIN32_WINNT=0x0A00 WINVER=0x0A00
                                                     NOMINMAX WIN32_LEAN_AND_MEAN UNICODE _UNICODE)
endif()

if(FERRY_SANITIZE)
  list(JOIN FERRY_SANITIZE "," _ferry_sanitizers)
  add_compile_options(-fsanitize=${_ferry_sanitizers} -fno-omit-frame-pointer
                      -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_ferry_sanitizers})
endif()

# ferry_uninstrumented_test_code(target): the test suites' own files are compiled without the
# sanitizers' instrumentation; the engine they call (the ferry_* libraries) keeps it, and the
# executable still links the sanitizer runtimes, so every engine bad access or UB a test reaches
# is still caught. Why: instrumented, a test file costs 2-3x the compile time (nlohmann/json's
# parser and GoogleTest's macros under ASan + UBSan: a 2-line JSON round trip takes 14.6 s at
# -O1 with both, 4.0 s without), and the ASan lane compiles about 100 of them from scratch on
# every CI run. Not for the fuzz targets (their coverage instrumentation is the point).
function(ferry_uninstrumented_test_code target)
  if(FERRY_SANITIZE AND NOT "fuzzer-no-link" IN_LIST FERRY_SANITIZE)
    target_compile_options(${target} PRIVATE -fno-sanitize=all)
    # The files no longer see __SANITIZE_ADDRESS__: say that the ASan runtime is linked (tests of
    # memory levels allow for its quarantine of freed blocks).
    if("address" IN_LIST FERRY_SANITIZE)
      target_compile_definitions(${target} PRIVATE FERRY_ASAN_RUNTIME=1)
    endif()
  endif()
endfunction()
