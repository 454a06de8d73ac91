//! Sizes the machine cannot hold: [`check_memory`] refuses an option whose memory alone
//! exceeds the machine's (a run would otherwise swap or be killed, silently, hours later), and
//! names the memory it would need: `--inducing 100000 needs 80 GB for one m × m matrix (m² ×
//! 8 bytes); this machine has 23 GiB`.
//!
//! Each count is a lower bound of what the option allocates (every agent holds its own m × m
//! natural parameters, its importance caches `a [k, m, m]`, its site window's rows), so a
//! refused run could not have run; an accepted one may still need more. The check is a pure
//! function of the sizes and the machine's memory; the drivers read the memory at their edge
//! with [`machine_memory`].

use coolgp::{ProjectionMode, UpdateMode};

use crate::{ConfigError, Driver};

/// The sizes of a run that decide its memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sizes {
    /// Agents held by this process: a simulated fleet's count; a node or a Python agent: 1.
    pub agents: usize,
    /// Inducing inputs m.
    pub inducing: usize,
    /// Importance samples k (`None` unless the update mode is importance).
    pub samples: Option<usize>,
    /// The site window's points and the input dimension d (`None` unless the projection mode
    /// is fleet, or d is not known yet).
    pub window: Option<(usize, usize)>,
    /// Rows B of each agent's local memory (0: off), whose B × B factor it holds.
    pub local_memory: usize,
    /// The training rows all these agents see in all, where known (a simulated stream): agent
    /// i's memory holds min(B, n_i) rows, so the memories hold at most min(agents · B², rows ·
    /// B) factor entries. `None`: every memory may fill.
    pub rows: Option<usize>,
}

impl Sizes {
    /// The sizes of `agents` agents at `inducing` inputs m, in update `mode` and `projection`
    /// mode with a site window of `window` points, on rows of `d` inputs (`None`: not known).
    pub fn of(
        agents: usize,
        inducing: usize,
        mode: UpdateMode,
        projection: ProjectionMode,
        window: usize,
        d: Option<usize>,
    ) -> Sizes {
        let samples = match mode {
            UpdateMode::Importance { samples, .. } => Some(samples),
            UpdateMode::Frozen | UpdateMode::Exact => None,
        };
        let fleet = projection == ProjectionMode::Fleet;
        Sizes {
            agents,
            inducing,
            samples,
            window: d.filter(|_| fleet).map(|d| (window, d)),
            local_memory: 0,
            rows: None,
        }
    }

    /// These sizes with a local memory of `b` rows per agent.
    pub fn with_local_memory(self, b: usize) -> Sizes {
        Sizes {
            local_memory: b,
            ..self
        }
    }

    /// These sizes for agents that see `rows` training rows in all ([`Sizes::rows`]).
    pub fn with_rows(self, rows: usize) -> Sizes {
        Sizes {
            rows: Some(rows),
            ..self
        }
    }
}

/// Refuses the first size (inducing inputs, importance samples, site window, local memory) whose memory
/// alone exceeds `machine` bytes, naming the option as `driver` spells it.
///
/// # Errors
/// [`ConfigError::TooLarge`] with the option, the bytes needed, what they hold and how they
/// are counted.
pub fn check_memory(s: &Sizes, machine: u64, driver: Driver) -> Result<(), ConfigError> {
    let agents = s.agents.max(1) as u128;
    let m = s.inducing as u128;
    let mm = m.saturating_mul(m).saturating_mul(8);
    // Per agent, or for each of several agents.
    let (each, times) = if agents == 1 {
        ("", String::new())
    } else {
        (" per agent", format!("{agents} agents × "))
    };
    let mut asks = vec![(
        driver.spell("inducing", s.inducing),
        agents.saturating_mul(mm),
        format!("one m × m matrix{each}"),
        format!("{times}m² × 8 bytes"),
    )];
    if let Some(k) = s.samples {
        asks.push((
            driver.spell("samples", k),
            agents.saturating_mul(k as u128).saturating_mul(mm),
            format!("the importance caches{each}"),
            format!("{times}k × m² × 8 bytes at m = {m}"),
        ));
    }
    if let Some((points, d)) = s.window {
        let row = (d as u128 + 1) * 8;
        asks.push((
            driver.spell("site-window", points),
            agents.saturating_mul(points as u128).saturating_mul(row),
            format!("the site window's rows{each}"),
            format!("{times}POINTS × (d + 1) × 8 bytes at d = {d}"),
        ));
    }
    if s.local_memory > 0 {
        let b = s.local_memory as u128;
        let full = agents.saturating_mul(b.saturating_mul(b));
        // Agent i holds min(B, n_i) rows: Σ min(B, n_i)² ≤ min(agents · B², rows · B).
        let (entries, formula) = match s.rows.map(|n| (n as u128).saturating_mul(b)) {
            Some(seen) if seen < full => (seen, format!("{} rows seen × B × 8 bytes", seen / b)),
            _ => (full, format!("{times}B² × 8 bytes")),
        };
        asks.push((
            driver.spell("local-memory", s.local_memory),
            entries.saturating_mul(8),
            format!("the local memory's B × B factor{each}"),
            formula,
        ));
    }
    match asks.into_iter().find(|a| a.1 > u128::from(machine)) {
        None => Ok(()),
        Some((option, needed, what, formula)) => Err(ConfigError::TooLarge {
            option,
            needed,
            what,
            formula,
            machine,
        }),
    }
}

/// The machine's memory in bytes (`MemTotal` of `/proc/meminfo`); `None` where it cannot be
/// read (not Linux): the sizes are then not checked.
pub fn machine_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// Bytes in decimal gigabytes: `80 GB`, `2.5 GB`.
pub(crate) fn gb(bytes: u128) -> String {
    let g = bytes as f64 / 1e9;
    if g >= 10.0 {
        format!("{g:.0} GB")
    } else {
        format!("{g:.1} GB")
    }
}

