# The floors of architecture.md §9, checked on every include: a file may include only headers of
# its own floor or of the floors below it. The build's link order catches an upward *call*; this
# catches an upward *include* too (every floor shares the include root, so the compiler cannot).
#
#   cmake -DROOT=<tree> -P check_layers.cmake     (fails listing each upward include)
#
# Floors, lowest first. core/models/<name>/ is a model family, or a shared part that families use
# (kSharedParts); a family may include the shared parts, a shared part no family, and no family
# another family. A new family folder needs no line here.
cmake_minimum_required(VERSION 3.25)
if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<source tree> -P check_layers.cmake")
endif()

set(shared_parts umt5 qwen3vl lora taehv)

set(allowed_base     base)
set(allowed_memory   base memory)
set(allowed_io       base memory io)
set(allowed_backend  base memory backend)
set(allowed_offload  base memory io backend offload)
set(allowed_media    base memory io media)
# core/models/*.h (the family interface, the generic request) is open to every model folder; a
# file directly in core/models/ may include only what the folders may, and no folder.
set(allowed_models   base memory io backend offload media)
set(allowed_pipeline base memory io backend offload models media pipeline)
# The model library: scanning folders into sets by asking the families, and the catalogue.
set(allowed_library  base memory io backend offload models media library)
set(allowed_cuda     base memory backend cuda)

# The floor of a path relative to ROOT ("core/io/x.h" → io), or "" for front ends, tests and the
# rest (which may include any floor). For models, also the model folder's name.
function(floor_of path out_floor out_model)
  set(model "")
  if(path MATCHES "^core/(error\\.h|error\\.cpp|tensor/)")
    set(floor base)
  elseif(path MATCHES "^core/models/([^/]+)/")
    set(floor models)
    set(model "${CMAKE_MATCH_1}")
  elseif(path MATCHES "^core/([a-z]+)/")
    set(floor "${CMAKE_MATCH_1}")
  elseif(path MATCHES "^cuda/")
    set(floor cuda)
  else()
    set(floor "")
  endif()
  set(${out_floor} "${floor}" PARENT_SCOPE)
  set(${out_model} "${model}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE sources RELATIVE "${ROOT}"
  "${ROOT}/core/*.h" "${ROOT}/core/*.cpp" "${ROOT}/cuda/*.h" "${ROOT}/cuda/*.cpp"
  "${ROOT}/cuda/*.cu" "${ROOT}/cuda/*.cuh")
set(violations "")
set(checked 0)
foreach(source IN LISTS sources)
  floor_of("${source}" floor model)
  if(floor STREQUAL "")
    continue()
  endif()
  if(NOT DEFINED allowed_${floor})
    list(APPEND violations "${source}: core/${floor}/ is no known floor (add it to check_layers.cmake)")
    continue()
  endif()
  file(STRINGS "${ROOT}/${source}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"(core|cuda|gui|cli)/")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" header "${line}")
    math(EXPR checked "${checked} + 1")
    floor_of("${header}" to to_model)
    set(ok FALSE)
    if(to STREQUAL "")
      set(ok FALSE)  # gui/, cli/: never from the engine or the CUDA backend
    elseif(floor STREQUAL "models" AND to STREQUAL "models")
      list(FIND shared_parts "${model}" from_shared)
      list(FIND shared_parts "${to_model}" to_shared)
      if(to_model STREQUAL "" OR model STREQUAL to_model OR to_shared GREATER_EQUAL 0)
        set(ok TRUE)  # core/models/*.h (what every family shares), its own folder, a shared part
      endif()
    else()
      list(FIND allowed_${floor} "${to}" found)
      if(found GREATER_EQUAL 0)
        set(ok TRUE)
      endif()
    endif()
    if(NOT ok)
      if(to_model)
        set(to "models/${to_model}")
      elseif(to STREQUAL "")
        set(to "a front end")
      endif()
      list(APPEND violations "${source} includes ${header}: ${floor} may not include ${to}")
    endif()
  endforeach()
endforeach()

list(LENGTH sources files)
if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "upward includes (architecture.md §9):\n  ${text}")
endif()
message(STATUS "floors: ${files} files, ${checked} includes, none upward")
