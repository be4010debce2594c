//! The suite's fixture list and the files in `fixtures/` must be the same set, and every fixture
//! must have a snapshot: a fixture file nobody runs, or a case with no data, fails here.

use ep_conformance::fixture::{embedded_snapshot, Fixture};
use ep_conformance::runner::listed_fixtures;

#[test]
fn every_fixture_file_is_listed_and_snapshotted() {
    let mut listed = listed_fixtures();
    listed.sort();
    assert_eq!(
        listed,
        Fixture::names(),
        "update __with_cases! in ep-conformance/src/lib.rs"
    );
    assert!(listed.len() >= 10);
    for name in listed {
        let fx = Fixture::load(name).unwrap();
        assert_eq!(fx.name, name, "a fixture's name must match its file name");
        assert!(
            embedded_snapshot(name).is_some(),
            "fixture {name} has no snapshot"
        );
    }
}
