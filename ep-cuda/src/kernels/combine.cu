// The combine program: its parts, in the order each uses what the ones before it define
// (combine/send.cu says what each holds).
#include "combine/send.cu"
#include "combine/reduce.cu"
#include "combine/marked.cu"
#include "combine/unreduced.cu"
#include "combine/single.cu"
