//! A rank's buffers mapped into the other processes of its node (CUDA IPC): each process makes a
//! handle for each of its buffers, the handles go round through the rendezvous, and each process
//! opens its node peers'. The NVLink kernels then take the mapped addresses as they take a
//! peer's in a world of one process. A peer in the same process (a launch with fewer processes
//! than ranks) is not mapped, since a handle does not open in the process that made it: its
//! addresses are used as they are, with peer access between the two GPUs.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::sys;
use cudarc::driver::CudaContext;
use ep_core::rendezvous::Rendezvous;
use ep_core::{EpError, Result};

use crate::driver::cuda;
use crate::memory::DevBuf;

/// A peer's buffer opened here; closed on drop.
pub struct Mapped {
    key: OpenKey,
    ctx: Arc<CudaContext>,
}

/// A handle opened in a context: the handle's bytes and the context's device.
type OpenKey = (Vec<u8>, usize);

/// Every handle open in this process, with its address and how many [`Mapped`] hold it: a
/// handle opens once per context (again is `CUDA_ERROR_ALREADY_MAPPED`), and ranks of one
/// process on one GPU share its context.
fn open_handles() -> std::sync::MutexGuard<'static, HashMap<OpenKey, (sys::CUdeviceptr, usize)>> {
    static OPEN: std::sync::OnceLock<
        std::sync::Mutex<HashMap<OpenKey, (sys::CUdeviceptr, usize)>>,
    > = std::sync::OnceLock::new();
    OPEN.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

impl Mapped {
    /// Opens `handle` (another process's allocation) in `ctx`, or takes the mapping this
    /// process already has of it there.
    fn open(ctx: &Arc<CudaContext>, handle: &[u8]) -> std::result::Result<(Mapped, u64), String> {
        let key = (handle.to_vec(), ctx.ordinal());
        let mut open = open_handles();
        if let Some((ptr, holders)) = open.get_mut(&key) {
            *holders += 1;
            let ptr = *ptr;
            return Ok((
                Mapped {
                    key,
                    ctx: Arc::clone(ctx),
                },
                ptr,
            ));
        }
        // SAFETY: a plain byte array.
        let mut h: sys::CUipcMemHandle = unsafe { std::mem::zeroed() };
        for (d, &s) in h.reserved.iter_mut().zip(handle) {
            *d = s as _;
        }
        let mut ptr: sys::CUdeviceptr = 0;
        ctx.bind_to_thread().map_err(|e| e.to_string())?;
        // SAFETY: a handle another process made for a live allocation of its GPU; the driver
        // checks it and enables peer access to that GPU on first use.
        unsafe {
            sys::cuIpcOpenMemHandle_v2(
                &mut ptr,
                h,
                sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32,
            )
            .result()
        }
        .map_err(|e| e.to_string())?;
        open.insert(key.clone(), (ptr, 1));
        Ok((
            Mapped {
                key,
                ctx: Arc::clone(ctx),
            },
            ptr,
        ))
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        let mut open = open_handles();
        let Some((ptr, holders)) = open.get_mut(&self.key) else {
            return;
        };
        *holders -= 1;
        if *holders > 0 {
            return;
        }
        let ptr = *ptr;
        open.remove(&self.key);
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: opened by cuIpcOpenMemHandle in this context and held by no world now
            // (their streams were synchronised when their comms dropped).
            let _ = unsafe { sys::cuIpcCloseMemHandle(ptr) };
        }
    }
}

const HANDLE: usize = std::mem::size_of::<sys::CUipcMemHandle>();

/// This process's key: equal keys in the rendezvous are ranks of one process.
pub fn process_key() -> [u8; 16] {
    static KEY: std::sync::OnceLock<[u8; 16]> = std::sync::OnceLock::new();
    *KEY.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let mut k = [0u8; 16];
        k[..4].copy_from_slice(&std::process::id().to_le_bytes());
        k[4..].copy_from_slice(&nanos.to_le_bytes()[..12]);
        k
    })
}

/// Shares `bufs` (each a plain `cuMemAlloc`, as IPC needs) with every rank `reachable` says
/// this process can map: per buffer, every rank's address as seen here (this rank's own, a
/// mapped peer's, or 0 for a rank it cannot reach), and the mappings, which must outlive every
/// use of those addresses.
pub fn share(
    rv: &mut Rendezvous,
    ctx: &Arc<CudaContext>,
    bufs: &[&DevBuf],
    reachable: impl Fn(usize) -> bool,
) -> Result<(Vec<Vec<u64>>, Vec<Mapped>)> {
    ctx.bind_to_thread().map_err(cuda)?;
    let mut mine = process_key().to_vec();
    mine.extend((ctx.ordinal() as u32).to_le_bytes());
    for b in bufs {
        mine.extend(b.ptr.to_le_bytes());
    }
    for b in bufs {
        let mut h = std::mem::MaybeUninit::<sys::CUipcMemHandle>::zeroed();
        // SAFETY: `b.ptr` is the base of a live cuMemAlloc allocation in this context.
        unsafe { sys::cuIpcGetMemHandle(h.as_mut_ptr(), b.ptr).result() }.map_err(cuda)?;
        // SAFETY: initialised by the call above.
        let h = unsafe { h.assume_init() };
        mine.extend(h.reserved.iter().map(|&c| c as u8));
    }
    let all = rv.all_gather(&mine)?;
    let rank = rv.spec().rank;
    let head = 16 + 4 + 8 * bufs.len();
    let mut tables = vec![vec![0u64; all.len()]; bufs.len()];
    let mut mapped = Vec::new();
    for (r, theirs) in all.iter().enumerate() {
        if r != rank && !reachable(r) {
            continue;
        }
        if theirs.len() != mine.len() {
            return Err(EpError::Backend(format!(
                "rank {r} shared {} bytes of buffer handles; this rank expects {}",
                theirs.len(),
                mine.len()
            )));
        }
        let same_process = theirs[..16] == mine[..16];
        if same_process && r != rank {
            let device = u32::from_le_bytes(theirs[16..20].try_into().expect("4 bytes"));
            peer_access(ctx, device as usize)?;
        }
        for (i, b) in bufs.iter().enumerate() {
            if r == rank {
                tables[i][r] = b.ptr;
                continue;
            }
            if same_process {
                let at = 20 + 8 * i;
                tables[i][r] = u64::from_le_bytes(theirs[at..at + 8].try_into().expect("8 bytes"));
                continue;
            }
            let at = head + i * HANDLE;
            let (m, ptr) = Mapped::open(ctx, &theirs[at..at + HANDLE]).map_err(|e| {
                EpError::Backend(format!(
                    "mapping rank {r}'s buffers into rank {rank} (CUDA IPC; the config puts \
                     both on one node): {e}"
                ))
            })?;
            mapped.push(m);
            tables[i][r] = ptr;
        }
    }
    Ok((tables, mapped))
}

/// Peer access from `ctx` to GPU `device`'s (primary) context, which this process also holds.
fn peer_access(ctx: &Arc<CudaContext>, device: usize) -> Result<()> {
    if device == ctx.ordinal() {
        return Ok(());
    }
    let ctxs = [
        (ctx.ordinal(), Arc::clone(ctx)),
        (device, crate::world::device_context(device)?),
    ]
    .into_iter()
    .collect();
    crate::world::enable_peer_access(&ctxs)
}
