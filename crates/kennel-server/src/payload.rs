//! A job's body: JSON as it is, or bytes (`application/octet-stream`, or
//! `multipart/form-data` with a JSON part and file parts) as JSON with the
//! bytes in base64 under `files`, within the pool's `upload_limit`
//! (docs/SERVICE.md, "Bytes").

use axum::body::Body;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

use crate::error::ApiError;

/// The most parts a multipart body may have.
pub(crate) const MAX_PARTS: usize = 64;

/// The name of the part that holds the job's JSON in a multipart body.
pub(crate) const JSON_PART: &str = "json";

/// The job a binary body stands for: `content_type` is
/// `application/octet-stream` or `multipart/form-data` (with its
/// parameters), `limit` the pool's `upload_limit`.
///
/// # Errors
///
/// 413 `too-large` over the limit; 400 `bad-json` for a `json` part that is
/// not JSON; 400 `bad-request` for a multipart body that cannot be read.
///
/// # Cancel safety
///
/// Dropping it drops the body half read; nothing else is held.
pub(crate) async fn job_of(
    content_type: &str,
    body: Body,
    limit: usize,
) -> Result<Value, ApiError> {
    if content_type
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("multipart/")
    {
        return multipart(content_type, body, limit).await;
    }
    let bytes = crate::http::body::read(body, limit).await?;
    Ok(json!({"files": [file("body", None, "application/octet-stream", &bytes)]}))
}

fn file(name: &str, filename: Option<&str>, content_type: &str, bytes: &[u8]) -> Value {
    json!({
        "name": name,
        "filename": filename,
        "content_type": content_type,
        "size": bytes.len(),
        "base64": STANDARD.encode(bytes),
    })
}

async fn multipart(content_type: &str, body: Body, limit: usize) -> Result<Value, ApiError> {
    let bad = |message: String| ApiError::BadRequest { message };
    let boundary = multer::parse_boundary(content_type)
        .map_err(|e| bad(format!("a multipart body needs a boundary: {e}")))?;
    let constraints =
        multer::Constraints::new().size_limit(multer::SizeLimit::new().whole_stream(limit as u64));
    let mut parts =
        multer::Multipart::with_constraints(body.into_data_stream(), boundary, constraints);
    let mut job = Map::new();
    let mut files = Vec::new();
    let mut count = 0;
    loop {
        let field = match parts.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => break,
            Err(e) => return Err(multipart_error(e, limit)),
        };
        count += 1;
        if count > MAX_PARTS {
            return Err(bad(format!(
                "the multipart body has more than {MAX_PARTS} parts (allowed: up to {MAX_PARTS})"
            )));
        }
        let name = field.name().unwrap_or("").to_owned();
        let filename = field.file_name().map(str::to_owned);
        let part_type = field.content_type().map_or_else(
            || "application/octet-stream".to_owned(),
            ToString::to_string,
        );
        let bytes = field.bytes().await.map_err(|e| multipart_error(e, limit))?;
        if name == JSON_PART && filename.is_none() {
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(Value::Object(map)) => job.extend(map),
                Ok(_) => {
                    return Err(bad(format!(
                        "the `{JSON_PART}` part is not a JSON object (allowed: an object)"
                    )));
                }
                Err(e) => {
                    return Err(ApiError::BadJson {
                        message: format!("the `{JSON_PART}` part: {e}"),
                    });
                }
            }
        } else {
            files.push(file(&name, filename.as_deref(), &part_type, &bytes));
        }
    }
    if job.contains_key("files") {
        return Err(bad(
            "the `json` part has a key `files`, which holds the file parts (allowed: any other key)"
                .into(),
        ));
    }
    job.insert("files".into(), Value::Array(files));
    Ok(Value::Object(job))
}

fn multipart_error(e: multer::Error, limit: usize) -> ApiError {
    match e {
        multer::Error::StreamSizeExceeded { .. } | multer::Error::FieldSizeExceeded { .. } => {
            ApiError::TooLarge { limit }
        }
        other => ApiError::BadRequest {
            message: format!("the multipart body cannot be read: {other}"),
        },
    }
}
