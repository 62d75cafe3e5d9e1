// Each sub-command registers itself on the CLI11 app and returns the exit
// code through *rc when it runs. Failures print one line on stderr.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace ssdfeed::cli {

// Set by the sub-command that ran; main returns it.
struct RunState {
  int rc = 0;
  std::string command_line;  // as typed, quoted where needed (bench reports name it)
};

void AddMakeDataset(CLI::App& app, RunState* st);
void AddWarm(CLI::App& app, RunState* st);
void AddCache(CLI::App& app, RunState* st);
void AddBench(CLI::App& app, RunState* st);
void AddServeMetrics(CLI::App& app, RunState* st);
void AddNodeLabels(CLI::App& app, RunState* st);
void AddEntryId(CLI::App& app, RunState* st);
void AddInspect(CLI::App& app, RunState* st);
void AddPlan(CLI::App& app, RunState* st);
void AddDoctor(CLI::App& app, RunState* st);

// Prints "ssdfeed: <msg>" on stderr and returns the failure code.
int Fail(const std::string& msg, int code = 1);

// Exit codes, documented in docs/cli.md.
inline constexpr int kExitFailure = 1;        // an error (bad sample, I/O, corrupt records)
inline constexpr int kExitUsage = 2;          // bad arguments
inline constexpr int kExitPartial = 3;        // warm: the cache filled before the entry did
inline constexpr int kExitInterrupted = 130;  // Ctrl-C (128 + SIGINT)

// "1 entry", "2 entries".
std::string Plural(uint64_t n, const std::string& one, const std::string& many);

}  // namespace ssdfeed::cli
