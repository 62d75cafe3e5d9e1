#include "util/sigbus_guard.h"

#include <signal.h>
#include <sys/mman.h>

#include <mutex>

namespace ssdfeed {

namespace {

constexpr size_t kMaxGuarded = 256;
SigbusGuard g_guards[kMaxGuarded];
struct sigaction g_prev_sigbus;
std::mutex g_guard_mu;  // registration and installation, never the handler

void OnSigbus(int sig, siginfo_t* info, void* ctx) {
  // si_code > 0: a fault (a kill(2) carries no address).
  if (info->si_code > 0 && SigbusGuard::RecoverFault(reinterpret_cast<uintptr_t>(info->si_addr)))
    return;
  const struct sigaction& prev = g_prev_sigbus;
  if (prev.sa_flags & SA_SIGINFO) return prev.sa_sigaction(sig, info, ctx);
  if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) return prev.sa_handler(sig);
  // The default: pending again once this handler returns, and it kills.
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

// Once per process. Never again after a handler installed later replaced
// ours: that one may chain to ours, and reinstalling ours over it would
// make a cycle. (Such a handler sees a guarded SIGBUS first; if it chains,
// ours still recovers; if not, the process dies as it would have.)
void InstallSigbusHandler() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  struct sigaction sa = {};
  sa.sa_sigaction = OnSigbus;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, nullptr, &g_prev_sigbus);  // set before ours can run
  ::sigaction(SIGBUS, &sa, nullptr);
}

}  // namespace

bool SigbusGuard::RecoverFault(uintptr_t addr) {
  for (SigbusGuard& g : g_guards) {
    uintptr_t start = g.start_.load(std::memory_order_acquire);
    size_t len = g.len_.load(std::memory_order_acquire);
    if (start == 0 || addr - start >= len) continue;
    void* p = ::mmap(reinterpret_cast<void*>(start), len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p != MAP_FAILED) {
      g.lost_.store(true, std::memory_order_release);
      return true;
    }
  }
  return false;
}

SigbusGuard* SigbusGuard::Acquire(uint8_t* start, size_t len) {
  std::lock_guard<std::mutex> l(g_guard_mu);
  InstallSigbusHandler();
  for (SigbusGuard& g : g_guards) {
    if (g.start_.load(std::memory_order_relaxed) != 0) continue;
    g.lost_.store(false, std::memory_order_relaxed);
    g.len_.store(len, std::memory_order_release);
    g.start_.store(reinterpret_cast<uintptr_t>(start), std::memory_order_release);
    return &g;
  }
  return nullptr;
}

void SigbusGuard::Release(SigbusGuard* g) {
  if (g == nullptr) return;
  std::lock_guard<std::mutex> l(g_guard_mu);
  g->start_.store(0, std::memory_order_release);
  g->len_.store(0, std::memory_order_release);
}

}  // namespace ssdfeed
