// ssdfeed doctor --cache DIR: runs the node checks (src/doctor/node_checks.h)
// and prints them, each with its fix. Exit 0 when all pass, 1 when a warning
// fails, 2 when a blocking check fails.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/options.h"
#include "doctor/node_checks.h"
#include "util/units.h"

namespace ssdfeed::cli {

namespace {

struct DoctorArgs {
  CacheArgs cache;
  std::string sysroot;
  int workers = 8;
  int prefetch = 2;
  std::string batch_bytes = "64M";
  bool json = false;
};

Status ToInput(const DoctorArgs& a, doctor::DoctorInput* in) {
  SSDFEED_RETURN_IF_ERROR(a.cache.ToOptions(&in->cache));
  auto batch = ParseSize(a.batch_bytes);
  if (!batch.ok() || *batch == 0)
    return Status::InvalidArgument("--batch-bytes: want a size > 0 such as 64M, not '" +
                                   a.batch_bytes + "'");
  in->batch_bytes = *batch;
  in->workers = a.workers;
  in->prefetch = a.prefetch;
  in->sysroot = a.sysroot == "/" ? "" : a.sysroot;
  return Status::OK();
}

const char* Label(const doctor::CheckResult& r) {
  if (r.finding.outcome == doctor::Outcome::kPass) return "ok";
  if (r.finding.outcome == doctor::Outcome::kSkip) return "skip";
  return r.check->severity == doctor::Severity::kBlocking ? "BLOCK" : "warn";
}

void PrintJson(const std::string& root, const std::vector<doctor::CheckResult>& results, int code) {
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& r : results)
    checks.push_back({{"id", r.check->id},
                      {"severity", doctor::SeverityName(r.check->severity)},
                      {"status", doctor::OutcomeName(r.finding.outcome)},
                      {"value", r.finding.value},
                      {"fix", r.fix()}});
  std::cout << nlohmann::json{{"root", root}, {"exit", code}, {"checks", checks}}.dump() << "\n";
}

void PrintText(const std::vector<doctor::CheckResult>& results, int code) {
  int blocking = 0, warnings = 0;
  for (const auto& r : results) {
    std::printf("%-5s  %-19s %s\n", Label(r), r.check->id, r.finding.value.c_str());
    if (r.finding.outcome != doctor::Outcome::kFail) continue;
    std::printf("       %-19s fix: %s\n", "", r.fix().c_str());
    ++(r.check->severity == doctor::Severity::kBlocking ? blocking : warnings);
  }
  std::printf("%d blocking, %d warning%s: exit %d\n", blocking, warnings, warnings == 1 ? "" : "s",
              code);
}

int RunDoctor(const DoctorArgs& a) {
  doctor::DoctorInput in;
  if (Status s = ToInput(a, &in); !s.ok()) return Fail(s.message(), kExitUsage);
  auto facts = doctor::GatherFacts(in);
  if (!facts.ok()) return Fail(facts.status().message(), kExitUsage);
  auto results = doctor::RunChecks(in, *facts);
  int code = doctor::ExitCode(results);
  if (a.json)
    PrintJson(in.cache.root, results, code);
  else
    PrintText(results, code);
  return code;
}

}  // namespace

void AddDoctor(CLI::App& app, RunState* st) {
  auto* c = app.add_subcommand("doctor",
                               "Check that this node can hold the cache well, and say what to fix");
  auto a = std::make_shared<DoctorArgs>();
  a->cache.Add(c, true);
  c->add_option("--workers", a->workers,
                "DataLoader worker processes per job, for the /dev/shm check (default 8)")
      ->check(CLI::Range(1, 4096));
  c->add_option("--prefetch", a->prefetch,
                "Batches in flight per worker (prefetch_factor), for /dev/shm and memlock "
                "(default 2)")
      ->check(CLI::Range(1, 1024));
  c->add_option("--batch-bytes", a->batch_bytes,
                "Bytes of one collated batch, for /dev/shm and memlock (default 64M)");
  c->add_option("--sysroot", a->sysroot,
                "Read proc/self/mountinfo, proc/self/limits, sys/ and dev/shm under DIR instead "
                "of / (a copy from another node, or test fixtures; default /)");
  c->add_flag("--json", a->json,
              "Print {root, exit, checks: [{id, severity, status, value, fix}]}");
  c->callback([st, a] { st->rc = RunDoctor(*a); });
}

}  // namespace ssdfeed::cli
