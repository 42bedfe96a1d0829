#include "cli/args.h"

#include <charconv>

#include "core/error.h"

namespace ferry::cli {

Args::Args(std::vector<std::string> argv, const std::set<std::string>& options,
           const std::set<std::string>& flags) {
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      positional_.push_back(arg);
      continue;
    }
    const std::string name = arg.substr(2);
    if (flags.count(name) != 0) {
      flags_.insert(name);
    } else if (options.count(name) != 0) {
      if (i + 1 >= argv.size()) throw Error(ErrorCode::kBadArgument, arg + " needs a value");
      values_[name].push_back(argv[++i]);
    } else {
      throw Error(ErrorCode::kBadArgument, "unknown option " + arg);
    }
  }
}

std::optional<std::string> Args::value(const std::string& name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Args::values(const std::string& name) const {
  const auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::string Args::value_or(const std::string& name, const std::string& fallback) const {
  return value(name).value_or(fallback);
}

long long Args::integer_or(const std::string& name, long long fallback, long long min,
                           long long max) const {
  const auto text = value(name);
  if (!text) return fallback;
  long long v = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size() || v < min || v > max) {
    throw Error(ErrorCode::kBadArgument, "--" + name + " must be an integer from " +
                                             std::to_string(min) + " to " + std::to_string(max) +
                                             ", not '" + *text + "'");
  }
  return v;
}

}  // namespace ferry::cli
