//! `coolgp certs`: a fleet CA, one certificate per node and a reader certificate, all with
//! Ed25519 keys (the same key authenticates a node's TLS links and signs its messages,
//! [`crate::auth`]). File names are fixed ([`crate::tls`]).
//!
//! - a node certificate: common name = the agent id, organization = the fleet, usable for TLS
//!   servers and clients, signed by the fleet CA;
//! - the reader certificate: common name `reader`, organization = the fleet, TLS client only;
//! - the CA: `coolgp fleet <F> CA`, organization = the fleet, may sign leaf certificates only.
//!
//! Private keys are PKCS#8 PEM files written with mode 0600; nothing is ever overwritten.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Args;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::error::{NodeError, Result};
use crate::keys::validate_fleet;
use crate::tls::{self, Identity};

/// Flags of `coolgp certs`.
#[derive(Args, Debug, Clone, Default)]
pub struct CertsArgs {
    /// Fleet name of a new fleet (with --nodes).
    #[arg(long)]
    pub fleet: Option<String>,
    /// Node ids of a new fleet, comma separated: writes ca.pem/.key, `node-<id>.pem`/.key and
    /// reader.pem/.key.
    #[arg(long, value_delimiter = ',')]
    pub nodes: Vec<u64>,
    /// Add nodes to an existing fleet directory (signed with its ca.key), comma separated.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["fleet", "nodes"])]
    pub add: Vec<u64>,
    /// The fleet's certificate directory (created if needed).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Years of validity of new certificates.
    #[arg(long, default_value_t = 10)]
    pub years: u16,
}

fn tls_err(path: &Path, reason: impl std::fmt::Display) -> NodeError {
    NodeError::Tls {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// The current calendar year (UTC, to within a day: only used for validity bounds).
fn this_year() -> i32 {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    1970 + i32::try_from(secs / 31_556_952).unwrap_or(0)
}

fn validity(p: &mut CertificateParams, years: u16) {
    let y = this_year();
    // From the start of last year (clock skew between machines), for `years` years.
    p.not_before = rcgen::date_time_ymd(y - 1, 1, 1);
    p.not_after = rcgen::date_time_ymd(y + i32::from(years), 1, 1);
}

fn new_key(path: &Path) -> Result<KeyPair> {
    KeyPair::generate_for(&rcgen::PKCS_ED25519).map_err(|e| tls_err(path, e))
}

/// Writes a new file (never overwrites); `secret` files get mode 0600.
fn write_new(path: &Path, text: &str, secret: bool) -> Result<()> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = secret;
    let mut f = o
        .open(path)
        .map_err(|e| NodeError::io("creating", path, e))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| NodeError::io("writing", path, e))
}

fn refuse_existing(paths: &[PathBuf]) -> Result<()> {
    match paths.iter().find(|p| p.exists()) {
        Some(p) => Err(tls_err(p, "already exists; nothing was written")),
        None => Ok(()),
    }
}

fn leaf(
    issuer: &Issuer<'_, KeyPair>,
    dir: &Path,
    fleet: &str,
    who: Identity,
    years: u16,
) -> Result<Vec<PathBuf>> {
    let (cert_path, key_path) = (who.cert(dir), who.key(dir));
    let key = new_key(&key_path)?;
    let mut p = CertificateParams::default();
    p.distinguished_name = rcgen::DistinguishedName::new();
    let (cn, ekus) = match who {
        Identity::Node(id) => (
            id.to_string(),
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        ),
        Identity::Reader => (
            "reader".to_string(),
            vec![ExtendedKeyUsagePurpose::ClientAuth],
        ),
    };
    p.distinguished_name.push(DnType::CommonName, cn);
    p.distinguished_name
        .push(DnType::OrganizationName, fleet.to_string());
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = ekus;
    p.use_authority_key_identifier_extension = true;
    validity(&mut p, years);
    let cert = p
        .signed_by(&key, issuer)
        .map_err(|e| tls_err(&cert_path, e))?;
    write_new(&key_path, &key.serialize_pem(), true)?;
    write_new(&cert_path, &cert.pem(), false)?;
    Ok(vec![cert_path, key_path])
}

/// Reads the first PEM block labelled `label` of a file and returns its DER bytes.
///
/// # Errors
/// [`NodeError::Io`] if unreadable, [`NodeError::Tls`] if no such block is in it.
pub fn read_pem(path: &Path, label: &str) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).map_err(|e| NodeError::io("reading", path, e))?;
    for pem in x509_parser::pem::Pem::iter_from_buffer(&bytes) {
        let pem = pem.map_err(|e| tls_err(path, format!("not PEM: {e}")))?;
        if pem.label == label {
            return Ok(pem.contents);
        }
    }
    Err(tls_err(path, format!("no '{label}' PEM block")))
}

