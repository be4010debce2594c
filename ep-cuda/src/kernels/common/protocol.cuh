// The wait protocol: the status codes a wait leaves for the host, combine rows in LL form, the
// message-count words' flags, and the polling, checking and reset of the counts.

#include "common/types.cuh"
#include "common/ordering.cuh"

// Status codes a wait kernel leaves for the host: EP_OK, EP_PENDING (a slice ran out with counts
// missing), EP_COUNT_OVERFLOW, EP_COUNT_MISMATCH, EP_MESSAGES_PENDING (the counts were there, a
// message was not when the slice ran out); defined with the host's copy (kernels/constants.rs).

// The start of a kernel launched chained after a wait kernel (comm/combine.rs): once that kernel
// has completed, whether its wait did (the status word). The host issues such kernels with the
// wait, before it knows; they return at once when it did not.
__device__ __forceinline__ bool ep_wait_completed(const u32* status) {
    ep_await_prior_grid();
    return status[0] == EP_OK;
}

// ---- combine rows in LL form (decode sizes) ---------------------------------------------------
//
// A rank with at most EP_LL_MAX_TOKENS tokens inside one node (the host decides: comm/path.rs,
// `ll_combine`) takes its combine rows in LL form, after NCCL's low-latency protocol: every 8-byte word holds 4 bytes of the row (low
// half) and the combine's number (high half), so a piece of a row is there once its words carry
// this combine's number. The sender needs no fence behind its stores and its counts need not
// vouch for them: the fence, the ticket and the publish after them are a chain of round trips,
// much of a 1-token combine (9341b99). Twice the bytes on the wire, so only at sizes where latency, not
// bandwidth, is the cost. The rank says so in its dispatch message count (EP_NMSG_LL, from the
// host's `ll` through ep_publish_counts), which every sender reads before it sends a row back. A rank's LL rows:
// [min(max_tokens, EP_LL_MAX_TOKENS), top_k] rows of hidden / 4 lines of 16 bytes, each line
// two words.
#ifndef EP_LL_MAX_TOKENS
#define EP_LL_MAX_TOKENS 0
#endif

// A dispatch message count word (a sender's, at each receiver): the count, and three flags.
// EARLY: the sender published its counts before its payload (dispatch/wire.cu). LL: the sender, as the
// combine's receiver, takes its rows in LL form. MARKED: the sender, as the combine's receiver,
// reduces its rows as they land (prefill sizes, comm/path.rs): each row is
// marked with the combine's number after a fence (ep_send_row), and its counts come first.
#define EP_NMSG_EARLY 0x80000000u
#define EP_NMSG_LL 0x40000000u
#define EP_NMSG_MARKED 0x20000000u
#define EP_NMSG_FLAGS (EP_NMSG_EARLY | EP_NMSG_LL | EP_NMSG_MARKED)

// A receiver's combine rows are marked (LL rows need no marks: they carry the number).
__device__ __forceinline__ bool ep_rows_marked(u32 nm) { return (nm & EP_NMSG_MARKED) && !(nm & EP_NMSG_LL); }

// A receiver's combine counts go out before its rows, with plain stores: its rows vouch for
// themselves (LL) or are marked one by one.
__device__ __forceinline__ bool ep_counts_early(u32 nm) { return (nm & (EP_NMSG_LL | EP_NMSG_MARKED)) != 0; }

// A message (or an LL row) that did not come within a slice: EP_MESSAGES_PENDING, unless a count
// poll already failed (its code stays, EP_PENDING or a count error).
__device__ __forceinline__ void ep_messages_pending(u32* status) {
    atomicCAS(status, (u32)EP_OK, (u32)EP_MESSAGES_PENDING);
}

// A combine row from expert `id` (an LL row, or a marked row's mark) that did not come within a
// slice: flagged at status[1 + g * n_ranks + s] for expert s * n_local + g, as a missing count
// is, so that the deadline names its rank, and EP_MESSAGES_PENDING.
__device__ __forceinline__ void ep_row_missing(u32* status, int id, int n_local, int n_ranks) {
    status[1 + (id % n_local) * n_ranks + id / n_local] = 1;
    ep_messages_pending(status);
}

