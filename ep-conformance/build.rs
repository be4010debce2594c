//! Embeds every fixture and snapshot under the workspace's `fixtures/` into the crate, so the
//! `ep` binary runs the suite on a GPU host with nothing beside it.

use std::fmt::Write as _;
use std::path::Path;

fn list(dir: &Path, ext: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == ext))
                .map(|p| {
                    let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
                    (
                        stem,
                        p.canonicalize().unwrap().to_string_lossy().into_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn main() {
    // Read when the script runs, not baked in when it was compiled: cargo shares one build-script
    // binary between checkouts of the workspace (a `git worktree` on the same target directory),
    // and a baked-in path then embedded another checkout's fixtures, or none once it was gone.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest).join("../fixtures");
    let snaps = root.join("snapshots");
    println!("cargo:rerun-if-changed={}", root.display());
    println!("cargo:rerun-if-changed={}", snaps.display());
    let mut out = String::new();
    for (name, files) in [
        ("FIXTURE_FILES", list(&root, "json")),
        ("SNAPSHOT_FILES", list(&snaps, "snap")),
    ] {
        writeln!(out, "pub static {name}: &[(&str, &str)] = &[").unwrap();
        for (stem, path) in files {
            println!("cargo:rerun-if-changed={path}");
            writeln!(out, "    ({stem:?}, include_str!({path:?})),").unwrap();
        }
        writeln!(out, "];").unwrap();
    }
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("embedded.rs");
    std::fs::write(dest, out).unwrap();
}
