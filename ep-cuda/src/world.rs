//! `ep_init` on GPUs: ranks placed on devices, peer access enabled between them, every rank's
//! symmetric buffers (plain device allocations) and working buffers, counts set to the sentinel.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{sys, CudaContext};
use ep_core::{ConfigError, EpConfig, EpError, MessageLayout, Result, TokenFormat};

use crate::comm::assign_chunks;
use crate::driver::cuda;
use crate::kernels::{Kernels, MsgLayout, Program};
use crate::memory::DevBuf;

/// One rank's device memory.
pub struct RankBuffers {
    // Symmetric: peers write these. Dispatch: each sender's messages [n_ranks, max_tokens, wire
    // message] (dispatch/wire.cu says why this is not the contract's per-expert message layout) and
    // the counts, each word with its sender's message count word in its high half.
    pub d_recv: DevBuf,
    pub d_counts: DevBuf,
    // How many messages each sender sent, with its flags [n_ranks] (u32): this rank's own, kept
    // by the dispatch's poll of the counts (ep_poll_counts) for the copy-out and the combine.
    pub d_nmsg: DevBuf,
    pub c_recv: DevBuf,
    pub c_counts: DevBuf,
    /// Combine rows in LL form (common/protocol.cuh), for a rank with few tokens inside one node:
    /// [min(max_tokens, LL bound), top_k, hidden] words of 4 bytes of the row and the combine's
    /// number (8 bytes each).
    pub c_ll: DevBuf,
    /// Combine marks (combine/marked.cu), for a rank that reduces its rows as they land: the
    /// combine's number per (token, slot) [max_tokens, top_k] (u32), written by the slot's sender
    /// after its row.
    pub c_marks: DevBuf,
    // Staging for puts to other nodes, and the shared expert's messages.
    pub d_staging: DevBuf,
    pub c_staging: DevBuf,
    pub shared_msgs: DevBuf,
    // Dispatch inputs and working state.
    pub tokens: DevBuf,
    pub ids: DevBuf,
    pub scales_in: DevBuf,
    pub slots: DevBuf,
    /// Each token's message slot at each destination rank [max_tokens, n_ranks], -1 if none; after
    /// `ep_assign_chunks` (dispatch/assign.cu), as `slots`, the position in the token's chunk.
    pub rank_slots: DevBuf,
    /// Each chunk's start per expert and per destination rank [chunks, n_experts + n_ranks]
    /// (u32), which `slots` and `rank_slots` are relative to after `ep_assign_chunks`.
    pub chunk_base: DevBuf,
    /// Messages sent to each rank this round, `[n_ranks]` (u32).
    pub msgs_to: DevBuf,
    pub sent: DevBuf,
    pub status: DevBuf,
    pub snapshot: DevBuf,
    /// Blocks of the send kernels that finished this launch (dispatch, combine): the last one
    /// signals. Zero between launches. The second word is the single-launch kernels' second
    /// ticket (the last block to have read the counts resets them); the dispatch's third, the round
    /// whose counts its counting block has published (its sending blocks hold their rows until
    /// then at the smallest sizes).
    pub d_ticket: DevBuf,
    pub c_ticket: DevBuf,
    // Dispatch outputs (capacity rows), kept on the device for combine and SwiGLU.
    pub row_offsets: DevBuf,
    pub src_offsets: DevBuf,
    pub recv_tokens: DevBuf,
    pub recv_scales: DevBuf,
    pub src_info: DevBuf,
    pub row_src: DevBuf,
    /// Each received message's rows by slot [n_ranks, max_tokens, top_k] (i32, -1: not here),
    /// for a combine that sends its rows back in token order.
    pub msg_rows: DevBuf,
    /// Two u32: the overlapped dispatch round whose layout `ep_dispatch_wait` has written (the
    /// send blocks that read it expand the rank's own messages themselves, ep_place_own_rows, and
    /// the copy-out's helpers start from it), then how many of the round's messages the copy-out
    /// has taken (dispatch/copy_out.cu, ep_dispatch_copy_messages).
    pub layout_seq: DevBuf,
    /// The rank's round numbers (u32): first its next dispatch's, then its combine's. On the device,
    /// so that a captured round replays with the next numbers: each phase's first kernel advances
    /// the other's (common/protocol.cuh, `ep_advance_dispatch_round`).
    pub rounds: DevBuf,
    /// A refused batch of device-memory expert ids (dispatch/ids.cu): 1, then the first bad
    /// id's token, slot and value (u32); 0 while none is unread.
    pub refused: DevBuf,
    // Combine.
    pub expert_out: DevBuf,
    pub weights: DevBuf,
    pub residual: DevBuf,
    pub out: DevBuf,
    pub fp8_payload: DevBuf,
    pub fp8_scales: DevBuf,
    pub c_snapshot: DevBuf,
    // Every rank's symmetric pointers, for the kernels.
    pub d_recv_ptrs: DevBuf,
    pub d_count_ptrs: DevBuf,
    pub c_recv_ptrs: DevBuf,
    pub c_count_ptrs: DevBuf,
    pub c_ll_ptrs: DevBuf,
    pub c_mark_ptrs: DevBuf,
}

