//! Agent state → checkpoint bytes: one function per part of the state (vocabulary, q(W) and
//! Adam, the learner's caches, q(u), the fleet site, the inbox, push-sum, the local memory),
//! then the metadata and the checksum.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use coolgp::faer::Mat;
use coolgp::fuse::Mass;
use coolgp::learn::{Learner, Likelihood, Site, SiteMemory, Sites, UNGROUPED};
use coolgp::local::ResidualFamily;
use coolgp::protocol::{AgentSnapshot, InboundSnapshot};
use coolgp::{Agent, Excess, FusionRule, ProjectionMode, UpdateMode, View, Vocabulary};
use safetensors::tensor::{Dtype, TensorView};

use super::{checksum, AgentMeta, LocalMeta, NodeMeta, FORMAT, FORMAT_VERSION};
use crate::error::{Result, StoreError};

/// Tensors by name (shape, little-endian bytes), and the group ids stored under each grouped
/// site-sum prefix (the metadata's `site_groups`).
#[derive(Default)]
struct Tensors {
    tensors: BTreeMap<String, (Vec<usize>, Vec<u8>)>,
    site_groups: BTreeMap<String, Vec<u64>>,
}

impl Tensors {
    fn raw(&mut self, name: impl Into<String>, shape: Vec<usize>, v: &[f64]) {
        let bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.tensors.insert(name.into(), (shape, bytes));
    }
    fn vec(&mut self, name: impl Into<String>, v: &[f64]) {
        self.raw(name, vec![v.len()], v);
    }
    /// Matrices, each row-major, one after the other (the shape's leading `k`, if any, counts
    /// them).
    fn mats_with_shape(&mut self, name: impl Into<String>, shape: Vec<usize>, ms: &[&Mat<f64>]) {
        let mut bytes = Vec::with_capacity(shape.iter().product::<usize>() * 8);
        for m in ms {
            for i in 0..m.nrows() {
                for j in 0..m.ncols() {
                    bytes.extend_from_slice(&m[(i, j)].to_le_bytes());
                }
            }
        }
        self.tensors.insert(name.into(), (shape, bytes));
    }
    fn mat(&mut self, name: impl Into<String>, m: &Mat<f64>) {
        self.mats_with_shape(name, vec![m.nrows(), m.ncols()], &[m]);
    }
    /// `k` matrices of `r × c` as one `[k, r, c]` tensor.
    fn mats(&mut self, name: impl Into<String>, ms: &[Mat<f64>], r: usize, c: usize) {
        let refs: Vec<&Mat<f64>> = ms.iter().collect();
        self.mats_with_shape(name, vec![ms.len(), r, c], &refs);
    }
    /// Data blocks as `<prefix>/x/<i>`, `<prefix>/y/<i>` (`i` zero-padded to 8 digits), and
    /// `<prefix>/w/<i>` for a block with row weights (the robust likelihood).
    fn blocks<'a>(
        &mut self,
        prefix: &str,
        blocks: impl Iterator<Item = (&'a Mat<f64>, &'a [f64], Option<&'a [f64]>)>,
    ) {
        for (i, (x, y, w)) in blocks.enumerate() {
            self.mat(format!("{prefix}/x/{i:08}"), x);
            self.vec(format!("{prefix}/y/{i:08}"), y);
            if let Some(w) = w {
                self.vec(format!("{prefix}/w/{i:08}"), w);
            }
        }
    }
    fn excess(&mut self, prefix: &str, e: &Excess) {
        self.mat(format!("{prefix}/d1"), &e.d1);
        self.vec(format!("{prefix}/d2"), &e.d2);
    }
    fn site(&mut self, prefix: &str, s: &Site) {
        self.vec(format!("{prefix}prec"), &s.prec);
        self.vec(format!("{prefix}shift"), &s.shift);
        let h = s.hyper.to_array();
        self.vec(
            format!("{prefix}stats"),
            &[h[0], h[1], h[2], h[3], s.points],
        );
    }
    /// Site sums under `prefix`: one site (no groups) or one per group (module docs).
    fn sites(&mut self, prefix: &str, s: &Sites) {
        if s.is_ungrouped() {
            if let Some(site) = s.get(UNGROUPED) {
                self.site(prefix, site);
            }
            return;
        }
        for (g, site) in s.iter() {
            self.site(&format!("{prefix}{g}_"), site);
        }
        self.site_groups
            .insert(prefix.to_owned(), s.iter().map(|(g, _)| g).collect());
    }
    fn mass(&mut self, prefix: &str, m: &Mass) {
        self.excess(prefix, &m.x);
        self.vec(format!("{prefix}/w_points"), &[m.w, m.points]);
        if let Some(sites) = &m.site {
            self.sites(&format!("{prefix}/site_"), sites);
        }
    }

