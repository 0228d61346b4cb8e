#include "commands.hpp"

#include <cstdio>
#include <cstring>

namespace {
void usage() {
  std::fprintf(stderr,
               "usage: cuasync <command> [options]\n"
               "commands:\n"
               "  info     the driver, each device and its attributes\n"
               "  compile  compile a .cu file with NVRTC (cuasync compile --help)\n");
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "info")) return cuasync::tools::info(argc - 1, argv + 1);
#ifdef CUASYNC_TOOL_COMPILE
  if (!std::strcmp(argv[1], "compile")) return cuasync::tools::compile(argc - 1, argv + 1);
#endif
  std::fprintf(stderr, "cuasync: unknown command '%s'\n", argv[1]);
  usage();
  return 2;
}
