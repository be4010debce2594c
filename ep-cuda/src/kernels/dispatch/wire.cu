// Dispatch: each rank's tokens to the ranks that hold their experts, laid out per expert.
//
// The dispatch program (kernels/dispatch.cu) includes this folder's files in this order, each
// including what it uses of the ones before it: wire.cu (the launch order, the wire layout, the
// landed marks), assign.cu (slots and counts), route.cu (a token's route and send), layout.cu (the
// receiver's counts and groups), send.cu (the multi-kernel send), copy_out.cu (messages into rows)
// and single.cu (the whole phase in one launch at decode sizes).
//
// Launch order on the rank's stream: ep_assign_slots (ep_assign_chunks from 4096 tokens:
// comm/path.rs, chunked_assign) -> ep_dispatch_send (which also signals, from its last block,
// inside one node) or, between nodes, ep_assign_slots -> ep_dispatch_send -> ep_dispatch_put ->
// ep_dispatch_signal; then ep_dispatch_wait -> ep_dispatch_copy_out, again
// while the wait's slice runs out before the counts are all there. A prefill round inside one node
// overlaps (below): ep_assign_slots (publishes the counts) -> ep_dispatch_send (marks each message
// landed), with ep_dispatch_wait -> ep_dispatch_copy_messages on a second stream beside the send,
// then ep_dispatch_copy_out for the padding and shared-expert rows. In such a round the send
// blocks that run once the wait has laid out the groups write the rank's own rows themselves
// (ep_place_own_rows; FP8 by default, comm/dispatch.rs).
// Stream order makes every message store complete before the signal kernel's release stores.

#include "common/types.cuh"
#include "common/numerics.cuh"

__device__ __forceinline__ bool ep_routes_to(int skip_a2a, int src, int e, int n_local) {
    return !skip_a2a || e / n_local == src;
}

// The wire layout departs from the contract's buffer section in one way, to move a token's
// payload once per destination rank instead of once per expert (a quarter of the bytes with two
// ranks and top-8 of 256): a receive buffer holds each sender's messages [n_ranks, max_tokens,
// msg] in the sender's token order, each message carries its row slots (MsgLayout), and the
// sender's count words carry how many messages it sent (ep_publish_counts). Slots, counts,
// signals, waits and outputs are the contract's.

// Message `pos` from rank `src` in a dispatch receive buffer [n_ranks, max_tokens, msg].
__device__ __forceinline__ u64 ep_recv_offset(int src, int max_tokens, u64 pos, int msg_bytes) {
    return ((u64)src * max_tokens + pos) * msg_bytes;
}

// Prefill rounds overlap the copy-out with the transfer (comm/path.rs: `overlap_dispatch`). Such a sender
// publishes its counts from ep_assign_slots, before any payload, with EP_NMSG_EARLY set in its
// message count, and marks each message landed once the message's stores are visible: its
// block's fence, then the round's number (`seq`, the same on every rank) in the message's header,
// in the 12 bytes the source token's 16 leave free. A receiver waits for that mark before it
// reads a message from a sender whose message count carries the bit; every other sender
// published its counts after its last store. (The word's flags: common/protocol.cuh.)
__device__ __forceinline__ u32* ep_landed_flag(u8* msg, MsgLayout m) { return (u32*)(msg + m.src_off + 8); }

// The mark of a message whose rows its sender wrote itself (the rank's own message in an
// overlapped round whose layout was known by the time the message was encoded: ep_place_own_rows);
// the copy-out skips it. Round numbers stay below it (comm/dispatch.rs).
#define EP_LANDED_PLACED 0x80000000u