    /// `vocab/*`, `theta/*` and `adam/*`: the vocabulary, q(W), σ_s, σ_n and the optimizer.
    fn vocabulary_and_theta(&mut self, vocab: &Vocabulary, s: &AgentSnapshot) {
        self.mat("vocab/z", &vocab.z().to_owned());
        self.mat("vocab/k", &vocab.k().to_owned());
        self.mat("theta/mu", &s.mu);
        self.mat("theta/log_sigma", &s.log_sigma);
        self.vec("theta/log_sigma_s", &[s.log_sigma_s]);
        self.vec("theta/log_sigma_n", &[s.log_sigma_n]);
        self.vec("adam/m1", &s.adam.m1);
        self.vec("adam/m2", &s.adam.m2);
        let c = &s.adam.config;
        self.vec(
            "adam/config",
            &[c.lr, c.beta1, c.beta2, c.eps, c.tau, c.kappa],
        );
    }

    /// `cache/*`: the update mode's caches. Returns the metadata's `(cache_points, cache_len)`.
    fn learner(&mut self, learner: &Learner, m: usize, dz: usize, d: usize) -> (usize, usize) {
        match learner {
            Learner::Frozen(st) => {
                self.mat("cache/psi2", &st.psi2);
                self.vec("cache/psi1_y", &st.psi1_y);
                self.vec("cache/yty", &[st.yty]);
                (st.n, 0)
            }
            Learner::Importance(c) => {
                self.mats("cache/samples", &c.samples, dz, d);
                self.mats("cache/a", &c.a, m, m);
                let b: Vec<f64> = c.b.iter().flatten().copied().collect();
                self.raw("cache/b", vec![c.b.len(), m], &b);
                (0, c.samples.len())
            }
            Learner::Exact(blocks) => {
                let rows = blocks.iter().map(|(x, y, w)| (x, &y[..], w.as_deref()));
                self.blocks("cache", rows);
                (0, blocks.len())
            }
        }
    }

    /// `own/*`, `fused/*`, `posterior/*`: the own excess and the fused q(u) (K-form as q(u)
    /// uses it: in the fleet projection mode, scaled by the fleet's σ_s, σ_n).
    fn own_and_fused(&mut self, agent: &Agent, vocab: &Vocabulary) {
        self.excess("own", agent.own_excess());
        let fused = agent.natural_params(View::Fused);
        self.mat("fused/t1", &fused.t1);
        self.vec("fused/t2", &fused.t2);
        self.vec("fused/points", &[agent.fleet_points()]);
        if let Ok(post) = agent.posterior(View::Fused) {
            let (mean, cov) = post.moments(vocab);
            self.vec("posterior/mean", &mean);
            self.mat("posterior/cov", &cov);
        }
    }

    /// `site/*`: the fleet projection's own site, its stream memory and its window's blocks
    /// with, for a robust agent, their rows' weights (`site/recent/w/<i>`).
    fn fleet_site(&mut self, s: &AgentSnapshot) {
        self.site("site/", &s.site);
        if s.config.site.memory == SiteMemory::Stream {
            self.site("site/frozen/", &s.site_frozen);
            self.site("site/window_term/", &s.window_term.0);
        }
        let weights = s.recent_weights.iter().flatten().map(Option::as_deref);
        let weights = weights.chain(std::iter::repeat(None));
        let rows = s
            .recent
            .iter()
            .zip(weights)
            .map(|((x, y), w)| (x, &y[..], w));
        self.blocks("site/recent", rows);
    }

