// `lowbit`: one program, many subcommands (see `lowbit --help`).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "tools/cli/command.h"

namespace lowbit::cli {
std::vector<Command>& command_registry() {
  static std::vector<Command> registry;
  return registry;
}
}  // namespace lowbit::cli

static void print_help() {
  auto cmds = lowbit::cli::command_registry();
  std::sort(cmds.begin(), cmds.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::printf(
      "lowbit: low-bit tensor-parallel LLM inference primitives\n"
      "  (Flash All-Reduce, INT4-weight GEMM and MoE, a tensor-parallel Llama runner)\n\n"
      "usage: lowbit <command> [options]     lowbit <command> --help for its options\n\ncommands:\n");
  for (const auto& c : cmds) std::printf("  %-20s %s\n", c.name.c_str(), c.summary.c_str());
}

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_help();
    return args.empty() ? 2 : 0;
  }
  // Longest match first: "bench allreduce" before "bench".
  const lowbit::cli::Command* best = nullptr;
  size_t best_words = 0;
  for (const auto& c : lowbit::cli::command_registry()) {
    size_t words = static_cast<size_t>(std::count(c.name.begin(), c.name.end(), ' ')) + 1;
    if (words > args.size() || words <= best_words) continue;
    std::string joined = args[0];
    for (size_t i = 1; i < words; ++i) joined += " " + args[i];
    if (joined == c.name) {
      best = &c;
      best_words = words;
    }
  }
  if (!best) {
    // A group word alone ("lowbit bench") lists the commands under it.
    std::vector<const lowbit::cli::Command*> group;
    for (const auto& c : lowbit::cli::command_registry())
      if (c.name.rfind(args[0] + " ", 0) == 0) group.push_back(&c);
    if (!group.empty()) {
      std::sort(group.begin(), group.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
      std::fprintf(stderr, "lowbit %s: choose one of\n", args[0].c_str());
      for (const auto* c : group) std::fprintf(stderr, "  %-20s %s\n", c->name.c_str(), c->summary.c_str());
      return 2;
    }
    std::fprintf(stderr, "lowbit: unknown command '%s' (see lowbit --help)\n", args[0].c_str());
    return 2;
  }
  std::vector<std::string> rest(args.begin() + static_cast<long>(best_words), args.end());
  // Commands report bad input through their return value; an exception that escapes one (a
  // failed allocation, a bench helper's failed device copy) is still a clear error, not an abort.
  try {
    return best->run(rest);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lowbit %s: error: %s\n", best->name.c_str(), e.what());
    return 1;
  }
}
