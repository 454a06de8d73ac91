//! Checkpoint bytes → agent state: the metadata is verified first (format, version, checksum,
//! vocabulary), then each part of the state is read by a function of its own (q(W) and Adam,
//! the learner's caches, the fusion rule, the inbox, push-sum, the fleet site, the local
//! memory).

use std::collections::BTreeMap;
use std::path::Path;

use coolgp::faer::Mat;
use coolgp::fuse::Mass;
use coolgp::learn::{
    Adam, AdamConfig, HyperStats, ImportanceCache, IsNormalization, Learner, Likelihood, Site,
    SiteConfig, SiteMemory, Sites, UNGROUPED,
};
use coolgp::local::{LocalConfig, LocalSnapshot, MemoryPolicy, ResidualFamily, ResidualKind};
use coolgp::model::psi::UnitStats;
use coolgp::protocol::{AgentSnapshot, InboundSnapshot, ProjectionShare};
use coolgp::{AgentConfig, Excess, FusionRule, ProjectionMode, UpdateMode, Vocabulary};
use safetensors::tensor::{Dtype, TensorView};
use safetensors::SafeTensors;

use super::{
    checksum, AgentMeta, Checkpoint, LocalMeta, NodeMeta, FORMAT, FORMAT_VERSION,
    FORMAT_VERSIONS_READ,
};
use crate::error::{Result, StoreError};

/// Typed, shape-checked access to the tensors of one checkpoint.
struct Reader<'a> {
    st: SafeTensors<'a>,
    path: &'a Path,
    /// Group ids per grouped site-sum prefix (metadata `site_groups`).
    site_groups: BTreeMap<String, Vec<u64>>,
}

/// The shape of the state: inducing inputs `m`, latent dimension `d'`, input dimension `d`.
#[derive(Clone, Copy)]
struct Dims {
    m: usize,
    dz: usize,
    d: usize,
}

impl Dims {
    /// Length of a fleet site's vectors, `d' d`.
    fn site_len(self) -> usize {
        self.dz * self.d
    }
    /// Parameters θ (q(W) mean and log standard deviations, σ_s, σ_n): `2 d' d + 2`.
    fn n_params(self) -> usize {
        2 * self.dz * self.d + 2
    }
}