/// The fleet named in a certificate (its organization), `None` if it has none.
pub fn fleet_of(cert: &x509_parser::certificate::X509Certificate<'_>) -> Option<String> {
    cert.subject()
        .iter_organization()
        .next()
        .and_then(|o| o.as_str().ok())
        .map(str::to_string)
}

/// Reads the fleet name from `DIR/ca.pem`.
///
/// # Errors
/// [`NodeError::Tls`] if the CA certificate is missing, unparsable or names no fleet.
pub fn ca_fleet(dir: &Path) -> Result<String> {
    let path = dir.join(tls::CA_CERT);
    let der = read_pem(&path, "CERTIFICATE")?;
    let (_, ca) = x509_parser::parse_x509_certificate(&der)
        .map_err(|e| tls_err(&path, format!("not an X.509 certificate: {e}")))?;
    fleet_of(&ca).ok_or_else(|| tls_err(&path, "the CA names no fleet (organization)"))
}

fn new_fleet(args: &CertsArgs, fleet: &str) -> Result<Vec<PathBuf>> {
    let dir = &args.out;
    if args.nodes.is_empty() {
        return Err(NodeError::Config(
            "coolgp certs --fleet F needs --nodes 1,2,3 (or use --add to extend a fleet)".into(),
        ));
    }
    let mut ids = args.nodes.clone();
    ids.sort_unstable();
    ids.dedup();
    std::fs::create_dir_all(dir).map_err(|e| NodeError::io("creating", dir, e))?;
    let mut planned = vec![dir.join(tls::CA_CERT), dir.join(tls::CA_KEY)];
    for who in ids
        .iter()
        .map(|&i| Identity::Node(i))
        .chain([Identity::Reader])
    {
        planned.push(who.cert(dir));
        planned.push(who.key(dir));
    }
    refuse_existing(&planned)?;
    let ca_key_path = dir.join(tls::CA_KEY);
    let ca_key = new_key(&ca_key_path)?;
    let mut p = CertificateParams::default();
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name
        .push(DnType::CommonName, format!("coolgp fleet {fleet} CA"));
    p.distinguished_name
        .push(DnType::OrganizationName, fleet.to_string());
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut p, args.years);
    let ca = p
        .self_signed(&ca_key)
        .map_err(|e| tls_err(&dir.join(tls::CA_CERT), e))?;
    write_new(&ca_key_path, &ca_key.serialize_pem(), true)?;
    write_new(&dir.join(tls::CA_CERT), &ca.pem(), false)?;
    let issuer = Issuer::new(p, ca_key);
    let mut out = vec![dir.join(tls::CA_CERT), ca_key_path];
    for who in ids
        .iter()
        .map(|&i| Identity::Node(i))
        .chain([Identity::Reader])
    {
        out.extend(leaf(&issuer, dir, fleet, who, args.years)?);
    }
    Ok(out)
}

fn add_nodes(args: &CertsArgs) -> Result<Vec<PathBuf>> {
    let dir = &args.out;
    let fleet = ca_fleet(dir)?;
    let mut ids = args.add.clone();
    ids.sort_unstable();
    ids.dedup();
    let planned: Vec<PathBuf> = ids
        .iter()
        .flat_map(|&i| [tls::node_cert(dir, i), tls::node_key(dir, i)])
        .collect();
    refuse_existing(&planned)?;
    let key_path = dir.join(tls::CA_KEY);
    let key_pem =
        std::fs::read_to_string(&key_path).map_err(|e| NodeError::io("reading", &key_path, e))?;
    let ca_key = KeyPair::from_pem(&key_pem).map_err(|e| tls_err(&key_path, e))?;
    let ca_path = dir.join(tls::CA_CERT);
    let ca_pem =
        std::fs::read_to_string(&ca_path).map_err(|e| NodeError::io("reading", &ca_path, e))?;
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, ca_key).map_err(|e| tls_err(&ca_path, e))?;
    let mut out = Vec::new();
    for &id in &ids {
        out.extend(leaf(&issuer, dir, &fleet, Identity::Node(id), args.years)?);
    }
    Ok(out)
}

