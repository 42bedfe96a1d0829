# Install-time (included by cmake_install.cmake): copies into bin/ every DLL Ferry's programs
# load that Windows does not provide — FFmpeg's and OpenBLAS's (vcpkg), cuBLASLt's (the CUDA
# toolkit) — found by walking the executables' imports. Set beforehand by installer/:
# FERRY_PROGRAMS (the executables) and FERRY_DLL_DIRS (where their DLLs are).
# Never shipped: Windows' own DLLs (API sets, System32), the driver's nvcuda.dll, and Qt's DLLs,
# which windeployqt deploys with their plugins (gui/). Patterns spell both cases: DLL names are
# case-insensitive on Windows and reach us as the import tables spell them.
file(GET_RUNTIME_DEPENDENCIES
  EXECUTABLES ${FERRY_PROGRAMS}
  DIRECTORIES ${FERRY_DLL_DIRS}
  PRE_EXCLUDE_REGEXES "^[Aa][Pp][Ii]-[Mm][Ss]-" "^[Ee][Xx][Tt]-[Mm][Ss]-" "^[Qq][Tt]6"
                      "^[Nn][Vv][Cc][Uu][Dd][Aa]\\.[Dd][Ll][Ll]$"
  POST_EXCLUDE_REGEXES "[/\\][Ss][Yy][Ss][Tt][Ee][Mm]32[/\\]" "[/\\][Ss][Yy][Ss][Ww][Oo][Ww]64[/\\]"
  RESOLVED_DEPENDENCIES_VAR ferry_dlls
  UNRESOLVED_DEPENDENCIES_VAR ferry_missing_dlls)
if(ferry_missing_dlls)
  message(FATAL_ERROR "Ferry's programs load DLLs that were not found: ${ferry_missing_dlls} "
                      "(looked in ${FERRY_DLL_DIRS} and PATH)")
endif()
foreach(dll IN LISTS ferry_dlls)
  file(INSTALL "${dll}" DESTINATION "${CMAKE_INSTALL_PREFIX}/bin")
endforeach()
