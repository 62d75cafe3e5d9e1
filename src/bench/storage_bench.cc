// O_DIRECT random and sequential reads at several queue depths, through
// io_uring (liburing) or, where io_uring is unavailable, a thread pool.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "bench/bench.h"

#ifdef SSDFEED_HAVE_URING
#include <liburing.h>
#endif

namespace ssdfeed {

namespace {

constexpr size_t kAlign = 4096;

double NowUs() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

struct AlignedBuf {
  void* p = nullptr;
  explicit AlignedBuf(size_t n) {
    if (posix_memalign(&p, kAlign, n) != 0) p = nullptr;
  }
  ~AlignedBuf() { std::free(p); }
};

Status MakeTestFile(const std::string& path, uint64_t bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(errno, "create " + path);
  AlignedBuf buf(1 << 20);
  std::mt19937_64 rng(1);
  auto* w = static_cast<uint64_t*>(buf.p);
  for (size_t i = 0; i < (1 << 20) / 8; ++i) w[i] = rng();  // incompressible
  Status s;
  for (uint64_t done = 0; done < bytes && s.ok(); done += 1 << 20) {
    w[0] = done;
    if (::write(fd, buf.p, 1 << 20) != (1 << 20)) s = Status::FromErrno(errno, "write " + path);
  }
  if (s.ok() && ::fdatasync(fd) != 0) s = Status::FromErrno(errno, "fdatasync " + path);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  return s;
}

// Offsets for a pattern: random aligned blocks, or sequential.
struct OffsetGen {
  bool seq;
  uint32_t block;
  uint64_t span;
  std::mt19937_64 rng{42};
  uint64_t next_seq = 0;
  uint64_t Next() {
    if (seq) {
      uint64_t o = next_seq;
      next_seq = (next_seq + block) % (span / block * block);
      return o;
    }
    return rng() % (span / kAlign - block / kAlign) * kAlign;
  }
};

StorageRow Finish(const char* pattern, uint32_t block, int qd, std::vector<double>& lat,
                  double seconds) {
  StorageRow r{pattern, block, qd};
  if (lat.empty()) return r;
  std::sort(lat.begin(), lat.end());
  r.iops = lat.size() / seconds;
  r.mb_s = r.iops * block / 1e6;
  r.p50_us = lat[lat.size() / 2];
  r.p99_us = lat[std::min(lat.size() - 1, lat.size() * 99 / 100)];
  return r;
}

StorageRow RunThreads(int fd, const char* pattern, bool seq, uint32_t block, int qd, uint64_t span,
                      double seconds) {
  std::vector<std::vector<double>> lats(qd);
  std::atomic<uint64_t> seq_next{0};
  double end = NowUs() + seconds * 1e6;
  std::vector<std::thread> ts;
  for (int t = 0; t < qd; ++t) {
    ts.emplace_back([&, t] {
      AlignedBuf buf(block);
      OffsetGen gen{seq, block, span};
      gen.rng.seed(1000 + t);
      while (NowUs() < end) {
        uint64_t off = seq ? seq_next.fetch_add(block) % (span / block * block) : gen.Next();
        double t0 = NowUs();
        if (::pread(fd, buf.p, block, static_cast<off_t>(off)) <= 0) break;
        lats[t].push_back(NowUs() - t0);
      }
    });
  }
  for (auto& t : ts) t.join();
  std::vector<double> all;
  for (auto& l : lats) all.insert(all.end(), l.begin(), l.end());
  return Finish(pattern, block, qd, all, seconds);
}

#ifdef SSDFEED_HAVE_URING
bool UringAvailable() {
  io_uring ring;
  if (io_uring_queue_init(4, &ring, 0) != 0) return false;
  io_uring_queue_exit(&ring);
  return true;
}

StorageRow RunUring(int fd, const char* pattern, bool seq, uint32_t block, int qd, uint64_t span,
                    double seconds) {
  io_uring ring;
  io_uring_queue_init(static_cast<unsigned>(qd), &ring, 0);
  std::vector<AlignedBuf> bufs;
  bufs.reserve(qd);
  for (int i = 0; i < qd; ++i) bufs.emplace_back(block);
  std::vector<double> started(qd), lat;
  OffsetGen gen{seq, block, span};
  auto submit = [&](int slot) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_read(sqe, fd, bufs[slot].p, block, gen.Next());
    io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(slot));
    started[slot] = NowUs();
  };
  double end = NowUs() + seconds * 1e6;
  for (int i = 0; i < qd; ++i) submit(i);
  io_uring_submit(&ring);
  int inflight = qd;
  while (inflight > 0) {
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring, &cqe) != 0) break;
    int slot = static_cast<int>(io_uring_cqe_get_data64(cqe));
    bool ok = cqe->res > 0;
    io_uring_cqe_seen(&ring, cqe);
    double now = NowUs();
    if (ok) lat.push_back(now - started[slot]);
    if (ok && now < end) {
      submit(slot);
      io_uring_submit(&ring);
    } else {
      --inflight;
    }
  }
  io_uring_queue_exit(&ring);
  return Finish(pattern, block, qd, lat, seconds);
}
#endif

}  // namespace

Result<StorageResult> BenchStorage(const std::string& dir, const StorageBenchOptions& o) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::InvalidArgument(dir + ": not a directory");
  std::string path = dir + "/.ssdfeed-bench-" + std::to_string(::getpid()) + ".dat";
  uint64_t bytes = std::max<uint64_t>(o.file_bytes / (1 << 20), 8) << 20;
  Status s = MakeTestFile(path, bytes);
  if (!s.ok()) {
    ::unlink(path.c_str());
    return s;
  }
  StorageResult res;
  res.path = dir;
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) {  // tmpfs and some network filesystems refuse O_DIRECT
    res.direct = false;
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (fd < 0) {
    s = Status::FromErrno(errno, "open " + path);
    ::unlink(path.c_str());
    return s;
  }
  bool uring = false;
#ifdef SSDFEED_HAVE_URING
  uring = !o.force_threads && UringAvailable();
#endif
  res.engine = uring ? "io_uring" : "threads";
  auto run = [&](const char* pattern, bool seq, uint32_t block, int qd) {
    if (!res.direct) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
#ifdef SSDFEED_HAVE_URING
    if (uring) return RunUring(fd, pattern, seq, block, qd, bytes, o.seconds_per_row);
#endif
    return RunThreads(fd, pattern, seq, block, qd, bytes, o.seconds_per_row);
  };
  for (uint32_t block : o.block_sizes)
    for (int qd : o.queue_depths) res.rows.push_back(run("randread", false, block, qd));
  res.rows.push_back(run("seqread", true, 1 << 20, 1));
  res.rows.push_back(run("seqread", true, 1 << 20, 8));
  ::close(fd);
  ::unlink(path.c_str());
  return res;
}

}  // namespace ssdfeed
