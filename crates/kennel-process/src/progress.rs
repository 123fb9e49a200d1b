//! [`Progress`]: one progress item a worker sends for the job in hand.

use serde::Serialize;
use serde_json::{Map, Value};

/// One progress item of a running job, in the same shape whatever the
/// framing: a JSON-lines progress line, MCP's `notifications/progress`
/// (without its token) or LSP's `$/progress` value.
///
/// It serialises as `{"progress":…,"total":…,"message":…}`, leaving out
/// what the worker did not give.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Progress {
    /// How far the job got: any JSON value (usually a number).
    pub progress: Value,
    /// Out of how much, if the worker said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<Value>,
    /// What it is doing, if it said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Progress {
    /// A progress item.
    pub fn new(progress: Value, total: Option<Value>, message: Option<String>) -> Self {
        Self {
            progress,
            total,
            message,
        }
    }

    /// Reads `progress`, `total` and `message` from an object; an object
    /// without `progress` (LSP's `{"kind":"report","percentage":…}`, say) is
    /// the progress itself.
    pub(crate) fn from_object(mut map: Map<String, Value>) -> Self {
        let Some(progress) = map.remove("progress") else {
            let message = map
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned);
            return Self::new(Value::Object(map), None, message);
        };
        let total = map.remove("total").filter(|t| !t.is_null());
        let message = match map.remove("message") {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        Self::new(progress, total, message)
    }

    /// As JSON.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}
