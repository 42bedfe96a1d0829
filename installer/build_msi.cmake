# Builds Ferry's MSI from a staged install tree (`cmake --install . --prefix STAGE`). One path for
# the `msi` target and for the installer test, with wixl (Linux) or the WiX toolset v3 (Windows):
#
#   cmake -DSTAGE=<dir> -DOUT=<file.msi> -DVERSION=<x.y.z> -DWORK=<scratch dir>
#         [-DWIXL=<wixl> | -DCANDLE=<candle.exe> -DLIGHT=<light.exe>] -P build_msi.cmake
#
# ferry.wxs holds what never changes (product, upgrade rules, icon, Start-menu shortcut); the
# payload — every file of the staged tree, whatever this build staged (the Qt runtime that
# windeployqt deployed, the FFmpeg and CUDA DLLs, ...) — is harvested into WORK/payload.wxs, one
# component per file. A component's GUID is derived from its installed path (a name-based UUID),
# so the same file keeps the same component in every build and every version: the rule Windows
# Installer needs to count references and to remove exactly what it installed.
cmake_minimum_required(VERSION 3.25)

foreach(var STAGE OUT VERSION WORK)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "build_msi.cmake: ${var} is required")
  endif()
endforeach()
if(NOT WIXL AND NOT (CANDLE AND LIGHT))
  message(FATAL_ERROR "build_msi.cmake: give WIXL, or CANDLE and LIGHT")
endif()
if(NOT VERSION MATCHES "^[0-9]+\\.[0-9]+\\.[0-9]+$")
  message(FATAL_ERROR "build_msi.cmake: VERSION must be x.y.z, not '${VERSION}'")
endif()
get_filename_component(STAGE "${STAGE}" ABSOLUTE)
get_filename_component(WORK "${WORK}" ABSOLUTE)
get_filename_component(OUT "${OUT}" ABSOLUTE)
if(NOT IS_DIRECTORY "${STAGE}/bin")
  message(FATAL_ERROR "build_msi.cmake: ${STAGE} is not a staged install tree (no bin/)")
endif()
set(wxs "${CMAKE_CURRENT_LIST_DIR}/ferry.wxs")

# Fixed namespace for the components' name-based GUIDs. Never change it: every component of every
# Ferry MSI would change identity, and upgrades would leave files behind.
set(component_namespace "6c1f3a52-8f0e-4d4b-9a7e-3b1f0d2c9e41")

