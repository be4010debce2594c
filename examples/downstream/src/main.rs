//! A downstream crate: its Cargo.toml names only `ep`; its arrays and `bf16` are ep's
//! (`ep::ndarray`, `ep::half`), so they are the versions ep's API takes. One round on the
//! simulator through the device API, checked: identity experts, every token back as it was sent.

use ep::half::bf16;
use ep::ndarray::Array2;
use ep::{Backend, BackendKind, CombineArgs, DispatchArgs, EpBackend, EpComm, EpConfig, HostIo};

/// One round on every rank: dispatch, identity experts, combine; each rank's combined rows.
fn round(backend: &Backend, cfg: &EpConfig, t: usize) -> ep::Result<Vec<Vec<bf16>>> {
    let mut ranks = backend.init_uniform(cfg)?;
    let k = cfg.top_k;
    let results = ep::on_every_rank(&mut ranks, |rank| -> ep::Result<Vec<bf16>> {
        let r = rank.rank();
        let tokens =
            Array2::from_shape_fn((t, cfg.hidden), |(i, c)| bf16::from_f32((i + c + r) as f32));
        let ids = Array2::from_shape_fn((t, k), |(i, j)| {
            ((i * k + j * 5 + r) % cfg.n_experts) as i32
        });
        let weights = Array2::from_elem((t, k), 1.0 / k as f32);
        let std = "standard layout";
        let tokens = rank.upload(tokens.as_slice().expect(std))?;
        let ids = rank.upload(ids.as_slice().expect(std))?;
        let weights = rank.upload(weights.as_slice().expect(std))?;
        let d = rank.dispatch(&DispatchArgs::new(&tokens, &ids, t))?;
        // Identity experts, worked out on the host here (a model runs its GEMM on the device).
        let rows = rank
            .dispatched_to_host(&d)?
            .decode_rows()
            .mapv(bf16::from_f32);
        let y = rank.alloc(d.capacity * d.hidden)?;
        rank.write(&y, rows.as_slice().expect(std))?;
        let out = rank.combine(&d.handle, &CombineArgs::weighted(&y, &weights))?;
        rank.to_host(out.reduced().expect("weighted"))
    });
    results.into_iter().collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cfg = EpConfig::builder()
        .hidden(64)
        .top_k(4)
        .experts(8)
        .max_tokens_per_rank(8);
    let cfg = cfg.gpus_per_node(2).build()?;
    let out = round(&Backend::new(BackendKind::Sim)?, &cfg, 8)?;
    println!(
        "{} ranks, {} values each: every token came back as sent",
        out.len(),
        out[0].len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_through_the_reexports_gives_every_token_back() {
        let cfg = EpConfig::builder()
            .hidden(64)
            .top_k(4)
            .experts(8)
            .max_tokens_per_rank(8);
        let cfg = cfg.gpus_per_node(2).build().unwrap();
        let out = round(&Backend::new(BackendKind::Sim).unwrap(), &cfg, 8).unwrap();
        for (r, rows) in out.iter().enumerate() {
            // Four distinct experts a token, each weighted 1/4: sums of equal powers of two.
            let want = (0..8 * 64).map(|i| bf16::from_f32((i / 64 + i % 64 + r) as f32));
            assert!(rows.iter().copied().eq(want), "rank {r}");
        }
    }
}
