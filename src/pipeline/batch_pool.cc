#include "pipeline/batch_pool.h"

namespace ssdfeed {

std::shared_ptr<BatchBuffer> BatchPool::Acquire(size_t image_bytes, size_t n) {
  std::unique_ptr<BatchBuffer> b;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!free_.empty()) {
      b = std::move(free_.back());
      free_.pop_back();
    } else {
      b = std::make_unique<BatchBuffer>();
    }
  }
  b->images.resize(image_bytes);  // no-op once sized: memory stays touched
  b->labels.resize(n);
  std::weak_ptr<BatchPool> pool = weak_from_this();
  return std::shared_ptr<BatchBuffer>(b.release(), [pool](BatchBuffer* p) {
    if (auto sp = pool.lock()) {
      sp->Return(p);
    } else {
      delete p;
    }
  });
}

void BatchPool::Return(BatchBuffer* b) {
  std::lock_guard<std::mutex> l(mu_);
  free_.emplace_back(b);
}

}  // namespace ssdfeed