function(xml_escape out text)
  string(REPLACE "&" "&amp;" text "${text}")
  string(REPLACE "<" "&lt;" text "${text}")
  string(REPLACE ">" "&gt;" text "${text}")
  string(REPLACE "\"" "&quot;" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# An MSI identifier (letters, digits, underscores; at most 72 characters) that stays readable in
# the tables and is unique by its hash: KIND_<path as identifier, cut>_<8 hex of the path's MD5>.
function(msi_id out kind rel)
  string(MAKE_C_IDENTIFIER "${rel}" readable)
  string(SUBSTRING "${readable}" 0 48 readable)
  string(MD5 hash "${rel}")
  string(SUBSTRING "${hash}" 0 8 hash)
  set(${out} "${kind}_${readable}_${hash}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${STAGE}" "${STAGE}/*")
list(SORT files)
if(NOT files)
  message(FATAL_ERROR "build_msi.cmake: nothing staged in ${STAGE}")
endif()
set(dirs "")
foreach(f IN LISTS files)
  get_filename_component(d "${f}" DIRECTORY)
  while(NOT d STREQUAL "")
    list(APPEND dirs "${d}")
    get_filename_component(d "${d}" DIRECTORY)
  endwhile()
endforeach()
list(REMOVE_DUPLICATES dirs)
list(SORT dirs)

get_filename_component(stage_name "${STAGE}" NAME)
set(component_refs "")
# Writes the components of folder `rel` ("" for INSTALLDIR), then its subfolders, recursively.
# The paths among ARGN whose folder is `rel`.
function(entries_in out rel)
  set(result "")
  foreach(path IN LISTS ARGN)
    get_filename_component(parent "${path}" DIRECTORY)
    if(parent STREQUAL rel)
      list(APPEND result "${path}")
    endif()
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

function(emit_folder rel indent)
  # Every folder the package creates goes on uninstall, parents included: Windows Installer and
  # Wine both remove a component's own folder once empty, but not always the folders above it
  # (share/ above share/ferry/, Ferry/ above both). So each folder has a component that removes
  # it (wixl has no RemoveFolder/@Directory, so the component sits in the folder itself).
  if(rel STREQUAL "")
    set(key "<INSTALLDIR>")
  else()
    set(key "${rel}/")
  endif()
  msi_id(folder_component k "${key}")
  msi_id(remove_id r "${key}")
  string(UUID folder_guid NAMESPACE "${component_namespace}" NAME "ferry/${key}" TYPE SHA1 UPPER)
  string(APPEND xml "${indent}<Component Id=\"${folder_component}\" Guid=\"${folder_guid}\" Win64=\"yes\">\n"
                    "${indent}  <CreateFolder />\n"
                    "${indent}  <RemoveFolder Id=\"${remove_id}\" On=\"uninstall\" />\n"
                    "${indent}</Component>\n")
  list(APPEND component_refs "${folder_component}")
  entries_in(files_here "${rel}" ${files})
  foreach(f IN LISTS files_here)
    get_filename_component(name "${f}" NAME)
    xml_escape(name_xml "${name}")
    xml_escape(source_xml "${stage_name}/${f}")
    msi_id(component_id c "${f}")
    msi_id(file_id f "${f}")
    string(UUID guid NAMESPACE "${component_namespace}" NAME "ferry/${f}" TYPE SHA1 UPPER)
    string(APPEND xml "${indent}<Component Id=\"${component_id}\" Guid=\"${guid}\" Win64=\"yes\">\n"
                      "${indent}  <File Id=\"${file_id}\" Name=\"${name_xml}\" Source=\"${source_xml}\" KeyPath=\"yes\" />\n"
                      "${indent}</Component>\n")
    list(APPEND component_refs "${component_id}")
  endforeach()
  entries_in(dirs_here "${rel}" ${dirs})
  foreach(d IN LISTS dirs_here)
    get_filename_component(name "${d}" NAME)
    xml_escape(name_xml "${name}")
    msi_id(dir_id d "${d}")
    string(APPEND xml "${indent}<Directory Id=\"${dir_id}\" Name=\"${name_xml}\">\n")
    emit_folder("${d}" "${indent}  ")
    string(APPEND xml "${indent}</Directory>\n")
  endforeach()
  set(xml "${xml}" PARENT_SCOPE)
  set(component_refs "${component_refs}" PARENT_SCOPE)
endfunction()

set(xml "")
emit_folder("" "      ")
set(refs_xml "")
foreach(id IN LISTS component_refs)
  string(APPEND refs_xml "      <ComponentRef Id=\"${id}\" />\n")
endforeach()
file(MAKE_DIRECTORY "${WORK}")
set(payload "${WORK}/payload.wxs")
file(WRITE "${payload}"
  "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
  "<!-- Written by installer/build_msi.cmake from ${STAGE}: every staged file, one component each. -->\n"
  "<Wix xmlns=\"http://schemas.microsoft.com/wix/2006/wi\">\n"
  "  <Fragment>\n"
  "    <DirectoryRef Id=\"INSTALLDIR\">\n"
  "${xml}"
  "    </DirectoryRef>\n"
  "    <ComponentGroup Id=\"Payload\">\n"
  "${refs_xml}"
  "    </ComponentGroup>\n"
  "  </Fragment>\n"
  "</Wix>\n")

# The desktop app gets its Start-menu shortcut only where this build staged it (the mingw lane
# builds no Qt app).
if(EXISTS "${STAGE}/bin/Ferry.exe")
  set(have_app yes)
else()
  set(have_app no)
endif()
if(NOT EXISTS "${STAGE}/share/ferry/ferry.ico")
  message(FATAL_ERROR "build_msi.cmake: ${STAGE}/share/ferry/ferry.ico is missing (the uninstall entry's icon)")
endif()
list(LENGTH files file_count)
message(STATUS "build_msi: ${file_count} files from ${STAGE}, app ${have_app}, version ${VERSION}")

# Both tools take Source paths relative to the folder they run in (wixl refuses absolute ones).
# The package is written beside OUT under a temporary name (still .msi: light picks its output
# type by extension) and renamed once complete: a failed build never leaves a truncated MSI
# under the real name.
get_filename_component(stage_parent "${STAGE}" DIRECTORY)
get_filename_component(out_dir "${OUT}" DIRECTORY)
get_filename_component(out_name "${OUT}" NAME)
set(partial "${out_dir}/.partial-${out_name}")
file(REMOVE "${partial}")
if(WIXL)
  execute_process(
    COMMAND "${WIXL}" --arch x64 -D "Version=${VERSION}" -D "StageDir=${stage_name}/"
            -D "HaveApp=${have_app}" -o "${partial}" "${wxs}" "${payload}"
    WORKING_DIRECTORY "${stage_parent}" RESULT_VARIABLE code ERROR_VARIABLE wixl_err)
  # wixl ignores an attribute it does not know with no more than a GLib warning: the package
  # would silently lack what the source asks for. A warning is a failure.
  if(wixl_err MATCHES "WARNING|CRITICAL")
    message(SEND_ERROR "build_msi.cmake: wixl warned:\n${wixl_err}")
    set(code 1)
  elseif(NOT wixl_err STREQUAL "")
    message(STATUS "${wixl_err}")
  endif()
else()
  execute_process(
    COMMAND "${CANDLE}" -nologo -arch x64 "-dVersion=${VERSION}" "-dStageDir=${stage_name}/"
            "-dHaveApp=${have_app}" -out "${WORK}/" "${wxs}" "${payload}"
    WORKING_DIRECTORY "${stage_parent}" RESULT_VARIABLE code)
  if(code EQUAL 0)
    execute_process(
      COMMAND "${LIGHT}" -nologo -out "${partial}" "${WORK}/ferry.wixobj" "${WORK}/payload.wixobj"
      WORKING_DIRECTORY "${stage_parent}" RESULT_VARIABLE code)
  endif()
endif()
if(NOT code EQUAL 0 OR NOT EXISTS "${partial}")
  file(REMOVE "${partial}")
  message(FATAL_ERROR "build_msi.cmake: building ${OUT} failed (${code})")
endif()
file(RENAME "${partial}" "${OUT}")
message(STATUS "build_msi: wrote ${OUT}")
