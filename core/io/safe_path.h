// File names that come from elsewhere (a hub's answer listing a model's files, a shared clip
// naming its model files) made into paths that stay inside a target folder on every platform, or
// refused. The model library must pass every remote file name through safe_relative_path before
// it creates, opens or links anything under its download folder.
#pragma once

#include <filesystem>
#include <string_view>

namespace ferry::io {

// Longest name and path safe_relative_path accepts (bytes of UTF-8): NTFS's 255-unit components,
// and a bound on the depth a remote listing may nest.
inline constexpr std::size_t kMaxRemoteNameBytes = 255;
inline constexpr std::size_t kMaxRemotePathBytes = 1024;

// `name` (UTF-8, components separated by '/' or '\', as hubs and Windows write them) as a relative
// path under which nothing can escape the folder it is joined to, on Windows or POSIX. Throws
// Error(kBadArgument) naming the name and the rule when it is empty, absolute (a leading
// separator, a drive "C:", a UNC or device prefix "\\?\"), or holds an empty, "." or ".."
// component, a ':' (drive-relative paths, NTFS alternate data streams), a control character, one
// of <>"|?*, invalid UTF-8, a component ending in '.' or ' ' (Windows drops them, so "x." would
// be "x"), a Windows reserved device name (CON, PRN, AUX, NUL, COM1-9, LPT1-9, also with the
// superscripts ¹²³, with any extension: "nul.txt" is the device), or too many bytes.
std::filesystem::path safe_relative_path(std::string_view name);

// The same rules for one component: a file name with no folder in it ("a/b" is refused).
std::filesystem::path safe_file_name(std::string_view name);

}  // namespace ferry::io
