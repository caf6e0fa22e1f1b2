//! The model agent's settings: the endpoint, the model, the key and the
//! bounds on every call, as `serve` options and their environment
//! variables.
//!
//! Owns: parsing and checking the settings. Must never: print, log or
//! record the key (its `Debug` is redacted).

use std::time::Duration;

/// The environment variable the API key is read from (never an option,
/// so it stays out of process listings and shell history).
pub const MODEL_API_KEY_ENV: &str = "LEDGERWIRE_MODEL_API_KEY";
/// Longest one model call may take, whole, in milliseconds.
pub const DEFAULT_MODEL_TIMEOUT_MS: u64 = 60_000;
/// Most tokens the model may write for one step.
pub const DEFAULT_MAX_TOKENS_PER_STEP: u32 = 512;
/// Most model calls one segment makes, retries included.
pub const DEFAULT_STEPS_PER_SEGMENT: u32 = 8;
/// Most model calls in flight at once across the server; a call waits
/// for a slot at most its timeout.
pub const DEFAULT_CONCURRENT_MODEL_CALLS: usize = 16;
/// Bounds of the settings above.
pub const MAX_MODEL_TIMEOUT_MS: u64 = 600_000;
pub const MAX_TOKENS_PER_STEP_LIMIT: u32 = 8_192;
pub const MAX_STEPS_PER_SEGMENT: u32 = 64;
pub const MAX_CONCURRENT_MODEL_CALLS: usize = 1_024;

/// `serve`'s options for `--agent model`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ModelArgs {
    /// The model's OpenAI-compatible endpoint for `--agent model`: its
    /// base URL (`http://127.0.0.1:8081/v1`) or the full
    /// `/v1/chat/completions` URL. The key comes from LEDGERWIRE_MODEL_API_KEY.
    #[arg(long = "model-url", env = "LEDGERWIRE_MODEL_URL")]
    pub url: Option<String>,
    /// The model's name, as the endpoint knows it.
    #[arg(long = "model", env = "LEDGERWIRE_MODEL", default_value = "default")]
    pub model: String,
    /// Longest one model call may take, in milliseconds.
    #[arg(long = "model-timeout-ms", env = "LEDGERWIRE_MODEL_TIMEOUT_MS", default_value_t = DEFAULT_MODEL_TIMEOUT_MS)]
    pub timeout_ms: u64,
    /// Most tokens the model may write for one step.
    #[arg(long = "model-max-tokens", env = "LEDGERWIRE_MODEL_MAX_TOKENS", default_value_t = DEFAULT_MAX_TOKENS_PER_STEP)]
    pub max_tokens: u32,
    /// Most model calls one segment makes, retries included.
    #[arg(long = "model-steps", env = "LEDGERWIRE_MODEL_STEPS", default_value_t = DEFAULT_STEPS_PER_SEGMENT)]
    pub steps: u32,
    /// Most model calls in flight at once.
    #[arg(long = "model-concurrency", env = "LEDGERWIRE_MODEL_CONCURRENCY", default_value_t = DEFAULT_CONCURRENT_MODEL_CALLS)]
    pub concurrency: usize,
    /// A PEM file of certificates to trust for an https:// --model-url,
    /// beside the public roots: a team's private CA, or a gateway's own
    /// self-signed certificate.
    #[arg(long = "model-ca", env = "LEDGERWIRE_MODEL_CA")]
    pub ca: Option<std::path::PathBuf>,
}

/// An API key: shown nowhere.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

/// The checked settings.
#[derive(Clone, Debug)]
pub struct ModelSettings {
    /// The chat-completions URL.
    pub url: reqwest::Url,
    pub model: String,
    pub key: Option<ApiKey>,
    pub timeout: Duration,
    pub max_tokens: u32,
    pub steps_per_segment: u32,
    pub concurrency: usize,
    /// Certificates trusted beside the public roots (`--model-ca`).
    pub ca: Vec<reqwest::Certificate>,
}

