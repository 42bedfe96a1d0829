// A deliberate upward include (io is below offload): check_layers.cmake must reject it.
#pragma once
#include "core/error.h"
#include "core/offload/plan.h"
