// Settings files (see settings_file.hpp).
#include "io/settings_file.hpp"
