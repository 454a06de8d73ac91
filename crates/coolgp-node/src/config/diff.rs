//! How a checkpoint's agent settings differ from a node's, named by the flags that set them
//! (the message of a refused restart).

use coolgp::{AgentConfig, FusionRule, UpdateMode};

/// One setting in which a checkpoint differs from this node, named by the flag that sets it.
#[derive(Clone, Debug, PartialEq)]
pub struct SettingDiff {
    /// The flag (`--projection`), or the field's name for a setting without a flag (`adam`).
    pub flag: &'static str,
    /// The checkpoint's value, as given on the command line.
    pub written: String,
    /// This node's value.
    pub now: String,
    /// A switch without a value (`--no-learn`): the values are `with` / `without`.
    pub switch: bool,
}

impl std::fmt::Display for SettingDiff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.switch, self.written.as_str()) {
            (true, "with") => write!(f, "{} (now without it)", self.flag),
            (true, _) => write!(f, "learning (now {})", self.flag),
            (false, _) => write!(f, "{} {} (now {})", self.flag, self.written, self.now),
        }
    }
}

/// The settings in which `written` (a checkpoint's) differs from `wanted` (this node's), in
/// a fixed order, each named by the flag that sets it (`--projection`, `--site-window`, …) with
/// both values as the command line spells them; a setting without a flag (the optimizer's)
/// by its field name. `wanted_group` is this node's `--projection-group` name (a checkpoint
/// holds only the group's id, shown as `id 0x…`). Empty when nothing differs.
pub fn setting_differences(
    written: &AgentConfig,
    wanted: &AgentConfig,
    wanted_group: Option<&str>,
) -> Vec<SettingDiff> {
    let mut out = Vec::new();
    let mut value = |flag: &'static str, w: String, n: String| {
        if w != n {
            out.push(SettingDiff {
                flag,
                written: w,
                now: n,
                switch: false,
            });
        }
    };
    // --mode, and within importance mode --samples and --normalization.
    let mode = |m: &UpdateMode| {
        let detail = match m {
            UpdateMode::Importance {
                samples,
                normalization,
            } => Some((*samples, *normalization)),
            UpdateMode::Frozen | UpdateMode::Exact => None,
        };
        (m.name(), detail)
    };
    let ((wm, wi), (nm, ni)) = (mode(&written.mode), mode(&wanted.mode));
    value("--mode", wm.into(), nm.into());
    if let (Some((ws, wn)), Some((ns, nn))) = (wi, ni) {
        value("--samples", ws.to_string(), ns.to_string());
        value("--normalization", wn.name().into(), nn.name().into());
    }
    value(
        "--projection",
        written.projection.name().into(),
        wanted.projection.name().into(),
    );
    let group = |g: Option<u64>| match g {
        None => "none".to_string(),
        Some(id) if Some(id) == wanted.group => {
            wanted_group.map_or_else(|| format!("id {id:#x}"), str::to_string)
        }
        Some(id) => format!("id {id:#x}"),
    };
    value(
        "--projection-group",
        group(written.group),
        group(wanted.group),
    );
    // --fusion, and under push-sum --fleet-size (the initial weight has no flag).
    let fusion = |f: &FusionRule| match f {
        FusionRule::Tree => ("tree", None),
        FusionRule::PushSum { agents, weight } => ("push-sum", Some((*agents, *weight))),
    };
    let ((wf, wp), (nf, np)) = (fusion(&written.fusion), fusion(&wanted.fusion));
    value("--fusion", wf.into(), nf.into());
    if let (Some((wa, ww)), Some((na, nw))) = (wp, np) {
        value("--fleet-size", wa.to_string(), na.to_string());
        value("push-sum weight", ww.to_string(), nw.to_string());
    }
    // The site update's flags, in the order of `coolgp node --help`.
    let site = |s: &coolgp::learn::SiteConfig| {
        [
            ("--site-damping", s.damping.to_string()),
            ("--site-fleet-damping", s.fleet_damping.to_string()),
            ("--site-window", s.window_points.to_string()),
            ("--site-prior-points", s.prior_points.to_string()),
            ("--scale-prior-points", s.scale_prior_points.to_string()),
            ("--site-memory", s.memory.name().to_owned()),
        ]
    };
    for ((flag, w), (_, n)) in site(&written.site).into_iter().zip(site(&wanted.site)) {
        value(flag, w, n);
    }
    // The local memory's flags; its policy and kernel only matter when it is on on both
    // sides (a memory that is off has none: `--local-memory 0` resumes with any policy).
    let local = |l: &coolgp::local::LocalConfig| {
        [
            ("--local-memory", l.capacity.to_string()),
            ("--local-policy", l.policy.name().to_owned()),
            ("--local-kernel", l.kernel.name().to_owned()),
        ]
    };
    // (`LocalConfig::in_effect`: an off memory's policy and kernel do not take effect.)
    let both_on = written.local.is_on() && wanted.local.is_on();
    let flags = local(&written.local).into_iter().zip(local(&wanted.local));
    for ((flag, w), (_, n)) in flags.take(if both_on { 3 } else { 1 }) {
        value(flag, w, n);
    }
    value("--seed", written.seed.to_string(), wanted.seed.to_string());
    value(
        "adam",
        format!("{:?}", written.adam),
        format!("{:?}", wanted.adam),
    );
    if written.learn != wanted.learn {
        let with = |learn: bool| if learn { "without" } else { "with" };
        out.push(SettingDiff {
            flag: "--no-learn",
            written: with(written.learn).into(),
            now: with(wanted.learn).into(),
            switch: true,
        });
    }
    out
}

