// `cuasync <command>`: the command table, `cuasync --help`, `cuasync help COMMAND`, `cuasync --version`.
#include "commands.hpp"

#include <cuasync/trace/json.hpp>

#include <array>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

namespace {
using namespace cuasync::tools;

const std::array commands = {
    &info_command,
#ifdef CUASYNC_TOOL_COMPILE
    &compile_command,
#endif
#ifdef CUASYNC_TOOL_DEMO
    &demo_command,
    &doctor_command,
#endif
    &bench_command,
    &trace_command,
};

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: cuasync <command> [options]     (cuasync <command> --help: a command's options)\n"
               "       cuasync --version [--json]\n\ncommands:\n");
  for (const command* c : commands)
    std::fprintf(out, "  %-9.*s %.*s\n", static_cast<int>(c->name.size()), c->name.data(),
                 static_cast<int>(c->summary.size()), c->summary.data());
  std::fprintf(out, "  %-9s %s\n", "help", "this text, or a command's help (cuasync help trace)");
  std::fwrite(common_help.data(), 1, common_help.size(), out);
}

const command* find(std::string_view name) {
  for (const command* c : commands)
    if (c->name == name) return c;
  return nullptr;
}
}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc; ++i) json = json || !std::strcmp(argv[i], "--json");
  // Options every command takes may come before the command too, as users type them: `cuasync --json info`.
  int at = 1;
  while (at < argc && !std::strcmp(argv[at], "--json")) ++at;
  const std::string_view first = at < argc ? argv[at] : "";
  const bool has_more = at + 1 < argc;
  if (first == "--help" || first == "-h" || (first == "help" && !has_more)) {
    usage(stdout);
    return exit_ok;
  }
  if (first == "--version") {
    if (json)
      std::printf("{\"version\":\"%s\"}\n", CUASYNC_VERSION);
    else
      std::printf("cuasync %s\n", CUASYNC_VERSION);
    return exit_ok;
  }
  if (first == "help") {
    const command* c = find(argv[at + 1]);
    if (!c) {
      std::fprintf(stderr, "cuasync help: unknown command '%s'\n", argv[at + 1]);
      return exit_usage;
    }
    invocation(*c, 0, nullptr).print_help();
    return exit_ok;
  }
  const command* c = find(first);
  if (!c) {
    if (first.empty())
      std::fprintf(stderr, "cuasync: no command given\n\n");
    else
      std::fprintf(stderr, "cuasync: unknown command '%s'\n\n", argv[at]);
    usage(stderr);
    if (json) {
      cuasync::trace::json::writer w;
      w.begin_object().key("error").begin_object().member("command", first).member("status", int{exit_usage});
      w.member("kind", "usage").member("message", first.empty() ? "no command given" : "unknown command");
      w.end_object().end_object();
      std::printf("%s\n", w.str().c_str());
    }
    return exit_usage;
  }
  // The command's own arguments, with the options given before it (the invocation takes --json out anywhere).
  std::vector<char*> command_args(argv + 1, argv + at);
  command_args.insert(command_args.end(), argv + at + 1, argv + argc);
  invocation inv(*c, static_cast<int>(command_args.size()), command_args.data());
  if (inv.help()) {
    inv.print_help();
    return exit_ok;
  }
  return c->run(inv);
}
