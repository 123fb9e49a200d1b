//! [`Framing`]: how a coprocess's messages are framed on its pipes, and the
//! [`Handshake`] that can be its warm-up (ADR 0036).

use std::fmt;
use std::str::FromStr;

use serde_json::{Value, json};

/// How the messages between kennel and a worker are framed
/// (`docs/PROTOCOL.md` has each one's messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Framing {
    /// One JSON value per line: the ready line, one request, one reply
    /// (the default). Replies pair with requests by order only.
    #[default]
    JsonLines,
    /// Newline-delimited JSON-RPC 2.0, MCP's stdio transport. kennel
    /// numbers the requests and takes as a job's reply only the response
    /// with its id.
    JsonRpc,
    /// JSON-RPC 2.0 framed by `Content-Length` headers, as LSP frames it.
    ContentLength,
}

impl Framing {
    /// Every framing, in the order of the docs.
    pub const ALL: [Self; 3] = [Self::JsonLines, Self::JsonRpc, Self::ContentLength];

    /// The name as written in a config: `json-lines`, `json-rpc`,
    /// `content-length`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::JsonLines => "json-lines",
            Self::JsonRpc => "json-rpc",
            Self::ContentLength => "content-length",
        }
    }

    /// Whether messages are JSON-RPC 2.0 (with ids).
    pub fn is_rpc(self) -> bool {
        !matches!(self, Self::JsonLines)
    }
}

impl fmt::Display for Framing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Framing {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown framing {s:?} (allowed: \"json-lines\", \"json-rpc\", \"content-length\")"
                )
            })
    }
}

/// The MCP protocol version a [`Handshake::mcp`] asks for unless told
/// otherwise.
pub const MCP_PROTOCOL_VERSION: &str = "2025-11-25";

/// An `initialize` request sent as the worker's warm-up, in the JSON-RPC
/// framings: kennel sends it, waits for its result, then sends the
/// `initialized` notification, and the worker is ready.
///
/// ```
/// use kennel_process::{CoprocessSpec, Framing, Handshake};
///
/// let spec = CoprocessSpec::new(["uvx", "mcp-server-time"])
///     .framing(Framing::JsonRpc)
///     .handshake(Handshake::mcp().client_info("my-app", "1.0"))
///     .method("tools/call");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Handshake {
    pub(crate) params: Value,
    pub(crate) initialized: Option<String>,
    /// Requests sent once after `initialized`, their answers dropped.
    pub(crate) primes: Vec<String>,
}

impl Handshake {
    /// MCP's: `initialize` with `protocolVersion` 2025-11-25, empty
    /// `capabilities` and `clientInfo` `{"name":"kennel","version":…}`,
    /// then `notifications/initialized`.
    pub fn mcp() -> Self {
        Self::for_framing(Framing::JsonRpc)
    }

    /// LSP's: `initialize` with `processId` (filled with kennel's pid as it
    /// is sent), `rootUri` null, empty `capabilities` and `clientInfo`
    /// `{"name":"kennel","version":…}`, then `initialized`. Set the
    /// workspace with [`param`](Self::param) (`rootUri`,
    /// `workspaceFolders`), or start from [`custom`](Self::custom).
    pub fn lsp() -> Self {
        Self::for_framing(Framing::ContentLength)
    }

    /// The handshake a worker in `framing` gets unless told otherwise:
    /// [`lsp`](Self::lsp) for `content-length`, [`mcp`](Self::mcp) for
    /// the others.
    pub fn for_framing(framing: Framing) -> Self {
        let client = json!({"name": "kennel", "version": env!("CARGO_PKG_VERSION")});
        let params = match framing {
            Framing::ContentLength => json!({
                "processId": null,
                "rootUri": null,
                "capabilities": {},
                "clientInfo": client,
            }),
            _ => json!({
                "protocolVersion": MCP_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": client,
            }),
        };
        let initialized = Self::default_initialized(framing).to_owned();
        Self::custom(params, Some(initialized))
    }

