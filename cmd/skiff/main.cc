// skiff: the command line and the daemon (`skiff serve`).
#include "cli/cli.h"

int main(int argc, char** argv) { return skiff::cli::Main(argc, argv); }