/// A rank this process drives: its GPU, kernels and buffers.
pub struct RankState {
    /// Device ordinal of the rank's GPU.
    pub device: usize,
    /// The kernels loaded on it.
    pub kernels: Arc<Kernels>,
    pub bufs: RankBuffers,
    /// The SMs of its GPU divided among the ranks that share it, the share its grids fill (its
    /// per-token grids in waves: comm/dispatch.rs, `chain_send_threads`).
    pub sms: u32,
    /// Whether other ranks share its GPU (which gives its persistent grids a share of the SMs,
    /// and changes which phases are one launch: comm/path.rs).
    pub shares_gpu: bool,
}

/// The ranks of a world this process holds, and how it reaches the others: every rank of a
/// world made by `init` (one process), or one rank of a world made rank by rank (`init_rank`,
/// one process per GPU), whose peers' buffers inside its node are mapped through CUDA IPC and
/// whose peers on other nodes are reached through NCCL (`net`).
pub struct World {
    /// Between nodes in a world of one process per rank: the NCCL transport. First, so that it
    /// goes before the buffers its exchanges use.
    pub net: Option<crate::net::Net>,
    pub cfg: EpConfig,
    /// The dispatch message as ep-cuda's kernels send it (ep-core's message, then its row slots).
    pub msg: MsgLayout,
    /// By rank: the ranks this process drives (`None`: a rank of another process).
    ranks: Vec<Option<RankState>>,
    /// The backend's options, which every rank reads (comm/path.rs, comm/dispatch.rs, ...).
    pub options: crate::CudaOptions,
    /// Every rank's dispatch and combine count arrays as this process addresses them, where a
    /// rejected call writes its poison (0: a rank on another node, reached through `net` only).
    pub counts: Vec<[u64; 2]>,
    /// Other processes' buffers mapped here (closed when the world goes, after the ranks).
    _mapped: Vec<crate::ipc::Mapped>,
}

impl World {
    /// Rank `r`, which this process drives (every comm is made for one of its world's).
    pub fn rank(&self, r: usize) -> &RankState {
        self.ranks[r]
            .as_ref()
            .expect("a comm is made only for a rank its process drives")
    }

    /// The ranks this process drives, in rank order.
    pub fn local_ranks(&self) -> impl Iterator<Item = (usize, &RankState)> {
        self.ranks
            .iter()
            .enumerate()
            .filter_map(|(r, s)| s.as_ref().map(|s| (r, s)))
    }

    /// Whether this process drives every rank of the world (`init`).
    #[cfg(feature = "bench")]
    pub fn whole(&self) -> bool {
        self.ranks.iter().all(Option::is_some)
    }

    /// Most blocks of rank `rank`'s single-launch phase (`ep_dispatch_single`,
    /// `ep_combine_single`): every block of such a grid must be resident at once, since its
    /// blocks wait for counts that the grid's last block publishes. One 512-thread block per SM
    /// is what the kernels' launch bounds guarantee; ranks sharing a GPU leave half of their share
    /// to the others' kernels, which may need SMs before these blocks' waits can end. The
    /// overlapped dispatch's copy-out grid, whose blocks wait for the send's messages, is sized
    /// from it too.
    pub fn single_launch_blocks(&self, rank: usize) -> u32 {
        let r = self.rank(rank);
        if r.shares_gpu {
            r.sms / 2
        } else {
            r.sms
        }
    }