// How many of rank s's dispatch messages this rank received, from s's message count word `nm`:
// none from another rank with skip_a2a; never more than its buffer holds.
__device__ __forceinline__ u32 ep_messages_from(u32 nm, int s, int rank, int skip_a2a, int max_tokens) {
    return skip_a2a && s != rank ? 0 : min(nm & ~EP_NMSG_FLAGS, (u32)max_tokens);
}

// Each 8-byte word is single-copy atomic (the PTX memory model treats a vector access as its
// elements), so a word that carries `seq` carries this combine's 4 bytes. Piece i of a row of n16
// pieces: its first 8 bytes in line i, its last 8 in line n16 + i, so that a warp's accesses to
// consecutive pieces are contiguous (a piece's two lines side by side made every store
// instruction a half-written sector each 32 bytes, which doubled the traffic). Volatile:
// the words are polled across the GPUs.
__device__ __forceinline__ void ep_ll_store(ulonglong2* row, u64 i, u64 n16, uint4 v, u32 seq) {
    u64 f = (u64)seq << 32;
    asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(row + i), "l"(v.x | f), "l"(v.y | f) : "memory");
    asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(row + n16 + i), "l"(v.z | f), "l"(v.w | f)
                 : "memory");
}

// Loads piece i; true when all four words carry `seq`.
__device__ __forceinline__ bool ep_ll_load(const ulonglong2* row, u64 i, u64 n16, u32 seq, uint4& v) {
    u64 a, b, c, d;
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(row + i));
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(c), "=l"(d) : "l"(row + n16 + i));
    v = make_uint4((u32)a, (u32)b, (u32)c, (u32)d);
    return (u32)(a >> 32) == seq && (u32)(b >> 32) == seq && (u32)(c >> 32) == seq && (u32)(d >> 32) == seq;
}

// What a reader of LL rows needs: the rank's LL rows, this combine's number, the slice's end, and
// where to say that a row did not come (ep_row_missing).
struct EpLlWait {
    const ulonglong2* rows;
    u32 seq;
    u64 deadline;
    u32* status;
    int n_local, n_ranks;
};

// Piece i of a row from expert `id`: polled until it carries the combine's number or the slice
// ends (every later poll of the launch then gives up at once). Returns whether it came.
__device__ __forceinline__ bool ep_ll_wait(const ulonglong2* row, u64 i, u64 n16, int id, const EpLlWait& ll,
                                           uint4& v) {
    while (!ep_ll_load(row, i, n16, ll.seq, v)) {
        if (ep_globaltimer() > ll.deadline) {
            ep_row_missing(ll.status, id, ll.n_local, ll.n_ranks);
            return false;
        }
    }
    return true;
}

// Whether count i ((local expert, rank) order, n_ranks per expert) is awaited: with skip_a2a
// only this rank's own.
__device__ __forceinline__ bool ep_awaited(int i, int n_ranks, int rank, int skip_a2a) {
    return !skip_a2a || (i % n_ranks) == rank;
}

// Count i, polled (acquire, system scope) until it is not the sentinel, or until `slice_ns` from
// `t0` have passed: then `late` is set and the sentinel returned.
__device__ __forceinline__ u64 ep_poll_count(const u64* counts, int i, u64 t0, u64 slice_ns, bool& late) {
    u64 v = ep_load_acquire(counts + i);
    while (v == EP_SENTINEL) {
        if (ep_globaltimer() - t0 > slice_ns) { late = true; break; }
        __nanosleep(64);
        v = ep_load_acquire(counts + i);
    }
    return v;
}

// A dispatch count word as it came (ep_publish_counts): its high half is the sender's message
// count word, kept in nmsg[s] from each sender s's first local expert's word (i = s); returns the
// count.
__device__ __forceinline__ u64 ep_unpack_count(u64 v, int i, int n_ranks, u32* nmsg) {
    if (i < n_ranks) nmsg[i] = (u32)(v >> 32);
    return v & 0xFFFFFFFFull;
}

