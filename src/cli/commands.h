// Each sub-command registers itself on the CLI11 app and returns the exit
// code through *rc when it runs. Failures print one line on stderr.
#pragma once

#include <CLI/CLI.hpp>

namespace ssdfeed::cli {

// Set by the sub-command that ran; main returns it.
struct RunState {
  int rc = 0;
};

void AddMakeDataset(CLI::App& app, RunState* st);
void AddWarm(CLI::App& app, RunState* st);
void AddCache(CLI::App& app, RunState* st);
void AddBench(CLI::App& app, RunState* st);
void AddServeMetrics(CLI::App& app, RunState* st);

// Prints "ssdfeed: <msg>" on stderr and returns the failure code.
int Fail(const std::string& msg, int code = 1);
// For commands whose issue has not landed yet.
int NotImplemented(const std::string& what);

// $SSDFEED_CACHE, then ~/.cache/ssdfeed.
std::string DefaultCacheDir();

}  // namespace ssdfeed::cli
