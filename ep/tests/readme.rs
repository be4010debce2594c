//! The README's API example, compiled and run: the text between the markers below is the
//! README's first `rust` block under "Using it", verbatim (the last test checks it).

// README-SNIPPET-BEGIN
use ep::ndarray::Array2;
use ep::{bf16, CombineArgs, DispatchArgs, Dispatched, EpBackend, EpComm, EpConfig, HostIo};

/// One MoE layer's communication on any backend: dispatch, the experts, combine. Buffers live
/// where the backend computes (GPU memory for `cuda`): the round moves nothing through the host.
fn layer<B: EpBackend>(backend: &B) -> ep::Result<Vec<Vec<bf16>>> {
    let cfg = EpConfig::builder().hidden(7168).top_k(8).experts(256);
    let cfg = cfg.max_tokens_per_rank(128).gpus_per_node(8).build()?;
    let mut ranks = backend.init_uniform(&cfg)?;
    let outputs = ep::on_every_rank(&mut ranks, |rank| -> ep::Result<Vec<bf16>> {
        let (tokens, topk_ids, weights) = my_router(rank)?;
        let d = rank.dispatch(&DispatchArgs::new(&tokens, &topk_ids, 16))?;
        // d.recv_tokens, d.row_offsets, d.expert_ids: one group per local expert
        let y = my_experts(rank, &d)?;
        let out = rank.combine(&d.handle, &CombineArgs::weighted(&y, &weights))?;
        rank.to_host(out.reduced().expect("weighted")) // [16, 7168], to look at
    });
    outputs.into_iter().collect()
}

type Routed<C> = (
    <C as EpComm>::Buffer<bf16>,
    <C as EpComm>::Buffer<i32>,
    <C as EpComm>::Buffer<f32>,
);

/// Your router's output on this rank, in its memory: 16 tokens, their top-8 experts and weights.
fn my_router<C: EpComm>(rank: &mut C) -> ep::Result<Routed<C>> {
    let r = rank.rank();
    let tokens = Array2::from_shape_fn((16, 7168), |(t, c)| bf16::from_f32((t + c + r) as f32));
    let ids = Array2::from_shape_fn((16, 8), |(t, k)| ((t * 8 + k * 31 + r) % 256) as i32);
    let (tokens, ids) = (
        tokens.into_raw_vec_and_offset().0,
        ids.into_raw_vec_and_offset().0,
    );
    Ok((
        rank.upload(&tokens)?,
        rank.upload(&ids)?,
        rank.upload(&[0.125; 16 * 8])?,
    ))
}

/// Your experts: a grouped GEMM per group into `[d.capacity, hidden]` rows. Here each returns
/// its input, worked out on the host for brevity: a model runs its GEMM on the device.
fn my_experts<C: EpComm>(rank: &mut C, d: &Dispatched<C>) -> ep::Result<C::Buffer<bf16>> {
    let rows = rank
        .dispatched_to_host(d)?
        .decode_rows()
        .mapv(bf16::from_f32);
    let y = rank.alloc(d.capacity * d.hidden)?;
    rank.write(&y, rows.as_slice().expect("standard layout"))?;
    Ok(y)
}
// README-SNIPPET-END

#[test]
fn the_readme_example_runs_on_the_simulator() {
    let sim = ep::Backend::new(ep::BackendKind::Sim).expect("the simulator is built in");
    let outputs = layer(&sim).expect("a valid round");
    assert_eq!(outputs.len(), 8);
    for (rank, out) in outputs.iter().enumerate() {
        // Identity experts and eight distinct experts a token, each weighted 1/8: every token
        // comes back as it was sent (sums of eight equal powers-of-two fractions are exact).
        let want = (0..16 * 7168).map(|i| bf16::from_f32((i / 7168 + i % 7168 + rank) as f32));
        assert!(out.iter().copied().eq(want), "rank {rank}");
    }
}

#[test]
fn the_readme_shows_this_example() {
    let readme = include_str!("../../README.md");
    let using = &readme[readme.find("## Using it").expect("a Using it section")..];
    let start = using.find("```rust\n").expect("a rust block") + "```rust\n".len();
    let block = &using[start..start + using[start..].find("```").expect("closed")];
    let me = include_str!("readme.rs");
    let marker = "// README-SNIPPET-BEGIN\n";
    let begin = me.find(marker).unwrap() + marker.len();
    let end = me.find("// README-SNIPPET-END").unwrap();
    assert_eq!(
        block,
        &me[begin..end],
        "README.md and tests/readme.rs differ"
    );
}

/// The README's "One process per GPU" lines, in a function that compiles them (each process of
/// a launch calls it; `ep-cli/tests/launch.rs` runs such processes).
#[allow(dead_code, unused_mut)]
#[rustfmt::skip]
fn one_rank_of_a_launch(backend: &ep::Backend, cfg: EpConfig) -> ep::Result<ep::Comm> {
    use std::time::Duration;
    // README-LAUNCH-BEGIN
let (spec, master) = ep::rendezvous::RankSpec::from_vars(|k| std::env::var(k).ok())?;
let mut rv = ep::rendezvous::Rendezvous::connect(spec, &master, Duration::from_secs(60))?;
let mut rank = backend.init_rank(&cfg, &mut rv)?; // configs checked across processes
    // README-LAUNCH-END
    let _ = rank.rank();
    Ok(rank)
}

#[test]
fn the_readme_shows_the_launch_lines() {
    let readme = include_str!("../../README.md");
    let section = &readme[readme.find("## One process per GPU").expect("the section")..];
    let start = section.find("```rust\n").expect("a rust block") + "```rust\n".len();
    let block = &section[start..start + section[start..].find("```").expect("closed")];
    let me = include_str!("readme.rs");
    let marker = "// README-LAUNCH-BEGIN\n";
    let begin = me.find(marker).unwrap() + marker.len();
    let end = me.find("    // README-LAUNCH-END").unwrap();
    assert_eq!(
        block,
        &me[begin..end],
        "README.md and tests/readme.rs differ"
    );
}
