# Finds the libraries the ssdfeed core links and defines their imported
# targets. Used by the build and, installed next to ssdfeedConfig.cmake, by
# find_package(ssdfeed): the library is static, so its users link these too.
#
# Every library that is not found goes into SSDFEED_MISSING_PACKAGES as the
# Debian package that provides it, so the caller can name them all at once
# instead of stopping at the first bare "not found".
#
# In: SSDFEED_DEPS_WITH_URING (ON: liburing is required, OFF: not wanted,
#     unset: used when present).
# Out: PkgConfig::SSDFEED_TURBOJPEG/_SPNG/_XXHASH/_ARCHIVE/_ZSTD[/_URING],
#      PkgConfig::SSDFEED_CURL, OpenSSL::Crypto, ssdfeed::opencv, prometheus-cpp::core/pull, SSDFEED_HAVE_URING,
#      SSDFEED_MISSING_PACKAGES.

set(SSDFEED_MISSING_PACKAGES "")

find_package(Threads QUIET)
if(NOT Threads_FOUND)
  list(APPEND SSDFEED_MISSING_PACKAGES libc6-dev)
endif()

find_package(PkgConfig QUIET)
if(NOT PKG_CONFIG_FOUND)
  # Without pkg-config nothing below can be looked up; name it and the rest.
  list(APPEND SSDFEED_MISSING_PACKAGES pkg-config libturbojpeg0-dev libspng-dev libxxhash-dev
       libarchive-dev libcurl4-openssl-dev libzstd-dev)
else()
  foreach(dep "TURBOJPEG;libturbojpeg;libturbojpeg0-dev" "SPNG;spng;libspng-dev"
              "XXHASH;libxxhash;libxxhash-dev" "ARCHIVE;libarchive;libarchive-dev"
              "CURL;libcurl;libcurl4-openssl-dev" "ZSTD;libzstd;libzstd-dev")
    list(GET dep 0 var)
    list(GET dep 1 module)
    list(GET dep 2 debian)
    if(NOT TARGET PkgConfig::SSDFEED_${var})
      pkg_check_modules(SSDFEED_${var} QUIET IMPORTED_TARGET ${module})
    endif()
    if(NOT TARGET PkgConfig::SSDFEED_${var})
      list(APPEND SSDFEED_MISSING_PACKAGES ${debian})
    endif()
  endforeach()
  set(SSDFEED_HAVE_URING OFF)
  if(NOT DEFINED SSDFEED_DEPS_WITH_URING OR SSDFEED_DEPS_WITH_URING)
    if(NOT TARGET PkgConfig::SSDFEED_URING)
      pkg_check_modules(SSDFEED_URING QUIET IMPORTED_TARGET liburing)
    endif()
    if(TARGET PkgConfig::SSDFEED_URING)
      set(SSDFEED_HAVE_URING ON)
    elseif(SSDFEED_DEPS_WITH_URING)
      list(APPEND SSDFEED_MISSING_PACKAGES liburing-dev)
    endif()
  endif()
endif()

# S3 request signing (SigV4: SHA-256 and HMAC).
if(NOT TARGET OpenSSL::Crypto)
  find_package(OpenSSL QUIET)
endif()
if(NOT TARGET OpenSSL::Crypto)
  list(APPEND SSDFEED_MISSING_PACKAGES libssl-dev)
endif()

# Metrics: the exposition format and HTTP server (Debian prometheus-cpp-dev).
if(NOT TARGET prometheus-cpp::core)
  find_package(prometheus-cpp CONFIG QUIET)
endif()
if(NOT TARGET prometheus-cpp::core OR NOT TARGET prometheus-cpp::pull)
  list(APPEND SSDFEED_MISSING_PACKAGES prometheus-cpp-dev)
endif()

# Debian ships OpenCV's imgproc without a CMake package unless libopencv-dev
# (all modules) is installed; imgproc + core is all the core uses.
if(NOT TARGET ssdfeed::opencv)
  find_path(SSDFEED_OPENCV_INCLUDE_DIR opencv2/imgproc.hpp PATH_SUFFIXES opencv4)
  find_library(SSDFEED_OPENCV_CORE_LIB opencv_core)
  find_library(SSDFEED_OPENCV_IMGPROC_LIB opencv_imgproc)
  if(SSDFEED_OPENCV_INCLUDE_DIR AND SSDFEED_OPENCV_CORE_LIB AND SSDFEED_OPENCV_IMGPROC_LIB)
    add_library(ssdfeed::opencv INTERFACE IMPORTED)
    # SYSTEM: OpenCV 4.6's headers trip C++20 deprecation warnings we do not own.
    target_include_directories(ssdfeed::opencv SYSTEM INTERFACE ${SSDFEED_OPENCV_INCLUDE_DIR})
    target_link_libraries(ssdfeed::opencv
                          INTERFACE ${SSDFEED_OPENCV_IMGPROC_LIB} ${SSDFEED_OPENCV_CORE_LIB})
  else()
    list(APPEND SSDFEED_MISSING_PACKAGES libopencv-imgproc-dev)
  endif()
endif()
