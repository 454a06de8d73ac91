//! The fleet's kernel from per-agent fits (`--local-fit agent`, issue 28 item 4; docs/LOCAL.md
//! §12b): each agent fits the learned residual kernel on its own memory only (no row leaves
//! it), and the fleet takes the elementwise median of the fitted log parameters
//! `[ln σ_r, ln σ_rn, ln ℓ_1..d]` (and the sum family's extra ones) over the agents that
//! have fitted. Every agent then answers with that kernel and refits from it, on its own rows,
//! on its own schedule: a federated fit whose aggregate is a median, so one member's wild
//! kernel moves it by at most one rank.
//!
//! Why: a kernel fitted on one region's rows is right there and often overconfident
//! elsewhere (a long lengthscale extrapolates its region's residuals), and the fleet query
//! combines every routed agent's answer. Measured (docs/LOCAL.md §12b): the traffic-like
//! field by 100 regions 9.76 → 7.26 (the pooled fit: 6.90), air 10.64 → 9.24.

use super::ResidualFamily;
use crate::members::check::median;

/// The consensus of the fitted kernels `(family, log parameters)`: the family held by most
/// of them (ties: the one seen first) and, over the kernels of that family, the elementwise
/// median of their parameters (an even count: the mean of the two middle values). `None`
/// without a kernel. Kernels whose parameter count is not their family's for `d` inputs
/// ([`ResidualFamily::param_len`]) or that hold a non-finite value are left out.
pub fn median_kernel<'a>(
    d: usize,
    kernels: impl IntoIterator<Item = (ResidualFamily, &'a [f64])>,
) -> Option<(ResidualFamily, Vec<f64>)> {
    let valid: Vec<(ResidualFamily, &[f64])> = kernels
        .into_iter()
        .filter(|(f, p)| p.len() == f.param_len(d) && p.iter().all(|v| v.is_finite()))
        .collect();
    let mut counts: Vec<(ResidualFamily, usize)> = Vec::new();
    for (f, _) in &valid {
        match counts.iter_mut().find(|(g, _)| g == f) {
            Some((_, c)) => *c += 1,
            None => counts.push((*f, 1)),
        }
    }
    // The first family among those held most often.
    let family = counts
        .iter()
        .fold(
            None::<(ResidualFamily, usize)>,
            |best, &(f, c)| match best {
                Some((_, b)) if b >= c => best,
                _ => Some((f, c)),
            },
        )?
        .0;
    let chosen: Vec<&[f64]> = valid
        .iter()
        .filter(|(f, _)| *f == family)
        .map(|(_, p)| *p)
        .collect();
    let params = (0..family.param_len(d))
        .map(|j| median(&mut chosen.iter().map(|p| p[j]).collect::<Vec<f64>>()))
        .collect();
    Some((family, params))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SE: ResidualFamily = ResidualFamily::SquaredExponential;

    #[test]
    fn the_median_is_taken_per_parameter_and_is_the_middle_of_an_odd_count() {
        let a = [0.0, 1.0, 2.0];
        let b = [3.0, -1.0, 0.5];
        let c = [1.0, 0.0, 9.0];
        let (f, p) = median_kernel(1, [(SE, &a[..]), (SE, &b[..]), (SE, &c[..])]).unwrap();
        assert_eq!(f, SE);
        assert_eq!(p, vec![1.0, 0.0, 2.0]);
    }

    #[test]
    fn an_even_count_takes_the_mean_of_the_two_middle_values() {
        let k = [
            [0.0, 0.0, 0.0],
            [1.0, 2.0, 4.0],
            [3.0, 4.0, 8.0],
            [10.0, 10.0, 10.0],
        ];
        let (_, p) = median_kernel(1, k.iter().map(|p| (SE, &p[..]))).unwrap();
        assert_eq!(p, vec![2.0, 3.0, 6.0]);
    }

    #[test]
    fn one_wild_kernel_moves_the_median_by_at_most_one_rank() {
        let honest: Vec<[f64; 3]> = (0..9).map(|i| [0.1 * i as f64, -1.0, 0.5]).collect();
        let without = median_kernel(1, honest.iter().map(|p| (SE, &p[..])))
            .unwrap()
            .1;
        let wild = [1e6, 1e6, -1e6];
        let with = median_kernel(
            1,
            honest.iter().map(|p| (SE, &p[..])).chain([(SE, &wild[..])]),
        )
        .unwrap()
        .1;
        // Ten values: the mean of the 5th and 6th; nine: the 5th. The wild one shifts by half
        // a rank, never to its own value.
        assert!((with[0] - 0.45).abs() < 1e-12, "{with:?}");
        assert_eq!(with[1], without[1]);
        assert_eq!(with[2], without[2]);
    }

    #[test]
    fn the_family_held_most_wins_and_invalid_kernels_are_left_out() {
        let m32 = ResidualFamily::Matern32;
        let a = [0.0, 0.0, 0.0];
        let b = [1.0, 1.0, 1.0];
        let nan = [f64::NAN, 0.0, 0.0];
        let short = [0.0, 0.0];
        let kernels = [
            (m32, &a[..]),
            (SE, &b[..]),
            (SE, &b[..]),
            (m32, &nan[..]),
            (m32, &short[..]),
        ];
        let (f, p) = median_kernel(1, kernels).unwrap();
        assert_eq!(f, SE);
        assert_eq!(p, b.to_vec());
        // A tie goes to the family seen first.
        let (f, _) = median_kernel(1, [(m32, &a[..]), (SE, &b[..])]).unwrap();
        assert_eq!(f, m32);
        assert!(median_kernel(1, [(SE, &nan[..])]).is_none());
        assert!(median_kernel(1, std::iter::empty()).is_none());
    }
}
