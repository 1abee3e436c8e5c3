// skiff: the command line, and the daemon it runs as `skiff serve`.
#include "cli/cli.h"
#include "daemon_main.h"

int main(int argc, char** argv) { return skiff::cli::Main(argc, argv, skiff::DaemonMain); }
