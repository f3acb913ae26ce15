#pragma once

// What both binaries' main() share: parsing, the usage-error exit status, and naming a first word that is no
// subcommand (with the nearest one, or the binary that has it) rather than CLI11's "A subcommand is required".

#include <map>
#include <string>

namespace CLI {
class App;
}

namespace gpusched::cli {

// Parses argv into `app` and runs the chosen subcommand's callback. Returns `exit_code` as the callback left it,
// 0 for --help and --version, 2 for a usage error. `shown_name` is how errors name the binary ("gpusched",
// "kubectl gpusched"); `elsewhere` maps a subcommand of the other binary to that binary's name.
int ParseAndRun(CLI::App& app, int argc, char** argv, const std::string& shown_name,
                const std::map<std::string, std::string>& elsewhere, const int& exit_code);

}  // namespace gpusched::cli
