// Diagnostics compiled in on demand: causal-profiling delays (EP_DELAY_NS) and the trace stamps
// (EP_TRACE).

#include "common/types.cuh"
#include "common/ordering.cuh"

// Causal profiling (EP_CUDA_DELAY=site:ns, kernels.rs): every thread of a block spins `ns` at one
// named site of a phase's chain; how much the phase's time grows says how much slack the site has
// (none: the full delay; off the path: nothing). Sites: 1 a sending block after its route, 2 a
// sending block after its marks, 3 the counting block before it publishes, 4 a receiving block
// once it has the counts with the layout (ep_poll_layout), 5 a receiving block after the layout
// once block 0 has kept the message counts.
// The SM clock (MHz) a delay's spin and the stamps' clock readings are converted at
// (EP_CUDA_TRACE_CLOCK_MHZ, kernels.rs): an H100's and an H200's while a phase runs (c59307d).
#ifndef EP_CLOCK_MHZ
#define EP_CLOCK_MHZ 1980
#endif
#ifdef EP_DELAY_NS
#define EP_DELAY(site)                                                                    \
    do {                                                                                  \
        if (EP_DELAY_SITE == (site)) {                                                    \
            long long c0_ = clock64();                                                    \
            while (clock64() - c0_ < (long long)EP_DELAY_NS * EP_CLOCK_MHZ / 1000) {      \
            }                                                                             \
        }                                                                                 \
    } while (0)
#else
#define EP_DELAY(site) do {} while (0)
#endif

// Stamps inside the kernels, to find where a phase's time goes: compiled in only when the process
// runs with EP_CUDA_TRACE set (kernels.rs). Then block 0 and the block that published the counts
// record, every launch, the block's start (%globaltimer, ns) and each stamp; with EP_CUDA_TRACE=all
// every block does, so that scripts/trace_summary.py can find the launch's last block and what held
// it, and trace_grid.py how busy the GPU was (EP_CUDA_TRACE_RANK: one rank records). Records go
// to a buffer in device memory, which the host prints as `trace` lines after the stream syncs
// (Kernels::print_trace): printf from every block stretched a launch several times over.
#ifdef EP_TRACE
#ifndef EP_TRACE_RANK
#define EP_TRACE_RANK -1
#endif
#ifdef EP_TRACE_ALL
#define EP_TRACE_PRINTS(rank, published) (EP_TRACE_RANK < 0 || (rank) == EP_TRACE_RANK)
#else
#define EP_TRACE_PRINTS(rank, published) \
    ((EP_TRACE_RANK < 0 || (rank) == EP_TRACE_RANK) && (blockIdx.x == 0 || (published)))
#endif
// 1-15 a kernel's steps, 16-31 sub-steps inside them (the single-launch dispatch's send and copy).
// A record: the name's first 8 bytes, (rank, block), (sm, published), then the stamps, stamp 0 the
// start (absolute %globaltimer, 0: not reached); EP_N_STAMPS of them (kernels/constants.rs, which
// also gives the record's words to the host).
// Inside a kernel a stamp reads the SM's clock (clock64), turned into ns at EP_CLOCK_MHZ when the
// record is written; blocks line up by their starts, read from %globaltimer (whose step
// `ep bench --probe-signals` measures; the host prints stamps as integer differences, since an
// f64 of a %globaltimer reading has too coarse a grid: kernels.rs, trace_line).
#define EP_TRACE_WORDS (3 + EP_N_STAMPS)
#define EP_TRACE_RECORDS (1 << 17)
__device__ u64 ep_trace_records[EP_TRACE_RECORDS * EP_TRACE_WORDS];
__device__ unsigned int ep_trace_count; // records asked for, overflow included
__device__ __forceinline__ u64 ep_trace_name(const char* what) {
    u64 w = 0;
    for (int i = 0; i < 8 && what[i]; i++) w |= (u64)(u8)what[i] << (8 * i);
    return w;
}
// `clock0`: the SM clock at stamps[0], when stamps[1 ..] are SM clocks (0: they are %globaltimer).
__device__ __forceinline__ void ep_trace_record(const char* what, int rank, u32 block, int published,
                                                const u64* stamps, long long clock0 = 0) {
    u32 sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    u32 i = atomicAdd(&ep_trace_count, 1u);
    if (i >= EP_TRACE_RECORDS) return;
    u64* rec = ep_trace_records + (u64)i * EP_TRACE_WORDS;
    rec[0] = ep_trace_name(what);
    rec[1] = ((u64)(u32)rank << 32) | block;
    rec[2] = ((u64)sm << 32) | (u32)published;
    for (int k = 0; k < EP_N_STAMPS; k++)
        rec[3 + k] = k == 0 || !clock0 || !stamps[k]
                         ? stamps[k]
                         : stamps[0] + (u64)(((long long)stamps[k] - clock0) * 1000 / EP_CLOCK_MHZ);
}
__shared__ u64 ep_stamp[EP_N_STAMPS]; // at file scope: the device functions a kernel calls stamp too
__shared__ long long ep_stamp_clock;  // the SM clock at the block's start
#define EP_STAMPS                                                          \
    if (threadIdx.x < EP_N_STAMPS) ep_stamp[threadIdx.x] = 0;              \
    __syncthreads();                                                       \
    if (threadIdx.x == 0) {                                                \
        ep_stamp_clock = clock64();                                        \
        ep_stamp[0] = ep_globaltimer();                                    \
    }
#define EP_STAMP(i) do { if (threadIdx.x == 0) ep_stamp[i] = (u64)clock64(); } while (0)
// The first time only (a step inside a loop), by any one thread.
#define EP_STAMP_FIRST(i) do { if (ep_stamp[i] == 0) ep_stamp[i] = (u64)clock64(); } while (0)
#define EP_STAMPS_PRINT(what, rank, published)                                                         \
    do {                                                                                               \
        if (threadIdx.x == 0 && EP_TRACE_PRINTS(rank, published))                                     \
            ep_trace_record(what, rank, blockIdx.x, (int)(published), ep_stamp, ep_stamp_clock);      \
    } while (0)
// One unit of work inside a launch (a message a copy-out warp took), recorded as a block of its
// own named `what` with id `id`: start `t0`, stamps 1 and 2 `t1` and `t2`. Every one is recorded
// under EP_CUDA_TRACE=all, none otherwise.
#ifdef EP_TRACE_ALL
#define EP_TRACE_WORK(what, rank, id, t0, t1, t2)                                                      \
    do {                                                                                               \
        if (EP_TRACE_RANK < 0 || (rank) == EP_TRACE_RANK) {                                            \
            u64 st_[EP_N_STAMPS] = {(t0), (t1), (t2)};                                                 \
            ep_trace_record(what, rank, (u32)(id), 0, st_);                                            \
        }                                                                                              \
    } while (0)
#else
#define EP_TRACE_WORK(what, rank, id, t0, t1, t2) do {} while (0)
#endif
#else
#define EP_STAMPS
#define EP_STAMP(i) do {} while (0)
#define EP_STAMP_FIRST(i) do {} while (0)
#define EP_STAMPS_PRINT(what, rank, published) do {} while (0)
#endif
