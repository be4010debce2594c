// What every program is compiled after (kernels.rs, `source`): the shared headers by concern and
// the kernels' parameter structs, in this order. Each kernel file also includes the ones it uses
// itself; kernels.rs includes each file once, where it is first named.
#include "common/types.cuh"
#include "common/numerics.cuh"
#include "common/formats.cuh"
#include "common/ordering.cuh"
#include "common/protocol.cuh"
#include "common/trace.cuh"
#include "params.cuh"
