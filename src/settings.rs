//! What every stage's configuration shares, below them all: the error that names the key at
//! fault, TLS files, secrets and URLs fit for logs. `config` assembles the stages' settings;
//! each stage owns its own struct and takes these from here, so no stage imports `config`.

use serde::Deserialize;

/// A configuration problem, always naming the key (or variable, or file) at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {path}: {message}")]
    File { path: String, message: String },
    #[error("environment variable {variable}: {message}")]
    Env { variable: String, message: String },
    #[error("config: {message}")]
    Parse { message: String },
    #[error("config key `{key}`: {message}")]
    Invalid { key: String, message: String },
}

/// A secret from the configuration: never shown by `Debug`.
#[derive(Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() { "\"\"" } else { "***" })
    }
}

/// The TLS files of one connection; "" means unused.
#[derive(Debug, Clone, Copy)]
pub struct TlsFiles<'a> {
    pub ca_file: &'a str,
    pub client_cert_file: &'a str,
    pub client_key_file: &'a str,
}

impl TlsFiles<'_> {
    pub fn any(&self) -> bool {
        !(self.ca_file.is_empty()
            && self.client_cert_file.is_empty()
            && self.client_key_file.is_empty())
    }

    /// Each file that is set must be readable; a client certificate needs its key and the
    /// other way round. Errors name `<section>.<key>`.
    pub fn validate(&self, section: &str) -> Result<(), ConfigError> {
        for (key, path) in [
            ("tls_ca_file", self.ca_file),
            ("tls_client_cert_file", self.client_cert_file),
            ("tls_client_key_file", self.client_key_file),
        ] {
            if !path.is_empty()
                && let Err(error) = std::fs::File::open(path)
            {
                return Err(ConfigError::Invalid {
                    key: format!("{section}.{key}"),
                    message: format!("cannot read {path:?}: {error}"),
                });
            }
        }
        if self.client_cert_file.is_empty() != self.client_key_file.is_empty() {
            let missing = if self.client_cert_file.is_empty() {
                "tls_client_cert_file"
            } else {
                "tls_client_key_file"
            };
            return Err(ConfigError::Invalid {
                key: format!("{section}.{missing}"),
                message: "a client certificate and its key go together; set both or neither".into(),
            });
        }
        Ok(())
    }
}

/// A URL fit for logs and error messages: any user or password in it is replaced by `***`.
/// Every form: with or without a scheme, and comma-separated lists of servers (a NATS
/// cluster's URL), each redacted on its own.
pub fn redact_url(url: &str) -> String {
    url.split(',')
        .map(redact_one_url)
        .collect::<Vec<_>>()
        .join(",")
}

fn redact_one_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => match scheme {
            Some(scheme) => format!("{scheme}://***@{}", &rest[at + 1..]),
            None => format!("***@{}", &rest[at + 1..]),
        },
        None => url.to_string(),
    }
}
