// Shared pieces of the `lowbit bench ...` drivers: the run record (date, commit, machine,
// command line) that every JSON result carries, an nccl-tests-style fixed-width table,
// and the JSON + PNG output convention (scripts/plot_bench.py draws the PNG).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lowbit::bench {

// {"date": ISO-8601 UTC, "commit": git describe at configure time, "host": hostname,
//  "gpus": [names] (filled by the CUDA side when available), "command": argv joined}
nlohmann::json run_record(const std::vector<std::string>& argv_of_subcommand, const std::string& subcommand);

// Fixed-width table printer: columns are set once, rows added as strings.
class Table {
 public:
  struct Column {
    std::string header;
    int width;
  };
  explicit Table(std::vector<Column> cols) : cols_(std::move(cols)) {}
  void print_header() const;
  void print_row(const std::vector<std::string>& cells) const;
  // Markdown form of every row printed so far (for docs/benchmarks/).
  std::string markdown() const;

 private:
  std::vector<Column> cols_;
  mutable std::vector<std::vector<std::string>> rows_;
};

std::string fmt(double v, int precision = 2);

// Writes <prefix>.json and <prefix>.md, then runs scripts/plot_bench.py to make <prefix>.png
// (if python3 + matplotlib are present; a missing plotter is reported, not fatal).
// plot_spec: {"x": field, "y": field, "series": field, "logx": bool, "logy": bool, "title": str}
bool write_results(const std::string& prefix, const nlohmann::json& record, const nlohmann::json& rows,
                   const std::string& markdown_table, const nlohmann::json& plot_spec);

}  // namespace lowbit::bench