/// A setting that cannot be used; the sentence says what to fix.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ModelSettingsError {
    #[error(
        "--agent model needs --model-url (LEDGERWIRE_MODEL_URL), the model's OpenAI-compatible endpoint"
    )]
    MissingUrl,
    #[error("--model-url {0:?} is not an http:// or https:// URL")]
    BadUrl(String),
    #[error("--model-ca {path}: the file cannot be read ({reason})")]
    CaUnreadable { path: String, reason: String },
    #[error(
        "--model-ca {path}: {reason}; give a PEM file of one or more certificates (-----BEGIN CERTIFICATE-----)"
    )]
    CaUnparsable { path: String, reason: String },
    #[error("--model must name the model (1 to 256 characters)")]
    BadModel,
    #[error("--{name} must be between 1 and {max}; it is {value}")]
    OutOfRange {
        name: &'static str,
        value: u64,
        max: u64,
    },
}

impl ModelSettings {
    /// Checks `args`, with the key read from the environment (`key`).
    pub fn new(args: &ModelArgs, key: Option<String>) -> Result<Self, ModelSettingsError> {
        let raw = args.url.as_deref().ok_or(ModelSettingsError::MissingUrl)?;
        let url = chat_url(raw)?;
        let model = args.model.trim();
        if model.is_empty() || model.len() > 256 {
            return Err(ModelSettingsError::BadModel);
        }
        in_range("model-timeout-ms", args.timeout_ms, MAX_MODEL_TIMEOUT_MS)?;
        in_range(
            "model-max-tokens",
            args.max_tokens.into(),
            MAX_TOKENS_PER_STEP_LIMIT.into(),
        )?;
        in_range(
            "model-steps",
            args.steps.into(),
            MAX_STEPS_PER_SEGMENT.into(),
        )?;
        in_range(
            "model-concurrency",
            args.concurrency as u64,
            MAX_CONCURRENT_MODEL_CALLS as u64,
        )?;
        Ok(Self {
            url,
            model: model.to_owned(),
            key: key.filter(|k| !k.trim().is_empty()).map(ApiKey),
            timeout: Duration::from_millis(args.timeout_ms),
            max_tokens: args.max_tokens,
            steps_per_segment: args.steps,
            concurrency: args.concurrency,
            ca: match &args.ca {
                Some(path) => trusted_certificates(path)?,
                None => Vec::new(),
            },
        })
    }
}

/// The certificates of the PEM file at `path`, each checked as a trust
/// anchor, so a bad file stops the start rather than every call.
fn trusted_certificates(
    path: &std::path::Path,
) -> Result<Vec<reqwest::Certificate>, ModelSettingsError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let shown = path.display().to_string();
    let unparsable = |reason: String| ModelSettingsError::CaUnparsable {
        path: shown.clone(),
        reason,
    };
    let pem = std::fs::read(path).map_err(|error| ModelSettingsError::CaUnreadable {
        path: shown.clone(),
        reason: error.to_string(),
    })?;
    let mut anchors = rustls::RootCertStore::empty();
    let mut certificates = Vec::new();
    for (n, der) in CertificateDer::pem_slice_iter(&pem).enumerate() {
        let der = der.map_err(|error| unparsable(format!("its PEM does not decode ({error})")))?;
        anchors
            .add(der.clone())
            .map_err(|error| unparsable(format!("certificate {} is not one ({error})", n + 1)))?;
        let certificate = reqwest::Certificate::from_der(&der)
            .map_err(|error| unparsable(format!("certificate {} ({error})", n + 1)))?;
        certificates.push(certificate);
    }
    if certificates.is_empty() {
        return Err(unparsable("it holds no certificate".into()));
    }
    Ok(certificates)
}

fn in_range(name: &'static str, value: u64, max: u64) -> Result<(), ModelSettingsError> {
    if (1..=max).contains(&value) {
        Ok(())
    } else {
        Err(ModelSettingsError::OutOfRange { name, value, max })
    }
}

