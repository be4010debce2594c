// The types every kernel shares: the integer names (NVRTC compiles without any header: bf16
// travels as its uint16 bits), the format ids, the sentinel, the top-k bound and the wire message.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define EP_FMT_BF16 0
#define EP_FMT_FP8 1
#define EP_FMT_MXFP4 2
#define EP_FMT_NVFP4 3

#define EP_SENTINEL 0xFFFFFFFFFFFFFFFFull

// EP_MAX_TOP_K, the slots per token the kernels' arrays hold, is ep_core::config::MAX_TOP_K
// (kernels/constants.rs defines it for every program).

// A dispatch message as it travels (ep-cuda's kernels::MsgLayout on the host): ep_core's
// MessageLayout (payload, scales, source token, top-k ids), then the sender's row slot of each
// top-k slot (i32, -1 for none), so the receiver knows each row of a message without an index.
// `bytes` is the whole wire message.
struct MsgLayout {
    int payload_bytes, scales_off, scale_bytes, src_off, ids_off, slots_off, bytes, top_k;
};
