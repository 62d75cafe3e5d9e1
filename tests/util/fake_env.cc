#include "util/fake_env.h"

#include "util/string_file.h"

namespace ssdfeed {

void CaptureLogger::Log(Level, const std::string& msg) {
  std::lock_guard<std::mutex> l(mu_);
  lines_.push_back(msg);
}

std::vector<std::string> CaptureLogger::lines() const {
  std::lock_guard<std::mutex> l(mu_);
  return lines_;
}

bool CaptureLogger::Has(const std::string& what) const {
  for (const auto& line : lines())
    if (line.find(what) != std::string::npos) return true;
  return false;
}

std::optional<std::string> SurroundingsEnv::GetEnvVar(const std::string& name) {
  auto it = vars_.find(name);
  if (it == vars_.end()) return std::nullopt;
  return it->second;
}

Result<std::unique_ptr<RandomAccessFile>> SurroundingsEnv::NewRandomAccessFile(
    const std::string& path, const RandomAccessFileOptions& opts) {
  if (auto it = files_.find(path); it != files_.end()) return NewStringFile(it->second, path);
  if (path.rfind("/proc/", 0) == 0 || path.rfind("/sys/", 0) == 0)
    return Status::NotFound(path + ": not set in this test's surroundings");
  return EnvWrapper::NewRandomAccessFile(path, opts);
}

}  // namespace ssdfeed
