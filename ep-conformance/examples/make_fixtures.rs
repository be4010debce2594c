//! Writes the routing fixtures under `fixtures/` from the recipes below. The files, not this
//! program, are the fixtures: tests read only the data. Re-run it only to add or change a
//! scenario, then review the snapshot changes with `cargo insta review`.
//!
//! cargo run -p ep-conformance --example make_fixtures

use ep_conformance::fixture::{Fixture, FixtureConfig};
use ep_conformance::rng::Rng;
use ep_conformance::routing::RoutingSpec;

struct Recipe {
    name: &'static str,
    description: &'static str,
    config: FixtureConfig,
    tokens: Vec<usize>,
    spec: RoutingSpec,
}

fn cfg(
    hidden: usize,
    top_k: usize,
    n_experts: usize,
    max_t: usize,
    gpus: usize,
    nodes: usize,
) -> FixtureConfig {
    FixtureConfig {
        hidden,
        top_k,
        n_experts,
        max_tokens_per_rank: max_t,
        n_gpus_per_node: gpus,
        n_nodes: nodes,
    }
}

fn main() {
    let base = || cfg(128, 4, 32, 48, 4, 1);
    let recipes = vec![
        Recipe {
            name: "uniform",
            description:
                "4 ranks, 32 experts, top-4: each token picks 4 distinct experts uniformly",
            config: base(),
            tokens: vec![40; 4],
            spec: RoutingSpec::uniform(),
        },
        Recipe {
            name: "skewed",
            description: "80% of slots go to the 3 hottest experts (all on rank 0)",
            config: base(),
            tokens: vec![40; 4],
            spec: RoutingSpec {
                skew: Some((3, 0.8)),
                ..Default::default()
            },
        },
        Recipe {
            name: "all_to_one",
            description: "every slot of every token names expert 5",
            config: base(),
            tokens: vec![24; 4],
            spec: RoutingSpec {
                only_expert: Some(5),
                ..Default::default()
            },
        },
        Recipe {
            name: "rank_receives_nothing",
            description: "no token picks an expert of rank 2; rank 2 still sends",
            config: base(),
            tokens: vec![32; 4],
            spec: RoutingSpec {
                avoid_rank: Some(2),
                ..Default::default()
            },
        },
        Recipe {
            name: "zero_token_ranks",
            description: "ranks 1 and 3 bring no tokens",
            config: base(),
            tokens: vec![30, 0, 45, 0],
            spec: RoutingSpec::uniform(),
        },
        Recipe {
            name: "ranks_uneven",
            description: "ranks bring 1, 17, 48 and 33 tokens",
            config: base(),
            tokens: vec![1, 17, 48, 33],
            spec: RoutingSpec::uniform(),
        },
        Recipe {
            name: "masked_10pct",
            description: "10% of slots masked with -1 (some tokens have every slot masked)",
            config: base(),
            tokens: vec![40; 4],
            spec: RoutingSpec {
                masked: 0.1,
                ..Default::default()
            },
        },
        Recipe {
            name: "duplicate_ids",
            description: "40% of tokens name their first expert again in their last slot",
            config: base(),
            tokens: vec![40; 4],
            spec: RoutingSpec {
                duplicates: 0.4,
                ..Default::default()
            },
        },
        Recipe {
            name: "full_capacity",
            description: "every rank brings exactly max_tokens_per_rank tokens",
            config: base(),
            tokens: vec![48; 4],
            spec: RoutingSpec {
                skew: Some((8, 0.3)),
                ..Default::default()
            },
        },
        Recipe {
            name: "one_expert_per_rank",
            description: "4 experts on 4 ranks, top-2",
            config: cfg(128, 2, 4, 32, 4, 1),
            tokens: vec![32; 4],
            spec: RoutingSpec::uniform(),
        },
        Recipe {
            name: "top1",
            description: "top-1 routing over 32 experts",
            config: cfg(128, 1, 32, 48, 4, 1),
            tokens: vec![48; 4],
            spec: RoutingSpec::uniform(),
        },
        Recipe {
            name: "top16",
            description: "top-16 routing over 64 experts, with masked and duplicate slots",
            config: cfg(128, 16, 64, 24, 4, 1),
            tokens: vec![24, 20, 16, 24],
            spec: RoutingSpec {
                masked: 0.05,
                duplicates: 0.2,
                ..Default::default()
            },
        },
        Recipe {
            name: "two_nodes_x4",
            description: "2 nodes x 4 GPUs, 64 experts, top-6: half the traffic crosses nodes",
            config: cfg(128, 6, 64, 32, 4, 2),
            tokens: vec![32, 28, 32, 16, 32, 0, 32, 25],
            spec: RoutingSpec {
                masked: 0.05,
                duplicates: 0.1,
                ..Default::default()
            },
        },
        Recipe {
            name: "hidden_7168",
            description: "hidden 7168 (DeepSeek-V3), 4 ranks, 32 experts, top-8",
            config: cfg(7168, 8, 32, 8, 4, 1),
            tokens: vec![8, 5, 8, 3],
            spec: RoutingSpec::uniform(),
        },
        Recipe {
            name: "wide_deepseek_shape",
            description: "the DeepSeek-V3 decode shape on 8 ranks: 256 experts, top-8, hidden 7168",
            config: cfg(7168, 8, 256, 4, 8, 1),
            tokens: vec![4; 8],
            spec: RoutingSpec {
                skew: Some((16, 0.2)),
                ..Default::default()
            },
        },
    ];

    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    for (i, r) in recipes.into_iter().enumerate() {
        let n_ranks = r.config.n_gpus_per_node * r.config.n_nodes;
        assert_eq!(r.tokens.len(), n_ranks, "{}", r.name);
        let mut rng = Rng::new(1000 + i as u64);
        let topk_ids = r
            .tokens
            .iter()
            .map(|&t| {
                let ids = r
                    .spec
                    .generate(&mut rng, t, r.config.top_k, r.config.n_experts, n_ranks);
                ids.outer_iter().map(|row| row.to_vec()).collect()
            })
            .collect();
        let fx = Fixture {
            name: r.name.into(),
            description: r.description.into(),
            config: r.config,
            seed: 1 + i as u64,
            topk_ids,
        };
        let path = dir.join(format!("{}.json", r.name));
        std::fs::write(&path, fx.to_json()).unwrap();
        println!("wrote {}", path.display());
    }
}
