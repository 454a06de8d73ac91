//! What the node tells: the status queryable's reply (counters, model summary, holdout RMSE)
//! and the copy of the model that predict queries use off the loop.

use coolgp::View;
use zenoh::query::Query;

use super::{fusion_name, Node};
use crate::coverage::{Brief, CoverageJson};
use crate::kernel_auth::{Claim, ConsensusClaim, KernelClaim};
use crate::keys;
use crate::query::QueryModel;
use crate::row_auth::{Members, RowPolicy};
use crate::status::{projection_digest, ExcessJson, ProjectionSummary, Status};

/// Milliseconds as the status reports them (saturating).
fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Node {
    /// RMSE of the fused prediction on the `--holdout` rows, in the target's units.
    fn rmse_holdout(&self) -> Option<f64> {
        let h = self.inputs.holdout.as_ref()?;
        let p = self.agent.predict(h.x.as_ref(), View::Fused).ok()?;
        let n = h.y.len().max(1) as f64;
        let scaler = self.inputs.scaler.as_ref();
        let se: f64 = p
            .mean
            .iter()
            .zip(&h.y)
            .map(|(m, y)| {
                let m = scaler.map_or(*m, |s| s.unscale_y(*m));
                (m - y) * (m - y)
            })
            .sum();
        Some((se / n).sqrt())
    }

    /// The residual kernel's part of the status: `local_pooled_fits`, `local_kernel` (its
    /// words: the parameters, and the family's ν if Matérn; kernel_auth), `local_consensus`
    /// (`--local-fit agent`), each with its signature under `--tls` (empty otherwise).
    fn kernel_status(&self) -> (u64, Vec<f64>, Vec<u8>, Vec<f64>, Vec<u8>) {
        let words = crate::kernel_auth::kernel_words;
        let kernel = match self.s.agent.local.is_on() {
            true => {
                let k = self.agent.local().kernel();
                words(k.family(), k.params())
            }
            false => Vec::new(),
        };
        let consensus = self
            .pooled
            .as_ref()
            .and_then(|p| p.consensus_made())
            .map_or(Vec::new(), |(f, p)| words(f, p));
        let fits = self.pooled.as_ref().map_or(0, |p| p.fits);
        let (kernel_sig, consensus_sig) = match &self.peers.auth {
            Some(a) => {
                let sign = |params: &[f64], consensus: bool| {
                    if params.is_empty() {
                        return Vec::new();
                    }
                    let claim = KernelClaim {
                        fleet: &self.s.fleet,
                        node: self.s.id,
                        fits,
                        params,
                    };
                    match consensus {
                        true => ConsensusClaim(claim).sign(&a.signer),
                        false => claim.sign(&a.signer),
                    }
                };
                (sign(&kernel, false), sign(&consensus, true))
            }
            None => (Vec::new(), Vec::new()),
        };
        (fits, kernel, kernel_sig, consensus, consensus_sig)
    }

    /// The status reply; with `with_fused`, the fused and own excesses too.
    fn status(&self, with_fused: bool) -> Status {
        let (dropped, oversize) = self.peers.inbound.dropped();
        let queries = self.queries.counts();
        let mut rejected = self.peers.rejects.counts.clone();
        if oversize > 0 {
            rejected.insert("oversize".into(), oversize);
        }
        let (fused, own) = if with_fused {
            let (e, pts) = self.agent.fused_excess();
            (
                Some(ExcessJson::new(&e, pts)),
                Some(ExcessJson::new(
                    self.agent.own_excess(),
                    self.agent.n_own() as f64,
                )),
            )
        } else {
            (None, None)
        };
        let proj = self.agent.projection();
        let unscale_std = |v: f64| self.inputs.scaler.as_ref().map_or(v, |s| s.unscale_std(v));
        let (t, d) = (&self.traffic, &self.durability);
        let (
            local_pooled_fits,
            local_kernel,
            local_kernel_sig,
            local_consensus,
            local_consensus_sig,
        ) = self.kernel_status();
        let (suspects, member_checks, suspects_by, suspects_sig) = self.suspects_status();
        let (fleet_calibration, fleet_calibration_sig) = self.calibration_status();
        Status {
            fleet_calibration,
            fleet_calibration_sig,
            member: self.own_member_evidence(),
            suspects,
            member_checks,
            suspects_by,
            suspects_sig,
            withheld: self.agent.is_withheld(),
            withheld_since_round: self.withheld_since(),
            capped: self.progress.capped.clone(),
            model: self.model_identity(),
            fusion: fusion_name(&self.s.agent.fusion).into(),
            projection: self.s.agent.projection.name().into(),
            projection_group: self.s.projection_group.clone(),
            site_memory: (self.s.agent.projection == coolgp::ProjectionMode::Fleet)
                .then(|| self.s.agent.site.memory.name().to_owned()),
            local_memory: self.s.agent.local.capacity,
            local_points: self.agent.local_points(),
            local_pooled_fits,
            local_kernel,
            local_kernel_sig,
            local_fitted_rows: match self.s.agent.local.fit {
                coolgp::local::LocalFit::Agent => self.agent.local().fit_state().0,
                coolgp::local::LocalFit::Fleet => 0,
            },
            local_consensus,
            local_consensus_sig,
            blocks: d.acked_blocks,
            points: d.acked_points,
            rows_skipped: self.intake.committed.rows_skipped,
            stream_ended: self.intake.cursor.ended,
            durable: self.s.state.is_some(),
            fleet_points: self.agent.fleet_points(),
            round: self.agent.round(),
            rounds_run: t.rounds_run,
            neighbors: self.s.neighbors.clone(),
            neighbors_heard: self.agent.neighbors_heard(),
            heard_ms_ago: self
                .peers
                .last_heard
                .iter()
                .map(|(k, at)| (*k, ms(at.elapsed())))
                .collect(),
            members_alive: self
                .peers
                .members
                .lock()
                .map(|m| m.iter().copied().collect())
                .unwrap_or_default(),
            routes_redeclared: self.heal.count,
            messages_pulled: self.heal.pulled(),
            rejected,
            ros2: self.ros2.as_ref().map(|r| r.link.status()),
            messages_accepted: t.messages_accepted,
            messages_received: t.messages_received,
            bytes_received: t.bytes_received,
            inbound_dropped: dropped,
            messages_sent: t.messages_sent,
            bytes_sent: t.bytes_sent,
            messages_unchanged_held: t.messages_unchanged_held,
            checkpoints: d.checkpoints,
            checkpoint_bytes: d.checkpoint_bytes,
            checkpoint_age_ms: d.last_checkpoint.map(|at| ms(at.elapsed())),
            projection_digest: projection_digest(proj),
            projection_summary: ProjectionSummary::of(proj),
            sigma_s: Some(unscale_std(proj.sigma_s())),
            sigma_n: Some(unscale_std(proj.sigma_n())),
            last_block_unix_ms: self.progress.last_block_unix_ms,
            fused_changed_unix_ms: self.progress.fused_changed_unix_ms,
            rmse_holdout: self.rmse_holdout(),
            uptime_ms: ms(self.progress.started.elapsed()),
            tls: self.peers.auth.is_some(),
            queries_running: queries.running,
            queries_answered: queries.answered,
            queries_refused_busy: queries.refused_busy,
            fused,
            own,
            coverage: self.coverage(),
        }
    }

    /// Where the memory rows lie, in original units ([`crate::coverage`]), as last computed
    /// ([`Node::refresh_coverage`]).
    fn coverage(&self) -> Option<CoverageJson> {
        self.advertised.as_ref().and_then(|(_, c)| c.clone())
    }

    /// Recomputes the advertised coverage when the memory or its kernel changed since the
    /// last time (a status call only reads it).
    pub(super) fn refresh_coverage(&mut self) {
        let key = (
            self.agent.version(),
            self.pooled.as_ref().map_or(0, |p| p.fits),
        );
        if self.advertised.as_ref().is_some_and(|(k, _)| *k == key) {
            return;
        }
        let scaler = self.inputs.scaler.as_ref();
        let c = self
            .agent
            .coverage()
            .map(|c| CoverageJson::of(&c, &self.inputs.layout.inputs, scaler));
        self.advertised = Some((key, c));
    }

    /// The brief status (`?brief`, [`Brief`]).
    fn brief(&self) -> Brief {
        let (dropped, oversize) = self.peers.inbound.dropped();
        let t = &self.traffic;
        Brief {
            id: self.s.id,
            blocks: self.durability.acked_blocks,
            points: self.durability.acked_points,
            stream_ended: self.intake.cursor.ended,
            fleet_points: self.agent.fleet_points(),
            round: self.agent.round(),
            local_points: self.agent.local_points(),
            withheld: self.agent.is_withheld(),
            messages_sent: t.messages_sent,
            bytes_sent: t.bytes_sent,
            messages_received: t.messages_received,
            rejected: self.peers.rejects.counts.values().sum::<u64>() + oversize,
            inbound_dropped: dropped,
            rmse_holdout: self.rmse_holdout(),
            coverage: self.coverage(),
            member: self.own_member_evidence(),
        }
    }

    /// Answers a status query (`?fused` adds the excesses; `?brief` gives the brief status
    /// instead, [`Brief`]; `?own` the own excess alone, [`ExcessJson`]).
    /// The fleet calibration this node measured as the fitter, and with `--tls` its
    /// signature ([`crate::fleet_calibration::CalibrationClaim`]).
    fn calibration_status(&self) -> (Option<crate::fleet_calibration::FleetCalibration>, Vec<u8>) {
        let held = self.calibration.held.clone();
        let sig = match (&self.peers.auth, &held) {
            (Some(a), Some(c)) => crate::fleet_calibration::CalibrationClaim {
                fleet: &self.s.fleet,
                node: self.s.id,
                calibration: c,
            }
            .sign(&a.signer),
            _ => Vec::new(),
        };
        (held, sig)
    }

    pub(super) async fn answer_status(&mut self, q: Query) {
        if let Some(to) = q.parameters().get("msg") {
            let to = to.to_owned();
            return self.answer_pull(q, &to).await;
        }
        let bytes = if q.parameters().get("brief").is_some() {
            serde_json::to_vec(&self.brief())
        } else if q.parameters().get("own").is_some() {
            let n = self.agent.n_own() as f64;
            serde_json::to_vec(&ExcessJson::new(self.agent.own_excess(), n))
        } else {
            let with_fused = q.parameters().get("fused").is_some();
            serde_json::to_vec(&self.status(with_fused))
        };
        let reply = match bytes {
            // On the node's own key: a fleet-wide get (`*/status`) tells who replied by it.
            Ok(b) => q.reply(keys::status(&self.s.fleet, self.s.id), b).await,
            Err(e) => q.reply_err(e.to_string()).await,
        };
        if let Err(e) = reply {
            tracing::debug!(error = %e, "status reply failed");
        }
    }

    /// A copy of what a predict query needs (taken on the loop, used off it).
    pub(super) fn query_model(&self) -> QueryModel {
        QueryModel {
            agent: self.agent.clone(),
            inputs: self.inputs.layout.inputs.clone(),
            scaler: self.inputs.scaler.clone(),
            key: crate::keys::predict(&self.s.fleet, self.s.id),
            id: self.s.id,
            rows: self.row_policy(),
        }
    }

    /// With `--tls`, a query signed as a request for rows by a node the roster does not
    /// know reloads the roster first ([`crate::auth::Roster::key_reloading`]), so a node
    /// added with `coolgp certs --add` since start-up gets rows without a restart.
    pub(super) fn know_requester(&mut self, q: &Query) {
        let Some(a) = self.peers.auth.as_mut() else {
            return;
        };
        let attachment = q.attachment().map(|z| z.to_bytes());
        if let Some(id) = crate::row_auth::requester(attachment.as_deref()) {
            a.roster.key_reloading(id);
        }
    }

    /// Who may receive this node's memory rows ([`crate::row_auth`]).
    fn row_policy(&self) -> RowPolicy {
        if self.s.agent.local.fit != coolgp::local::LocalFit::Fleet {
            return RowPolicy::NotShared;
        }
        match &self.peers.auth {
            None => RowPolicy::Anyone,
            Some(a) => RowPolicy::Members(Members {
                fleet: self.s.fleet.clone(),
                keys: a.roster.keys(),
                seen: self.peers.rows_seen.clone(),
            }),
        }
    }
}
