#pragma once
// The subcommands of the `cuasync` command; each returns the process exit code.
namespace cuasync::tools {
int info(int argc, char** argv);
int compile(int argc, char** argv);
}
