//! [`Answers`]: what kennel answers the requests a JSON-RPC worker sends
//! it (server → client requests), from the spec's configuration: the
//! rules are [`CoprocessSpec::answer`]'s and
//! [`CoprocessSpec::settings`]'s.
//!
//! [`CoprocessSpec::answer`]: crate::CoprocessSpec::answer
//! [`CoprocessSpec::settings`]: crate::CoprocessSpec::settings

use serde_json::{Value, json};

use crate::framing::Framing;

/// The requests a language server sends that kennel answers with `null` in
/// the `content-length` framing, unless the spec answers them otherwise.
pub const LSP_NULL_REQUESTS: [&str; 3] = [
    "client/registerCapability",
    "client/unregisterCapability",
    "window/workDoneProgress/create",
];

/// How kennel answers the worker's requests: fixed results by method, and
/// the settings `workspace/configuration` reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Answers {
    fixed: Vec<(String, Value)>,
    settings: Option<Value>,
}

impl Answers {
    /// Answers `method` with `result` from now on (over an earlier answer).
    pub(crate) fn fix(&mut self, method: String, result: Value) {
        self.fixed.retain(|(m, _)| *m != method);
        self.fixed.push((method, result));
    }

    /// `workspace/configuration` reads `settings`.
    pub(crate) fn set_settings(&mut self, settings: Value) {
        self.settings = Some(settings);
    }

    /// The result of the worker's request `method` with `params` in
    /// `framing`, or `None` for "method not found".
    pub(crate) fn result(
        &self,
        framing: Framing,
        method: &str,
        params: Option<&Value>,
    ) -> Option<Value> {
        if let Some((_, result)) = self.fixed.iter().find(|(m, _)| m == method) {
            return Some(result.clone());
        }
        match (method, &self.settings) {
            ("workspace/configuration", Some(settings)) => Some(configuration(settings, params)),
            ("ping", _) => Some(json!({})),
            _ if framing == Framing::ContentLength && LSP_NULL_REQUESTS.contains(&method) => {
                Some(Value::Null)
            }
            _ => None,
        }
    }
}

/// `workspace/configuration`'s result: per item, the settings at its
/// section.
fn configuration(settings: &Value, params: Option<&Value>) -> Value {
    let items = params
        .and_then(|p| p.get("items"))
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    items
        .iter()
        .map(|item| match item.get("section").and_then(Value::as_str) {
            None | Some("") => settings.clone(),
            Some(section) => section
                .split('.')
                .try_fold(settings, |at, key| at.get(key))
                .cloned()
                .unwrap_or(Value::Null),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_reads_each_section_from_the_settings() {
        let mut answers = Answers::default();
        let none = json!({"items": [{"section": "python"}]});
        let ask = |a: &Answers, params: &Value| {
            a.result(
                Framing::ContentLength,
                "workspace/configuration",
                Some(params),
            )
        };
        assert_eq!(ask(&answers, &none), None, "no settings: not served");
        answers.set_settings(json!({"python": {"analysis": {"extraPaths": ["/x"]}}}));
        let params = json!({"items": [
            {"section": "python.analysis"},
            {"scopeUri": "file:///a", "section": "python.pythonPath"},
            {"section": "python.analysis.extraPaths"},
            {},
        ]});
        assert_eq!(
            ask(&answers, &params),
            Some(json!([
                {"extraPaths": ["/x"]},
                null,
                ["/x"],
                {"python": {"analysis": {"extraPaths": ["/x"]}}},
            ]))
        );
        assert_eq!(ask(&answers, &json!({})), Some(json!([])));
    }

    #[test]
    fn fixed_answers_come_first_then_ping_then_lsp_nulls_then_not_found() {
        let mut answers = Answers::default();
        let cl = Framing::ContentLength;
        assert_eq!(answers.result(cl, "ping", None), Some(json!({})));
        assert_eq!(
            answers.result(cl, "client/registerCapability", None),
            Some(Value::Null)
        );
        assert_eq!(
            answers.result(Framing::JsonRpc, "client/registerCapability", None),
            None,
            "an MCP server gets no LSP answers"
        );
        assert_eq!(answers.result(cl, "roots/list", None), None);
        answers.fix("roots/list".into(), json!({"roots": []}));
        answers.fix("client/registerCapability".into(), json!("no"));
        assert_eq!(
            answers.result(Framing::JsonRpc, "roots/list", None),
            Some(json!({"roots": []}))
        );
        assert_eq!(
            answers.result(cl, "client/registerCapability", None),
            Some(json!("no"))
        );
    }
}