impl Reader<'_> {
    fn err(&self, reason: impl Into<String>) -> StoreError {
        StoreError::checkpoint(self.path, reason)
    }
    fn has(&self, name: &str) -> bool {
        self.st.tensor(name).is_ok()
    }
    fn raw(&self, name: &str) -> Result<(Vec<usize>, Vec<f64>)> {
        let v = self
            .st
            .tensor(name)
            .map_err(|_| self.err(format!("missing tensor {name}")))?;
        if v.dtype() != Dtype::F64 {
            return Err(self.err(format!("{name}: dtype {:?}, expected F64", v.dtype())));
        }
        let data = v
            .data()
            .chunks_exact(8)
            .map(|c| {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                f64::from_le_bytes(b)
            })
            .collect();
        Ok((v.shape().to_vec(), data))
    }
    fn vec(&self, name: &str, len: usize) -> Result<Vec<f64>> {
        let (shape, v) = self.raw(name)?;
        if shape != [len] {
            return Err(self.err(format!("{name}: shape {shape:?}, expected [{len}]")));
        }
        Ok(v)
    }
    fn scalar(&self, name: &str) -> Result<f64> {
        Ok(self.vec(name, 1)?[0])
    }
    fn mat(&self, name: &str, r: usize, c: usize) -> Result<Mat<f64>> {
        let (shape, v) = self.raw(name)?;
        if shape != [r, c] {
            return Err(self.err(format!("{name}: shape {shape:?}, expected [{r}, {c}]")));
        }
        Ok(Mat::from_fn(r, c, |i, j| v[i * c + j]))
    }
    fn mat_any(&self, name: &str, c: usize) -> Result<Mat<f64>> {
        let (shape, v) = self.raw(name)?;
        if shape.len() != 2 || shape[1] != c {
            return Err(self.err(format!("{name}: shape {shape:?}, expected [_, {c}]")));
        }
        let r = shape[0];
        Ok(Mat::from_fn(r, c, |i, j| v[i * c + j]))
    }
    fn mats(&self, name: &str, k: usize, r: usize, c: usize) -> Result<Vec<Mat<f64>>> {
        let (shape, v) = self.raw(name)?;
        if shape != [k, r, c] {
            return Err(self.err(format!("{name}: shape {shape:?}, expected [{k}, {r}, {c}]")));
        }
        Ok((0..k)
            .map(|s| Mat::from_fn(r, c, |i, j| v[s * r * c + i * c + j]))
            .collect())
    }
    /// `count` data blocks of `d` input columns, `<prefix>/x/<i>` and `<prefix>/y/<i>`.
    fn blocks(&self, prefix: &str, count: usize, d: usize) -> Result<Vec<(Mat<f64>, Vec<f64>)>> {
        let mut blocks = Vec::with_capacity(count.min(1024));
        for i in 0..count {
            let x = self.mat_any(&format!("{prefix}/x/{i:08}"), d)?;
            let y = self.vec(&format!("{prefix}/y/{i:08}"), x.nrows())?;
            blocks.push((x, y));
        }
        Ok(blocks)
    }
    /// The row weights `<prefix>/w/<i>` of each of `blocks` (`None` where absent).
    fn block_weights(
        &self,
        prefix: &str,
        blocks: &[(Mat<f64>, Vec<f64>)],
    ) -> Result<Vec<Option<Vec<f64>>>> {
        let name = |i: usize| format!("{prefix}/w/{i:08}");
        (blocks.iter().enumerate())
            .map(|(i, (_, y))| {
                let has = self.has(&name(i));
                has.then(|| self.vec(&name(i), y.len())).transpose()
            })
            .collect()
    }
    fn excess(&self, prefix: &str, m: usize) -> Result<Excess> {
        Ok(Excess {
            d1: self.mat(&format!("{prefix}/d1"), m, m)?,
            d2: self.vec(&format!("{prefix}/d2"), m)?,
        })
    }
    fn site(&self, prefix: &str, len: usize) -> Result<Site> {
        let st = self.vec(&format!("{prefix}stats"), 5)?;
        Ok(Site {
            prec: self.vec(&format!("{prefix}prec"), len)?,
            shift: self.vec(&format!("{prefix}shift"), len)?,
            hyper: HyperStats::from_array([st[0], st[1], st[2], st[3]]),
            points: st[4],
        })
    }
    /// Site sums under `prefix` (one site, or one per group listed in `site_groups`), or
    /// `None` if the file has none there.
    fn sites(&self, prefix: &str, len: usize) -> Result<Option<Sites>> {
        if let Some(ids) = self.site_groups.get(prefix) {
            let pairs = ids
                .iter()
                .map(|g| Ok((*g, self.site(&format!("{prefix}{g}_"), len)?)))
                .collect::<Result<Vec<_>>>()?;
            return Ok(Some(Sites::from_pairs(pairs)));
        }
        if self.has(&format!("{prefix}stats")) {
            return Ok(Some(Sites::single(UNGROUPED, self.site(prefix, len)?)));
        }
        Ok(None)
    }
    /// A push-sum mass; its site part (`site_len` entries) is read if the file has one.
    fn mass(&self, prefix: &str, m: usize, site_len: usize) -> Result<Mass> {
        let wp = self.vec(&format!("{prefix}/w_points"), 2)?;
        Ok(Mass {
            x: self.excess(prefix, m)?,
            w: wp[0],
            points: wp[1],
            site: self.sites(&format!("{prefix}/site_"), site_len)?,
        })
    }

    /// `adam/*`: the optimizer of θ (its step count is in the metadata).
    fn adam(&self, a: &AgentMeta, dims: Dims) -> Result<Adam> {
        let ac = self.vec("adam/config", 6)?;
        Ok(Adam {
            config: AdamConfig {
                lr: ac[0],
                beta1: ac[1],
                beta2: ac[2],
                eps: ac[3],
                tau: ac[4],
                kappa: ac[5],
            },
            t: a.adam_t,
            m1: self.vec("adam/m1", dims.n_params())?,
            m2: self.vec("adam/m2", dims.n_params())?,
        })
    }

    /// `cache/*`: the update mode (metadata `mode`, `normalization`) and its caches.
    fn learner(&self, a: &AgentMeta, Dims { m, dz, d }: Dims) -> Result<(UpdateMode, Learner)> {
        let normalization = match a.normalization.as_deref() {
            Some("self-normalized") => IsNormalization::SelfNormalized,
            _ => IsNormalization::Unnormalized,
        };
        Ok(match a.mode.as_str() {
            "frozen" => (
                UpdateMode::Frozen,
                Learner::Frozen(UnitStats {
                    psi2: self.mat("cache/psi2", m, m)?,
                    psi1_y: self.vec("cache/psi1_y", m)?,
                    n: a.cache_points,
                    yty: self.scalar("cache/yty")?,
                }),
            ),
            "importance" => {
                let k = a.cache_len;
                let (bshape, b) = self.raw("cache/b")?;
                if bshape != [k, m] {
                    return Err(self.err(format!("cache/b: shape {bshape:?}, expected [{k}, {m}]")));
                }
                (
                    UpdateMode::Importance {
                        samples: k,
                        normalization,
                    },
                    Learner::Importance(ImportanceCache {
                        samples: self.mats("cache/samples", k, dz, d)?,
                        a: self.mats("cache/a", k, m, m)?,
                        b: b.chunks_exact(m.max(1)).map(<[f64]>::to_vec).collect(),
                        normalization,
                    }),
                )
            }
            "exact" => {
                let blocks = self.blocks("cache", a.cache_len, d)?;
                let weights = self.block_weights("cache", &blocks)?;
                let blocks = blocks.into_iter().zip(weights);
                let blocks = blocks.map(|((x, y), w)| (x, y, w)).collect();
                (UpdateMode::Exact, Learner::Exact(blocks))
            }
            other => return Err(self.err(format!("unknown mode '{other}'"))),
        })
    }

    /// The fusion rule (metadata `fusion`; push-sum's scale in `fusion/push_sum`).
    fn fusion(&self, a: &AgentMeta) -> Result<FusionRule> {
        match a.fusion.as_str() {
            "tree" => Ok(FusionRule::Tree),
            "push-sum" => {
                let p = self.vec("fusion/push_sum", 2)?;
                Ok(FusionRule::PushSum {
                    agents: p[0],
                    weight: p[1],
                })
            }
            other => Err(self.err(format!("unknown fusion '{other}'"))),
        }
    }

    /// What the fleet site remembers (metadata `site_memory`; `recent` if written before the
    /// choice existed).
    fn site_memory(&self, a: &AgentMeta) -> Result<SiteMemory> {
        match a.site_memory.as_deref() {
            None => Ok(SiteMemory::Recent),
            Some(name) => SiteMemory::from_name(name).map_err(|e| self.err(e)),
        }
    }

    /// The site update's settings (metadata `site`, `site_fleet_damping`, `site_window`,
    /// `site_memory`; what a checkpoint written before a setting existed ran under).
    fn site_config(&self, a: &AgentMeta) -> Result<SiteConfig> {
        let memory = self.site_memory(a)?;
        Ok(match a.site {
            Some([damping, prior_points, scale_prior_points]) => SiteConfig {
                damping,
                fleet_damping: a.site_fleet_damping.unwrap_or(0.0),
                window_points: a.site_window.unwrap_or(0),
                prior_points,
                scale_prior_points,
                memory,
            },
            None => SiteConfig::default(),
        })
    }

    /// The agent's settings: every field of [`AgentConfig`] from the metadata.
    fn config(&self, a: &AgentMeta, mode: UpdateMode, adam: &AdamConfig) -> Result<AgentConfig> {
        let projection = ProjectionMode::from_name(&a.projection)
            .ok_or_else(|| self.err(format!("unknown projection mode '{}'", a.projection)))?;
        Ok(AgentConfig {
            mode,
            projection,
            fusion: self.fusion(a)?,
            adam: adam.clone(),
            learn: a.learn,
            seed: a.seed,
            site: self.site_config(a)?,
            group: a.group,
            local: self.local_config(a.local.as_ref())?,
            // A receiver's policies, like its neighbours: the driver sets them on restore.
            influence_cap: None,
            row_rate: None,
            likelihood: Likelihood::parse(a.likelihood.as_deref(), a.robust_c)
                .map_err(|e| self.err(format!("likelihood: {e}")))?,
        })
    }

    /// The local memory's settings (metadata `local`; off if absent).
    fn local_config(&self, l: Option<&LocalMeta>) -> Result<LocalConfig> {
        let Some(l) = l else {
            return Ok(LocalConfig::default());
        };
        Ok(LocalConfig {
            capacity: l.capacity,
            policy: MemoryPolicy::from_name(&l.policy)
                .ok_or_else(|| self.err(format!("unknown local memory policy '{}'", l.policy)))?,
            kernel: ResidualKind::from_name(&l.kernel)
                .ok_or_else(|| self.err(format!("unknown residual kernel '{}'", l.kernel)))?,
            // A checkpointed agent fits its own kernel: only a driver that pools rows fits it
            // fleet-wide, and sets that up anew.
            ..LocalConfig::default()
        })
    }

    /// `local/*`: the local memory's rows of `d` inputs, targets and kernel parameters
    /// (metadata `local`; `None` if absent). A row of another width, a count other than the
    /// metadata's, more rows than the capacity or a value that is not finite is refused.
    fn local(&self, l: Option<&LocalMeta>, d: usize) -> Result<Option<LocalSnapshot>> {
        let Some(l) = l else {
            return Ok(None);
        };
        let (shape, _) = self.raw("local/x")?;
        if shape.len() != 2 || shape[1] != d {
            return Err(self.err(format!(
                "local memory rows have shape {shape:?}: each row must hold the agent's {d} \
                 inputs"
            )));
        }
        if shape[0] != l.rows || l.rows > l.capacity {
            return Err(self.err(format!(
                "local memory holds {} rows, its metadata says {} (capacity {})",
                shape[0], l.rows, l.capacity
            )));
        }
        let x = self.mat("local/x", l.rows, d)?;
        let y = self.vec("local/y", l.rows)?;
        let (pshape, params) = self.raw("local/params")?;
        if pshape.len() != 1 {
            return Err(self.err(format!("local/params: shape {pshape:?}, expected [p]")));
        }
        let finite = |v: &[f64]| v.iter().position(|v| !v.is_finite());
        let xs: Vec<f64> = (0..l.rows)
            .flat_map(|i| (0..d).map(move |j| (i, j)))
            .map(|(i, j)| x[(i, j)])
            .collect();
        for (name, at) in [
            ("row", finite(&xs).map(|k| k / d.max(1))),
            ("target", finite(&y)),
            ("kernel parameter", finite(&params)),
        ] {
            if let Some(i) = at {
                return Err(self.err(format!("local memory {name} {i} is not finite")));
            }
        }
        let family = match l.family.as_deref() {
            None => ResidualFamily::SquaredExponential,
            Some(name) => ResidualFamily::from_name(name).ok_or_else(|| {
                let known: Vec<&str> = ResidualFamily::ALL.iter().map(|f| f.name()).collect();
                self.err(format!(
                    "unknown residual kernel family '{name}' (this build knows {})",
                    known.join(", ")
                ))
            })?,
        };
        Ok(Some(LocalSnapshot {
            x,
            y,
            seen: l.seen,
            params,
            family,
            last_fit: l.last_fit,
            since_fit: l.since_fit,
        }))
    }

    /// `inbox/<j>/*`: the last message accepted from each neighbour.
    fn inbox(&self, a: &AgentMeta, dims: Dims) -> Result<BTreeMap<u64, InboundSnapshot>> {
        let mut inbox = BTreeMap::new();
        for k in &a.inbox {
            let p = format!("inbox/{k}");
            let projection = if self.has(&format!("{p}/share_weight")) {
                let n = dims.n_params();
                Some(ProjectionShare {
                    weight: self.scalar(&format!("{p}/share_weight"))?,
                    theta: self.vec(&format!("{p}/share_theta"), n)?,
                    m1: self.vec(&format!("{p}/share_m1"), n)?,
                    m2: self.vec(&format!("{p}/share_m2"), n)?,
                })
            } else {
                None
            };
            let sites = if a.inbox_sites.contains(k) {
                Some(
                    self.sites(&format!("{p}/site_"), dims.site_len())?
                        .ok_or_else(|| self.err(format!("missing tensor {p}/site_stats")))?,
                )
            } else {
                None
            };
            let entry = InboundSnapshot {
                excess: self.excess(&p, dims.m)?,
                points: self.scalar(&format!("{p}/points"))?,
                projection,
                sites,
            };
            inbox.insert(*k, entry);
        }
        Ok(inbox)
    }
}

