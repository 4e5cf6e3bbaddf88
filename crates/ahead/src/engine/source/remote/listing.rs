//! What a name is and what is under it, as a store tells: a HEAD for one object, a listing
//! with a delimiter for a prefix (S3; HTTP servers have none).

use super::*;

/// An object at `url`, as the store's metadata describes it. An empty ETag (versitygw lists
/// `<ETag></ETag>` for an object it has none for) is none: pinning to it would pin nothing.
pub(super) fn object(url: String, meta: &ObjectMeta) -> Entry {
    Entry {
        name: url,
        size: meta.size,
        is_dir: false,
        e_tag: meta
            .e_tag
            .clone()
            .filter(|tag| !tag.trim_matches('"').is_empty()),
        modified_ns: meta.last_modified.timestamp_nanos_opt().unwrap_or(0),
    }
}

/// A prefix at `url` (ending with `/`).
pub(super) fn prefix(url: String) -> Entry {
    Entry {
        name: url,
        size: 0,
        is_dir: true,
        e_tag: None,
        modified_ns: 0,
    }
}

/// The object at `name` (a HEAD), or, for an S3 URL with no object but objects under it as
/// under a directory, that prefix.
pub(super) fn stat(name: &Path, settings: &OpenSettings) -> io::Result<Entry> {
    let url = parsed(name, true)?;
    let (store, location, _) = store_and_location(&url, settings.remote_options)?;
    let (text, name) = (url.shown.as_str(), Path::new(&url.shown));
    let runtime = runtime()?;
    if !text.ends_with('/') && !location.as_ref().is_empty() {
        match runtime.block_on(store.head(&location)) {
            Ok(meta) => return Ok(object(text.to_string(), &meta)),
            Err(object_store::Error::NotFound { .. }) if url.scheme == url::Scheme::S3 => {}
            Err(e) => return Err(store_error(name, "cannot stat it", e)),
        }
    }
    // No such object: a prefix if anything is listed under it (the bucket itself always is).
    let listed = runtime
        .block_on(store.list_with_delimiter(Some(&location)))
        .map_err(|e| store_error(name, "cannot list it", e))?;
    if location.as_ref().is_empty()
        || !listed.objects.is_empty()
        || !listed.common_prefixes.is_empty()
    {
        return Ok(prefix(format!("{}/", text.trim_end_matches('/'))));
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such object (or no such bucket)", name.display()),
    ))
}

/// The objects and prefixes directly under `name` (`s3://bucket`, `s3://bucket/dir/`), one
/// level deep as `ls` shows a directory; an object lists as itself. An HTTP server has no
/// listing: its URL lists as the object it names (a HEAD).
pub(super) fn list(name: &Path, settings: &OpenSettings) -> io::Result<Vec<Entry>> {
    let url = parsed(name, true)?;
    if url.scheme != url::Scheme::S3 {
        return Ok(vec![stat(name, settings)?]);
    }
    let shown = Path::new(&url.shown);
    let bucket = url.authority.as_str();
    let (store, location, _) = store_and_location(&url, settings.remote_options)?;
    let listed = runtime()?
        .block_on(store.list_with_delimiter(Some(&location)))
        .map_err(|e| store_error(shown, "cannot list it", e))?;
    let mut out: Vec<Entry> = listed
        .common_prefixes
        .iter()
        .map(|p| prefix(format!("s3://{bucket}/{p}/")))
        .chain(
            listed
                .objects
                .iter()
                .map(|o| object(format!("s3://{bucket}/{}", o.location), o)),
        )
        .collect();
    if out.is_empty() && !url.shown.ends_with('/') && !location.as_ref().is_empty() {
        // Nothing under it as a prefix: the object itself, or no such name.
        return Ok(vec![stat(name, settings)?]);
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}
