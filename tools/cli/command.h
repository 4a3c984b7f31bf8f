// Subcommand registry of the `lowbit` program. Each subcommand lives in its own file and
// registers itself with a static LOWBIT_REGISTER_COMMAND(...) object, so adding one never
// touches main.cpp.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace lowbit::cli {

// args: the arguments after the subcommand name. Returns the process exit code.
using CommandFn = std::function<int(const std::vector<std::string>& args)>;

struct Command {
  std::string name;     // e.g. "quant-error" or "bench allreduce" (two words allowed)
  std::string summary;  // one line for `lowbit --help`
  CommandFn run;
};

std::vector<Command>& command_registry();

struct CommandRegistrar {
  CommandRegistrar(std::string name, std::string summary, CommandFn fn) {
    command_registry().push_back({std::move(name), std::move(summary), std::move(fn)});
  }
};

}  // namespace lowbit::cli

#define LOWBIT_CLI_CONCAT2(a, b) a##b
#define LOWBIT_CLI_CONCAT(a, b) LOWBIT_CLI_CONCAT2(a, b)
#define LOWBIT_REGISTER_COMMAND(name, summary, fn) \
  static ::lowbit::cli::CommandRegistrar LOWBIT_CLI_CONCAT(lowbit_cmd_, __LINE__)(name, summary, fn)
