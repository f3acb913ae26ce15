#include "gpusched/cli/app_main.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <vector>

#include "gpusched/common/nearest.h"

namespace gpusched::cli {

int ParseAndRun(CLI::App& app, int argc, char** argv, const std::string& shown_name,
                const std::map<std::string, std::string>& elsewhere, const int& exit_code) {
  if (argc > 1 && argv[1][0] != '-') {
    const std::string word = argv[1];
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      names.push_back(sub->get_name());
    }
    if (std::find(names.begin(), names.end(), word) == names.end()) {
      if (auto it = elsewhere.find(word); it != elsewhere.end()) {
        std::cerr << shown_name << ": '" << word << "' is a subcommand of " << it->second << ": run `" << it->second
                  << " " << word << "`\n";
        return 2;
      }
      // The nearest name among both binaries' subcommands: a typo of the other binary's names it.
      std::vector<std::string> everywhere = names;
      for (const auto& [name, binary] : elsewhere) everywhere.push_back(name);
      const std::string near = common::Nearest(word, everywhere);
      if (auto it = elsewhere.find(near); it != elsewhere.end()) {
        std::cerr << shown_name << ": unknown subcommand '" << word << "'; did you mean `" << it->second << " " << near
                  << "`?\n";
        return 2;
      }
      std::cerr << shown_name << ": unknown subcommand '" << word << "'" << common::NearestAndKnown(word, names)
                << "; --help says what each does\n";
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; any other parse error is a usage error: its message, then status 2.
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return exit_code;
}

}  // namespace gpusched::cli