/// Runs `coolgp certs`; returns the files written.
///
/// # Errors
/// [`NodeError::Config`] for a missing or conflicting flag, [`NodeError::Tls`] if a file to
/// be written already exists or the CA cannot be read, [`NodeError::Io`] on write failures.
pub fn run(args: &CertsArgs) -> Result<Vec<PathBuf>> {
    if args.years == 0 {
        return Err(NodeError::Config("--years must be > 0".into()));
    }
    match (&args.fleet, args.add.is_empty()) {
        (Some(f), true) => {
            validate_fleet(f)?;
            new_fleet(args, f)
        }
        (None, false) => add_nodes(args),
        (None, true) => Err(NodeError::Config(
            "use --fleet F --nodes 1,2,3 (a new fleet) or --add 4 (an existing one)".into(),
        )),
        (Some(_), false) => Err(NodeError::Config(
            "--add extends an existing fleet: drop --fleet".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{Auth, Roster};

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("coolgp-certs-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// `coolgp certs --fleet lab --nodes NODES --out DIR --years 1`.
    fn new_fleet(dir: &Path, nodes: &[u64]) -> CertsArgs {
        CertsArgs {
            fleet: Some("lab".into()),
            nodes: nodes.to_vec(),
            out: dir.to_path_buf(),
            years: 1,
            ..CertsArgs::default()
        }
    }

    /// `coolgp certs --add IDS --out DIR --years 1`.
    fn add_nodes_to(dir: &Path, ids: &[u64]) -> CertsArgs {
        CertsArgs {
            add: ids.to_vec(),
            out: dir.to_path_buf(),
            years: 1,
            ..CertsArgs::default()
        }
    }

    #[test]
    fn a_new_fleet_an_added_node_and_no_overwrites() {
        let dir = tmp("fleet");
        let new = new_fleet(&dir, &[2, 1, 2]);
        let files = run(&new).expect("new fleet");
        assert_eq!(files.len(), 2 + 2 * 2 + 2);
        assert_eq!(ca_fleet(&dir).expect("fleet"), "lab");
        let roster = Roster::load(&dir, "lab").expect("roster");
        assert_eq!(roster.ids(), vec![1, 2]);
        // The key of node 1 belongs to its certificate, not to node 2's.
        assert!(Auth::load(&dir, "lab", 1).is_ok());
        std::fs::copy(tls::node_key(&dir, 2), tls::node_key(&dir, 1)).expect("swap keys");
        let e = Auth::load(&dir, "lab", 1)
            .map(|_| ())
            .expect_err("node 2's key as node 1");
        assert!(e.to_string().contains("does not match"), "{e}");
        let e = run(&new)
            .map(|_| ())
            .expect_err("a second CA over the first");
        assert!(e.to_string().contains("already exists"), "{e}");
        let add = add_nodes_to(&dir, &[4]);
        run(&add).expect("add");
        assert_eq!(
            Roster::load(&dir, "lab").expect("roster").ids(),
            vec![1, 2, 4]
        );
        assert!(run(&add).is_err(), "node 4 twice");
        assert!(Roster::load(&dir, "other").is_err(), "another fleet's name");
        // A certificate of another CA copied in is left out of the roster.
        let other = tmp("other");
        run(&new_fleet(&other, &[7])).expect("other CA");
        std::fs::copy(tls::node_cert(&other, 7), tls::node_cert(&dir, 7)).expect("copy");
        assert_eq!(
            Roster::load(&dir, "lab").expect("roster").ids(),
            vec![1, 2, 4]
        );
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&other);
    }

    #[test]
    fn a_roster_finds_a_node_added_since_its_load_at_most_once_a_second() {
        // A running node's roster learns of `certs --add 3` when asked for node 3's key
        // (a request for rows or a fitter's kernel from a node that is no neighbour).
        let dir = tmp("reload");
        run(&new_fleet(&dir, &[1, 2])).expect("new fleet");
        let mut roster = Roster::load(&dir, "lab").expect("roster");
        run(&add_nodes_to(&dir, &[3])).expect("add");
        assert_eq!(roster.key(3), None, "not re-read by itself");
        // Within RELOAD_EVERY of the load, nothing is re-read.
        assert_eq!(roster.key_reloading(3), None);
        assert_eq!(roster.reloads(), 0);
        std::thread::sleep(crate::auth::RELOAD_EVERY);
        let want = Auth::load(&dir, "lab", 3)
            .expect("node 3")
            .signer
            .public_key();
        assert_eq!(roster.key_reloading(3), Some(want));
        assert_eq!(roster.reloads(), 1);
        // A known id, or an id still unknown within the second, reads nothing.
        assert!(roster.key_reloading(1).is_some());
        assert_eq!(roster.key_reloading(9), None);
        assert_eq!((roster.reloads(), roster.ids()), (1, vec![1, 2, 3]));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
