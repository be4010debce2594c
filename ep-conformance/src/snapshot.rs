//! Routing snapshots, one per fixture, shared by every backend: `fixtures/snapshots/NAME.snap`.
//! Under `cargo test` they go through insta (review with `cargo insta review`); the `ep` binary
//! compares against the copies embedded at build time.

use ep_core::DispatchOutput;

/// How a case checks snapshots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotMode {
    /// insta, as in `cargo test` (honours `INSTA_UPDATE`).
    Insta,
    /// Compare with the snapshot embedded in the binary; never write.
    Embedded,
}

/// The routing of every rank, as stored in a snapshot.
pub fn routing_text(outputs: &[DispatchOutput]) -> String {
    outputs
        .iter()
        .map(DispatchOutput::routing_report)
        .collect::<Vec<_>>()
        .join("")
}

fn snapshot_dir() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/snapshots");
    dir.canonicalize().unwrap_or(dir)
}

/// Checks `text` against the snapshot `name`.
pub fn check(mode: SnapshotMode, name: &str, text: &str) -> Result<(), String> {
    match mode {
        SnapshotMode::Insta => {
            let mut settings = insta::Settings::clone_current();
            settings.set_snapshot_path(snapshot_dir());
            settings.set_prepend_module_to_snapshot(false);
            settings.set_omit_expression(true);
            settings.bind(|| insta::assert_snapshot!(name.to_string(), text));
            Ok(())
        }
        SnapshotMode::Embedded => {
            let stored = crate::fixture::embedded_snapshot(name).ok_or_else(|| {
                format!("no snapshot for `{name}`: run `cargo test -p ep-sim` and review it with `cargo insta review`")
            })?;
            let stored = snapshot_body(stored);
            if stored.trim_end() == text.trim_end() {
                Ok(())
            } else {
                let line = stored
                    .lines()
                    .zip(text.lines())
                    .position(|(a, b)| a != b)
                    .unwrap_or(stored.lines().count().min(text.lines().count()));
                Err(format!(
                    "routing differs from snapshot `{name}` at line {}:\n  stored: {}\n  got:    {}",
                    line + 1,
                    stored.lines().nth(line).unwrap_or("<end>"),
                    text.lines().nth(line).unwrap_or("<end>")
                ))
            }
        }
    }
}

/// The content of an insta `.snap` file: everything after its `---` header.
fn snapshot_body(file: &str) -> &str {
    let rest = file.strip_prefix("---\n").unwrap_or(file);
    match rest.find("\n---\n") {
        Some(i) => &rest[i + 5..],
        None => rest,
    }
}
