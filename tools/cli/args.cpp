#include "tools/cli/args.h"

#include <cstdlib>
#include <sstream>

namespace lowbit::cli {

Args::Args(const std::vector<std::string>& argv, const std::set<std::string>& known,
           const std::set<std::string>& flags) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.rfind("--", 0) != 0) {
      positional_.push_back(a);
      continue;
    }
    std::string key = a.substr(2), value;
    bool has_value = false;
    if (auto eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
      has_value = true;
    }
    if (!known.count(key) && !flags.count(key)) {
      error_ = "unknown option --" + key;
      return;
    }
    if (flags.count(key)) {
      values_[key] = has_value ? value : "1";
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argv.size()) {
        error_ = "option --" + key + " needs a value";
        return;
      }
      value = argv[++i];
    }
    values_[key] = value;
  }
}

std::string Args::get(const std::string& k, const std::string& def) const {
  auto it = values_.find(k);
  return it == values_.end() ? def : it->second;
}

int64_t Args::get_int(const std::string& k, int64_t def) {
  if (!has(k)) return def;
  const std::string& s = values_[k];
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0') {
    if (error_.empty()) error_ = "option --" + k + ": '" + s + "' is not an integer";
    return def;
  }
  return v;
}

double Args::get_double(const std::string& k, double def) {
  if (!has(k)) return def;
  const std::string& s = values_[k];
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0') {
    if (error_.empty()) error_ = "option --" + k + ": '" + s + "' is not a number";
    return def;
  }
  return v;
}

std::vector<std::string> Args::get_list(const std::string& k, const std::vector<std::string>& def) const {
  if (!has(k)) return def;
  std::vector<std::string> out;
  std::stringstream ss(get(k));
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

bool parse_size(const std::string& s, uint64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string unit(end);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();  // "MiB"/"MB" -> "Mi"/"M"
  if (!unit.empty() && unit.back() == 'I') unit.pop_back();
  uint64_t mul = 1;
  if (unit == "") mul = 1;
  else if (unit == "K") mul = 1ull << 10;
  else if (unit == "M") mul = 1ull << 20;
  else if (unit == "G") mul = 1ull << 30;
  else return false;
  if (!(v >= 0)) return false;
  *out = static_cast<uint64_t>(v * static_cast<double>(mul));
  return true;
}

std::string format_size(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  double v = static_cast<double>(b);
  while (v >= 1024 && u < 3 && static_cast<uint64_t>(v) % 1024 == 0) {
    v /= 1024;
    ++u;
  }
  std::ostringstream os;
  os << v << " " << units[u];
  return os.str();
}

}  // namespace lowbit::cli
