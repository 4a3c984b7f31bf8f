#include "bench/common/bench_common.h"

#if LOWBIT_HAS_CUDA
#include "bench/common/gpu_timing.cuh"
#endif

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>

#include "lowbit_version.h"  // LOWBIT_GIT_COMMIT, generated at build time (cmake/gen_version.cmake)

namespace lowbit::bench {

nlohmann::json run_record(const std::vector<std::string>& argv, const std::string& subcommand) {
  char date[64];
  std::time_t t = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::string cmd = "lowbit " + subcommand;
  for (const auto& a : argv) cmd += " " + a;
#if LOWBIT_HAS_CUDA
  const std::string machine = machine_description();
#else
  const std::string machine = "CPU only (built without CUDA)";
#endif
  return {{"date", date}, {"commit", LOWBIT_GIT_COMMIT}, {"host", host}, {"command", cmd}, {"machine", machine}};
}

void Table::print_header() const {
  std::string line, rule;
  for (const auto& c : cols_) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%*s ", c.width, c.header.c_str());
    line += buf;
    rule += std::string(static_cast<size_t>(c.width), '-') + " ";
  }
  std::printf("%s\n%s\n", line.c_str(), rule.c_str());
  std::fflush(stdout);
}

void Table::print_row(const std::vector<std::string>& cells) const {
  std::string line;
  for (size_t i = 0; i < cols_.size(); ++i) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%*s ", cols_[i].width, i < cells.size() ? cells[i].c_str() : "");
    line += buf;
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  rows_.push_back(cells);
}

std::string Table::markdown() const {
  std::ostringstream os;
  os << "|";
  for (const auto& c : cols_) os << " " << c.header << " |";
  os << "\n|";
  for (size_t i = 0; i < cols_.size(); ++i) os << "---|";
  os << "\n";
  for (const auto& r : rows_) {
    os << "|";
    for (size_t i = 0; i < cols_.size(); ++i) os << " " << (i < r.size() ? r[i] : "") << " |";
    os << "\n";
  }
  return os.str();
}

std::string fmt(double v, int precision) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", precision, v);
  return buf;
}

bool write_results(const std::string& prefix, const nlohmann::json& record, const nlohmann::json& rows,
                   const std::string& markdown_table, const nlohmann::json& plot_spec) {
  nlohmann::json doc = record;
  doc["rows"] = rows;
  doc["plot"] = plot_spec;
  {
    std::ofstream f(prefix + ".json");
    if (!f) {
      std::fprintf(stderr, "bench: cannot write %s.json\n", prefix.c_str());
      return false;
    }
    f << doc.dump(2) << "\n";
  }
  {
    std::ofstream f(prefix + ".md");
    f << "# " << record.value("command", std::string("lowbit bench")) << "\n\n"
      << "date " << record.value("date", std::string("?")) << ", commit " << record.value("commit", std::string("?"))
      << ", machine: " << record.value("machine", std::string("?"));
    if (record.contains("copy_gbps") && record.contains("read_gbps"))  // the memory-bound benches
      f << ", copy bandwidth " << static_cast<long>(record["copy_gbps"].get<double>()) << " GB/s (the floor's), "
        << "read-only stream " << static_cast<long>(record["read_gbps"].get<double>()) << " GB/s";
    f << "\n\n" << markdown_table;
  }
  // The plotter lives next to the sources; LOWBIT_SOURCE_DIR overrides the default guess.
  const char* src = std::getenv("LOWBIT_SOURCE_DIR");
  std::string script = std::string(src ? src : ".") + "/scripts/plot_bench.py";
  std::string cmd = "python3 '" + script + "' '" + prefix + ".json' '" + prefix + ".png' 2>&1";
  int rc = std::system(cmd.c_str());
  if (rc != 0) std::fprintf(stderr, "bench: plot not made (%s exited %d); JSON and table are written\n", script.c_str(), rc);
  std::printf("results: %s.json %s.md %s.png\n", prefix.c_str(), prefix.c_str(), prefix.c_str());
  return true;
}

}  // namespace lowbit::bench
