// A family that includes a shared part and a lower floor: allowed.
#pragma once
#include "core/models/umt5/encoder.h"
#include "core/offload/streamer.h"
