//! `EpConfig`: the shape of an expert-parallel world, identical on every rank.

use std::time::Duration;

use crate::error::{ConfigError, EpError, Result};
use crate::format::{Format, MessageLayout, TokenFormat};

/// Ids travel as u16 in a message and `0xFFFF` is the masked id, so expert ids stop below it.
pub const MAX_EXPERTS: usize = u16::MAX as usize;
/// Slots per token; generous, but bounded so a message's id field stays small.
pub const MAX_TOP_K: usize = 64;

/// Everything every rank must agree on. Build it by name with [`EpConfig::builder`] (checked when
/// built), or with [`EpConfig::new`] and the `with_*` methods; [`EpConfig::validate`] (backends
/// call it at init) returns a typed error for a bad value.
#[derive(Clone, Debug, PartialEq)]
pub struct EpConfig {
    /// Elements per token row.
    pub hidden: usize,
    /// Expert slots per token.
    pub top_k: usize,
    /// Experts across all ranks.
    pub n_experts: usize,
    /// Upper bound on the tokens one rank brings to a round; buffers are sized for it.
    pub max_tokens_per_rank: usize,
    /// Ranks (GPUs) per node.
    pub n_gpus_per_node: usize,
    /// Nodes; ranks on different nodes reach each other through the inter-node transport.
    pub n_nodes: usize,
    /// How dispatched token rows are encoded.
    pub format: Format,
    /// How long any wait for a peer may take before it returns [`EpError::Timeout`].
    pub timeout: Duration,
    /// Dispatch also places the rank's own tokens as group 0 (the shared expert); combine adds
    /// group 0's output in f32 before the single rounding. Needs router weights at combine.
    pub fused_shared_expert: bool,
    /// `Some(allreduce_world_size)`: skip the all-to-all. Tokens go only to experts on their own
    /// device, combine sums only those slots, and an all-reduce over `allreduce_world_size`
    /// ranks (the caller's) adds the partial outputs. Single node only.
    pub skip_a2a: Option<usize>,
}

impl EpConfig {
    /// A config built by name; [`EpConfigBuilder::build`] validates it.
    ///
    /// ```
    /// use ep_core::{EpConfig, Format};
    /// let config = EpConfig::builder()
    ///     .hidden(7168)
    ///     .top_k(8)
    ///     .experts(256)
    ///     .max_tokens_per_rank(128)
    ///     .gpus_per_node(8)
    ///     .format(Format::Fp8)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(config.n_local_experts(), 32);
    /// ```
    pub fn builder() -> EpConfigBuilder {
        EpConfigBuilder(EpConfig::new(0, 0, 0, 0, 0))
    }

    /// A single-node BF16 config with a 10 s deadline.
    pub fn new(
        hidden: usize,
        top_k: usize,
        n_experts: usize,
        max_tokens_per_rank: usize,
        n_gpus_per_node: usize,
    ) -> Self {
        EpConfig {
            hidden,
            top_k,
            n_experts,
            max_tokens_per_rank,
            n_gpus_per_node,
            n_nodes: 1,
            format: Format::Bf16,
            timeout: Duration::from_secs(10),
            fused_shared_expert: false,
            skip_a2a: None,
        }
    }

    /// This config with the fused shared expert ([`EpConfig::fused_shared_expert`]).
    pub fn with_shared_expert(mut self) -> Self {
        self.fused_shared_expert = true;
        self
    }

    /// This config without the all-to-all ([`EpConfig::skip_a2a`]).
    pub fn with_skip_a2a(mut self, allreduce_world_size: usize) -> Self {
        self.skip_a2a = Some(allreduce_world_size);
        self
    }

    /// This config over `n_nodes` nodes.
    pub fn with_nodes(mut self, n_nodes: usize) -> Self {
        self.n_nodes = n_nodes;
        self
    }