    /// The `initialized` notification a handshake in `framing` sends
    /// unless told otherwise: LSP's `initialized` for `content-length`,
    /// MCP's `notifications/initialized` for the others.
    pub fn default_initialized(framing: Framing) -> &'static str {
        match framing {
            Framing::ContentLength => "initialized",
            _ => "notifications/initialized",
        }
    }

    /// Any handshake: `initialize` with these params, then the notification
    /// `initialized` if given. In the `content-length` framing, object
    /// params without a `processId` (or a null one) get kennel's pid, as in
    /// [`lsp`](Self::lsp) (a language server ends when kennel has).
    pub fn custom(params: Value, initialized: Option<String>) -> Self {
        Self {
            params,
            initialized,
            primes: Vec::new(),
        }
    }

    /// After `initialized`, sends a request of `method` (no params) and
    /// waits for its answer (whatever it is) before the worker counts as
    /// warm: the code that answers a client's first request has run once
    /// (`tools/list` for an MCP server under a JIT, such as node's). Each
    /// call adds one, sent in order.
    pub fn prime(mut self, method: impl Into<String>) -> Self {
        self.primes.push(method.into());
        self
    }

    /// Sets `params.protocolVersion`.
    pub fn protocol_version(self, version: impl Into<String>) -> Self {
        self.param("protocolVersion", Value::String(version.into()))
    }

    /// Sets `params.clientInfo` to a name and a version.
    pub fn client_info(self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.param(
            "clientInfo",
            json!({"name": name.into(), "version": version.into()}),
        )
    }

    /// Sets `params.capabilities`.
    pub fn capabilities(self, capabilities: Value) -> Self {
        self.param("capabilities", capabilities)
    }

    /// Sets `params[key]` (LSP's `rootUri`, `workspaceFolders`,
    /// `initializationOptions`…).
    pub fn param(mut self, key: &str, value: Value) -> Self {
        if !self.params.is_object() {
            self.params = json!({});
        }
        if let Value::Object(map) = &mut self.params {
            map.insert(key.to_owned(), value);
        }
        self
    }

    /// The params `initialize` is sent with in `framing`: in
    /// `content-length`, `processId` filled with `pid` when left out or
    /// null.
    pub(crate) fn params_for(&self, framing: Framing, pid: u32) -> Value {
        let mut params = self.params.clone();
        if framing == Framing::ContentLength
            && let Value::Object(map) = &mut params
            && map.get("processId").is_none_or(Value::is_null)
        {
            map.insert("processId".to_owned(), pid.into());
        }
        params
    }

    /// The params of the `initialize` request.
    pub fn params(&self) -> &Value {
        &self.params
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_framing_reads_back_from_its_name() {
        for f in Framing::ALL {
            assert_eq!(f.as_str().parse::<Framing>(), Ok(f));
        }
        let err = "jsonrpc".parse::<Framing>().unwrap_err();
        assert!(err.contains("allowed"), "{err}");
    }

    #[test]
    fn an_lsp_handshake_gets_kennels_pid_and_sends_initialized() {
        let lsp =
            Handshake::for_framing(Framing::ContentLength).param("rootUri", json!("file:///w"));
        assert_eq!(lsp, Handshake::lsp().param("rootUri", json!("file:///w")));
        assert_eq!(lsp.initialized.as_deref(), Some("initialized"));
        let sent = lsp.params_for(Framing::ContentLength, 42);
        assert_eq!(sent["processId"], 42);
        assert_eq!(sent["rootUri"], "file:///w");
        let own = Handshake::custom(json!({"processId": 7}), None);
        assert_eq!(own.params_for(Framing::ContentLength, 42)["processId"], 7);
        let left_out = Handshake::custom(json!({"capabilities": {}}), None);
        assert_eq!(
            left_out.params_for(Framing::ContentLength, 42)["processId"],
            42
        );
        let mcp = Handshake::for_framing(Framing::JsonRpc);
        assert_eq!(mcp, Handshake::mcp());
        assert_eq!(
            mcp.initialized.as_deref(),
            Some("notifications/initialized")
        );
        assert!(
            mcp.params_for(Framing::JsonRpc, 42)
                .get("processId")
                .is_none()
        );
    }

    #[test]
    fn an_mcp_handshake_carries_what_it_is_given() {
        let h = Handshake::mcp()
            .protocol_version("2024-11-05")
            .client_info("app", "2")
            .capabilities(json!({"roots": {}}));
        assert_eq!(h.params()["protocolVersion"], "2024-11-05");
        assert_eq!(
            h.params()["clientInfo"],
            json!({"name": "app", "version": "2"})
        );
        assert_eq!(h.params()["capabilities"], json!({"roots": {}}));
    }
}
