//! The whole conformance suite on the simulator.
ep_conformance::testgen!(ep_sim::SimBackend::new());
