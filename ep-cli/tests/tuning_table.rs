//! docs/tuning.md lists every variable the `ep` command reads for the backends' options: the
//! names are the ones the options' parsers ask for (recorded through their lookup: the backend's
//! and `ep bench`'s), not a copy.

use std::cell::RefCell;

/// The variables `parse` asks its lookup for, each asked once with nothing set.
fn asked_for(parse: impl FnOnce(&dyn Fn(&str) -> Option<String>)) -> Vec<String> {
    let asked = RefCell::new(Vec::new());
    parse(&|name: &str| {
        asked.borrow_mut().push(name.to_string());
        None
    });
    let mut names = asked.into_inner();
    names.sort();
    names.dedup();
    names
}

#[test]
#[cfg(feature = "cuda")]
fn every_variable_the_cli_reads_is_in_the_tuning_table() {
    let doc = include_str!("../../docs/tuning.md");
    let mut names = asked_for(|get| {
        ep::cuda::options_from_env_vars(get).unwrap();
    });
    names.extend(asked_for(|get| {
        ep::cuda::bench::BenchOptions::from_env_vars(get).unwrap();
    }));
    names.extend(
        ep::cuda::driver::DRIVER_ENVIRONMENT
            .iter()
            .map(|(v, _)| v.to_string()),
    );
    assert!(names.len() > 20, "{names:?}");
    let missing: Vec<_> = names
        .iter()
        .filter(|n| !doc.contains(&format!("| `{n}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "not in docs/tuning.md's tables: {missing:?}"
    );
}
