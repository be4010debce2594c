//! # ep-conformance: one suite, every backend
//!
//! Each case is a generic function over [`ep_core::EpBackend`] that runs the backend and the
//! oracle on the same inputs and requires identical bytes. A backend crate gets one `#[test]` per
//! case with one line:
//!
//! ```ignore
//! ep_conformance::testgen!(my_backend::MyBackend::new());
//! ```
//!
//! The `ep conformance` command runs the same list through [`runner`].
//!
//! - [`fixture`]: routing scenarios from `fixtures/*.json`, embedded at build time.
//! - [`scenario`], [`routing`], [`rng`]: inputs of a round and the stand-in experts.
//! - [`round`]: run a round on every rank's thread and hold it against the oracle; [`barrier`]:
//!   the rank threads' rendezvous, which a panicking rank breaks.
//! - [`snapshot`]: routing snapshots shared by all backends (`fixtures/snapshots`).
//! - [`cases`]: the cases; [`runner`]: the list of cases and a runner outside `cargo test`.
//! - [`per_rank`]: the suite with one process per rank (under `ep launch` or `torchrun`): each
//!   process runs the cases for its own ranks, kept in step with the others.

#![warn(missing_docs)]

pub mod barrier;
pub mod cases;
pub mod fixture;
pub mod per_rank;
pub mod rng;
pub mod round;
pub mod routing;
pub mod runner;
pub mod scenario;
pub mod snapshot;

#[doc(hidden)]
pub use ep_core as __ep_core;
pub use fixture::Fixture;
pub use round::{check_against_oracle, run_and_check, run_round, Calls, RankRound, RoundOptions};
pub use scenario::{toy_experts, RoundInputs, WeightKind};

/// The single list of cases. Fixture names must match the files in `fixtures/` (a test checks).
#[doc(hidden)]
#[macro_export]
macro_rules! __with_cases {
    ($callback:ident ! ( $($args:tt)* )) => {
        $crate::$callback! { $($args)*
            fixtures [
                all_to_one duplicate_ids full_capacity hidden_7168 masked_10pct
                one_expert_per_rank rank_receives_nothing ranks_uneven skewed top1 top16
                two_nodes_x4 uniform wide_deepseek_shape zero_token_ranks
            ]
            cases [
                round_trip_identity rounds_1000 rounds_many_tokens
                expert_id_too_large expert_id_below_minus_one too_many_tokens
                tokens_wrong_shape topk_ids_wrong_shape experts_not_divisible hidden_not_allowed
                config_mismatch weights_wrong_shape expert_out_wrong_rows stale_routing_handle
                stale_swiglu_routing
                calls_out_of_order rank_never_dispatches rank_never_combines nonfinite_inputs
                every_bf16_magnitude
                shared_expert_fp8_weighted shared_expert_every_format skip_a2a
                skip_a2a_shared_expert epilogues swiglu_every_format combinations_not_allowed
                summation_order
                combine_sum_starts_from_positive_zero nan_bit_patterns nvfp4_decode_order
                bf16_bits_exact nvfp4_source_scales
                peer_rejects_dispatch peer_rejects_combine sizes_beyond_memory
                rejecting_rank_never_calls_again
            ]
            host_closure_cases [
                host_closure_epilogue
            ]
        }
    };
}

/// Generates one `#[test]` per conformance case for the backend expression `$backend`.
/// `testgen!(backend; without_host_closures)` leaves out the cases that need host-closure
/// epilogues (simulator-only), for backends whose output never reaches the host.
#[macro_export]
macro_rules! testgen {
    ($backend:expr) => {
        $crate::__with_cases!(__testgen_emit!($backend; with_host_closures));
    };
    ($backend:expr; without_host_closures) => {
        $crate::__with_cases!(__testgen_emit!($backend; without_host_closures));
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __testgen_modes {
    ($module:ident $format:ident) => {
        mod $module {
            use $crate::__ep_core::Format::$format as F;
            use $crate::cases::FixtureMode as M;
            #[test]
            fn fused_weighted() {
                super::run(F, M::FusedWeighted)
            }
            #[test]
            fn fused_unreduced() {
                super::run(F, M::FusedUnreduced)
            }
            #[test]
            fn split_weighted() {
                super::run(F, M::SplitWeighted)
            }
            #[test]
            fn split_unreduced() {
                super::run(F, M::SplitUnreduced)
            }
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __testgen_emit {
    ($backend:expr; $host:ident fixtures [$($fx:ident)*] cases [$($case:ident)*] host_closure_cases [$($hcase:ident)*]) => {
        $crate::__testgen_emit!(@emit $backend; fixtures [$($fx)*] cases [$($case)*]);
        $crate::__testgen_emit!(@host $host $backend; $($hcase)*);
    };
    (@host with_host_closures $backend:expr; $($hcase:ident)*) => {
        mod host_closure_cases {
            $(
                #[test]
                fn $hcase() {
                    let cx = $crate::cases::Ctx::in_process($crate::snapshot::SnapshotMode::Insta);
                    if let Err(e) = $crate::cases::$hcase(&$backend, &cx) {
                        panic!("{}", e);
                    }
                }
            )*
        }
    };
    (@host without_host_closures $backend:expr; $($hcase:ident)*) => {};
    (@emit $backend:expr; fixtures [$($fx:ident)*] cases [$($case:ident)*]) => {
        #[allow(non_snake_case)]
        mod fixtures {
            $(
                mod $fx {
                    fn run(format: $crate::__ep_core::Format, mode: $crate::cases::FixtureMode) {
                        let cx = $crate::cases::Ctx::in_process($crate::snapshot::SnapshotMode::Insta);
                        if let Err(e) = $crate::cases::fixture(&$backend, &cx, stringify!($fx), format, mode) {
                            panic!("{}", e);
                        }
                    }
                    $crate::__testgen_modes!(bf16 Bf16);
                    $crate::__testgen_modes!(fp8 Fp8);
                    $crate::__testgen_modes!(mxfp4 Mxfp4);
                    $crate::__testgen_modes!(nvfp4 Nvfp4);
                }
            )*
        }
        mod cases {
            $(
                #[test]
                fn $case() {
                    let cx = $crate::cases::Ctx::in_process($crate::snapshot::SnapshotMode::Insta);
                    if let Err(e) = $crate::cases::$case(&$backend, &cx) {
                        panic!("{}", e);
                    }
                }
            )*
        }
    };
}
