#include "util/stage_clock.h"

namespace ssdfeed {

StageClock*& ThreadStageClock() {
  thread_local StageClock* clock = nullptr;
  return clock;
}

}  // namespace ssdfeed
