#pragma once
// The subcommands, one file each: each adds its options to the app and returns what runs it.

#include "cli_common.hpp"

namespace roofsim::cli {

Command add_specs_command(CLI::App& app);
Command add_roofline_command(CLI::App& app);
Command add_kernel_command(CLI::App& app);
Command add_predict_command(CLI::App& app);
Command add_validate_command(CLI::App& app);
Command add_fit_kernels_command(CLI::App& app);
Command add_compare_command(CLI::App& app);
Command add_survey_command(CLI::App& app);
Command add_sweep_command(CLI::App& app);
Command add_models_command(CLI::App& app);

/// Runs the command line `argv` (argv[0] the program) and returns its exit code; the program's main.
int run_cli(int argc, char** argv);

}  // namespace roofsim::cli
