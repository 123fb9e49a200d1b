//! A client of a running `kennel serve`, for the commands that call one
//! (`kennel status`, `kennel run --server`): JSON requests with the bearer
//! token, each bounded in time, and errors that say which server and why.

use std::time::Duration;

use anyhow::{Context, bail};
use axum::body::Bytes;
use axum::http::{Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// How long one request to the server may take, its answer included.
const REQUEST_LIMIT: Duration = Duration::from_secs(30);

/// A server and how to call it.
pub(crate) struct Remote {
    /// `http://host:port`.
    pub(crate) base: String,
    token: Option<String>,
    /// Added to a failure to reach the server: what to do then.
    hint: &'static str,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Remote {
    /// The server at `base`, called with `token`; `hint` ends the message
    /// of a failure to reach it.
    pub(crate) fn new(base: String, token: Option<String>, hint: &'static str) -> Self {
        Self {
            base,
            token,
            hint,
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// One request: the status and the body as JSON.
    ///
    /// # Errors
    ///
    /// A server that cannot be reached, does not answer within 30 s, or
    /// answers what is not JSON.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped, the request is abandoned (the server may
    /// still have acted on it).
    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> anyhow::Result<(StatusCode, Value)> {
        let base = &self.base;
        let uri: Uri = format!("{base}{path}")
            .parse()
            .with_context(|| format!("`{base}{path}` is not a URL"))?;
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(t) = &self.token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let request = request
            .body(Full::new(body))
            .context("cannot make the request")?;
        let answer = async {
            let response = self.client.request(request).await.map_err(|e| {
                anyhow::anyhow!(
                    "cannot reach {base}: {} ({})",
                    crate::status::root_cause(&e),
                    self.hint
                )
            })?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .with_context(|| format!("{base}{path}: the answer broke off"))?
                .to_bytes();
            let value: Value = serde_json::from_slice(&body)
                .with_context(|| format!("{base}{path}: the answer is not JSON (HTTP {status})"))?;
            anyhow::Ok((status, value))
        };
        tokio::time::timeout(REQUEST_LIMIT, answer)
            .await
            .map_err(|_| anyhow::anyhow!("{base} did not answer within {REQUEST_LIMIT:?}"))?
    }

    /// `GET path`, a success: its body.
    ///
    /// # Errors
    ///
    /// As [`call`](Self::call), and an answer that is not a success (with
    /// its message).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub(crate) async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let (status, value) = self.call(Method::GET, path, &[], Bytes::new()).await?;
        if !status.is_success() {
            let message = value["message"].as_str().unwrap_or("no message");
            bail!("{}{path}: HTTP {status}: {message}", self.base);
        }
        Ok(value)
    }
}
