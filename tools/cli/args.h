// Tiny option parser shared by the subcommands: --key value, --key=value and --flag.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace lowbit::cli {

class Args {
 public:
  // known: accepted option names (without "--"); flags: those that take no value.
  // On an unknown option or a missing value, ok() is false and error() says why.
  Args(const std::vector<std::string>& argv, const std::set<std::string>& known,
       const std::set<std::string>& flags = {});
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  bool has(const std::string& k) const { return values_.count(k) != 0; }
  std::string get(const std::string& k, const std::string& def = "") const;
  // Parse errors in numbers are recorded in error() (check ok() after reading).
  int64_t get_int(const std::string& k, int64_t def);
  double get_double(const std::string& k, double def);
  // Comma-separated list ("a,b,c").
  std::vector<std::string> get_list(const std::string& k, const std::vector<std::string>& def) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
  std::string error_;
};

// "16K", "4MiB", "1G", "1048576" -> bytes. Returns false on garbage.
bool parse_size(const std::string& s, uint64_t* out);
std::string format_size(uint64_t bytes);

}  // namespace lowbit::cli
