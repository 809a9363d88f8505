// Subcommands of the `dllm` tool register themselves here, one file per subcommand (cmd_*.cpp),
// so that adding a command never edits a shared file.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace dllm::cli {

// Adds one subcommand (with its options and callback) to the app.
using CommandSetup = std::function<void(CLI::App& app)>;

struct CommandEntry {
  std::string name;  // used only to order the subcommands in --help
  CommandSetup setup;
};

std::vector<CommandEntry>& command_registry();

struct RegisterCommand {
  RegisterCommand(std::string name, CommandSetup setup) {
    command_registry().push_back({std::move(name), std::move(setup)});
  }
};

// Exit status a subcommand callback wants main() to return (0 when it succeeded).
int& exit_status();

}  // namespace dllm::cli
