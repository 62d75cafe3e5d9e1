// OpenCV reports a failure by throwing (cv::Exception; std::bad_alloc when
// memory runs out). Every call into it goes through CvCall, so that no
// exception leaves ssdfeed: the failure becomes a Status saying what was
// being done.
#pragma once

#include <new>
#include <opencv2/core.hpp>
#include <string>

#include "ssdfeed/status.h"

namespace ssdfeed {

// `what` (a short phrase; callers add detail with WithContext on failure,
// so that the hot path builds no string).
template <typename F>
Status CvCall(const char* what, F&& f) {
  try {
    f();
    return Status::OK();
  } catch (const cv::Exception& e) {
    return Status::InvalidArgument(std::string(what) + ": OpenCV " + e.func + ": " + e.err);
  } catch (const std::bad_alloc&) {
    return Status::IOError(std::string(what) + ": out of memory");
  }
}

}  // namespace ssdfeed
