//! How a pool's workers talk: `protocol`, `cancel_lines`, `method` and
//! `initialize` (the handshake that is the warm-up), turned into the
//! [`CoprocessSpec`] options of the same names.

use kennel_process::{CoprocessSpec, Framing, Handshake};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::Refusal;

/// `protocol`: the framing of the workers' messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ProtocolKind {
    /// `"json-lines"`: one JSON value per line (the default).
    #[default]
    JsonLines,
    /// `"json-rpc"`: newline-delimited JSON-RPC 2.0 (MCP's stdio transport).
    JsonRpc,
    /// `"content-length"`: JSON-RPC 2.0 framed by LSP's headers.
    ContentLength,
}

impl ProtocolKind {
    /// The framing it names.
    pub(crate) fn framing(self) -> Framing {
        match self {
            Self::JsonLines => Framing::JsonLines,
            Self::JsonRpc => Framing::JsonRpc,
            Self::ContentLength => Framing::ContentLength,
        }
    }
}

/// `initialize = { … }`: the handshake sent as the warm-up, MCP's unless
/// `params` gives the whole of another's (LSP's, say).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InitializeConfig {
    /// `protocol_version` (default "2025-11-25").
    #[serde(default)]
    pub protocol_version: Option<String>,
    /// `client_info = { name = "…", version = "…" }` (default kennel's).
    #[serde(default)]
    pub client_info: Option<ClientInfo>,
    /// `capabilities` (default `{}`).
    #[serde(default)]
    pub capabilities: Option<Value>,
    /// `params`: the whole params of `initialize`, instead of the three
    /// keys above.
    #[serde(default)]
    pub params: Option<Value>,
    /// `initialized`: the notification sent once `initialize` is answered
    /// (default `"notifications/initialized"`; `""` for none).
    #[serde(default)]
    pub initialized: Option<String>,
}

/// `client_info`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClientInfo {
    /// `name`.
    pub name: String,
    /// `version`.
    pub version: String,
}

impl InitializeConfig {
    /// The handshake it describes, for a worker in `framing`.
    pub(crate) fn handshake(&self, framing: Framing) -> Handshake {
        let initialized = match self.initialized.as_deref() {
            None => Some(Handshake::default_initialized(framing).to_owned()),
            Some("") => None,
            Some(method) => Some(method.to_owned()),
        };
        if let Some(params) = &self.params {
            return Handshake::custom(params.clone(), initialized);
        }
        let mut h = Handshake::for_framing(framing);
        if let Some(v) = &self.protocol_version {
            h = h.protocol_version(v);
        }
        if let Some(c) = &self.client_info {
            h = h.client_info(&c.name, &c.version);
        }
        if let Some(c) = &self.capabilities {
            h = h.capabilities(c.clone());
        }
        Handshake::custom(h.params().clone(), initialized)
    }
}

/// What the protocol keys set on a worker's spec.
pub(crate) fn apply(
    spec: CoprocessSpec,
    protocol: ProtocolKind,
    cancel_lines: bool,
    method: Option<&str>,
    initialize: Option<&InitializeConfig>,
    primes: &[String],
) -> CoprocessSpec {
    let mut spec = spec.framing(protocol.framing()).cancel_lines(cancel_lines);
    if let Some(m) = method {
        spec = spec.method(m);
    }
    if let Some(i) = initialize {
        let handshake = primes
            .iter()
            .fold(i.handshake(protocol.framing()), |h, m| h.prime(m));
        spec = spec.handshake(handshake);
    }
    spec
}

/// The links between the protocol keys.
pub(crate) fn check(
    protocol: ProtocolKind,
    cancel_lines: bool,
    method: Option<&str>,
    initialize: Option<&InitializeConfig>,
) -> Result<(), Refusal> {
    let rpc = protocol != ProtocolKind::JsonLines;
    if cancel_lines && rpc {
        return Err((
            "cancel_lines".into(),
            "is for protocol = \"json-lines\" (allowed: false here; the JSON-RPC framings always cancel)".into(),
        ));
    }
    if !rpc && method.is_some() {
        return Err((
            "method".into(),
            "is for the JSON-RPC protocols (allowed: with protocol = \"json-rpc\" or \"content-length\")".into(),
        ));
    }
    if !rpc && initialize.is_some() {
        return Err((
            "initialize".into(),
            "is for the JSON-RPC protocols (allowed: with protocol = \"json-rpc\" or \"content-length\")".into(),
        ));
    }
    if let Some(m) = method
        && m.is_empty()
    {
        return Err((
            "method".into(),
            "is empty (allowed: a method name such as \"tools/call\")".into(),
        ));
    }
    if let Some(i) = initialize
        && i.params.is_some()
        && (i.protocol_version.is_some() || i.client_info.is_some() || i.capabilities.is_some())
    {
        return Err((
            "initialize.params".into(),
            "comes with protocol_version, client_info or capabilities (allowed: params alone, or those three)".into(),
        ));
    }
    Ok(())
}
