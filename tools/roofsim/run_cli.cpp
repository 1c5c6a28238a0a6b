// The roofsim command line, run in-process: parses argv, runs the subcommand, returns the exit code.
// Exit codes: 0 ok, 1 error (bad file, failed computation), 2 usage (bad option or argument value).

#include "commands.hpp"
#include "data_dir.hpp"

#include <roofsim/roofsim.hpp>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace {

using namespace roofsim::cli;

/// Runs the subcommand the command line chose, mapping its exceptions to exit codes.
int run_parsed(const std::vector<Command>& commands, const std::string& calibration_path, bool accept_partial) {
    try {
        Context ctx;
        if (!calibration_path.empty()) ctx.calibration = calibration_arg(calibration_path, accept_partial);
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

/// A usage error for a first word that is no subcommand ("roofsim frobnicate"): it names the word
/// and lists the subcommands. Returns false where the command line has no such word.
bool report_unknown_subcommand(const CLI::App& app, const std::vector<Command>& commands) {
    for (const auto& c : commands) {
        if (c.app->parsed()) return false;
    }
    for (const std::string& arg : app.remaining()) {
        if (arg.empty() || arg.front() == '-') continue;
        std::string names;
        for (const auto& c : commands) {
            if (!names.empty()) names += ", ";
            names += c.app->get_name();
        }
        std::cerr << "roofsim: '" << arg << "' is not a subcommand; the subcommands are: " << names
                  << "\nRun with --help for more information.\n";
        return true;
    }
    return false;
}

/// Flushes standard output: a failed write (a full disk) makes a successful run exit 1, with a message.
int flushed(int code) {
    errno = 0;
    std::cout.flush();
    if (std::cout && std::fflush(stdout) == 0 && !std::ferror(stdout)) return code;
    const int error = errno;
    std::cerr << "roofsim: error: cannot write standard output";
    if (error != 0) std::cerr << ": " << std::strerror(error);
    std::cerr << '\n';
    return code == exit_ok ? exit_error : code;
}

}  // namespace

namespace roofsim::cli {

int run_cli(int argc, char** argv) {
    roofsim::cli::use_installed_data_dir();
    CLI::App app{"roofsim: GPU specs, rooflines and kernel times for PyTorch training on NVIDIA GPUs"};
    app.require_subcommand(1);
    app.fallthrough();
    std::string calibration_path;
    app.add_option("--calibration", calibration_path,
                   "Calibration profile (JSON) measured by roofsim-calibrate; replaces datasheet ceilings for its GPU");
    bool accept_partial = false;
    app.add_flag("--accept-partial", accept_partial,
                 "Use a partial calibration (roofsim-calibrate interrupted before all its probes ran); refused without it");
    const std::vector<Command> commands = {add_specs_command(app), add_roofline_command(app), add_kernel_command(app),
                                           add_predict_command(app), add_validate_command(app),
                                           add_fit_kernels_command(app), add_compare_command(app), add_survey_command(app),
                                           add_sweep_command(app), add_models_command(app)};
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return flushed(app.exit(e));
    } catch (const CLI::CallForAllHelp& e) {
        return flushed(app.exit(e));
    } catch (const CLI::ParseError& e) {
        if (!report_unknown_subcommand(app, commands)) app.exit(e);
        return flushed(exit_usage);
    }
    return flushed(run_parsed(commands, calibration_path, accept_partial));
}

}  // namespace roofsim::cli
