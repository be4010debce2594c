//! Random routing generators: the recipes behind the fixtures, the soak case and the CLI demo.

use ndarray::Array2;

use crate::rng::Rng;

/// How to draw `topk_ids` for one rank.
#[derive(Clone, Debug, Default)]
pub struct RoutingSpec {
    /// With probability `.1`, a slot picks one of the first `.0` experts (a hot set).
    pub skew: Option<(usize, f32)>,
    /// Fraction of slots masked with -1.
    pub masked: f32,
    /// Fraction of tokens whose last slot repeats their first expert.
    pub duplicates: f32,
    /// Experts of this rank are never chosen (the rank receives nothing).
    pub avoid_rank: Option<usize>,
    /// Every slot of every token names this expert.
    pub only_expert: Option<usize>,
}

impl RoutingSpec {
    /// Distinct experts per token, drawn uniformly; nothing masked or duplicated.
    pub fn uniform() -> Self {
        RoutingSpec::default()
    }

    /// `[n_tokens, top_k]` ids for a world of `n_experts` experts on `n_ranks` ranks.
    pub fn generate(
        &self,
        rng: &mut Rng,
        n_tokens: usize,
        top_k: usize,
        n_experts: usize,
        n_ranks: usize,
    ) -> Array2<i32> {
        let per_rank = n_experts / n_ranks;
        let allowed: Vec<usize> = (0..n_experts)
            .filter(|&e| self.avoid_rank != Some(e / per_rank))
            .collect();
        let mut ids = Array2::<i32>::zeros((n_tokens, top_k));
        for t in 0..n_tokens {
            let mut row: Vec<i32> = Vec::with_capacity(top_k);
            while row.len() < top_k {
                let e = match (self.only_expert, self.skew) {
                    (Some(e), _) => e,
                    (None, Some((hot, p))) if rng.chance(p) => {
                        allowed[rng.below(hot.min(allowed.len()))]
                    }
                    _ => allowed[rng.below(allowed.len())],
                } as i32;
                // Distinct unless the pool is too small (or a single expert is forced).
                if self.only_expert.is_some() || allowed.len() < top_k || !row.contains(&e) {
                    row.push(e);
                }
            }
            if top_k > 1 && rng.chance(self.duplicates) {
                row[top_k - 1] = row[0];
            }
            for x in row.iter_mut() {
                if rng.chance(self.masked) {
                    *x = -1;
                }
            }
            for (k, x) in row.into_iter().enumerate() {
                ids[[t, k]] = x;
            }
        }
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avoid_rank_and_masking_hold() {
        let mut rng = Rng::new(1);
        let spec = RoutingSpec {
            masked: 0.5,
            avoid_rank: Some(2),
            ..Default::default()
        };
        let ids = spec.generate(&mut rng, 200, 4, 16, 4);
        assert!(ids.iter().all(|&e| e == -1 || !(8..12).contains(&e)));
        let masked = ids.iter().filter(|&&e| e == -1).count();
        assert!((300..500).contains(&masked), "{masked}");
    }
}