    /// Places `cfg.n_ranks()` ranks on the visible GPUs, `ranks_per_gpu` each (default: as few
    /// per GPU as fit), and allocates everything, as `options` ask.
    pub fn new(
        cfg: &EpConfig,
        ranks_per_gpu: Option<usize>,
        options: &crate::CudaOptions,
    ) -> Result<World> {
        options.validate()?;
        fits_kernel_sizes(cfg)?;
        let n_dev = crate::driver::device_count()?;
        crate::driver::nvrtc_present()?;
        let n = cfg.n_ranks();
        let backend = crate::CudaBackend::new().with_ranks_per_gpu_opt(ranks_per_gpu);
        let device_of = backend.placement(n, n_dev);
        let per_gpu = ranks_per_gpu.unwrap_or(n.div_ceil(n_dev)).max(1);
        if per_gpu > crate::driver::MAX_RANKS_PER_GPU {
            return Err(ConfigError::Unsupported(format!(
                "{per_gpu} ranks on one GPU; at most {} (each rank needs a hardware work queue of its own)",
                crate::driver::MAX_RANKS_PER_GPU
            ))
            .into());
        }
        let needed = device_of.last().map_or(1, |d| d + 1);
        if needed > n_dev {
            return Err(ConfigError::Unsupported(format!(
                "{n} ranks at {per_gpu} per GPU need {needed} GPUs; {n_dev} visible"
            ))
            .into());
        }

        let loaded: HashMap<usize, Arc<Kernels>> = device_of
            .iter()
            .map(|&d| Ok((d, device_kernels(d, options)?)))
            .collect::<Result<_>>()?;
        let ctxs: HashMap<usize, Arc<CudaContext>> = loaded
            .iter()
            .map(|(&d, k)| (d, Arc::clone(&k.ctx)))
            .collect();
        enable_peer_access(&ctxs)?;

        let msg = MsgLayout::from(&MessageLayout::new(cfg.format, cfg.hidden, cfg.top_k));
        let ranks = device_of
            .iter()
            .map(|d| RankBuffers::new(cfg, &msg, &ctxs[d], options.ll_max_tokens))
            .collect::<Result<Vec<_>>>()?;
        // Every rank's view of every rank's symmetric buffers.
        let tables: Vec<Vec<u64>> = (0..SYMMETRIC)
            .map(|i| ranks.iter().map(|b| b.symmetric()[i].ptr).collect())
            .collect();
        for (r, b) in ranks.iter().enumerate() {
            b.upload_tables(&tables, &ctxs[&device_of[r]])?;
        }
        // cuMemset and the table uploads are asynchronous to the host and not ordered with the
        // ranks' (non-blocking) streams: a count reset to the sentinel after a fast peer's first
        // signal would lose that signal. Nothing may start before every device is done.
        for ctx in ctxs.values() {
            ctx.synchronize().map_err(cuda)?;
        }
        let counts = (0..n).map(|r| [tables[1][r], tables[3][r]]).collect();
        let mut states = Vec::with_capacity(n);
        for (bufs, &d) in ranks.into_iter().zip(&device_of) {
            let sharing = device_of.iter().filter(|&&e| e == d).count();
            states.push(Some(RankState {
                device: d,
                kernels: Arc::clone(&loaded[&d]),
                bufs,
                sms: (sm_count(&ctxs[&d])? / sharing) as u32,
                shares_gpu: sharing > 1,
            }));
        }
        Ok(World {
            cfg: cfg.clone(),
            msg,
            options: options.clone(),
            ranks: states,
            counts,
            _mapped: Vec::new(),
            net: None,
        })
    }

