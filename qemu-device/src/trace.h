#include "trace/trace-hw_hcasim.h"
