# Fails the build when a file in policy/ includes anything outside the allowlist:
# the C++ standard library (minus threads), SSE2's intrinsics, nlohmann/json and policy/ itself.
# Run as: cmake -DROOT=<source dir> -P policy/check_purity.cmake
set(allowed_std
  algorithm array bit bitset cctype cerrno charconv chrono cmath compare concepts cstddef
  cstdint cstdio cstdlib cstring ctime functional initializer_list iomanip iterator limits
  map memory numeric optional set span sstream stdexcept string string_view system_error
  tuple type_traits unordered_map unordered_set utility variant vector arpa/inet.h
  emmintrin.h)  # SSE2 compares: pure computation, every x86-64 has them
file(GLOB files "${ROOT}/policy/*.hpp" "${ROOT}/policy/*.cpp")
set(bad "")
foreach(f IN LISTS files)
  file(STRINGS "${f}" lines REGEX "^[ \t]*#[ \t]*include")
  foreach(line IN LISTS lines)
    if(line MATCHES "#[ \t]*include[ \t]*<([^>]+)>")
      set(h "${CMAKE_MATCH_1}")
      if(NOT h MATCHES "^nlohmann/json(_fwd)?\\.hpp$")
        list(FIND allowed_std "${h}" idx)
        if(idx EQUAL -1)
          list(APPEND bad "${f}: <${h}>")
        endif()
      endif()
    elseif(line MATCHES "#[ \t]*include[ \t]*\"([^\"]+)\"")
      if(NOT CMAKE_MATCH_1 MATCHES "^policy/[a-z_]+\\.hpp$")
        list(APPEND bad "${f}: \"${CMAKE_MATCH_1}\"")
      endif()
    endif()
  endforeach()
endforeach()
if(bad)
  list(JOIN bad "\n  " msg)
  message(FATAL_ERROR "policy/ must stay pure (no CAF, libuv, threads or I/O); "
                      "these includes are not allowed:\n  ${msg}")
endif()
