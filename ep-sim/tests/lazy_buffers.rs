//! Receive buffers are sized for the worst case (`[experts, ranks, max_tokens, msg]`), which for
//! a DeepSeek-V3 prefill shape is ~120 GB of address space. Only the slots a round uses may cost
//! memory, or the simulator cannot run realistic shapes on a laptop.

use ep_core::{EpBackend, EpConfig};

fn resident_bytes() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

#[test]
fn a_worst_case_world_costs_no_memory_until_used() {
    let cfg = EpConfig::new(7168, 8, 256, 4096, 8);
    let Some(before) = resident_bytes() else {
        eprintln!("no /proc/self/statm here: resident memory not checked");
        return;
    };
    let comms = ep_sim::SimBackend::new().init_uniform(&cfg).unwrap();
    let after = resident_bytes().unwrap();
    assert_eq!(comms.len(), 8);
    let grown = after.saturating_sub(before);
    assert!(grown < 256 << 20, "init touched {} MiB", grown >> 20);
}
