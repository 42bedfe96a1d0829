// A shared part that includes a family: check_layers.cmake must reject it.
#pragma once
#include "core/models/wan/dit.h"
