// Everything a lab's implementation needs: error checks, buffers, random fills. Gates add labkit/gate.h.
#pragma once
#include "labkit/buffer.h"
#include "labkit/check.h"
#include "labkit/not_implemented.h"
#include "labkit/random.h"