/// Bytes in binary gigabytes, rounded down: `23 GiB`, `7.5 GiB`.
pub(crate) fn gib(bytes: u64) -> String {
    if bytes >= 10 << 30 {
        format!("{} GiB", bytes >> 30)
    } else {
        format!("{:.1} GiB", (bytes >> 20) as f64 / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 23.5 GiB, as `MemTotal: 24684084 kB`.
    const MACHINE: u64 = 24_684_084 * 1024;

    fn refused(s: &Sizes, driver: Driver) -> String {
        check_memory(s, MACHINE, driver)
            .map(|()| String::new())
            .unwrap_or_else(|e| e.to_string())
    }

    #[test]
    fn an_m_by_m_matrix_larger_than_the_machine_is_refused_by_name() {
        let one = Sizes {
            agents: 1,
            inducing: 100_000,
            ..Sizes::default()
        };
        assert_eq!(
            refused(&one, Driver::Node),
            "--inducing 100000 needs 80 GB for one m × m matrix (m² × 8 bytes); this machine \
             has 23 GiB"
        );
        assert!(refused(&one, Driver::Python).starts_with("inducing=100000 needs 80 GB"));
        // 30000² × 8 = 7.2 GB fits once, not for each of 10 agents.
        let fleet = Sizes {
            agents: 10,
            inducing: 30_000,
            ..Sizes::default()
        };
        assert!(check_memory(&Sizes { agents: 1, ..fleet }, MACHINE, Driver::Simulate).is_ok());
        assert_eq!(
            refused(&fleet, Driver::Simulate),
            "--inducing 30000 needs 72 GB for one m × m matrix per agent (10 agents × m² × 8 \
             bytes); this machine has 23 GiB"
        );
        // No overflow at absurd sizes.
        let huge = Sizes {
            agents: usize::MAX,
            inducing: usize::MAX,
            ..Sizes::default()
        };
        assert!(refused(&huge, Driver::Simulate).starts_with("--inducing 18446744073709551615"));
    }

    #[test]
    fn a_local_memory_whose_factor_does_not_fit_is_refused() {
        let one = Sizes::of(
            1,
            50,
            UpdateMode::Frozen,
            ProjectionMode::PerAgent,
            80,
            Some(3),
        )
        .with_local_memory(100_000);
        assert_eq!(
            refused(&one, Driver::Simulate),
            "--local-memory 100000 needs 80 GB for the local memory's B × B factor (B² × 8 \
             bytes); this machine has 23 GiB"
        );
        assert!(refused(&one, Driver::Python).starts_with("local_memory=100000 needs 80 GB"));
        let fleet = Sizes {
            agents: 1000,
            ..one.with_local_memory(2000)
        };
        assert!(refused(&fleet, Driver::Simulate).starts_with(
            "--local-memory 2000 needs 32 GB for the local memory's B × B factor per agent"
        ));
        assert!(check_memory(&one.with_local_memory(2000), MACHINE, Driver::Node).is_ok());
    }

    #[test]
    fn a_local_memory_is_counted_by_the_rows_its_agents_can_see() {
        // 20,000 agents at B = 500 would need 40 GB if every memory filled; on airline's
        // 246,468 rows they hold at most 246,468 × 500 entries (0.99 GB).
        let fleet = Sizes {
            agents: 20_000,
            inducing: 50,
            ..Sizes::default()
        }
        .with_local_memory(500);
        assert!(refused(&fleet, Driver::Simulate).starts_with("--local-memory 500 needs 40 GB"));
        assert!(check_memory(&fleet.with_rows(246_468), MACHINE, Driver::Simulate).is_ok());
        // More rows than the memories can hold: the full count again.
        assert!(refused(&fleet.with_rows(usize::MAX), Driver::Simulate)
            .starts_with("--local-memory 500 needs 40 GB"));
        // Fewer agents' memories than rows allow, but the rows' bound is what refuses.
        let big = Sizes {
            agents: 100_000,
            ..fleet
        };
        assert_eq!(
            refused(&big.with_rows(10_000_000), Driver::Simulate),
            "--local-memory 500 needs 40 GB for the local memory's B × B factor per agent \
             (10000000 rows seen × B × 8 bytes); this machine has 23 GiB"
        );
    }

    #[test]
    fn importance_caches_and_site_windows_count_too() {
        let is = Sizes {
            agents: 1,
            inducing: 20_000,
            samples: Some(20),
            window: None,
            local_memory: 0,
            rows: None,
        };
        assert_eq!(
            refused(&is, Driver::Node),
            "--samples 20 needs 64 GB for the importance caches (k × m² × 8 bytes at m = \
             20000); this machine has 23 GiB"
        );
        let window = Sizes {
            agents: 1000,
            inducing: 50,
            samples: None,
            window: Some((100_000, 40)),
            local_memory: 0,
            rows: None,
        };
        assert!(refused(&window, Driver::Simulate).starts_with(
            "--site-window 100000 needs 33 GB for the site window's rows per agent (1000 agents \
             × POINTS × (d + 1) × 8 bytes at d = 40)"
        ));
        let fits = Sizes {
            agents: 10,
            inducing: 50,
            samples: Some(20),
            window: Some((80, 6)),
            local_memory: 0,
            rows: None,
        };
        assert!(check_memory(&fits, MACHINE, Driver::Simulate).is_ok());
        assert_eq!(gib(3 << 29), "1.5 GiB");
        assert_eq!(gb(2_500_000_000), "2.5 GB");
    }
}