/// The push-sum state: `(mass, sent, pending, received)`.
type PushSum = (Mass, Mass, Mass, BTreeMap<u64, Mass>);

/// `pushsum/*`: the mass, what was sent and received, and the pending own changes.
fn push_sum(r: &Reader<'_>, a: &AgentMeta, dims: Dims) -> Result<PushSum> {
    let (m, site_len) = (dims.m, dims.site_len());
    let mut received = BTreeMap::new();
    for k in &a.push_received {
        received.insert(*k, r.mass(&format!("pushsum/received/{k}"), m, site_len)?);
    }
    let mass = r.mass("pushsum/mass", m, site_len)?;
    // Checkpoints written before pending changes existed have none.
    let pending = if r.has("pushsum/pending/w_points") {
        r.mass("pushsum/pending", m, site_len)?
    } else {
        mass.zeros_like()
    };
    let sent = r.mass("pushsum/sent", m, site_len)?;
    Ok((mass, sent, pending, received))
}

/// The fleet projection's site state: `(site, frozen, window term, recent blocks, their
/// weights)`.
type FleetSite = (
    Site,
    Site,
    (Site, f64),
    Vec<(Mat<f64>, Vec<f64>)>,
    Option<Vec<Option<Vec<f64>>>>,
);

/// `site/*`: the own site, the stream memory's frozen terms and last window term, and the
/// window's blocks (zeros of the right length for what the agent's settings do not use)
/// with their row weights when the metadata says they are stored (`site_recent_weights`).
fn fleet_site(r: &Reader<'_>, a: &AgentMeta, fleet: bool, dims: Dims) -> Result<FleetSite> {
    let stream = fleet && r.site_memory(a)? == SiteMemory::Stream;
    let site_len = dims.site_len();
    // The stream memory's state of an agent without it: zeros of the site's length.
    let zeros = Site::zeros(if fleet { site_len } else { 0 });
    let site = if fleet {
        r.site("site/", site_len)?
    } else {
        Site::zeros(0)
    };
    let (frozen, window_term) = if stream {
        (
            r.site("site/frozen/", site_len)?,
            (
                r.site("site/window_term/", site_len)?,
                a.site_window_term_points.unwrap_or(0.0),
            ),
        )
    } else {
        (zeros.clone(), (zeros, 0.0))
    };
    let recent = r.blocks("site/recent", a.site_recent, dims.d)?;
    let weights = (fleet && a.site_recent_weights)
        .then(|| r.block_weights("site/recent", &recent))
        .transpose()?;
    Ok((site, frozen, window_term, recent, weights))
}

