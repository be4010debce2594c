//! The README's API example, compiled and run: the text between the markers below is the
//! README's first `rust` block under "Using it", verbatim (the last test checks it).

// README-SNIPPET-BEGIN
use ep::ndarray::Array2;
use ep::{bf16, CombineInput, CombineOutput, DispatchInput, DispatchOutput, EpBackend, EpComm};
use ep::{EpConfig, RouterWeights};

/// One MoE layer's communication on any backend: dispatch, the experts, combine.
fn layer<B: EpBackend>(backend: &B) -> ep::Result<Vec<CombineOutput>> {
    // hidden 7168, top-8, 256 experts, up to 128 tokens per rank, 8 GPUs per node
    let cfg = EpConfig::new(7168, 8, 256, 128, 8);
    let mut ranks = backend.init_uniform(&cfg)?;
    let outputs = ep::on_every_rank(&mut ranks, |rank| -> ep::Result<CombineOutput> {
        let (tokens, topk_ids, weights) = my_tokens(rank.rank());
        let d = rank.dispatch(&DispatchInput::new(tokens.view(), topk_ids.view()))?;
        // d.recv_tokens, d.row_offsets, d.expert_ids: one group per local expert
        let y = my_experts(&d);
        let input = CombineInput::weighted(y.view(), RouterWeights::F32(weights.view()));
        rank.combine(&d.handle, &input)
    });
    // One result per rank: the first error, if any rank had one, or every rank's output.
    outputs.into_iter().collect()
}

/// Your router's output on this rank: 16 tokens, their top-8 experts and weights.
fn my_tokens(rank: usize) -> (Array2<bf16>, Array2<i32>, Array2<f32>) {
    let tokens = Array2::from_shape_fn((16, 7168), |(t, c)| bf16::from_f32((t + c + rank) as f32));
    let ids = Array2::from_shape_fn((16, 8), |(t, k)| ((t * 8 + k * 31 + rank) % 256) as i32);
    (tokens, ids, Array2::from_elem((16, 8), 0.125))
}

/// Your experts: here each returns its input (a real layer runs a grouped GEMM per group).
fn my_experts(d: &DispatchOutput) -> Array2<bf16> {
    d.decode_rows().mapv(bf16::from_f32)
}
// README-SNIPPET-END

#[test]
fn the_readme_example_runs_on_the_simulator() {
    let sim = ep::Backend::new(ep::BackendKind::Sim).expect("the simulator is built in");
    let outputs = layer(&sim).expect("a valid round");
    assert_eq!(outputs.len(), 8);
    for (rank, out) in outputs.iter().enumerate() {
        let reduced = out.reduced().expect("weighted: reduced");
        assert_eq!(reduced.dim(), (16, 7168));
        // Identity experts and eight distinct experts a token, each weighted 1/8: every token
        // comes back as it was sent (sums of eight equal powers-of-two fractions are exact).
        let (tokens, _, _) = my_tokens(rank);
        assert_eq!(reduced, &tokens, "rank {rank}");
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
