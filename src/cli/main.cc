// ssdfeed: the command-line tool.
#include <cstdlib>
#include <iostream>

#include "cli/commands.h"
#include "cli/printable.h"
#include "ssdfeed/cache.h"

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

}  // namespace ssdfeed::cli

int main(int argc, char** argv) {
  using namespace ssdfeed::cli;
  ssdfeed::RaiseFdLimit();  // entries many writers filled at once hold many segment files
  CLI::App app{"ssdfeed: prepare once, cache on local SSD, serve batches at memory speed"};
  app.name("ssdfeed");
  app.set_version_flag("-V,--version", std::string("ssdfeed ") + SSDFEED_VERSION);
  app.require_subcommand(1);
  RunState st;
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
