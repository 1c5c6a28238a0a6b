// roofsim: GPU specs, rooflines, kernel times and training-step predictions from the command line.
// Exit codes: 0 ok, 1 error (bad file, failed computation), 2 usage (bad option or argument value).

#include "commands.hpp"
#include "data_dir.hpp"

#include <roofsim/roofsim.hpp>

#include <CLI/CLI.hpp>

#include <iostream>
#include <string>
#include <vector>

namespace {

using namespace roofsim::cli;

/// Runs the subcommand the command line chose, mapping its exceptions to exit codes.
int run_parsed(const std::vector<Command>& commands, const std::string& calibration_path) {
    try {
        Context ctx;
        if (!calibration_path.empty()) ctx.calibration = roofsim::load_calibration(calibration_path);
        for (const auto& c : commands) {
            if (c.app->parsed()) c.run(ctx);
        }
    } catch (const UsageError& e) {
        std::cerr << "roofsim: " << e.what() << '\n';
        return exit_usage;
    } catch (const std::exception& e) {
        std::cerr << "roofsim: error: " << e.what() << '\n';
        return exit_error;
    }
    return exit_ok;
}

}  // namespace

int main(int argc, char** argv) {
    roofsim::cli::use_installed_data_dir();
    CLI::App app{"roofsim: GPU specs, rooflines and kernel times for PyTorch training on NVIDIA GPUs"};
    app.require_subcommand(1);
    app.fallthrough();
    std::string calibration_path;
    app.add_option("--calibration", calibration_path,
                   "Calibration profile (JSON) measured by roofsim-calibrate; replaces datasheet ceilings for its GPU");
    const std::vector<Command> commands = {add_specs_command(app), add_roofline_command(app), add_kernel_command(app),
                                           add_predict_command(app), add_validate_command(app),
                                           add_fit_kernels_command(app), add_compare_command(app)};
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        app.exit(e);
        return exit_usage;
    }
    return run_parsed(commands, calibration_path);
}