    /// One rank of a world made rank by rank, each by its own process with a GPU of its own
    /// (`CudaBackend::init_rank`): the rank's GPU is the launcher's `LOCAL_RANK`-th visible one
    /// (the only one when the launcher gives each process one); the ranks check that no two
    /// share a GPU, allocate their buffers, map the buffers of the ranks of their node (CUDA IPC)
    /// and, between nodes, form an NCCL communicator (`net`).
    pub fn for_rank(
        cfg: &EpConfig,
        rv: &mut ep_core::rendezvous::Rendezvous,
        options: &crate::CudaOptions,
    ) -> Result<World> {
        let cfg = &rv.agree(cfg)?;
        options.validate()?;
        fits_kernel_sizes(cfg)?;
        let n_dev = crate::driver::device_count()?;
        crate::driver::nvrtc_present()?;
        let spec = rv.spec();
        let (rank, n) = (spec.rank, cfg.n_ranks());
        let device = match (n_dev, spec.local_rank) {
            (1, _) => 0,
            (_, l) if l < n_dev => l,
            (_, l) => {
                return Err(EpError::Launch {
                    variable: "LOCAL_RANK".into(),
                    problem: format!(
                        "{l}, but this process sees {n_dev} GPUs: give each process one \
                         (CUDA_VISIBLE_DEVICES) or at least LOCAL_WORLD_SIZE"
                    ),
                })
            }
        };
        let kernels = device_kernels(device, options)?;
        let ctx = Arc::clone(&kernels.ctx);
        let mine = [
            crate::driver::uuid(&ctx)?,
            crate::ipc::process_key().to_vec(),
        ]
        .concat();
        let sharing = placement_check(cfg, &rv.all_gather(&mine)?, rank)?;
        let msg = MsgLayout::from(&MessageLayout::new(cfg.format, cfg.hidden, cfg.top_k));
        let bufs = RankBuffers::new(cfg, &msg, &ctx, options.ll_max_tokens)?;
        // Every rank's buffers are set (counts to the sentinel) before its handles go out, so a
        // peer that has them may signal at once.
        let node = cfg.node_of(rank);
        let (mut tables, mapped) =
            crate::ipc::share(rv, &ctx, &bufs.symmetric(), |r| cfg.node_of(r) == node)?;
        // A rejected call poisons the counts it can reach: those of its node.
        let counts = (0..n).map(|r| [tables[1][r], tables[3][r]]).collect();
        let net = match cfg.n_nodes {
            1 => None,
            _ => Some(crate::net::Net::new(
                cfg,
                &msg,
                rank,
                &ctx,
                rv,
                &mut tables,
            )?),
        };
        bufs.upload_tables(&tables, &ctx)?;
        let mut ranks: Vec<Option<RankState>> = (0..n).map(|_| None).collect();
        ranks[rank] = Some(RankState {
            device,
            kernels,
            bufs,
            sms: (sm_count(&ctx)? / sharing) as u32,
            shares_gpu: sharing > 1,
        });
        // Nobody starts a round before every rank's tables are in place.
        rv.barrier()?;
        Ok(World {
            cfg: cfg.clone(),
            msg,
            ranks,
            options: options.clone(),
            counts,
            _mapped: mapped,
            net,
        })
    }
}

/// Where every rank of a world made rank by rank is (`placed[r]`: its GPU's UUID, then its
/// process's key): how many ranks share `rank`'s GPU, or why the world cannot be placed so.
/// Every rank judges from the same table, so all refuse together. Ranks may share a GPU only
/// inside one process (ranks in separate processes would spin in separate contexts, which the
/// GPU time-slices), and not between nodes, where NCCL takes a GPU per rank.
fn placement_check(cfg: &EpConfig, placed: &[Vec<u8>], rank: usize) -> Result<usize> {
    let unavailable = |reason: String| EpError::BackendUnavailable {
        backend: "cuda".into(),
        reason,
    };
    if let Some(r) = (0..placed.len()).find(|&r| placed[r].len() != 32) {
        return Err(EpError::Backend(format!(
            "rank {r} sent {} bytes of placement; 32 expected",
            placed[r].len()
        )));
    }
    let gpu = |r: usize| &placed[r][..16];
    let process = |r: usize| &placed[r][16..];
    for a in 0..placed.len() {
        for b in a + 1..placed.len() {
            if gpu(a) != gpu(b) {
                continue;
            }
            if process(a) != process(b) {
                return Err(unavailable(format!(
                    "ranks {a} and {b} are on one GPU from two processes: give each process \
                     its own GPU (LOCAL_RANK, CUDA_VISIBLE_DEVICES)"
                )));
            }
            if cfg.n_nodes > 1 {
                return Err(unavailable(format!(
                    "ranks {a} and {b} share a GPU in a world of {} nodes: NCCL, which carries \
                     the traffic between nodes, takes a GPU per rank",
                    cfg.n_nodes
                )));
            }
        }
    }
    Ok((0..placed.len()).filter(|&r| gpu(r) == gpu(rank)).count())
}