// Polls (acquire, system scope) until no awaited count is the sentinel, or `slice_ns` passes:
// count i into got[i] (0 when not awaited), and with `missing`, missing[i] = 1 for a count that
// had not arrived. Each awaited count is judged by `check(i, v, e)` (EP_OK or an error code) as
// it comes, `e` being what `check.expect(i)` loaded before the poll (the combine's rows sent:
// loaded after every count was there, it would add a round trip after the poll's; 62b523e).
// Returns EP_OK, EP_PENDING (the slice ran out) or a check's code,
// the same in every thread; every thread calls it.
// With `nmsg` the counts are a dispatch's (ep_unpack_count).
template <typename Check>
__device__ u32 ep_poll_counts(const u64* counts, int n, int rank, int n_ranks, int skip_a2a, u64 slice_ns, u64* got,
                              u32* missing, Check check, u32* nmsg = nullptr) {
    __shared__ u32 outcome, bad;
    if (threadIdx.x == 0) {
        outcome = EP_OK;
        bad = EP_OK;
    }
    __syncthreads();
    u64 start = ep_globaltimer();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        bool late = false;
        u64 v = 0;
        if (ep_awaited(i, n_ranks, rank, skip_a2a)) {
            u64 e = check.expect(i);
            v = ep_poll_count(counts, i, start, slice_ns, late);
            if (late) {
                outcome = EP_PENDING;
            } else {
                if (nmsg) v = ep_unpack_count(v, i, n_ranks, nmsg);
                u32 code = check(i, v, e);
                if (code != EP_OK) bad = code;
            }
        }
        got[i] = v;
        if (missing) missing[i] = late;
    }
    __syncthreads();
    return outcome != EP_OK ? outcome : bad;
}

// The awaited counts back to the sentinel, for the next round.
__device__ void ep_reset_counts(u64* counts, int n, int rank, int n_ranks, int skip_a2a) {
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        if (ep_awaited(i, n_ranks, rank, skip_a2a)) *((volatile u64*)(counts + i)) = EP_SENTINEL;
}

// Whether an earlier wait of the rank failed (ran out, or met a count that failed its check) and
// left its outcome in status[0]: with stream-ordered waits (comm/wait.rs) nothing relaunches a
// wait, so the rank's later waits give up at once and leave that outcome for the host to read,
// and a round whose peer never signals ends within one deadline, not one per wait. The host resets
// the word before it launches a wait again (comm/wait.rs, `clean_status`).
__device__ __forceinline__ bool ep_failed_before(const u32* status) {
    return *(volatile const u32*)status != EP_OK;
}

// A wait's slice, or none after an earlier failure (ep_failed_before).
__device__ __forceinline__ u64 ep_slice(u64 slice_ns, const u32* status) {
    return ep_failed_before(status) ? 0 : slice_ns;
}

// The rank's round words (comm/mod.rs, `RankBuffers::rounds`): [0] the number of the rank's next
// dispatch, [1] of its combine. They live on the device so that a captured round replays with the
// next numbers: a phase's first kernel advances the other phase's word (block 0, thread 0, after
// the prior grid), which no kernel of its own phase reads, and every kernel reads its own phase's
// word. Every rank makes the same calls, so the numbers agree. A dispatch's run 1 .. 2^31 - 1 and
// round again (clear of EP_LANDED_PLACED and of 0, which flags start at); a combine's skip 0 (LL
// rows start at 0).
__device__ __forceinline__ void ep_advance_dispatch_round(u32* word) {
    if (word && blockIdx.x == 0 && threadIdx.x == 0) *word = *word % 0x7fffffffu + 1;
}
__device__ __forceinline__ void ep_advance_combine_round(u32* word) {
    if (word && blockIdx.x == 0 && threadIdx.x == 0) *word = *word + 1 == 0 ? 1 : *word + 1;
}

