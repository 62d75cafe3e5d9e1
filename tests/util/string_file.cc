#include "util/string_file.h"

#include <cstring>

namespace ssdfeed {

namespace {

class StringFile final : public RandomAccessFile {
 public:
  StringFile(std::string data, std::string name) : data_(std::move(data)), name_(std::move(name)) {}
  Status Read(uint64_t off, size_t n, char* scratch, size_t* got) const override {
    *got = off >= data_.size() ? 0 : std::min<uint64_t>(n, data_.size() - off);
    if (*got) std::memcpy(scratch, data_.data() + off, *got);
    return Status::OK();
  }
  Result<uint64_t> Size() const override { return static_cast<uint64_t>(data_.size()); }
  const std::string& path() const override { return name_; }

 private:
  std::string data_, name_;
};

}  // namespace

std::unique_ptr<RandomAccessFile> NewStringFile(std::string data, std::string name) {
  return std::make_unique<StringFile>(std::move(data), std::move(name));
}

}  // namespace ssdfeed