/// The SMs of `ctx`'s GPU.
fn sm_count(ctx: &Arc<CudaContext>) -> Result<usize> {
    Ok(ctx
        .attribute(
            cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )
        .map_err(cuda)? as usize)
}

/// GPU `gpu`'s context and `program`, one compiled only when a tool runs (the signal probes, the
/// device self-checks; kernels.rs), with the backend's checks first: a clear error naming `what`
/// where there is no such GPU, not cudarc's panic.
pub(crate) fn on_demand_program(
    gpu: usize,
    what: &str,
    program: (&str, &str, &[&'static str]),
) -> Result<(Arc<CudaContext>, Program)> {
    let n = crate::CudaBackend::probe()?.len();
    if gpu >= n {
        return Err(EpError::Backend(format!(
            "{what} on GPU {gpu}: {n} visible"
        )));
    }
    let ctx = device_context(gpu)?;
    let (major, minor) = ctx.compute_capability().map_err(cuda)?;
    let k = Program::load(&ctx, crate::kernels::arch_name(major, minor), "", program)?;
    Ok((ctx, k))
}

/// The kernels take a message's sizes and offsets, `hidden` and the row counts as 32-bit
/// integers (`MsgLayout`, the scalars of comm/mod.rs, u32 row offsets): a config past them is
/// refused before anything is allocated, rather than truncated. `EpConfig::validate` has bounded
/// every size by `isize::MAX`, so the arithmetic here does not wrap.
fn fits_kernel_sizes(cfg: &EpConfig) -> Result<()> {
    let msg = MessageLayout::new(cfg.format, cfg.hidden, cfg.top_k);
    let wire = msg.bytes + (4 * cfg.top_k).div_ceil(16) * 16;
    let too_large = |what: String| Err(ConfigError::Unsupported(what).into());
    if wire > i32::MAX as usize || cfg.hidden > i32::MAX as usize / 2 {
        return too_large(format!(
            "hidden = {} on the cuda backend: a message of {wire} bytes; its kernels take message sizes as 32-bit ints (at most {} bytes)",
            cfg.hidden,
            i32::MAX
        ));
    }
    if cfg.max_recv_rows() > u32::MAX as usize {
        return too_large(format!(
            "max_tokens_per_rank = {} on the cuda backend: a rank may receive {} rows; its row offsets are 32-bit (at most {})",
            cfg.max_tokens_per_rank,
            cfg.max_recv_rows(),
            u32::MAX
        ));
    }
    Ok(())
}

/// Device `d`'s context with the kernels loaded as `options` ask, made once per process for
/// each value of the options that changes the compiled programs ([`crate::CudaOptions`]'s
/// `compile_key`), so that backends with different options in one process each run their own.
/// The context is one per device, shared by them all: cudarc releases the primary context when
/// its last handle goes, and making it again costs ~1 s with 32 hardware queues (driver.rs), so
/// every `init`, benchmark and ceiling shares one.
pub(crate) fn device_kernels(d: usize, options: &crate::CudaOptions) -> Result<Arc<Kernels>> {
    type Loaded = HashMap<(usize, (String, bool)), Arc<Kernels>>;
    static DEVICES: std::sync::OnceLock<std::sync::Mutex<Loaded>> = std::sync::OnceLock::new();
    let mut devices = DEVICES.get_or_init(Default::default).lock().unwrap();
    let key = (d, options.compile_key());
    if let Some(k) = devices.get(&key) {
        return Ok(Arc::clone(k));
    }
    let k = Arc::new(Kernels::load(&device_context(d)?, options)?);
    devices.insert(key, Arc::clone(&k));
    Ok(k)
}

/// Device `d`'s (primary) context, made once per process and shared by every set of kernels and
/// tool on it ([`device_kernels`] says why).
pub(crate) fn device_context(d: usize) -> Result<Arc<CudaContext>> {
    static CONTEXTS: std::sync::OnceLock<std::sync::Mutex<HashMap<usize, Arc<CudaContext>>>> =
        std::sync::OnceLock::new();
    let mut contexts = CONTEXTS.get_or_init(Default::default).lock().unwrap();
    if let Some(ctx) = contexts.get(&d) {
        return Ok(Arc::clone(ctx));
    }
    let ctx = CudaContext::new(d).map_err(cuda)?;
    contexts.insert(d, Arc::clone(&ctx));
    Ok(ctx)
}

pub(crate) fn enable_peer_access(ctxs: &HashMap<usize, Arc<CudaContext>>) -> Result<()> {
    for (&a, ca) in ctxs {
        for (&b, cb) in ctxs {
            if a == b {
                continue;
            }
            let mut can = 0i32;
            // SAFETY: plain queries and a context-wide flag on live contexts.
            unsafe {
                sys::cuDeviceCanAccessPeer(&mut can, ca.cu_device(), cb.cu_device())
                    .result()
                    .map_err(cuda)?;
                if can == 0 {
                    return Err(EpError::BackendUnavailable {
                        backend: "cuda".into(),
                        reason: format!("GPU {a} cannot reach GPU {b} peer-to-peer"),
                    });
                }
                ca.bind_to_thread().map_err(cuda)?;
                match sys::cuCtxEnablePeerAccess(cb.cu_ctx(), 0) {
                    sys::CUresult::CUDA_SUCCESS
                    | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
                    e => return Err(cuda(e.result().unwrap_err())),
                }
            }
        }
    }
    Ok(())
}

/// Buffers in [`RankBuffers::symmetric`].
const SYMMETRIC: usize = 6;

impl RankBuffers {
    /// The buffers peers write, in the order of their pointer tables (`upload_tables`): the
    /// dispatch's receive buffer and counts, the combine's, its LL rows and its marks.
    pub(crate) fn symmetric(&self) -> [&DevBuf; SYMMETRIC] {
        [
            &self.d_recv,
            &self.d_counts,
            &self.c_recv,
            &self.c_counts,
            &self.c_ll,
            &self.c_marks,
        ]
    }

    /// Every rank's address of each symmetric buffer as this rank reaches it (`tables[i][r]`),
    /// into the tables the kernels take; returns once they are there.
    fn upload_tables(&self, tables: &[Vec<u64>], ctx: &Arc<CudaContext>) -> Result<()> {
        let stream = ctx.default_stream();
        let to = [
            &self.d_recv_ptrs,
            &self.d_count_ptrs,
            &self.c_recv_ptrs,
            &self.c_count_ptrs,
            &self.c_ll_ptrs,
            &self.c_mark_ptrs,
        ];
        for (buf, t) in to.into_iter().zip(tables) {
            buf.upload(t, &stream)?;
        }
        stream.synchronize().map_err(cuda)
    }

    /// `ll_max_tokens`: [`crate::CudaOptions::ll_max_tokens`], which sizes the LL rows.
    fn new(
        cfg: &EpConfig,
        msg: &MsgLayout,
        ctx: &Arc<CudaContext>,
        ll_max_tokens: usize,
    ) -> Result<RankBuffers> {
        let (n, l, t, k, h) = (
            cfg.n_ranks(),
            cfg.n_local_experts(),
            cfg.max_tokens_per_rank,
            cfg.top_k,
            cfg.hidden,
        );
        let (g, cap) = (cfg.n_groups(), cfg.max_recv_rows());
        let multi_node = cfg.n_nodes > 1;
        let payload = msg.payload_bytes as usize;
        let wire = msg.bytes as usize;
        let b = |len: usize| DevBuf::new(ctx, len);
        let bufs = RankBuffers {
            d_recv: b(n * t * wire)?,
            d_nmsg: b(n * 4)?,
            d_counts: b(l * n * 8)?,
            c_recv: b(t * k * h * 2)?,
            c_counts: b(l * n * 8)?,
            d_staging: b(if multi_node { t * wire } else { 0 })?,
            c_staging: b(if multi_node { cap * h * 2 } else { 0 })?,
            shared_msgs: b(if cfg.fused_shared_expert { t * wire } else { 0 })?,
            tokens: b(t * h * 2)?,
            ids: b(t * k * 4)?,
            scales_in: b(t * 4)?,
            slots: b(t * k * 4)?,
            rank_slots: b(t * n * 4)?,
            msgs_to: b(n * 4)?,
            sent: b(cfg.n_experts * 8)?,
            status: b((1 + l * n) * 4)?,
            snapshot: b(l * n * 8)?,
            d_ticket: b(16)?,
            c_ticket: b(8)?,
            row_offsets: b((g + 1) * 4)?,
            src_offsets: b(g * (n + 1) * 4)?,
            recv_tokens: b(cap * payload)?,
            recv_scales: b(cfg.format.output_scales_bytes(h, cap))?,
            src_info: b(cap * 8)?,
            row_src: b(cap * 4)?,
            expert_out: b(cap * h * 2)?,
            weights: b(t * k * 4)?,
            residual: b(t * h * 2)?,
            out: b(t * k * h * 2)?,
            fp8_payload: b(t * h)?,
            fp8_scales: b(t * (h / 128).max(1) * 4)?,
            c_snapshot: b(l * n * 8)?,
            d_recv_ptrs: b(n * 8)?,
            d_count_ptrs: b(n * 8)?,
            c_recv_ptrs: b(n * 8)?,
            c_count_ptrs: b(n * 8)?,
            c_ll_ptrs: b(n * 8)?,
            c_mark_ptrs: b(n * 8)?,
            // Last, so that the other buffers keep the addresses they had before it existed:
            // allocated first, it moved them and the dispatch read slower with the kernels
            // unchanged (measured at 728cbc8).
            c_ll: b(if multi_node {
                0
            } else {
                t.min(ll_max_tokens) * k * h * 4
            })?,
            c_marks: b(if multi_node { 0 } else { t * k * 4 })?,
            msg_rows: b(if multi_node { 0 } else { n * t * k * 4 })?,
            layout_seq: b(8)?,
            // Last, as c_ll above.
            chunk_base: b(assign_chunks(t) * (cfg.n_experts + n) * 4)?,
            rounds: b(8)?,
            refused: b(16)?,
        };
        bufs.d_counts.fill(0xFF)?;
        bufs.d_ticket.fill(0)?;
        // Each message's landed mark (dispatch/wire.cu) below every round number.
        bufs.d_recv.fill(0)?;
        // EP_OK: every round starts with it (ep_dispatch_single and ep_combine_single rely on it).
        bufs.status.fill(0)?;
        bufs.c_ticket.fill(0)?;
        bufs.c_counts.fill(0xFF)?;
        // Words below every combine's number (the first is 1).
        bufs.c_ll.fill(0)?;
        bufs.c_marks.fill(0)?;
        // Below every round number.
        bufs.layout_seq.fill(0)?;
        // The first dispatch is round 1; the first dispatch advances the combine's word to 1.
        bufs.rounds.fill(0)?;
        bufs.refused.fill(0)?;
        // SAFETY: one u32 inside the 8-byte allocation, in the context `fill` bound.
        unsafe { cudarc::driver::result::memcpy_htod_sync(bufs.rounds.ptr, &[1u32]) }
            .map_err(cuda)?;
        Ok(bufs)
    }
}

#[cfg(test)]
mod size_tests {
    use super::*;

    /// A message past 32 bits is refused (it was truncated into the kernels' sizes); the largest
    /// that fits passes, so that its allocation fails, if it does, as OutOfMemory.
    #[test]
    fn configs_past_the_kernels_32_bit_sizes_are_refused() {
        let big = EpConfig::new(1 << 30, 4, 16, 8, 2);
        big.validate().unwrap();
        match fits_kernel_sizes(&big) {
            Err(EpError::Config(ConfigError::Unsupported(m))) => {
                assert!(m.contains("hidden = 1073741824"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        fits_kernel_sizes(&EpConfig::new(1 << 28, 4, 16, 4096, 2)).unwrap();
        fits_kernel_sizes(&EpConfig::new(7168, 8, 256, 4096, 8)).unwrap();
    }
}
