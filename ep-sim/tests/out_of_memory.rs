//! Sizes the host cannot give are typed errors, never an abort. The simulator refuses one buffer
//! larger than the host's memory and swap before asking the allocator (whose answer depends on the
//! kernel's overcommit policy), so these hold on every host.

use ep_core::{ConfigError, EpBackend, EpConfig, EpError};
use ep_sim::memory::host_memory_limit;
use ep_sim::SimBackend;

/// `ep soak --hidden 1000000000 --ranks 2` asked for one 128 GB send buffer and died with
/// SIGABRT. The same shape, scaled so its send buffer is 4x this host's memory, returns
/// OutOfMemory naming the bytes and the buffer; the process goes on and a small world works.
#[test]
fn a_buffer_larger_than_the_host_is_out_of_memory() {
    let limit = host_memory_limit();
    if limit == usize::MAX {
        eprintln!("no /proc/meminfo here: the host's memory is unknown");
        return;
    }
    let max_tokens = 64;
    let hidden = (limit / max_tokens / 2 * 4).next_multiple_of(128);
    let cfg = EpConfig::new(hidden, 2, 2, max_tokens, 2);
    cfg.validate().unwrap();
    match SimBackend::new().init_uniform(&cfg) {
        Err(EpError::OutOfMemory { bytes, what }) => {
            assert!(bytes > limit, "{bytes} <= {limit}");
            assert!(bytes >= max_tokens * hidden * 2, "{bytes}");
            assert!(what.contains("rank 0"), "{what}");
            let msg = EpError::OutOfMemory { bytes, what }.to_string();
            assert!(msg.contains(&bytes.to_string()), "{msg}");
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!(
            "a world needing {} bytes per buffer was built",
            hidden * 128
        ),
    }
    SimBackend::new()
        .init_uniform(&EpConfig::new(128, 2, 4, 8, 2))
        .unwrap();
}

/// hidden 2^40: every size fits the address range (a valid config), none fits the host.
#[test]
fn hidden_two_to_the_forty_is_out_of_memory() {
    let cfg = EpConfig::new(1 << 40, 8, 16, 8, 4);
    match SimBackend::new().init_uniform(&cfg) {
        Err(EpError::OutOfMemory { bytes, .. }) => assert!(bytes >= 8 << 41),
        other => panic!("{:?}", other.map(|c| c.len())),
    }
}

/// hidden 2^60 with 8 tokens wrapped the size arithmetic, passed init, and a 0-token dispatch
/// aborted: now init refuses it, naming the field.
#[test]
fn hidden_two_to_the_sixty_is_a_config_error() {
    let cfg = EpConfig::new(1 << 60, 8, 16, 8, 4);
    match SimBackend::new().init_uniform(&cfg) {
        Err(EpError::Config(ConfigError::SizeOverflow {
            field: "hidden", ..
        })) => {}
        other => panic!("{:?}", other.map(|c| c.len())),
    }
}
