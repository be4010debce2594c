// Latency probes of the protocol's signals (`ep bench --probe-signals`, probe.rs): how long a
// word one block publishes takes to be seen by blocks polling it, per flavour of publish and of
// poll and per number of pollers; and the step of %globaltimer, which the traces' stamps read.
// The decode traces showed a count's publish seen late with every block of the grid polling
// every count (6b658bb); these probes tell the publish's cost from the pollers'.

#include "common/types.cuh"
#include "common/numerics.cuh"
#include "common/formats.cuh"
#include "common/ordering.cuh"
#include "common/protocol.cuh"

// How block 0 publishes a word: EP_PROBE_PUB_* (kernels/constants.rs, probe.rs' Publish, in that
// order), each case below.

// How a poller reads it: EP_PROBE_POLL_* (kernels/constants.rs, probe.rs' Poll, in that order).
// The relaxed and volatile polls take one fence.acq_rel.sys once the word is there, which makes
// them an acquire.

__device__ __forceinline__ void ep_probe_publish(u64* p, u64 v, int publish) {
    switch (publish) {
    case EP_PROBE_PUB_FENCE: ep_publish(p, v); break;
    case EP_PROBE_PUB_RELEASE: asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory"); break;
    case EP_PROBE_PUB_RELAXED: ep_store_relaxed_sys(p, v); break;
    case EP_PROBE_PUB_SC_FENCE:
        __threadfence_system();
        ep_store_relaxed_sys(p, v);
        break;
    default:
        ep_fence_acq_rel_gpu();
        asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
    }
}

__device__ __forceinline__ u64 ep_probe_load(const u64* p, int poll) {
    u64 v;
    switch (poll) {
    case EP_PROBE_POLL_ACQUIRE: return ep_load_acquire(p);
    case EP_PROBE_POLL_RELAXED: asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory"); break;
    case EP_PROBE_POLL_VOLATILE: asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory"); break;
    default: asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    }
    return v;
}

// Polls `p` until it reaches `want` (as ep_poll_counts does: a deadline check and a nap of
// `nap_ns` between loads; 0: no nap). False when the deadline passed first.
__device__ __forceinline__ bool ep_probe_await(const u64* p, u64 want, int poll, int nap_ns, u64 deadline) {
    while (ep_probe_load(p, poll) < want) {
        if (ep_globaltimer() > deadline) return false;
        if (nap_ns > 0) __nanosleep(nap_ns);
    }
    if (poll == EP_PROBE_POLL_RELAXED || poll == EP_PROBE_POLL_VOLATILE) ep_fence_acq_rel();
    return true;
}