/// Checks the metadata (format, version, checksum, vocabulary) and parses the [`NodeMeta`].
fn verified<'a>(
    path: &Path,
    bytes: &'a [u8],
    vocab: &Vocabulary,
) -> Result<(SafeTensors<'a>, NodeMeta)> {
    let err = |reason: String| StoreError::checkpoint(path, reason);
    let (_, md) = SafeTensors::read_metadata(bytes)
        .map_err(|e| err(format!("not a safetensors file: {e}")))?;
    let info = md.metadata().clone().unwrap_or_default();
    if info.get("format").map(String::as_str) != Some(FORMAT) {
        return Err(err("not a coolgp checkpoint (metadata 'format')".into()));
    }
    let version = info.get("format_version");
    if !version
        .and_then(|v| v.parse::<u32>().ok())
        .is_some_and(|v| FORMAT_VERSIONS_READ.contains(&v))
    {
        return Err(err(format!(
            "format version {version:?}, this build reads {} to {FORMAT_VERSION}",
            FORMAT_VERSIONS_READ.start()
        )));
    }
    let meta_json = info
        .get("coolgp")
        .ok_or_else(|| err("no 'coolgp' metadata".into()))?;
    let st = SafeTensors::deserialize(bytes).map_err(|e| err(format!("corrupt: {e}")))?;
    let mut names: Vec<(String, TensorView<'_>)> = st.tensors();
    names.sort_by(|a, b| a.0.cmp(&b.0));
    let sum = checksum(
        names.iter().map(|(k, v)| (k.as_str(), v.shape(), v.data())),
        meta_json,
    );
    if info.get("sha256") != Some(&sum) {
        return Err(err("checksum mismatch: the file is corrupt".into()));
    }
    let meta: NodeMeta =
        serde_json::from_str(meta_json).map_err(|e| err(format!("metadata: {e}")))?;
    if meta.model.fingerprint != vocab.fingerprint().to_string() {
        return Err(err(format!(
            "written under vocabulary {}, this node uses {}",
            meta.model.fingerprint,
            vocab.fingerprint()
        )));
    }
    Ok((st, meta))
}

/// The agent state of a verified checkpoint.
fn snapshot(r: &Reader<'_>, meta: &NodeMeta, dims: Dims) -> Result<AgentSnapshot> {
    let a = &meta.agent;
    let mu = r.mat("theta/mu", dims.dz, dims.d)?;
    let log_sigma = r.mat("theta/log_sigma", dims.dz, dims.d)?;
    let adam = r.adam(a, dims)?;
    let (mode, learner) = r.learner(a, dims)?;
    let config = r.config(a, mode, &adam.config)?;
    let inbox = r.inbox(a, dims)?;
    let (push_mass, push_sent, push_pending, push_received) = push_sum(r, a, dims)?;
    let (site, site_frozen, window_term, recent, recent_weights) =
        fleet_site(r, a, config.projection == ProjectionMode::Fleet, dims)?;
    Ok(AgentSnapshot {
        id: meta.model.id,
        config,
        mu,
        log_sigma,
        log_sigma_s: r.scalar("theta/log_sigma_s")?,
        log_sigma_n: r.scalar("theta/log_sigma_n")?,
        adam,
        learner,
        n_own: a.n_own,
        blocks: a.blocks,
        version: a.version,
        round: a.round,
        neighbors: a.neighbors.clone(),
        inbox,
        push_pending,
        push_mass,
        push_sent,
        push_received,
        last_round: a.last_round.clone(),
        site,
        site_clock: a.site_clock.unwrap_or(0.0),
        site_frozen,
        window_term,
        recent,
        recent_weights,
        local: r.local(a.local.as_ref(), dims.d)?,
        withheld: a.withheld,
    })
}

/// Parses and verifies checkpoint bytes read from `path`, for an agent of input dimension `d`
/// under `vocab`.
///
/// # Errors
/// [`StoreError::Checkpoint`] for a corrupt file, a failed checksum, another format, or a
/// vocabulary other than `vocab`.
pub fn from_bytes(path: &Path, bytes: &[u8], vocab: &Vocabulary, d: usize) -> Result<Checkpoint> {
    let (st, meta) = verified(path, bytes, vocab)?;
    let r = Reader {
        st,
        path,
        site_groups: meta.agent.site_groups.clone(),
    };
    let dims = Dims {
        m: vocab.m(),
        dz: vocab.d_latent(),
        d,
    };
    let snapshot = snapshot(&r, &meta, dims)?;
    Ok(Checkpoint {
        meta,
        snapshot,
        path: path.to_path_buf(),
    })
}
