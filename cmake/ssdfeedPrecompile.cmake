# ssdfeed_precompile(TARGET HEADER...): the header-only libraries a target's
# every file includes (CLI11, nlohmann/json, gtest) are parsed once per build
# instead of once per file. Build-time only: not installed.
#
# ccache caches compiles against a clang PCH only when the PCH leaves out the
# headers' mtimes (-fno-pch-timestamp, per ccache's manual); with GCC's it
# needs only CCACHE_SLOPPINESS=pch_defines,time_macros (the Makefile sets it).
function(ssdfeed_precompile target)
  target_precompile_headers(${target} PRIVATE ${ARGN})
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    target_compile_options(${target} PRIVATE "SHELL:-Xclang -fno-pch-timestamp")
  endif()
endfunction()