    /// `local/*`: the local memory's rows, targets and residual kernel parameters. Returns
    /// the metadata's [`LocalMeta`] (`None` when the memory is off).
    fn local(&mut self, s: &AgentSnapshot) -> Option<LocalMeta> {
        let mem = s.local.as_ref()?;
        self.mat("local/x", &mem.x);
        self.vec("local/y", &mem.y);
        self.vec("local/params", &mem.params);
        let c = &s.config.local;
        Some(LocalMeta {
            capacity: c.capacity,
            policy: c.policy.name().to_owned(),
            kernel: c.kernel.name().to_owned(),
            rows: mem.y.len(),
            seen: mem.seen,
            last_fit: mem.last_fit,
            since_fit: mem.since_fit,
            family: (mem.family != ResidualFamily::SquaredExponential)
                .then(|| mem.family.name().to_owned()),
        })
    }

    /// `inbox/<j>/*`: the last message accepted from each neighbour. Returns the neighbours
    /// whose entry carries a projection share and those carrying site sums.
    fn inbox(&mut self, inbox: &BTreeMap<u64, InboundSnapshot>) -> (Vec<u64>, Vec<u64>) {
        let mut shares = Vec::new();
        let mut inbox_sites = Vec::new();
        for (k, ib) in inbox {
            if let Some(sites) = &ib.sites {
                self.sites(&format!("inbox/{k}/site_"), sites);
                inbox_sites.push(*k);
            }
            self.excess(&format!("inbox/{k}"), &ib.excess);
            self.vec(format!("inbox/{k}/points"), &[ib.points]);
            if let Some(p) = &ib.projection {
                self.vec(format!("inbox/{k}/share_weight"), &[p.weight]);
                self.vec(format!("inbox/{k}/share_theta"), &p.theta);
                self.vec(format!("inbox/{k}/share_m1"), &p.m1);
                self.vec(format!("inbox/{k}/share_m2"), &p.m2);
                shares.push(*k);
            }
        }
        (shares, inbox_sites)
    }

    /// `pushsum/*` and `fusion/push_sum`: the push-sum masses and the fusion rule's scale.
    /// Returns the rule's metadata name.
    fn push_sum(&mut self, s: &AgentSnapshot) -> &'static str {
        self.mass("pushsum/mass", &s.push_mass);
        self.mass("pushsum/sent", &s.push_sent);
        self.mass("pushsum/pending", &s.push_pending);
        for (k, v) in &s.push_received {
            self.mass(&format!("pushsum/received/{k}"), v);
        }
        match s.config.fusion {
            FusionRule::Tree => "tree",
            FusionRule::PushSum { agents, weight } => {
                self.vec("fusion/push_sum", &[agents, weight]);
                "push-sum"
            }
        }
    }

    /// The safetensors file: the tensors, and the metadata with its checksum.
    fn serialize(self, meta: &NodeMeta) -> Result<Vec<u8>> {
        let encoding = |e: String| StoreError::checkpoint(PathBuf::new(), e);
        let meta_json = serde_json::to_string(meta).map_err(|e| encoding(e.to_string()))?;
        let sum = checksum(
            self.tensors
                .iter()
                .map(|(k, (s, d))| (k.as_str(), s.as_slice(), d.as_slice())),
            &meta_json,
        );
        let mut info = HashMap::new();
        info.insert("format".to_string(), FORMAT.to_string());
        info.insert("format_version".to_string(), FORMAT_VERSION.to_string());
        info.insert("coolgp".to_string(), meta_json);
        info.insert("sha256".to_string(), sum);
        let views = self
            .tensors
            .iter()
            .map(|(k, (shape, data))| {
                TensorView::new(Dtype::F64, shape.clone(), data).map(|v| (k.clone(), v))
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| encoding(e.to_string()))?;
        safetensors::serialize(views, Some(info)).map_err(|e| encoding(e.to_string()))
    }
}

