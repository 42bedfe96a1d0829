# Third-party packages, all from the system (Debian packages, the CUDA toolkit, vcpkg on
# Windows). Nothing is downloaded or vendored. The GPU machine's image has neither nlohmann-json
# nor GoogleTest: tests/gpu/run.sh carries copies staged by scripts/stage-gpu-deps.sh and points
# CMAKE_PREFIX_PATH and FERRY_GTEST_SOURCE_DIR at them.
find_package(Threads REQUIRED)

# nlohmann-json (header only). A cross build searches only the mingw sysroot, which has no copy:
# expose just the host's nlohmann/ folder, never the whole of /usr/include.
find_package(nlohmann_json 3.10 CONFIG QUIET)
if(NOT TARGET nlohmann_json::nlohmann_json)
  if(CMAKE_CROSSCOMPILING AND EXISTS "/usr/include/nlohmann/json.hpp")
    set(_ferry_json_dir "${CMAKE_BINARY_DIR}/host-headers")
    file(MAKE_DIRECTORY "${_ferry_json_dir}")
    file(CREATE_LINK "/usr/include/nlohmann" "${_ferry_json_dir}/nlohmann" SYMBOLIC)
    add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
    target_include_directories(nlohmann_json::nlohmann_json SYSTEM INTERFACE "${_ferry_json_dir}")
  else()
    message(FATAL_ERROR "nlohmann-json not found: install nlohmann-json3-dev (scripts/setup-debian.sh), "
                        "or stage a copy (scripts/stage-gpu-deps.sh) and pass -DCMAKE_PREFIX_PATH=<that folder>")
  endif()
endif()

# CUDA toolkit: the runtime and cuBLAS come from it; the backend is built when it is found.
set(FERRY_HAVE_CUDA OFF)
if(NOT FERRY_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND NOT TARGET CUDA::cublasLt)
    # A toolkit without cuBLAS (nvcc alone): say so here rather than at link time.
    if(FERRY_CUDA STREQUAL "ON")
      message(FATAL_ERROR "FERRY_CUDA=ON but the CUDA toolkit in ${CUDAToolkit_LIBRARY_DIR} has no "
                          "cuBLASLt (libcublasLt): install the toolkit's cuBLAS")
    endif()
    message(STATUS "CUDA toolkit without cuBLASLt: the CUDA backend is not built")
  elseif(CUDAToolkit_FOUND)
    set(FERRY_HAVE_CUDA ON)
  elseif(FERRY_CUDA STREQUAL "ON")
    message(FATAL_ERROR "FERRY_CUDA=ON but the CUDA toolkit was not found")
  endif()
endif()

# OpenBLAS for the CPU backend's GEMM: Debian's libopenblas-dev (its CMake config sets variables)
# or vcpkg's (an OpenBLAS::OpenBLAS target). Never in the mingw lane, which has none: there, and
# with FERRY_OPENBLAS=OFF, the CPU backend runs its own blocked GEMM.
set(FERRY_OPENBLAS "AUTO" CACHE STRING "OpenBLAS for the CPU GEMM: AUTO (when found), ON, OFF")
set_property(CACHE FERRY_OPENBLAS PROPERTY STRINGS AUTO ON OFF)
set(FERRY_HAVE_OPENBLAS OFF)
if(NOT FERRY_OPENBLAS STREQUAL "OFF" AND NOT MINGW)
  find_package(OpenBLAS CONFIG QUIET)
  if(TARGET OpenBLAS::OpenBLAS OR OpenBLAS_LIBRARIES)
    set(FERRY_HAVE_OPENBLAS ON)
    add_library(ferry_openblas INTERFACE IMPORTED)
    if(TARGET OpenBLAS::OpenBLAS)
      target_link_libraries(ferry_openblas INTERFACE OpenBLAS::OpenBLAS)
    else()
      target_include_directories(ferry_openblas SYSTEM INTERFACE ${OpenBLAS_INCLUDE_DIRS})
      target_link_libraries(ferry_openblas INTERFACE ${OpenBLAS_LIBRARIES})
    endif()
  elseif(FERRY_OPENBLAS STREQUAL "ON")
    message(FATAL_ERROR "FERRY_OPENBLAS=ON but OpenBLAS was not found: install libopenblas-dev")
  endif()
endif()
message(STATUS "CPU GEMM: OpenBLAS ${FERRY_HAVE_OPENBLAS}, own blocked GEMM always")


# Qt 6 Widgets for the desktop app (not in the mingw lane: Debian has no Qt for mingw).
set(FERRY_HAVE_QT OFF)
if(NOT FERRY_GUI STREQUAL "OFF")
  set(_ferry_qt_components Widgets)
  if(FERRY_BUILD_TESTS)
    list(APPEND _ferry_qt_components Test)
  endif()
  find_package(Qt6 6.4 QUIET COMPONENTS ${_ferry_qt_components})
  if(Qt6_FOUND)
    set(FERRY_HAVE_QT ON)
  elseif(FERRY_GUI STREQUAL "ON")
    message(FATAL_ERROR "FERRY_GUI=ON but Qt 6 was not found: install qt6-base-dev")
  endif()
endif()

