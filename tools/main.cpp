// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// `cuasync <command>`: the command table on CLI11, `cuasync --help`, `cuasync help COMMAND`, `cuasync --version`,
// and what a command line that does not parse gets: a usage error (status 2) naming the nearest command or option.
#include "commands.hpp"
#include "options.hpp"

#include <CLI/CLI.hpp>

#include <array>
#include <cstdio>
#include <memory>
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

// One subcommand's parser: its options, bound to its runner's state, and the flags every command takes.
struct subcommand {
  const command* cmd = nullptr;
  CLI::App* app = nullptr;
  runner run;
  bool json = false, help = false;  // json: never set (see main), declared for the help
};

constexpr const char* help_summary = "this text, or a command's help (cuasync help trace)";

std::string command_help(const subcommand& s) {
  std::string text = usage_line(*s.app) + reflow(s.cmd->description);
  if (const std::string own = option_lines(*s.app, ""); !own.empty()) text += "\noptions:\n" + own;
  if (!s.cmd->notes.empty()) text += reflow(s.cmd->notes);
  text += "\n" + std::string(common_group) + ":\n" + option_lines(*s.app, common_group);
  return text + std::string(exit_status_help);
}

void usage(std::FILE* out, const CLI::App& top) {
  std::fprintf(out,
               "usage: cuasync <command> [options]     (cuasync <command> --help: a command's options)\n"
               "       cuasync --version [--json]\n\ncommands:\n");
  for (const command* c : commands)
    std::fprintf(out, "  %-9.*s %.*s\n", static_cast<int>(c->name.size()), c->name.data(),
                 static_cast<int>(c->summary.size()), c->summary.data());
  std::fprintf(out, "  %-9s %s\n\n%s:\n%s%s", "help", help_summary, common_group,
               option_lines(top, common_group).c_str(), std::string(exit_status_help).c_str());
}

std::vector<std::string> command_names() {
  std::vector<std::string> names{"help"};
  for (const command* c : commands) names.emplace_back(c->name);
  return names;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string near = nearest(word, candidates);
  return near.empty() ? "" : ": did you mean " + near + "?";
}

// CLI11's words for a missing value or argument, as this command says the rest: "--out needs DIR", "no FILE.cu given".
std::string plain(const CLI::ParseError& e) {
  const std::string text = e.what();
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e)) {  // "--out: 1 required DIR missing"
    const auto colon = text.find(": 1 required "), missing = text.rfind(" missing");
    if (colon != std::string::npos && missing != std::string::npos && missing > colon + 13)
      return text.substr(0, colon) + " needs " + text.substr(colon + 13, missing - colon - 13);
  }
  const std::string_view required = " is required";  // "FILE.cu is required"
  if (dynamic_cast<const CLI::RequiredError*>(&e) && text.ends_with(required) &&
      text.find(' ') == text.size() - required.size())
    return "no " + text.substr(0, text.size() - required.size()) + " given";
  return text;
}

bool given(int argc, char** argv, std::initializer_list<std::string_view> names) {
  for (int i = 1; i < argc; ++i)
    for (std::string_view n : names)
      if (argv[i] == n) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("cuasync", "cuasync");
  app.set_help_flag();   // --help is an option like the others (option_set::common), so help is ours to print
  app.allow_extras();    // unknown arguments are kept and reported here, with the nearest name
  app.require_subcommand(0, 1);
  bool json = false, help = false, version = false;
  option_set top(app);
  top.common(json, help);
  top.flag("--version", version, "the version of cuasync");

  std::vector<subcommand> subs;
  subs.reserve(commands.size());
  for (const command* c : commands) {
    subcommand& s = subs.emplace_back();
    s.cmd = c;
    s.app = app.add_subcommand(std::string(c->name), std::string(c->summary));
    s.app->set_help_flag();
    s.app->allow_extras();
    option_set o(*s.app);
    o.common(s.json, s.help);  // listed in its help; --json itself is taken out before parsing (below)
    s.run = c->declare(o);
  }
  CLI::App* help_app = app.add_subcommand("help", help_summary);
  help_app->set_help_flag();
  help_app->allow_extras();
  std::string help_topic;
  help_app->add_option("COMMAND", help_topic, "the command");

  auto parsed = [&]() -> subcommand* {
    for (subcommand& s : subs)
      if (s.app->parsed()) return &s;
    return nullptr;
  };
  // --json means the same wherever it is, as it always has: never an option's value (`demo --out --json` is a
  // missing directory, not one named "--json"). So it is taken out here; the commands declare it for their help.
  json = given(argc, argv, {"--json"});
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i)
    if (i == 0 || std::string_view(argv[i]) != "--json") args.push_back(argv[i]);
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    // A value that fails its check: the flags may not all be set yet, so --help is looked for as given.
    subcommand* s = parsed();
    if (given(argc, argv, {"-h", "--help"})) {
      if (s)
        std::fputs(command_help(*s).c_str(), stdout);
      else
        usage(stdout, app);
      return exit_ok;
    }
    if (!s) return usage_error("", json, plain(e));
    return invocation(*s->cmd, json).usage_error(plain(e));
  }

  subcommand* s = parsed();
  if (help_app->parsed()) {
    if (help_topic.empty()) {
      usage(stdout, app);
      return exit_ok;
    }
    for (subcommand& t : subs)
      if (t.cmd->name == help_topic) {
        std::fputs(command_help(t).c_str(), stdout);
        return exit_ok;
      }
    return usage_error("help", json, "help: unknown command '" + help_topic + "'" +
                                         did_you_mean(help_topic, command_names()) + " (cuasync --help lists them)");
  }
  if (s && (help || s->help)) {
    std::fputs(command_help(*s).c_str(), stdout);
    return exit_ok;
  }
  // What CLI11 did not take before the command (or without one): an unknown option or command.
  for (const std::string& a : app.remaining()) {
    if (a.starts_with("-") && a != "--")
      return usage_error(s ? s->cmd->name : "", json,
                         "unknown option '" + a + "'" + did_you_mean(a, option_names(app)) + " (cuasync --help)");
    if (a != "--")
      return usage_error(a, json, "unknown command '" + a + "'" + did_you_mean(a, command_names()) +
                                      " (cuasync --help lists the commands)");
  }
  if (help) {
    usage(stdout, app);
    return exit_ok;
  }
  if (version) {
    if (json)
      std::printf("{\"version\":\"%s\"}\n", CUASYNC_VERSION);
    else
      std::printf("cuasync %s\n", CUASYNC_VERSION);
    return exit_ok;
  }
  if (!s) {
    usage(stderr, app);
    std::fputc('\n', stderr);
    return usage_error("", json, "no command given");
  }
  invocation inv(*s->cmd, json);
  for (const std::string& a : s->app->remaining()) {
    if (a == "--") continue;
    if (a.starts_with("-"))
      return inv.usage_error("unknown option '" + a + "'" + did_you_mean(a, option_names(*s->app)));
    return inv.usage_error("unexpected argument '" + a + "'");
  }
  return s->run(inv);
}
