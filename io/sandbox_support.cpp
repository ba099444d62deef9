// What the running kernel offers for the OS sandbox (see sandbox_support.hpp).
#include "io/sandbox_support.hpp"
