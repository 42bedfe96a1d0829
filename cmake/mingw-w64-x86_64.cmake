# Cross-compiling Ferry's core for Windows x64 with mingw-w64 (the -posix flavour has
# std::thread). Test executables run under Wine through CMAKE_CROSSCOMPILING_EMULATOR; source
# scripts/wine-env.sh first (scripts/test-mingw-wine.sh does) so Wine starts fast and never hangs.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

set(CMAKE_C_COMPILER x86_64-w64-mingw32-gcc-posix)
set(CMAKE_CXX_COMPILER x86_64-w64-mingw32-g++-posix)
set(CMAKE_RC_COMPILER x86_64-w64-mingw32-windres)

set(CMAKE_FIND_ROOT_PATH /usr/x86_64-w64-mingw32)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Static runtime (libgcc, libstdc++, winpthreads): the executables need no mingw DLLs beside them.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")

# Debian's /usr/bin/wine picks wine64 when there is no wine32 and sets WINELOADER for it.
find_program(FERRY_WINE NAMES wine wine64 PATHS /usr/lib/wine)
# Through scripts/wine-run.sh, which retries a launch Wine abandoned before the program started.
if(FERRY_WINE)
  get_filename_component(_ferry_wine_run "${CMAKE_CURRENT_LIST_DIR}/../scripts/wine-run.sh" ABSOLUTE)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${_ferry_wine_run}")
endif()
