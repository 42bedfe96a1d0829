# The player's sound in the install tree (Windows, after windeployqt has deployed Qt: gui/).
# Ferry plays its soundtracks through Qt Multimedia's QAudioSink alone (gui/audio_output.h): the
# tree must hold Qt6Multimedia.dll and a media plugin that opens audio devices without FFmpeg —
# Qt's Windows (WMF/WASAPI) plugin — and never Qt's FFmpeg media plugin, which would load its
# own FFmpeg DLLs beside the ones Ferry ships (installer/runtime_dlls.cmake), and which Ferry
# never needs: it decodes its videos itself.
#
# Removes any FFmpeg media plugin windeployqt deployed, then checks; FATAL_ERROR naming what is
# missing. Run at install time (FERRY_STAGE unset: CMAKE_INSTALL_PREFIX) or on its own:
#   cmake -DFERRY_STAGE=<staged tree> -P qt_audio_runtime.cmake
if(NOT DEFINED FERRY_STAGE OR FERRY_STAGE STREQUAL "")
  set(FERRY_STAGE "${CMAKE_INSTALL_PREFIX}")
endif()

# Plugin and DLL names are case-insensitive on Windows: compare lower case.
function(ferry_staged_files out pattern)
  file(GLOB_RECURSE all LIST_DIRECTORIES false RELATIVE "${FERRY_STAGE}" "${FERRY_STAGE}/*")
  set(found "")
  foreach(rel IN LISTS all)
    string(TOLOWER "${rel}" lower)
    if(lower MATCHES "${pattern}")
      list(APPEND found "${rel}")
    endif()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

ferry_staged_files(ffmpeg_plugins "(^|/)multimedia/[^/]*ffmpegmediaplugin[^/]*\\.dll$")
foreach(rel IN LISTS ffmpeg_plugins)
  message(STATUS "Leaving out Qt's FFmpeg media plugin: ${rel}")
  file(REMOVE "${FERRY_STAGE}/${rel}")
endforeach()

ferry_staged_files(multimedia_dll "^bin/qt6multimedia\\.dll$")
ferry_staged_files(windows_plugin "(^|/)multimedia/[^/]*windowsmediaplugin[^/]*\\.dll$")
set(missing "")
if(NOT multimedia_dll)
  list(APPEND missing "bin/Qt6Multimedia.dll")
endif()
if(NOT windows_plugin)
  list(APPEND missing "plugins/multimedia/windowsmediaplugin.dll (Qt's Windows media plugin)")
endif()
if(missing)
  string(REPLACE ";" ", " missing "${missing}")
  message(FATAL_ERROR "The player's sound needs ${missing} in ${FERRY_STAGE}: deploy Qt "
                      "Multimedia with windeployqt (gui/CMakeLists.txt)")
endif()
message(STATUS "Qt audio runtime: ${multimedia_dll}, ${windows_plugin}")