// Round trips of a signal. Each round r (1, 2, ...): block 0 writes `payload16` 16-byte words of
// `payload` (the row a real publish would vouch for; 0: none), then thread i < n_words publishes
// r into words[i]. Every other block polls all of them, thread i word i, and once its block has
// seen every word acks r (ep_publish into acks[block]). Block 0 waits for every block's ack (an
// acquire poll without a nap, the same in every configuration) before the next round.
// out[0]: ns from round 2's start to the end (round 1 warms up), out[1]: 1 when a poll passed
// `timeout_ns` (every block then gives up). All blocks must be resident: the grid is at most one
// block per SM. `words` and `acks` are 0 before the launch.
extern "C" __global__ void ep_probe_signal(u64* words, u64* acks, int n_words, int rounds, int publish, int poll,
                                           int nap_ns, uint4* payload, u64 payload16, u64 timeout_ns, u64* out) {
    const u64 deadline = ep_globaltimer() + timeout_ns;
    __shared__ int failed;
    if (threadIdx.x == 0) failed = 0;
    __syncthreads();
    u64 began = 0;
    for (int r = 1; r <= rounds; r++) {
        if (blockIdx.x == 0) {
            if (r == 2) began = ep_globaltimer();
            for (u64 i = threadIdx.x; i < payload16; i += blockDim.x) payload[i] = make_uint4(r, r, r, r);
            if ((int)threadIdx.x < n_words) ep_probe_publish(words + threadIdx.x, r, publish);
            for (int b = threadIdx.x + 1; b < gridDim.x; b += blockDim.x)
                if (!ep_probe_await(acks + b, r, EP_PROBE_POLL_ACQUIRE, 0, deadline)) failed = 1;
        } else {
            if ((int)threadIdx.x < n_words && !ep_probe_await(words + threadIdx.x, r, poll, nap_ns, deadline)) failed = 1;
            __syncthreads();
            if (threadIdx.x == 0) ep_publish(acks + blockIdx.x, r);
        }
        __syncthreads();
        if (failed) {
            if (threadIdx.x == 0) out[1] = 1;
            return;
        }
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = ep_globaltimer() - began;
}

// The step of %globaltimer and of the SM clock: one thread reads both for ~100 us. out[0]: the
// smallest change of %globaltimer seen (ns), out[1]: how many changes; out[2]: the smallest
// nonzero change of clock64 between two reads, out[3]: clock64's cycles over the run (the trace's
// stamps read clock64).
extern "C" __global__ void ep_probe_timer(u64* out) {
    u64 first = ep_globaltimer(), prev = first, step = ~0ull, changes = 0;
    long long c_first = clock64(), c_prev = c_first, c_step = 1ll << 62;
    while (prev - first < 100000) {
        u64 t = ep_globaltimer();
        long long c = clock64();
        if (c != c_prev) c_step = min(c_step, c - c_prev);
        c_prev = c;
        if (t != prev) {
            step = min(step, t - prev);
            changes++;
            prev = t;
        }
    }
    out[0] = step;
    out[1] = changes;
    out[2] = (u64)c_step;
    out[3] = (u64)(c_prev - c_first);
}

// What a load costs right after the block's own stores (the copy-out writes its layout and
// padding rows, then polls a message's mark). Each of `iters` rounds: every thread stores its
// share of `stores16` 16-byte words into `scratch`, the block passes a barrier, then warp 0 does
// `op` on word[lane], each load's address taken from the value the last one read (0), so the
// loads of a thread follow one another. Ops (probe.rs' LoadOp, in order): the loads of
// EP_PROBE_POLL_* (the relaxed and volatile ones without a fence), then a plain ld.global, a
// relaxed load followed by fence.acq_rel.sys, fence.acq_rel.sys alone, fence.acq_rel.gpu alone,
// and nothing (the rounds' own cost, to subtract). out[0]: ns over the rounds. `word` holds 0s.
extern "C" __global__ void ep_probe_load_after_stores(const u64* word, uint4* scratch, u64 stores16, int op, int iters, u64* out) {
    u64 off = 0, began = ep_globaltimer();
    for (int r = 0; r < iters; r++) {
        for (u64 i = threadIdx.x; i < stores16; i += blockDim.x) scratch[i] = make_uint4(r, r, r, r);
        __syncthreads();
        if (threadIdx.x < 32) {
            const u64* p = word + threadIdx.x + off;
            if (op < EP_PROBE_OP_PLAIN) off = ep_probe_load(p, op);
            else if (op == EP_PROBE_OP_PLAIN) off = *p; // the words hold 0: the next address is the same
            else if (op == EP_PROBE_OP_RELAXED_FENCE) {
                off = ep_probe_load(p, EP_PROBE_POLL_RELAXED);
                ep_fence_acq_rel();
            } else if (op == EP_PROBE_OP_FENCE_SYS) ep_fence_acq_rel();
            else if (op == EP_PROBE_OP_FENCE_GPU) ep_fence_acq_rel_gpu();
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = ep_globaltimer() - began + off;
}

// What running code for the first time costs (instruction fetch): one warp runs a straight run
// of ~4096 instructions (~64 KB of SASS: 8 independent chains of xor and rotate, so the warp
// issues about one a cycle when the code is at hand) twice in a row, timing each pass in SM
// clocks. out[0], out[1]: the first pass (the code fetched from L2 or memory) and the second
// (from the SM's instruction caches, when it fits there); out[2]: the chains' result, kept.
#define EP_PROBE_OP(r, c) asm volatile("xor.b32 %0, %0, " #c ";\n\tshf.l.wrap.b32 %0, %0, %0, 3;" : "+r"(r))
#define EP_PROBE_8(c)                                                                                     \
    EP_PROBE_OP(x0, c); EP_PROBE_OP(x1, c); EP_PROBE_OP(x2, c); EP_PROBE_OP(x3, c); EP_PROBE_OP(x4, c);  \
    EP_PROBE_OP(x5, c); EP_PROBE_OP(x6, c); EP_PROBE_OP(x7, c);
#define EP_PROBE_64(c) EP_PROBE_8(c##1) EP_PROBE_8(c##2) EP_PROBE_8(c##3) EP_PROBE_8(c##4) EP_PROBE_8(c##5) \
    EP_PROBE_8(c##6) EP_PROBE_8(c##7) EP_PROBE_8(c##8)
#define EP_PROBE_512(c) EP_PROBE_64(c##1) EP_PROBE_64(c##2) EP_PROBE_64(c##3) EP_PROBE_64(c##4) \
    EP_PROBE_64(c##5) EP_PROBE_64(c##6) EP_PROBE_64(c##7) EP_PROBE_64(c##8)
extern "C" __global__ void ep_probe_code(u64* out, u32 seed) {
    u32 x0 = seed, x1 = seed + 1, x2 = seed + 2, x3 = seed + 3, x4 = seed + 4, x5 = seed + 5, x6 = seed + 6,
        x7 = seed + 7;
    u64 t[3];
#pragma unroll 1
    for (int pass = 0; pass < 2; pass++) {
        t[pass] = clock64();
        EP_PROBE_512(1) EP_PROBE_512(2) EP_PROBE_512(3) EP_PROBE_512(4)
    }
    t[2] = clock64();
    if (threadIdx.x == 0) {
        out[0] = t[1] - t[0];
        out[1] = t[2] - t[1];
        out[2] = x0 ^ x1 ^ x2 ^ x3 ^ x4 ^ x5 ^ x6 ^ x7;
    }
}
