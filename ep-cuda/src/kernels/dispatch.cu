// The dispatch program: its parts, one file a step, in the order each uses what the ones before it
// define (dispatch/wire.cu says what each holds).
#include "dispatch/wire.cu"
#include "dispatch/ids.cu"
#include "dispatch/assign.cu"
#include "dispatch/route.cu"
#include "dispatch/layout.cu"
#include "dispatch/send.cu"
#include "dispatch/copy_out.cu"
#include "dispatch/single.cu"
