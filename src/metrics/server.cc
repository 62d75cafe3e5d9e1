// The HTTP side: prometheus-cpp's Exposer (civetweb) serving collectables
// that read the stats files at each scrape. Nothing here talks to the jobs.
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/text_serializer.h>

#include <exception>
#include <mutex>
#include <set>

#include "metrics/families.h"

namespace ssdfeed {

namespace {

class RootCollectable final : public prometheus::Collectable {
 public:
  explicit RootCollectable(CacheOptions c) : cache_(std::move(c)) {
    if (cache_.env == nullptr) cache_.env = Env::Default();
  }
  std::vector<prometheus::MetricFamily> Collect() const override {
    metrics::Families out;
    Status s = Build(&out);
    if (!s.ok()) Warn("scrape of " + cache_.root + ": " + s.message());
    return out;
  }
  Status Build(metrics::Families* out) const {
    SSDFEED_ASSIGN_OR_RETURN(RootStats stats, CollectRootStats(cache_.env, cache_));
    for (const auto& w : stats.warnings) Warn(w);
    std::vector<std::pair<std::string, StatsSnapshot>> per_entry;
    for (const auto& [entry, e] : stats.entries) per_entry.emplace_back(entry, e.stats);
    metrics::AddStatsFamilies(per_entry, out);
    SSDFEED_ASSIGN_OR_RETURN(auto entries, Entries());
    return metrics::AddRootFamilies(cache_.env, cache_, stats, entries, out);
  }

 private:
  // Each distinct warning once: a scrape every few seconds must not flood logs.
  void Warn(const std::string& w) const {
    std::lock_guard<std::mutex> l(mu_);
    if (warned_.insert(w).second) cache_.env->Warn(w);
  }
  // Listing entries reads every index file (samples present): at most once
  // per kListSeconds, however often Prometheus scrapes.
  Result<std::vector<EntryInfo>> Entries() const {
    static constexpr int64_t kListSeconds = 10;
    std::lock_guard<std::mutex> l(list_mu_);
    int64_t now = cache_.env->MonotonicMicros();
    if (listed_at_us_ == 0 || now - listed_at_us_ > kListSeconds * 1000000) {
      SSDFEED_ASSIGN_OR_RETURN(entries_, ListEntries(cache_));
      listed_at_us_ = now;
    }
    return entries_;
  }

  CacheOptions cache_;
  mutable std::mutex list_mu_;
  mutable int64_t listed_at_us_ = 0;
  mutable std::vector<EntryInfo> entries_;
  mutable std::mutex mu_;
  mutable std::set<std::string> warned_;
};

class ProcessCollectable final : public prometheus::Collectable {
 public:
  explicit ProcessCollectable(const StatsPublisher* p) : p_(p) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    metrics::Families out;
    metrics::AddStatsFamilies({{p_->entry(), p_->Snapshot()}}, &out);
    return out;
  }

 private:
  const StatsPublisher* p_;
};

class ServerImpl final : public MetricsServer {
 public:
  ServerImpl(std::unique_ptr<prometheus::Exposer> e, std::shared_ptr<prometheus::Collectable> c)
      : exposer_(std::move(e)), collectable_(std::move(c)) {
    exposer_->RegisterCollectable(collectable_);
  }
  int port() const override {
    auto ports = exposer_->GetListeningPorts();
    return ports.empty() ? 0 : ports[0];
  }

 private:
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Collectable> collectable_;
};

Result<std::unique_ptr<MetricsServer>> Serve(const std::string& listen,
                                             std::shared_ptr<prometheus::Collectable> c) {
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == listen.size())
    return Status::InvalidArgument("--listen " + listen + ": expected HOST:PORT");
  try {
    auto e = std::make_unique<prometheus::Exposer>(listen, 2);
    return std::unique_ptr<MetricsServer>(new ServerImpl(std::move(e), std::move(c)));
  } catch (const std::exception& ex) {
    return Status::IOError("cannot listen on " + listen +
                           " (port in use, or no such address): " + ex.what());
  }
}

}  // namespace

Result<std::unique_ptr<MetricsServer>> MetricsServer::ServeRoot(const CacheOptions& cache,
                                                                const std::string& listen) {
  return Serve(listen, std::make_shared<RootCollectable>(cache));
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::ServeProcess(const StatsPublisher* stats,
                                                                   const std::string& listen) {
  return Serve(listen, std::make_shared<ProcessCollectable>(stats));
}

Result<std::string> RenderRootMetrics(const CacheOptions& cache) {
  RootCollectable c(cache);
  metrics::Families out;
  SSDFEED_RETURN_IF_ERROR(c.Build(&out));
  return prometheus::TextSerializer().Serialize(out);
}

}  // namespace ssdfeed
