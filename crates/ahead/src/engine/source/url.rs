//! Object URLs taken apart, in one place: `s3://bucket/key` and `http(s)://[user[:password]@]host[:port]/path`.
//!
//! A pure parser (no store is reached), so it is fuzzed and property-tested on its own
//! (`tests/fuzz_corpus.rs`, `fuzz/fuzz_targets/url.rs`). Credentials in an HTTP URL are taken
//! out here: the store is built from the URL without them and sends them as Basic auth; every
//! message, statistic and `Debug` shows the URL with the password replaced by `***`
//! ([`ObjectUrl::shown`], [`redact`]). An `s3://` URL carries no credentials (S3's are keys,
//! taken from the environment or the remote options): one that has some is refused, and
//! not repeated.

/// The kinds of object URL, by scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scheme {
    S3,
    Http,
    Https,
}

impl Scheme {
    /// The schemes, with their prefixes: the one table names are matched against.
    pub(crate) const ALL: [(&'static str, Scheme); 3] = [
        ("s3://", Scheme::S3),
        ("http://", Scheme::Http),
        ("https://", Scheme::Https),
    ];

    /// The scheme `text` starts with, if it is an object URL.
    pub(crate) fn of(text: &str) -> Option<Scheme> {
        Scheme::ALL
            .iter()
            .find(|(prefix, _)| text.starts_with(prefix))
            .map(|&(_, s)| s)
    }

    fn prefix(self) -> &'static str {
        match self {
            Scheme::S3 => "s3://",
            Scheme::Http => "http://",
            Scheme::Https => "https://",
        }
    }
}

/// Whether `text` starts with a URL scheme (`letter [letter digit + - .]* ://`): a name for a
/// kind of source that takes URLs, never a local path (the local source claims the rest).
pub(crate) fn has_scheme(text: &str) -> bool {
    let Some((scheme, _)) = text.split_once("://") else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// An object URL, taken apart.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ObjectUrl {
    pub scheme: Scheme,
    /// `s3://bucket`, or `http(s)://host[:port]` without credentials: what a store is built for.
    pub place: String,
    /// For S3 the bucket; for HTTP the host and port.
    pub authority: String,
    /// The key (S3) or the path (HTTP) without its leading `/`; empty for a bucket itself.
    pub key: String,
    /// User and password given in an HTTP URL (percent-decoded).
    pub credentials: Option<(String, String)>,
    /// The URL as it may be shown: the password, if any, replaced by `***`.
    pub shown: String,
}

impl std::fmt::Debug for ObjectUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

/// `text` with the password of an URL's credentials replaced by `***` (any text: what is not a
/// URL with credentials comes back as it is).
pub fn redact(text: &str) -> String {
    let Some(scheme_end) = text.find("://").map(|i| i + 3) else {
        return text.to_string();
    };
    let authority_end = text[scheme_end..]
        .find(['/', '?', '#'])
        .map_or(text.len(), |i| scheme_end + i);
    let authority = &text[scheme_end..authority_end];
    let Some(at) = authority.rfind('@') else {
        return text.to_string();
    };
    let user = authority[..at].split(':').next().unwrap_or_default();
    format!(
        "{}{user}:***@{}{}",
        &text[..scheme_end],
        &authority[at + 1..],
        &text[authority_end..]
    )
}

/// Whether `text` is an object URL the engine can open (its scheme, bucket or host, and key),
/// without reaching the store: the URL as it is shown (a password hidden), or why not.
///
/// # Errors
/// Why `text` names no object: not an `s3://`, `http://` or `https://` URL, no bucket, host or
/// key, or credentials in an `s3://` URL (which takes keys from the environment instead).
pub fn check(text: &str) -> Result<String, String> {
    parse(text, false).map(|u| u.shown)
}

/// Percent-decoded `s` (`%40` is `@`); malformed escapes kept as written.
fn percent_decoded(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// Why a name is not an object URL, in words (the caller names the URL, shown redacted).
pub(crate) type UrlError = String;

/// Take `text` apart. `prefix`: an `s3://bucket` or `s3://bucket/dir/` with no key is allowed
/// (a listing, a stat of a prefix).
pub(crate) fn parse(text: &str, prefix: bool) -> Result<ObjectUrl, UrlError> {
    let scheme = Scheme::of(text).ok_or("not an s3://, http:// or https:// URL")?;
    let rest = &text[scheme.prefix().len()..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let (userinfo, host) = match authority.rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    };
    let shown = redact(text);
    let path = path.strip_prefix('/').unwrap_or(path);
    match scheme {
        Scheme::S3 => {
            if userinfo.is_some() {
                return Err("an s3:// URL carries no credentials: give them as AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, or the remote options access_key_id and secret_access_key".into());
            }
            if host.is_empty() || path.is_empty() && !prefix {
                return Err("expected s3://bucket/key".into());
            }
            Ok(ObjectUrl {
                scheme,
                place: format!("s3://{host}"),
                authority: host.to_string(),
                key: path.to_string(),
                credentials: None,
                shown,
            })
        }
        Scheme::Http | Scheme::Https => {
            if host.is_empty() {
                return Err("no host".into());
            }
            if authority_end == rest.len() || path.is_empty() {
                return Err("no object path after the host".into());
            }
            let credentials = userinfo.map(|u| {
                let (user, password) = u.split_once(':').unwrap_or((u, ""));
                (percent_decoded(user), percent_decoded(password))
            });
            Ok(ObjectUrl {
                scheme,
                place: format!("{}{host}", scheme.prefix()),
                authority: host.to_string(),
                key: path.to_string(),
                credentials,
                shown,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_taken_apart_and_passwords_never_shown() {
        let u = parse("http://alice:S3cret%40PW@127.0.0.1:8080/dir/obj.bin", false).unwrap();
        assert_eq!(u.place, "http://127.0.0.1:8080");
        assert_eq!(u.key, "dir/obj.bin");
        assert_eq!(
            u.credentials,
            Some(("alice".to_string(), "S3cret@PW".to_string()))
        );
        assert_eq!(u.shown, "http://alice:***@127.0.0.1:8080/dir/obj.bin");
        assert!(!format!("{u:?}").contains("S3cret"));
        let s = parse("s3://bucket/a/b", false).unwrap();
        assert_eq!((s.place.as_str(), s.key.as_str()), ("s3://bucket", "a/b"));
        assert!(parse("s3://bucket", false).is_err());
        assert_eq!(parse("s3://bucket", true).unwrap().key, "");
        let refused = parse("s3://KEY:pw-quux@bucket/k", false).unwrap_err();
        assert!(!refused.contains("pw-quux"), "{refused}");
        for bad in ["http://host-only", "https://", "ftp://x/y", "http:///path"] {
            assert!(parse(bad, false).is_err(), "{bad}");
        }
        assert_eq!(redact("/local/path"), "/local/path");
        assert_eq!(redact("http://h/p@x"), "http://h/p@x");
        assert_eq!(redact("https://u:p@h"), "https://u:***@h");
    }
}