/// The non-matrix agent fields, with what the tensor writers returned.
struct Written {
    cache_points: usize,
    cache_len: usize,
    shares: Vec<u64>,
    inbox_sites: Vec<u64>,
    fusion: &'static str,
    site_groups: BTreeMap<String, Vec<u64>>,
    local: Option<LocalMeta>,
}

fn agent_meta(s: &AgentSnapshot, w: Written) -> AgentMeta {
    let normalization = match &s.config.mode {
        UpdateMode::Importance { normalization, .. } => Some(normalization.name().into()),
        UpdateMode::Frozen | UpdateMode::Exact => None,
    };
    let fleet = s.config.projection == ProjectionMode::Fleet;
    let site = &s.config.site;
    AgentMeta {
        n_own: s.n_own,
        blocks: s.blocks,
        version: s.version,
        round: s.round,
        neighbors: s.neighbors.clone(),
        last_round: s.last_round.clone(),
        adam_t: s.adam.t,
        mode: s.config.mode.name().into(),
        normalization,
        fusion: w.fusion.into(),
        learn: s.config.learn,
        seed: s.config.seed,
        cache_points: w.cache_points,
        cache_len: w.cache_len,
        inbox: s.inbox.keys().copied().collect(),
        inbox_shares: w.shares,
        push_received: s.push_received.keys().copied().collect(),
        projection: s.config.projection.name().into(),
        site: fleet.then_some([site.damping, site.prior_points, site.scale_prior_points]),
        site_fleet_damping: fleet.then_some(site.fleet_damping),
        site_clock: fleet.then_some(s.site_clock),
        site_window: fleet.then_some(site.window_points),
        site_recent: if fleet { s.recent.len() } else { 0 },
        site_recent_weights: fleet && s.recent_weights.is_some(),
        site_memory: fleet.then(|| site.memory.name().to_owned()),
        site_window_term_points: (fleet && site.memory == SiteMemory::Stream)
            .then_some(s.window_term.1),
        inbox_sites: w.inbox_sites,
        withheld: s.withheld,
        group: s.config.group,
        site_groups: w.site_groups,
        local: w.local,
        likelihood: match s.config.likelihood {
            Likelihood::Gaussian => None,
            Likelihood::Robust { .. } => Some(s.config.likelihood.name().into()),
        },
        robust_c: match s.config.likelihood {
            Likelihood::Gaussian => None,
            Likelihood::Robust { c } => Some(c),
        },
    }
}

/// Serializes an agent and its node metadata into checkpoint bytes (no I/O).
///
/// `meta.agent` is filled from the agent.
///
/// # Errors
/// [`StoreError::Checkpoint`] if safetensors refuses the layout (never for a valid agent).
pub fn to_bytes(agent: &Agent, meta: &mut NodeMeta) -> Result<Vec<u8>> {
    let vocab = agent.vocabulary().clone();
    let s = agent.snapshot();
    let (m, dz, d) = (vocab.m(), vocab.d_latent(), s.mu.ncols());
    let mut t = Tensors::default();
    t.vocabulary_and_theta(&vocab, &s);
    let (cache_points, cache_len) = t.learner(&s.learner, m, dz, d);
    t.own_and_fused(agent, &vocab);
    if s.config.projection == ProjectionMode::Fleet {
        t.fleet_site(&s);
    }
    let (shares, inbox_sites) = t.inbox(&s.inbox);
    let fusion = t.push_sum(&s);
    let local = t.local(&s);
    let written = Written {
        cache_points,
        cache_len,
        shares,
        inbox_sites,
        fusion,
        site_groups: std::mem::take(&mut t.site_groups),
        local,
    };
    meta.agent = agent_meta(&s, written);
    t.serialize(meta)
}
