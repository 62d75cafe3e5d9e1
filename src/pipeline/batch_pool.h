// Batch buffers are expensive to create on these machines (first touch of a
// page costs ~15 us), so they are recycled: a buffer goes back to the pool
// when its last holder (the loader or a numpy/torch array) lets go of it.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "ssdfeed/loader.h"

namespace ssdfeed {

class BatchPool : public std::enable_shared_from_this<BatchPool> {
 public:
  static std::shared_ptr<BatchPool> Create() { return std::shared_ptr<BatchPool>(new BatchPool()); }
  // A buffer with room for image_bytes and n labels (contents unspecified).
  std::shared_ptr<BatchBuffer> Acquire(size_t image_bytes, size_t n);

 private:
  BatchPool() = default;
  void Return(BatchBuffer* b);

  std::mutex mu_;
  std::vector<std::unique_ptr<BatchBuffer>> free_;
};

}  // namespace ssdfeed
