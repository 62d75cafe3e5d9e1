// ssdfeed serve-metrics --cache DIR [--listen 127.0.0.1:9808]: one exporter
// per node for every job on a cache root. It reads the jobs' stats files at
// each scrape and never talks to (or blocks) a job.
#include <signal.h>

#include <iostream>

#include "cli/commands.h"
#include "cli/options.h"
#include "ssdfeed/metrics.h"

namespace ssdfeed::cli {

namespace {

struct ServeMetricsArgs {
  CacheArgs cache;
  std::string listen = "127.0.0.1:9808";
  bool once = false;
};

int RunServeMetrics(const ServeMetricsArgs& a) {
  CacheOptions c;
  if (Status s = a.cache.ToOptions(&c); !s.ok()) return Fail(s.message(), 2);
  auto info = Env::Default()->Stat(c.root);
  if (!info.ok() || !info->is_dir)
    return Fail(c.root + ": no cache root there (run a job or `ssdfeed warm` first)");
  if (a.once) {
    auto text = RenderRootMetrics(c);
    if (!text.ok()) return Fail(text.status().message());
    std::cout << *text;
    return 0;
  }
  // Blocked before the server's threads start, so they inherit the mask and
  // only sigwait below sees the signal.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  auto server = MetricsServer::ServeRoot(c, a.listen);
  if (!server.ok())
    return Fail(server.status().message(),
                server.status().code() == Status::Code::kInvalidArgument ? 2 : 1);
  std::string host = a.listen.substr(0, a.listen.rfind(':'));
  std::cout << "serving metrics of " << c.root << " on http://" << host << ":" << (*server)->port()
            << "/metrics" << std::endl;
  int sig = 0;
  sigwait(&set, &sig);
  return 0;
}

}  // namespace

void AddServeMetrics(CLI::App& app, RunState* st) {
  auto* c = app.add_subcommand("serve-metrics",
                               "Export Prometheus metrics of every job using a cache root");
  auto a = std::make_shared<ServeMetricsArgs>();
  a->cache.Add(c, true);
  c->add_option("--listen", a->listen,
                "HOST:PORT to serve /metrics on (default 127.0.0.1:9808; 0.0.0.0:9808 for all "
                "interfaces; port 0 picks a free one)");
  c->add_flag("--once", a->once, "Print the metrics once on stdout and exit");
  c->callback([st, a] { st->rc = RunServeMetrics(*a); });
}

}  // namespace ssdfeed::cli
