// A small command-line reader for ferry-cli: positional arguments and `--name value` options,
// with every mistake reported as Error(kBadArgument).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ferry::cli {

class Args {
 public:
  // `flags` take no value; every other `--name` takes the next argument as its value.
  Args(std::vector<std::string> argv, const std::set<std::string>& options,
       const std::set<std::string>& flags);

  const std::vector<std::string>& positional() const { return positional_; }
  bool flag(const std::string& name) const { return flags_.count(name) != 0; }
  // The option's value (the last, when it was given more than once).
  std::optional<std::string> value(const std::string& name) const;
  // Every value of a repeatable option, in order.
  std::vector<std::string> values(const std::string& name) const;
  std::string value_or(const std::string& name, const std::string& fallback) const;
  // An integer option in [min, max].
  long long integer_or(const std::string& name, long long fallback, long long min,
                       long long max) const;

 private:
  std::vector<std::string> positional_;
  std::map<std::string, std::vector<std::string>> values_;
  std::set<std::string> flags_;
};

}  // namespace ferry::cli
