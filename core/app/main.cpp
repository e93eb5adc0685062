#include "core/app/cli.h"

int main(int argc, char** argv) { return ptrain::app::run_cli(argc, argv); }
