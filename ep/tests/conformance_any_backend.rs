//! The suite through the run-time `Backend` enum (boxed communicators), as the CLI uses it.
ep_conformance::testgen!(ep::Backend::new(ep::BackendKind::Sim).unwrap());
