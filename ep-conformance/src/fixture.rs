//! Fixtures: routing scenarios stored as data files under the workspace's `fixtures/` and
//! embedded at build time. A fixture fixes the config and every rank's `topk_ids` literally; the
//! token values and router weights come from its seed.

use ep_core::{EpConfig, Format};
use ndarray::Array2;
use serde::{Deserialize, Serialize};

use crate::scenario::RoundInputs;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
}

/// The config fields a fixture sets (the rest take `EpConfig::new`'s defaults).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FixtureConfig {
    /// `EpConfig::hidden`.
    pub hidden: usize,
    /// `EpConfig::top_k`.
    pub top_k: usize,
    /// `EpConfig::n_experts`.
    pub n_experts: usize,
    /// `EpConfig::max_tokens_per_rank`.
    pub max_tokens_per_rank: usize,
    /// `EpConfig::n_gpus_per_node`.
    pub n_gpus_per_node: usize,
    /// `EpConfig::n_nodes`.
    pub n_nodes: usize,
}

/// One routing scenario, as stored in `fixtures/NAME.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Fixture {
    /// The scenario's name; an embedded fixture's matches its file name, which `load` takes.
    pub name: String,
    /// What the scenario exercises, for listings.
    pub description: String,
    /// The world it runs in.
    pub config: FixtureConfig,
    /// Seed of the token values and router weights.
    pub seed: u64,
    /// `topk_ids[rank][token][slot]`.
    pub topk_ids: Vec<Vec<Vec<i32>>>,
}

impl Fixture {
    /// Names of every embedded fixture, sorted.
    pub fn names() -> Vec<&'static str> {
        embedded::FIXTURE_FILES.iter().map(|(n, _)| *n).collect()
    }

    /// An embedded fixture by name.
    pub fn load(name: &str) -> Result<Fixture, String> {
        let (_, text) = embedded::FIXTURE_FILES
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| {
                format!(
                    "no fixture named `{name}`; known: {}",
                    Fixture::names().join(", ")
                )
            })?;
        Fixture::parse(text).map_err(|e| format!("fixture {name}: {e}"))
    }

    /// A fixture file from disk (for `ep run --scenario FILE`).
    pub fn read(path: &std::path::Path) -> Result<Fixture, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Fixture::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// A fixture from its JSON text, checked: a valid config, one `topk_ids` list per rank,
    /// `top_k` ids per token, and token values that fit in memory.
    pub fn parse(text: &str) -> Result<Fixture, String> {
        let fx: Fixture = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let cfg = fx.config(Format::Bf16);
        // Before any size is computed from the config: sizes that wrap are config errors.
        cfg.validate().map_err(|e| format!("invalid config: {e}"))?;
        if fx.topk_ids.len() != cfg.n_ranks() {
            return Err(format!(
                "topk_ids has {} ranks, the topology has {}",
                fx.topk_ids.len(),
                cfg.n_ranks()
            ));
        }
        for (r, rank) in fx.topk_ids.iter().enumerate() {
            if let Some(t) = rank.iter().position(|ids| ids.len() != cfg.top_k) {
                return Err(format!(
                    "rank {r} token {t} does not have top_k = {} ids",
                    cfg.top_k
                ));
            }
        }
        // The token values `inputs` makes: the bytes asked for are named, not an abort.
        let tokens: usize = fx.topk_ids.iter().map(Vec::len).sum();
        let bytes = tokens
            .checked_mul(cfg.hidden)
            .and_then(|n| n.checked_mul(2))
            .filter(|&b| b <= isize::MAX as usize);
        let fits = bytes.is_some_and(|b| Vec::<u8>::new().try_reserve_exact(b).is_ok());
        if !fits {
            return Err(format!(
                "out of memory: its {tokens} tokens of hidden = {} need {} bytes of token values",
                cfg.hidden,
                bytes.map_or("more than isize::MAX".to_string(), |b| b.to_string())
            ));
        }
        Ok(fx)
    }

    /// The fixture's world as an [`EpConfig`] in token format `format`.
    pub fn config(&self, format: Format) -> EpConfig {
        let c = &self.config;
        EpConfig::new(
            c.hidden,
            c.top_k,
            c.n_experts,
            c.max_tokens_per_rank,
            c.n_gpus_per_node,
        )
        .with_nodes(c.n_nodes)
        .with_format(format)
    }

    /// The round this fixture describes.
    pub fn inputs(&self) -> RoundInputs {
        let ids = self
            .topk_ids
            .iter()
            .map(|rank| {
                let t = rank.len();
                Array2::from_shape_vec((t, self.config.top_k), rank.concat()).expect("checked")
            })
            .collect();
        RoundInputs::with_random_values(self.config.hidden, ids, self.seed)
    }

    /// JSON with one token per line: readable diffs, small files.
    pub fn to_json(&self) -> String {
        let mut s = String::from("{\n");
        s += &format!(
            "  \"name\": {},\n",
            serde_json::to_string(&self.name).unwrap()
        );
        s += &format!(
            "  \"description\": {},\n",
            serde_json::to_string(&self.description).unwrap()
        );
        s += &format!(
            "  \"config\": {},\n",
            serde_json::to_string(&self.config).unwrap()
        );
        s += &format!("  \"seed\": {},\n", self.seed);
        s += "  \"topk_ids\": [\n";
        for (r, rank) in self.topk_ids.iter().enumerate() {
            s += "    [\n";
            for (t, ids) in rank.iter().enumerate() {
                let sep = if t + 1 < rank.len() { "," } else { "" };
                s += &format!("      {}{sep}\n", serde_json::to_string(ids).unwrap());
            }
            s += if r + 1 < self.topk_ids.len() {
                "    ],\n"
            } else {
                "    ]\n"
            };
        }
        s += "  ]\n}\n";
        s
    }
}

/// The stored snapshot text of `name`, if one is embedded.
pub fn embedded_snapshot(name: &str) -> Option<&'static str> {
    embedded::SNAPSHOT_FILES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_hidden(hidden: usize) -> String {
        let mut fx = Fixture::load("uniform").unwrap();
        fx.config.hidden = hidden;
        fx.to_json()
    }

    /// hidden 2^40 used to panic with a LayoutError; 2^60 wrapped the size arithmetic.
    #[test]
    fn huge_hidden_is_an_error_not_a_panic() {
        let e = Fixture::parse(&with_hidden(1 << 60)).unwrap_err();
        assert!(e.contains("hidden"), "{e}");
        let e = Fixture::parse(&with_hidden(1 << 40)).unwrap_err();
        assert!(e.contains("out of memory") && e.contains("bytes"), "{e}");
        Fixture::parse(&with_hidden(256)).unwrap();
    }
}