// The wait kernels' wait, one block: ep_poll_counts into `snapshot`, with the not-arrived flags
// in status[1 ..] and the outcome in status[0]; once every count is there and passed its check,
// they are reset. A count that failed its check stays: it may be a peer's poison (ep-core's
// `poison`: the peer rejected its input), which the host reads from the counts, and the wait is
// taken up again once the peer publishes its real count over it.
//
// A slice is short (comm/wait.rs: WAIT_SLICE): when it runs out the host launches the wait again until
// the round's deadline. A kernel that spun for the whole deadline could hold up the very rank it
// waits for: ranks sharing a GPU share its driver and hardware queues, and the driver may make a
// rank's launch or copy wait for the kernels already running (seen with 4-8 ranks a GPU: a
// rank's signals released only when a peer's wait timed out; 9a7465d).
template <typename Check>
__device__ bool ep_wait_counts(u64* counts, int n, int rank, int n_ranks, int skip_a2a, u64 slice_ns, u32* status,
                               u64* snapshot, Check check) {
    if (ep_failed_before(status)) return false; // (ep_failed_before: its outcome stays)
    u32 outcome = ep_poll_counts(counts, n, rank, n_ranks, skip_a2a, slice_ns, snapshot, status + 1, check);
    if (outcome == EP_OK) ep_reset_counts(counts, n, rank, n_ranks, skip_a2a);
    if (threadIdx.x == 0) status[0] = outcome;
    return outcome == EP_OK;
}

__device__ __forceinline__ void ep_red_release_gpu(u32* p, u32 v) {
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void ep_red_relaxed_gpu(u32* p, u32 v) {
    asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void ep_store_release_gpu(u32* p, u32 v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ u32 ep_load_acquire_gpu(const u32* p) {
    u32 v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// The end of a single-launch phase's wait (ep_dispatch_single, ep_combine_single), where every
// block polls the same counts and one block (the resetter) resets them for the next round, off
// the others' path. Each block, right after its poll, stores an outcome that is not EP_OK and
// reports that it has read the counts: a reduction on `ticket` (the phase's second ticket word)
// that the thread does not wait for (a ticket taken here put a round trip before every block's
// copy-out; cb55e0d). A failed poll's EP_PENDING or count error overwrites whatever the status holds
// (EP_PENDING makes the host launch the wait kernels, which read and reset the counts
// themselves); a message that did not land only replaces EP_OK (ep_message_landed). The status
// word is EP_OK when a round starts (every wait leaves it so, or the rank is poisoned).
// Only a failed poll's report is a release (its status store before it, for the resetter, which
// reads the status after the reports): an EP_OK report orders nothing before it. The counts' loads
// it follows have returned their values (the block passed a barrier on them), so no reset can
// reach them; the release's fence (MEMBAR.GPU and an error barrier, waiting for every memory
// operation of the thread) was on every block's path between the counts and the layout.
__device__ void ep_counts_read(u32 outcome, u32* ticket, u32* status) {
    if (threadIdx.x == 0) {
        if (outcome != EP_OK) {
            atomicExch(status, outcome);
            ep_red_release_gpu(ticket, 1);
        } else {
            ep_red_relaxed_gpu(ticket, 1);
        }
    }
}

// The resetter, once its own work is done (every path through the kernel must get here): waits
// for the reports of `blocks` blocks (all resident, each reported right after a poll with a
// deadline, so the wait ends), sets the ticket back to 0 and resets the counts unless a poll
// failed. Returns with a barrier passed.
__device__ void ep_reset_counts_when_read(u32* ticket, u32 blocks, u64* counts, int n, int rank, int n_ranks,
                                          int skip_a2a, u32* status) {
    __shared__ u32 st;
    __syncthreads();
    if (threadIdx.x == 0) {
        while (ep_load_acquire_gpu(ticket) != blocks) {
        }
        *ticket = 0;
        st = *(volatile const u32*)status;
    }
    __syncthreads();
    if (st == EP_OK || st == EP_MESSAGES_PENDING) ep_reset_counts(counts, n, rank, n_ranks, skip_a2a);
    __syncthreads();
}