    /// This config with rows encoded as `format`.
    pub fn with_format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }

    /// This config with `timeout` as every wait's deadline.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Ranks in the world: nodes times GPUs per node.
    pub fn n_ranks(&self) -> usize {
        self.n_gpus_per_node * self.n_nodes
    }

    /// Experts each rank holds.
    pub fn n_local_experts(&self) -> usize {
        self.n_experts / self.n_ranks()
    }

    /// The rank that holds global expert `e`.
    pub fn expert_rank(&self, e: usize) -> usize {
        e / self.n_local_experts()
    }

    /// The node of rank `r`.
    pub fn node_of(&self, r: usize) -> usize {
        r / self.n_gpus_per_node
    }

    /// Groups in the dispatch output: the shared expert (group 0, when fused), then one per
    /// local expert.
    pub fn n_groups(&self) -> usize {
        self.n_local_experts() + self.shared_groups()
    }

    /// 1 with the fused shared expert, else 0: the group index of local expert `i` is
    /// `i + shared_groups()`.
    pub fn shared_groups(&self) -> usize {
        usize::from(self.fused_shared_expert)
    }

    /// The most rows a rank can receive, padding included: every source's tokens can reach every
    /// local expert, but a token brings at most `top_k` rows; the shared expert adds the rank's
    /// own tokens.
    pub fn max_recv_rows(&self) -> usize {
        let l = self.n_local_experts();
        let unpadded = self.max_tokens_per_rank * self.n_ranks() * l.min(self.top_k);
        let shared = self.shared_groups() * self.max_tokens_per_rank;
        unpadded + shared + self.n_groups() * (self.format.group_row_multiple() - 1)
    }

    /// The tokens `[start, end)` whose shared-expert rows rank `rank` computes: all of its tokens,
    /// or under skip_a2a its share of the `n_tokens` tokens every rank of the all-reduce holds.
    pub fn shared_token_range(&self, rank: usize, n_tokens: usize) -> std::ops::Range<usize> {
        match self.skip_a2a {
            None => 0..n_tokens,
            Some(w) => {
                let r = rank % w;
                let start = r * (n_tokens / w) + r.min(n_tokens % w);
                start..start + (n_tokens + w - r - 1) / w
            }
        }
    }

    /// The ranks a token with expert ids `ids` reaches (masked slots skipped), ascending, each once.
    pub fn ranks_reached(&self, ids: impl IntoIterator<Item = i32>) -> Vec<usize> {
        let l = self.n_local_experts();
        let mut r: Vec<usize> = ids
            .into_iter()
            .filter(|&e| e >= 0)
            .map(|e| e as usize / l)
            .collect();
        r.sort_unstable();
        r.dedup();
        r
    }

    /// Whether a token on `src` may send to expert `e` (skip_a2a keeps tokens on their device).
    pub fn routes_to(&self, src: usize, e: usize) -> bool {
        self.skip_a2a.is_none() || self.expert_rank(e) == src
    }

    /// Checks every field; the first problem found is returned.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let at_least = |field, value: usize, min: usize| {
            if value < min {
                Err(ConfigError::TooSmall { field, value, min })
            } else {
                Ok(())
            }
        };
        let at_most = |field, value: usize, max: usize| {
            if value > max {
                Err(ConfigError::TooLarge { field, value, max })
            } else {
                Ok(())
            }
        };
        at_least("hidden", self.hidden, 1)?;
        at_least("top_k", self.top_k, 1)?;
        at_most("top_k", self.top_k, MAX_TOP_K)?;
        at_least("n_experts", self.n_experts, 1)?;
        at_most("n_experts", self.n_experts, MAX_EXPERTS - 1)?;
        at_least("max_tokens_per_rank", self.max_tokens_per_rank, 1)?;
        at_most(
            "max_tokens_per_rank",
            self.max_tokens_per_rank,
            i32::MAX as usize,
        )?;
        at_least("n_gpus_per_node", self.n_gpus_per_node, 1)?;
        at_least("n_nodes", self.n_nodes, 1)?;
        at_most("n_nodes", self.n_nodes, usize::MAX / self.n_gpus_per_node)?;
        at_least("timeout (ms)", self.timeout.as_millis() as usize, 1)?;
        if !self.n_experts.is_multiple_of(self.n_ranks()) {
            return Err(ConfigError::ExpertsNotDivisible {
                n_experts: self.n_experts,
                n_ranks: self.n_ranks(),
            });
        }
        if let Some(w) = self.skip_a2a {
            if self.n_nodes > 1 {
                return Err(ConfigError::Incompatible {
                    what: "skip_a2a with n_nodes > 1",
                    why: "skip_a2a keeps every token on its own device, so no traffic may cross nodes; use n_nodes = 1",
                });
            }
            at_least("allreduce_world_size", w, 1)?;
            at_most("allreduce_world_size", w, self.n_ranks())?;
        }
        let block = self.format.block();
        if !self.hidden.is_multiple_of(block) {
            return Err(ConfigError::HiddenNotAllowed {
                format: self.format.name(),
                hidden: self.hidden,
                block,
            });
        }
        self.buffer_bytes()?;
        Ok(())
    }

    /// The bytes of the largest buffer a rank's world needs, computed with checked arithmetic:
    /// a size that would pass `isize::MAX` (the most one allocation may ask for) is a
    /// [`ConfigError::SizeOverflow`] naming the field whose factor pushed it over. Every size a
    /// backend derives from the config (receive and send buffers, dispatch and combine outputs) is
    /// at most this, so after [`EpConfig::validate`] none of them wraps. Needs the other fields
    /// valid (at least 1; `n_experts` divisible by the ranks).
    pub fn buffer_bytes(&self) -> Result<usize, ConfigError> {
        // A product of (field, factor) pairs, in u128 so that nothing wraps; past the limit, the
        // field with the largest factor is the one named.
        let product = |what: &'static str, factors: &[(&'static str, usize, u128)]| {
            let p = factors.iter().fold(1u128, |p, f| p.saturating_mul(f.2));
            if p <= isize::MAX as u128 {
                return Ok(p as usize);
            }
            let &(field, value, _) = factors.iter().max_by_key(|f| f.2).unwrap();
            Err(ConfigError::SizeOverflow { field, value, what })
        };
        let (h, t, k) = (self.hidden, self.max_tokens_per_rank, self.top_k);
        let n = self.n_gpus_per_node as u128 * self.n_nodes as u128;
        // One message: at most 2 payload bytes per element (BF16), less than one scale byte per
        // element, 16 for the source index, 2 per id, 16 of padding per part. Bounding it first
        // keeps the format's own size functions from wrapping.
        let msg_bound = 4 * h as u128 + 64 + 2 * k as u128;
        product("one token's message", &[("hidden", h, msg_bound)])?;
        let msg = MessageLayout::new(self.format, h, k).bytes as u128;
        let row = 2 * h as u128;
        // The most rows a rank receives (max_recv_rows, padding and the shared expert included).
        let rows = t as u128 * n * self.n_local_experts().min(k) as u128
            + (self.n_groups() * self.format.group_row_multiple()) as u128
            + t as u128;
        let rows_of = |f: usize| ("max_tokens_per_rank", t, rows.max(f as u128));
        let bytes = [
            // Dispatch receive buffer: [n_local_experts, n_ranks, max_tokens, msg].
            product(
                "the dispatch receive buffer",
                &[
                    ("hidden", h, msg),
                    ("max_tokens_per_rank", t, t as u128),
                    ("n_experts", self.n_experts, self.n_experts as u128),
                ],
            )?,
            // Combine receive buffer and the unreduced output: [max_tokens, top_k, hidden] bf16.
            product(
                "the combine receive buffer",
                &[
                    ("hidden", h, row),
                    ("max_tokens_per_rank", t, t as u128),
                    ("top_k", k, k as u128),
                ],
            )?,
            // The dispatch output and the combine's send buffer: rows x message, rows x row.
            product("the dispatch output", &[("hidden", h, msg), rows_of(0)])?,
            product("the combine send buffer", &[("hidden", h, row), rows_of(0)])?,
        ];
        Ok(bytes.into_iter().max().unwrap())
    }

    /// Validates `configs` (one per rank, in rank order) and checks that they are identical, as
    /// `ep_init` does on every rank: a rank with a different config gets an error, never a hang.
    pub fn check_world(configs: &[EpConfig]) -> Result<&EpConfig> {
        let first = configs.first().ok_or(ConfigError::WrongRankCount {
            expected: 1,
            got: 0,
        })?;
        first.validate()?;
        if configs.len() != first.n_ranks() {
            return Err(ConfigError::WrongRankCount {
                expected: first.n_ranks(),
                got: configs.len(),
            }
            .into());
        }
        for (rank, c) in configs.iter().enumerate().skip(1) {
            if let Some((field, expected, got)) = first.first_difference(c) {
                return Err(EpError::ConfigMismatch {
                    rank,
                    field,
                    expected,
                    got,
                });
            }
        }
        Ok(first)
    }

    /// The config as bytes another process reads back with [`EpConfig::from_bytes`]: every
    /// field, little-endian, the format by name (so a process built with other formats still
    /// reads it).
    pub fn to_bytes(&self) -> Vec<u8> {
        let words = [
            self.hidden as u64,
            self.top_k as u64,
            self.n_experts as u64,
            self.max_tokens_per_rank as u64,
            self.n_gpus_per_node as u64,
            self.n_nodes as u64,
            self.timeout.as_nanos().min(u64::MAX as u128) as u64,
            self.fused_shared_expert as u64,
            self.skip_a2a.map_or(0, |w| w as u64 + 1),
        ];
        let mut v: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        v.extend(self.format.name().as_bytes());
        v
    }

    /// A config from [`EpConfig::to_bytes`]; `None` when the bytes are not one.
    pub fn from_bytes(b: &[u8]) -> Option<EpConfig> {
        const WORDS: usize = 9;
        let (words, name) = b.split_at_checked(WORDS * 8)?;
        let w: Vec<u64> = words
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let n = |i: usize| usize::try_from(w[i]).ok();
        Some(EpConfig {
            hidden: n(0)?,
            top_k: n(1)?,
            n_experts: n(2)?,
            max_tokens_per_rank: n(3)?,
            n_gpus_per_node: n(4)?,
            n_nodes: n(5)?,
            timeout: Duration::from_nanos(w[6]),
            fused_shared_expert: w[7] != 0,
            skip_a2a: n(8)?.checked_sub(1),
            format: std::str::from_utf8(name).ok()?.parse().ok()?,
        })
    }

    /// The first field in which `other` differs, with both values printed.
    pub fn first_difference(&self, other: &EpConfig) -> Option<(&'static str, String, String)> {
        macro_rules! cmp {
            ($($f:ident),*) => {$(
                if self.$f != other.$f {
                    return Some((stringify!($f), format!("{:?}", self.$f), format!("{:?}", other.$f)));
                }
            )*};
        }
        cmp!(
            hidden,
            top_k,
            n_experts,
            max_tokens_per_rank,
            n_gpus_per_node,
            n_nodes,
            format,
            timeout,
            fused_shared_expert,
            skip_a2a
        );
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topology_arithmetic() {
        let c = EpConfig::new(128, 8, 256, 64, 4).with_nodes(2);
        assert_eq!(c.n_ranks(), 8);
        assert_eq!(c.n_local_experts(), 32);
        assert_eq!(c.expert_rank(33), 1);
        assert_eq!(c.node_of(5), 1);
        assert_eq!(c.max_recv_rows(), 64 * 8 * 8);
        c.validate().unwrap();
    }

    #[test]
    fn the_builder_names_what_is_missing_and_matches_new() {
        let built = EpConfig::builder()
            .hidden(128)
            .top_k(8)
            .experts(256)
            .max_tokens_per_rank(64)
            .gpus_per_node(4)
            .nodes(2)
            .format(Format::Nvfp4)
            .shared_expert(true)
            .build()
            .unwrap();
        let want = EpConfig::new(128, 8, 256, 64, 4)
            .with_nodes(2)
            .with_format(Format::Nvfp4)
            .with_shared_expert();
        assert_eq!(built, want);
        let e = EpConfig::builder()
            .hidden(128)
            .top_k(8)
            .experts(256)
            .gpus_per_node(4)
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("max_tokens_per_rank"), "{e}");
    }

    #[test]
    fn bad_fields_are_named() {
        let c = EpConfig::new(128, 8, 250, 64, 4);
        assert_eq!(
            c.validate(),
            Err(ConfigError::ExpertsNotDivisible {
                n_experts: 250,
                n_ranks: 4
            })
        );
        let c = EpConfig::new(100, 8, 256, 64, 4);
        let e = c.validate().unwrap_err();
        assert!(e.to_string().contains("bf16") && e.to_string().contains("100"));
        let c = EpConfig::new(128, 0, 256, 64, 4);
        assert!(matches!(
            c.validate(),
            Err(ConfigError::TooSmall { field: "top_k", .. })
        ));
    }

    #[test]
    fn shared_token_ranges_partition_the_tokens() {
        for w in 1..=5 {
            let c = EpConfig::new(128, 2, 20, 64, 5).with_skip_a2a(w);
            for t in [0, 1, 7, 13, 64] {
                let mut next = 0;
                for r in 0..w {
                    let range = c.shared_token_range(r, t);
                    assert_eq!(range.start, next, "w {w} t {t} r {r}");
                    next = range.end;
                }
                assert_eq!(next, t);
            }
        }
    }

    /// Sizes that wrap a usize, or pass the most one allocation may ask for, are config errors
    /// naming the field, at validation: before any backend computes a buffer size from them.
    #[test]
    fn sizes_that_overflow_are_config_errors() {
        let field_of = |c: &EpConfig| match c.validate() {
            Err(ConfigError::SizeOverflow { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        // hidden 2^60 with 8 tokens: the size arithmetic used to wrap, init passed, and a
        // 0-token dispatch aborted.
        let c = EpConfig::new(1 << 60, 8, 16, 8, 4);
        assert_eq!(field_of(&c), "hidden");
        assert!(c.validate().unwrap_err().to_string().contains("hidden"));
        // 2^40 fits one message, but not 2^40 x tokens x experts... (2^47 x 16 experts = 2^51
        // fits; more tokens do not).
        let c = EpConfig::new(1 << 40, 8, 16, 1 << 20, 4);
        assert_eq!(field_of(&c), "hidden");
        // A buffer 2^40 x 2 x 8 x 16 x ... = 2^48 bytes fits the address range: valid (its
        // allocation fails instead, with EpError::OutOfMemory).
        let c = EpConfig::new(1 << 40, 8, 16, 8, 4);
        assert!(c.validate().is_ok());
        assert!(c.buffer_bytes().unwrap() >= (1 << 40) * 8 * 16);
        // n_experts x max_tokens x message overflows though each alone is allowed; the largest
        // factor is named.
        let c = EpConfig::new(1 << 24, 8, 60_000, i32::MAX as usize, 4);
        assert_eq!(field_of(&c), "max_tokens_per_rank");
        // So many ranks that n_ranks itself wraps.
        let c = EpConfig::new(128, 8, 16, 8, usize::MAX / 2).with_nodes(4);
        assert!(matches!(
            c.validate(),
            Err(ConfigError::TooLarge {
                field: "n_nodes",
                ..
            })
        ));
        // Realistic shapes pass.
        EpConfig::new(7168, 8, 256, 4096, 8).validate().unwrap();
    }

    #[test]
    fn mismatch_names_rank_and_field() {
        let a = EpConfig::new(128, 8, 256, 64, 4);
        let mut b = a.clone();
        b.top_k = 4;
        let world = vec![a.clone(), a.clone(), b, a];
        match EpConfig::check_world(&world) {
            Err(EpError::ConfigMismatch { rank, field, .. }) => {
                assert_eq!((rank, field), (2, "top_k"))
            }
            other => panic!("{other:?}"),
        }
    }
}

/// [`EpConfig`] by name ([`EpConfig::builder`]): the five sizes are required (one left out is
/// reported as too small by [`EpConfigBuilder::build`]); the rest default as in
/// [`EpConfig::new`].
#[derive(Clone, Debug)]
#[must_use]
pub struct EpConfigBuilder(EpConfig);

impl EpConfigBuilder {
    /// Elements per token row.
    pub fn hidden(mut self, hidden: usize) -> Self {
        self.0.hidden = hidden;
        self
    }
    /// Expert slots per token.
    pub fn top_k(mut self, top_k: usize) -> Self {
        self.0.top_k = top_k;
        self
    }
    /// Experts across all ranks.
    pub fn experts(mut self, n_experts: usize) -> Self {
        self.0.n_experts = n_experts;
        self
    }
    /// The most tokens one rank brings to a round.
    pub fn max_tokens_per_rank(mut self, max_tokens: usize) -> Self {
        self.0.max_tokens_per_rank = max_tokens;
        self
    }
    /// Ranks per node.
    pub fn gpus_per_node(mut self, n: usize) -> Self {
        self.0.n_gpus_per_node = n;
        self
    }
    /// Nodes (default 1).
    pub fn nodes(mut self, n: usize) -> Self {
        self.0.n_nodes = n;
        self
    }
    /// How rows are encoded (default BF16).
    pub fn format(mut self, format: Format) -> Self {
        self.0.format = format;
        self
    }
    /// Every wait's deadline (default 10 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.0.timeout = timeout;
        self
    }
    /// Dispatch also places the rank's own tokens as group 0 (default off).
    pub fn shared_expert(mut self, on: bool) -> Self {
        self.0.fused_shared_expert = on;
        self
    }
    /// Skip the all-to-all; an all-reduce over `allreduce_world_size` ranks adds the partial
    /// outputs (default off).
    pub fn skip_a2a(mut self, allreduce_world_size: Option<usize>) -> Self {
        self.0.skip_a2a = allreduce_world_size;
        self
    }
    /// The config, or the first thing wrong with it ([`EpConfig::validate`]).
    pub fn build(self) -> Result<EpConfig> {
        self.0.validate()?;
        Ok(self.0)
    }
}