/// `a`, `a and b`, `a, b and c`.
pub fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::NodeError;
    use coolgp::learn::IsNormalization;
    use coolgp::ProjectionMode;

    /// The text of the differences of `written` from `wanted`.
    fn differences(written: &AgentConfig, wanted: &AgentConfig, group: Option<&str>) -> String {
        let d: Vec<String> = setting_differences(written, wanted, group)
            .iter()
            .map(ToString::to_string)
            .collect();
        join_and(&d)
    }

    #[test]
    fn a_checkpoint_with_other_settings_is_described_by_the_flags_that_resume_it() {
        let fleet = AgentConfig {
            projection: ProjectionMode::Fleet,
            ..AgentConfig::default()
        };
        assert!(setting_differences(&fleet, &fleet, None).is_empty());
        // Written with --projection fleet, now started per-agent with a group.
        let wanted = AgentConfig {
            group: Some(coolgp::learn::group_id("g")),
            ..AgentConfig::default()
        };
        assert_eq!(
            differences(&fleet, &wanted, Some("g")),
            "--projection fleet (now per-agent) and --projection-group none (now g)"
        );
        let e = NodeError::StateSettings {
            path: "st2".into(),
            settings: differences(&fleet, &wanted, Some("g")),
        };
        assert_eq!(
            e.to_string(),
            "state directory st2 was written with --projection fleet (now per-agent) and \
             --projection-group none (now g): restart with those flags to resume, or use a \
             fresh --state DIR to start over"
        );
        // The other way round: the checkpoint's group is known by its id only.
        let grouped = AgentConfig {
            group: Some(coolgp::learn::group_id("g")),
            ..fleet.clone()
        };
        let text = differences(&grouped, &fleet, None);
        assert_eq!(
            text,
            format!(
                "--projection-group id {:#x} (now none)",
                coolgp::learn::group_id("g")
            )
        );
        // A checkpoint written before --site-fleet-damping and --site-window (both 0).
        let mut old = fleet.clone();
        old.site.fleet_damping = 0.0;
        old.site.window_points = 0;
        assert_eq!(
            differences(&old, &fleet, None),
            "--site-fleet-damping 0 (now 0.01) and --site-window 0 (now 320)"
        );
        // Mode details, the seed, a switch, and a setting without a flag.
        let mut other = fleet.clone();
        other.mode = UpdateMode::Importance {
            samples: 7,
            normalization: IsNormalization::SelfNormalized,
        };
        other.seed = 9;
        other.learn = false;
        other.adam.lr *= 2.0;
        let text = differences(&other, &fleet, None);
        for part in [
            "--mode importance (now frozen), ",
            "--seed 9 (now 0), ",
            "adam AdamConfig",
            " and --no-learn (now without it)",
        ] {
            assert!(text.contains(part), "{part:?} in {text}");
        }
        let mut is = other.clone();
        is.mode = UpdateMode::Importance {
            samples: 20,
            normalization: IsNormalization::Unnormalized,
        };
        let text = differences(&other, &is, None);
        assert!(
            text == "--samples 7 (now 20) and --normalization self-normalized (now unnormalized)",
            "{text}"
        );
        assert!(differences(&fleet, &other, None).ends_with("learning (now --no-learn)"));
        // A checkpoint without a local memory, resumed with one (issue 19).
        let mut local = fleet.clone();
        local.local.capacity = 200;
        local.local.policy = coolgp::local::MemoryPolicy::Spread;
        assert_eq!(
            differences(&fleet, &local, None),
            "--local-memory 0 (now 200)"
        );
        // Off on both sides: the policy does not matter.
        let mut off = fleet.clone();
        off.local.policy = coolgp::local::MemoryPolicy::Reservoir;
        assert_eq!(differences(&fleet, &off, None), "");
        // On on both sides: it does.
        let mut other = local.clone();
        other.local.policy = coolgp::local::MemoryPolicy::Reservoir;
        assert_eq!(
            differences(&local, &other, None),
            "--local-policy spread (now reservoir)"
        );
    }
}
