// roofsim: GPU specs, rooflines, kernel times and training-step predictions from the command line.

#include "commands.hpp"

int main(int argc, char** argv) { return roofsim::cli::run_cli(argc, argv); }
