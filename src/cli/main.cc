// ssdfeed: the command-line tool.
#include <cstdlib>
#include <iostream>

#include "cli/commands.h"
#include "cli/printable.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/env.h"

namespace ssdfeed::cli {

// Messages name files and what manifests and sources hold: printed through
// Printable, so none of it reaches the terminal as a control sequence.
int Fail(const std::string& msg, int code) {
  std::cerr << "ssdfeed: " << Printable(msg) << "\n";
  return code;
}

std::string Plural(uint64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

namespace {

// argv as a shell would take it back: words with anything but [A-Za-z0-9
// ,._+:@%/=-] in single quotes; the program by its name alone (the launcher
// of the Python package passes its whole path).
std::string CommandLine(int argc, char** argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    std::string a = i == 0 ? ssdfeed::Basename(argv[0]) : argv[i];
    bool plain = !a.empty() && a.find_first_not_of(
                                   "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuv"
                                   "wxyz0123456789,._+:@%/=-") == std::string::npos;
    if (!plain) {
      std::string q = "'";
      for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      a = q + "'";
    }
    out += (i ? " " : "") + a;
  }
  return out;
}

}  // namespace

}  // namespace ssdfeed::cli

int main(int argc, char** argv) {
  using namespace ssdfeed::cli;
  ssdfeed::RaiseFdLimit();  // entries many writers filled at once hold many segment files
  CLI::App app{"ssdfeed: prepare once, cache on local SSD, serve batches at memory speed"};
  app.name("ssdfeed");
  app.set_version_flag("-V,--version", std::string("ssdfeed ") + SSDFEED_VERSION);
  app.require_subcommand(1);
  RunState st;
  st.command_line = CommandLine(argc, argv);
  AddMakeDataset(app, &st);
  AddWarm(app, &st);
  AddCache(app, &st);
  AddBench(app, &st);
  AddServeMetrics(app, &st);
  AddNodeLabels(app, &st);
  AddEntryId(app, &st);
  AddInspect(app, &st);
  AddPlan(app, &st);
  AddDoctor(app, &st);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    if (what.empty()) what = "bad arguments";
    return Fail(what + " (see --help)", kExitUsage);
  } catch (const std::bad_alloc&) {
    return Fail("out of memory", kExitFailure);
  } catch (const std::exception& e) {
    // Commands catch what their libraries throw; this is the last resort,
    // so that a defect still ends in a message rather than an abort.
    return Fail(std::string("internal error: ") + e.what(), kExitFailure);
  }
  return st.rc;
}
