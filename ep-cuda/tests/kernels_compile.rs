//! Compiles every ep-cuda kernel with NVRTC for sm_90, on any machine where libnvrtc loads (no
//! GPU or driver needed), and checks each entry point is in the PTX. Without NVRTC it says so and
//! counts nothing; with EP_REQUIRE_NVRTC=1 (CI) a missing NVRTC is a failure. With
//! EP_PTX_DUMP=DIR each program's PTX is also written there (`DIR/<name>.ptx`), for `ptxas -v`
//! (registers, spills) and the SASS.

use ep_cuda::kernels::{
    check_syntax, compile, file_source, params, source, BENCH_PROGRAM, COMBINE, FILES,
    LATE_INPUTS_PROGRAM, PROBE_PROGRAM, PROGRAMS, SELFCHECK_PROGRAM,
};

fn main() {
    if let Err(e) = ep_cuda::driver::nvrtc_present() {
        if std::env::var_os("EP_REQUIRE_NVRTC").is_some() {
            eprintln!("ep-cuda kernels: FAILED: {e}");
            std::process::exit(1);
        }
        println!("ep-cuda kernels: NOT RUN (not counted): {e}");
        return;
    }
    let (mut passed, mut failed) = (0, 0);
    let dump = std::env::var_os("EP_PTX_DUMP").map(std::path::PathBuf::from);
    let mut check = |what: &str, src: String, entries: &[&str]| match compile(&src, "sm_90") {
        Ok(ptx) => {
            let text = ptx.to_src();
            if let Some(dir) = &dump {
                let file = dir.join(format!("{}.ptx", what.replace([' ', ',', '+'], "_")));
                if let Err(e) =
                    std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&file, &text))
                {
                    println!("FAILED {what}: could not write {}: {e}", file.display());
                }
            }
            let missing: Vec<_> = entries
                .iter()
                .filter(|e| !text.contains(&format!(".entry {e}(")))
                .collect();
            if missing.is_empty() {
                println!("ok     {what} ({} kB of PTX)", text.len() / 1024);
                passed += 1;
            } else {
                println!("FAILED {what}: no entry for {missing:?}");
                failed += 1;
            }
        }
        Err(e) => {
            println!("FAILED {what}: {e}");
            failed += 1;
        }
    };
    // The programs compiled with the backend's options (their defines): every start's, then the
    // benchmark's (ep-cuda's feature `bench`, compiled when `ep bench` runs) and the late-inputs
    // test hook's (feature `test-hooks`). Their sources are in every build, so that every build
    // compiles them here.
    let with_options: Vec<_> = PROGRAMS
        .iter()
        .copied()
        .chain([BENCH_PROGRAM, LATE_INPUTS_PROGRAM])
        .collect();
    for &(name, body, entries) in &with_options {
        check(name, source(body, ""), entries);
    }
    // The probes' program, compiled when `ep bench --probe-signals` runs (feature `bench`).
    let (name, body, entries) = PROBE_PROGRAM;
    check(name, source(body, ""), entries);
    // The device self-checks' program, compiled when a CUDA conformance run starts.
    let (name, body, entries) = SELFCHECK_PROGRAM;
    check(name, source(body, ""), entries);
    // The combine program with a device-code epilogue compiled in.
    let user = "__device__ unsigned long long ep_test_sum;\n\
                __device__ void my_epilogue(int t, int c, const unsigned short* v, int n) {\n\
                    for (int i = 0; i < n; i++) atomicAdd(&ep_test_sum, (unsigned long long)v[i]);\n\
                }\n";
    check(
        "combine + device epilogue",
        source(
            &format!("{user}\n{COMBINE}"),
            "#define EP_USER_EPILOGUE my_epilogue\n",
        ),
        &["ep_combine_reduce", "ep_combine_single"],
    );
    // With the single-launch kernels' timing stamps (EP_CUDA_TRACE, and =all).
    for &(name, body, entries) in &with_options {
        check(
            &format!("{name} + trace stamps"),
            source(body, "#define EP_TRACE 1\n"),
            entries,
        );
        check(
            &format!("{name} + trace stamps, every block"),
            source(body, "#define EP_TRACE 1\n#define EP_TRACE_ALL 1\n"),
            entries,
        );
    }
    // Each kernel file alone, its includes expanded, through NVRTC's front end: it includes all
    // it uses.
    for (path, _) in FILES {
        if let Err(e) = check_syntax(&file_source(path), "sm_90") {
            println!("FAILED {path} alone: {e}");
            failed += 1;
        }
    }
    // The parameter structs of kernels/params.cuh against their Rust twins (kernels::params).
    match params::check_layouts() {
        Ok(()) => {
            println!("ok     params.cuh laid out as params.rs");
            passed += 1;
        }
        Err(e) => {
            println!("FAILED params.cuh against params.rs: {e}");
            failed += 1;
        }
    }
    println!("\n{passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
}
