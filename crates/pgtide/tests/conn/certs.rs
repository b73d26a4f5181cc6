//! Test certificates, generated per run: a CA, a server certificate for
//! `localhost` and 127.0.0.1 signed by it, a client certificate for user
//! `postgres`, and an unrelated "wrong" CA.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use openssl::asn1::Asn1Time;
use openssl::bn::{BigNum, MsbOption};
use openssl::hash::MessageDigest;
use openssl::pkey::{PKey, Private};
use openssl::rsa::Rsa;
use openssl::x509::extension::{BasicConstraints, SubjectAlternativeName};
use openssl::x509::{X509NameBuilder, X509};

pub struct Certs {
    pub dir: tempfile::TempDir,
}

impl Certs {
    pub fn generate() -> Certs {
        let dir = tempfile::Builder::new()
            .prefix("pgtide-certs-")
            .tempdir_in("/tmp")
            .unwrap();
        // Readable by the server's user (pgtide, when tests run as root).
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let (ca, ca_key) = self_signed("pgtide test CA");
        let (wrong, _) = self_signed("some other CA");
        let (server, server_key) = leaf("localhost", true, &ca, &ca_key);
        let (client, client_key) = leaf("postgres", false, &ca, &ca_key);
        let certs = Certs { dir };
        certs.write("ca.crt", &ca.to_pem().unwrap(), 0o644);
        certs.write("wrong-ca.crt", &wrong.to_pem().unwrap(), 0o644);
        certs.write("server.crt", &server.to_pem().unwrap(), 0o644);
        certs.write(
            "server.key",
            &server_key.private_key_to_pem_pkcs8().unwrap(),
            0o600,
        );
        certs.write("client.crt", &client.to_pem().unwrap(), 0o644);
        certs.write(
            "client.key",
            &client_key.private_key_to_pem_pkcs8().unwrap(),
            0o600,
        );
        certs
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn write(&self, name: &str, bytes: &[u8], mode: u32) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, bytes).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    /// A home directory with `.postgresql/root.crt` = the given CA file.
    pub fn home_with_root(&self, name: &str, ca: &Path) -> PathBuf {
        let home = self.path(name);
        std::fs::create_dir_all(home.join(".postgresql")).unwrap();
        std::fs::copy(ca, home.join(".postgresql/root.crt")).unwrap();
        home
    }
}

fn key() -> PKey<Private> {
    PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap()
}

fn builder(cn: &str, key: &PKey<Private>) -> openssl::x509::X509Builder {
    let mut name = X509NameBuilder::new().unwrap();
    name.append_entry_by_text("CN", cn).unwrap();
    let name = name.build();
    let mut b = X509::builder().unwrap();
    b.set_version(2).unwrap();
    let mut serial = BigNum::new().unwrap();
    serial.rand(64, MsbOption::MAYBE_ZERO, false).unwrap();
    b.set_serial_number(&serial.to_asn1_integer().unwrap())
        .unwrap();
    b.set_subject_name(&name).unwrap();
    b.set_pubkey(key).unwrap();
    b.set_not_before(&Asn1Time::days_from_now(0).unwrap())
        .unwrap();
    b.set_not_after(&Asn1Time::days_from_now(2).unwrap())
        .unwrap();
    b
}

fn self_signed(cn: &str) -> (X509, PKey<Private>) {
    let key = key();
    let mut b = builder(cn, &key);
    let mut name = X509NameBuilder::new().unwrap();
    name.append_entry_by_text("CN", cn).unwrap();
    b.set_issuer_name(&name.build()).unwrap();
    b.append_extension(BasicConstraints::new().critical().ca().build().unwrap())
        .unwrap();
    b.sign(&key, MessageDigest::sha256()).unwrap();
    (b.build(), key)
}

fn leaf(cn: &str, server: bool, ca: &X509, ca_key: &PKey<Private>) -> (X509, PKey<Private>) {
    let key = key();
    let mut b = builder(cn, &key);
    b.set_issuer_name(ca.subject_name()).unwrap();
    if server {
        let san = SubjectAlternativeName::new()
            .dns("localhost")
            .ip("127.0.0.1")
            .build(&b.x509v3_context(Some(ca), None));
        b.append_extension(san.unwrap()).unwrap();
    }
    b.sign(ca_key, MessageDigest::sha256()).unwrap();
    (b.build(), key)
}