/// The chat-completions URL of an endpoint given as a base URL or whole.
fn chat_url(raw: &str) -> Result<reqwest::Url, ModelSettingsError> {
    let bad = || ModelSettingsError::BadUrl(redacted(raw));
    let mut url = reqwest::Url::parse(raw.trim()).map_err(|_| bad())?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(bad());
    }
    if !url.path().ends_with("/chat/completions") {
        let path = format!("{}/chat/completions", url.path().trim_end_matches('/'));
        url.set_path(&path);
    }
    Ok(url)
}

/// A URL as an error may show it: no user, password or query.
fn redacted(raw: &str) -> String {
    match reqwest::Url::parse(raw) {
        Ok(mut url) => {
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.set_query(None);
            url.to_string()
        }
        Err(_) => "(unparsable)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(url: &str) -> ModelArgs {
        ModelArgs {
            url: Some(url.to_owned()),
            model: "m".into(),
            timeout_ms: DEFAULT_MODEL_TIMEOUT_MS,
            max_tokens: DEFAULT_MAX_TOKENS_PER_STEP,
            steps: DEFAULT_STEPS_PER_SEGMENT,
            concurrency: DEFAULT_CONCURRENT_MODEL_CALLS,
            ca: None,
        }
    }

    #[test]
    fn a_base_url_gains_the_chat_path_and_the_key_never_shows() {
        let settings =
            ModelSettings::new(&args("http://127.0.0.1:9/v1"), Some("sk-secret".into())).unwrap();
        assert_eq!(
            settings.url.as_str(),
            "http://127.0.0.1:9/v1/chat/completions"
        );
        assert!(!format!("{settings:?}").contains("sk-secret"));
        let whole = ModelSettings::new(&args("http://h/v1/chat/completions"), None).unwrap();
        assert_eq!(whole.url.path(), "/v1/chat/completions");
    }

    #[test]
    fn bad_settings_say_what_to_fix_without_echoing_credentials() {
        let error = ModelSettings::new(&args("ftp://u:pw@h/x?key=k"), None).unwrap_err();
        assert!(!error.to_string().contains("pw") && !error.to_string().contains("key=k"));
        let tls = ModelSettings::new(&args("https://api.example/v1"), None).unwrap();
        assert_eq!(tls.url.as_str(), "https://api.example/v1/chat/completions");
        let mut zero = args("http://h/v1");
        zero.steps = 0;
        assert!(matches!(
            ModelSettings::new(&zero, None),
            Err(ModelSettingsError::OutOfRange {
                name: "model-steps",
                ..
            })
        ));
        assert_eq!(
            ModelSettings::new(&ModelArgs::default(), None).unwrap_err(),
            ModelSettingsError::MissingUrl
        );
    }

    #[test]
    fn a_ca_file_that_cannot_serve_stops_the_start_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let with_ca = |path: std::path::PathBuf| {
            let mut args = args("https://gateway.internal/v1");
            args.ca = Some(path);
            ModelSettings::new(&args, None).map(|s| s.ca.len())
        };
        let cases = [
            ("missing.pem", None),
            ("prose.pem", Some("not a certificate at all\n")),
            (
                "garbled.pem",
                Some("-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n"),
            ),
            (
                "not-x509.pem",
                Some("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
            ),
        ];
        for (name, text) in cases {
            let path = dir.path().join(name);
            if let Some(text) = text {
                std::fs::write(&path, text).unwrap();
            }
            let error = with_ca(path.clone()).unwrap_err();
            let kind_right = match text {
                None => matches!(error, ModelSettingsError::CaUnreadable { .. }),
                Some(_) => matches!(error, ModelSettingsError::CaUnparsable { .. }),
            };
            assert!(kind_right, "{name}: {error}");
            assert!(
                error.to_string().contains(&path.display().to_string()),
                "{error}"
            );
        }
    }
}
