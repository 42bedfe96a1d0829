#include "core/models/family.h"

#include <exception>

#include "core/error.h"

namespace ferry::models {

std::string_view stage_name(StageKind stage) {
  switch (stage) {
    case StageKind::kText:
      return "encoding the prompt";
    case StageKind::kImage:
      return "encoding the start image";
    case StageKind::kDenoise:
      return "denoising";
    case StageKind::kDecode:
      return "decoding the video";
    case StageKind::kWrite:
      return "writing the video";
  }
  return "?";
}

std::string_view stage_key(StageKind stage) {
  switch (stage) {
    case StageKind::kText:
      return "text";
    case StageKind::kImage:
      return "image";
    case StageKind::kDenoise:
      return "denoise";
    case StageKind::kDecode:
      return "decode";
    case StageKind::kWrite:
      return "write";
  }
  return "?";
}

const ModelFamily* find_family(std::string_view name) {
  for (const ModelFamily* family : model_families()) {
    if (family->name() == name) return family;
  }
  return nullptr;
}

std::unique_ptr<ModelParts> open_model(const std::vector<std::filesystem::path>& paths) {
  std::exception_ptr first_error, not_this_family;
  for (const ModelFamily* family : model_families()) {
    try {
      return family->open(paths);
    } catch (const NotThisFamily&) {
      not_this_family = std::current_exception();
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
  if (not_this_family) std::rethrow_exception(not_this_family);
  throw Error(ErrorCode::kInternal, "this build of Ferry has no model family");
}

}  // namespace ferry::models