# Qt 6 Network for the model library's downloader (net/: `ferry-cli models get`, the app's library
# panel), wherever Qt is found, the app built or not. Not in the mingw lane (no Qt there): its
# ferry-cli lists and scans models but has no `models get`.
set(FERRY_HAVE_NET OFF)
find_package(Qt6 6.4 QUIET COMPONENTS Core Network)
if(Qt6Network_FOUND)
  set(FERRY_HAVE_NET ON)
endif()

# GoogleTest: built from sources with this lane's compiler and flags (the mingw lane needs that):
# Debian's, or a staged copy (FERRY_GTEST_SOURCE_DIR); else an installed package (vcpkg on
# Windows).
set(FERRY_GTEST_SOURCE_DIR "/usr/src/googletest" CACHE PATH
    "GoogleTest sources built with the project (Debian's googletest, or a staged copy)")
if(FERRY_BUILD_TESTS)
  if(EXISTS "${FERRY_GTEST_SOURCE_DIR}/CMakeLists.txt")
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)  # no suite uses GoogleMock
    set(gtest_force_shared_crt ON CACHE BOOL "" FORCE)
    add_subdirectory("${FERRY_GTEST_SOURCE_DIR}" "${CMAKE_BINARY_DIR}/googletest" EXCLUDE_FROM_ALL
                     SYSTEM)
    # GoogleTest's one big file is compiled in every lane from nothing: without debug information
    # and lightly optimised (unoptimised under the sanitizers), it costs 21 s instead of 54 s
    # under ASan and 23 s instead of 33 s in release. The suites themselves keep their flags.
    if(NOT MSVC)
      foreach(_gtest_target IN ITEMS gtest gtest_main)
        target_compile_options(${_gtest_target} PRIVATE -g0 $<IF:$<BOOL:${FERRY_SANITIZE}>,-O0,-O1>)
      endforeach()
    endif()
  else()
    find_package(GTest QUIET)
    if(NOT GTest_FOUND)
      message(FATAL_ERROR "GoogleTest not found (FERRY_BUILD_TESTS=ON): install googletest "
                          "(scripts/setup-debian.sh), give its sources with "
                          "-DFERRY_GTEST_SOURCE_DIR=<dir> (scripts/stage-gpu-deps.sh stages a copy), "
                          "or configure with -DFERRY_BUILD_TESTS=OFF")
    endif()
  endif()
  include(GoogleTest)
endif()

# FFmpeg (libavformat, libavcodec, libswscale, libavutil) for start images and MP4 output:
# Debian's -dev packages through pkg-config. Windows seldom has a pkg-config (CMake ignores
# Strawberry Perl's), so without one the headers and libraries are looked up directly: vcpkg's
# ffmpeg port (DLLs with their import libraries) sits on the search paths its toolchain file
# sets. Not in the mingw lane, which has no FFmpeg cross build: there core/media is not built
# (FERRY_HAVE_FFMPEG OFF) and its tests compile to nothing.
set(FERRY_HAVE_FFMPEG OFF)
if(NOT MINGW)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(FERRY_FFMPEG QUIET IMPORTED_TARGET libavformat libavcodec libswscale libavutil)
  endif()
  if(TARGET PkgConfig::FERRY_FFMPEG)
    add_library(ferry_ffmpeg INTERFACE IMPORTED)
    target_link_libraries(ferry_ffmpeg INTERFACE PkgConfig::FERRY_FFMPEG)
    set(FERRY_HAVE_FFMPEG ON)
  else()
    find_path(FERRY_AVCODEC_INCLUDE_DIR libavcodec/avcodec.h)
    get_filename_component(_ferry_ffmpeg_prefix "${FERRY_AVCODEC_INCLUDE_DIR}" DIRECTORY)
    set(_ferry_ffmpeg_libs "")
    set(_ferry_ffmpeg_complete ON)
    foreach(_lib IN ITEMS avformat avcodec swscale avutil)
      string(TOUPPER "${_lib}" _var)
      # The lib/ beside that include/ first: under a multi-config generator (Visual Studio)
      # vcpkg's toolchain puts its debug/ tree ahead of the release one, and the release build
      # must link the release DLLs. Then the usual places (Debian's multiarch lib folder).
      if(FERRY_AVCODEC_INCLUDE_DIR)
        find_library(FERRY_${_var}_LIBRARY ${_lib}
                     PATHS "${_ferry_ffmpeg_prefix}/lib" NO_DEFAULT_PATH)
      endif()
      find_library(FERRY_${_var}_LIBRARY ${_lib})
      if(NOT FERRY_${_var}_LIBRARY)
        set(_ferry_ffmpeg_complete OFF)
      endif()
      list(APPEND _ferry_ffmpeg_libs "${FERRY_${_var}_LIBRARY}")
    endforeach()
    if(FERRY_AVCODEC_INCLUDE_DIR AND _ferry_ffmpeg_complete)
      add_library(ferry_ffmpeg INTERFACE IMPORTED)
      target_include_directories(ferry_ffmpeg SYSTEM INTERFACE "${FERRY_AVCODEC_INCLUDE_DIR}")
      target_link_libraries(ferry_ffmpeg INTERFACE ${_ferry_ffmpeg_libs})
      set(FERRY_HAVE_FFMPEG ON)
    endif()
  endif()
endif()
message(STATUS "Video (FFmpeg): ${FERRY_HAVE_FFMPEG}")
