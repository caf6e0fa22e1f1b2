//! The older `harness-sdk` contract, 2026-11-15..2026-11-30, served
//! through one adapter from the native one: the messages lived inline in
//! the main document (`messages`, oldest first, no keyed documents), a
//! turn was asked with `ask [text]`, answers named no message ids, and a
//! rejection's data carried no HTTP status.
//!
//! Owns: the converters between that contract and 2026-12-01. Pure.
//! Must never: change a document's meaning, only its shape.

use serde_json::{Value, json};

use ledgerwire_statewire::host::{Adapter, CommandInfo, ProjectedDocument};
use ledgerwire_statewire::version::Version;

use super::{HARNESS_SDK, HARNESS_SDK_VERSION};

/// The first version of the inline-messages contract.
pub const INLINE_MESSAGES_VERSION: Version = Version::ymd(2026, 11, 15);

/// The adapter from 2026-12-01 down to the inline-messages contract.
pub fn adapter() -> Adapter {
    Adapter::new(INLINE_MESSAGES_VERSION, HARNESS_SDK_VERSION)
        .documents_down(inline_messages)
        .command_up(ask_up)
        .result_down(|result| Ok(without(result, &["reply", "request"])))
        .error_down(|rejection| {
            let mut rejection = rejection.clone();
            if let Some(data) = rejection.data.as_mut() {
                *data = without(data, &["status"]);
            }
            Ok(rejection)
        })
        .commands_down(|commands| {
            commands
                .into_iter()
                .map(|info| match info.method.as_str() {
                    "turn" => CommandInfo {
                        method: "ask".into(),
                        description: info.description,
                    },
                    _ => info,
                })
                .collect()
        })
}

/// The main document with every message document inline, in the order
/// the main document lists them; no keyed documents.
fn inline_messages(documents: Vec<ProjectedDocument>) -> Result<Vec<ProjectedDocument>, String> {
    let (mains, messages): (Vec<_>, Vec<_>) = documents
        .into_iter()
        .filter(|d| d.protocol.as_str() == HARNESS_SDK)
        .partition(|d| d.main);
    let Some(mut main) = mains.into_iter().next() else {
        return Err("there is no main document to put the messages in".into());
    };
    let order: Vec<String> = main.value["turns"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|turn| turn["messages"].as_array().into_iter().flatten())
        .filter_map(|id| id.as_str().map(str::to_owned))
        .collect();
    let mut inline: Vec<(usize, Value)> = messages
        .into_iter()
        .map(|message| {
            let at = order
                .iter()
                .position(|id| message.value["id"] == id.as_str())
                .unwrap_or(usize::MAX);
            (at, message.value)
        })
        .collect();
    inline.sort_by_key(|(at, _)| *at);
    let object = main
        .value
        .as_object_mut()
        .ok_or("the main document is not an object")?;
    object.remove("turns_omitted");
    object.insert(
        "messages".into(),
        Value::Array(inline.into_iter().map(|(_, m)| m).collect()),
    );
    Ok(vec![main])
}

/// `ask [text]` is `turn [{"message": text}]`; other commands pass.
fn ask_up(command: &Value) -> Result<Value, String> {
    if command["method"] != "ask" {
        return Ok(command.clone());
    }
    let Some(text) = command["params"][0].as_str() else {
        return Err("ask takes one parameter, the question as a string".into());
    };
    Ok(json!({"method": "turn", "params": [{"message": text}]}))
}

/// An object without `members`; anything else as it is.
fn without(value: &Value, members: &[&str]) -> Value {
    match value {
        Value::Object(object) => Value::Object(
            object
                .iter()
                .filter(|(name, _)| !members.contains(&name.as_str()))
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ledgerwire_statewire::ids::ProtocolName;

    #[test]
    fn messages_go_inline_in_the_main_documents_order() {
        let protocol = ProtocolName::new(HARNESS_SDK).unwrap();
        let document = |key: Option<&str>, value: Value| ProjectedDocument {
            protocol: protocol.clone(),
            key: key.map(|id| vec!["c1".into(), "main".into(), id.into()]),
            main: key.is_none(),
            value,
        };
        let main = json!({"status": "idle", "turns_omitted": 0,
                          "turns": [{"turn": 1, "messages": ["t1-user", "t1-seg1"]}]});
        let projected = inline_messages(vec![
            document(Some("t1-seg1"), json!({"id": "t1-seg1"})),
            document(None, main),
            document(Some("t1-user"), json!({"id": "t1-user"})),
        ])
        .unwrap();
        assert_eq!(projected.len(), 1);
        assert!(projected[0].main);
        assert_eq!(
            projected[0].value["messages"],
            json!([{"id": "t1-user"}, {"id": "t1-seg1"}])
        );
        assert!(projected[0].value.get("turns_omitted").is_none());
    }

    #[test]
    fn ask_is_a_turn_and_answers_name_no_messages() {
        let lifted = ask_up(&json!({"method": "ask", "params": ["Population of Peru"]})).unwrap();
        assert_eq!(
            lifted,
            json!({"method": "turn", "params": [{"message": "Population of Peru"}]})
        );
        assert!(ask_up(&json!({"method": "ask", "params": [3]})).is_err());
        let cancel = json!({"method": "cancel", "params": [{}]});
        assert_eq!(ask_up(&cancel).unwrap(), cancel);
        let answer = json!({"turn": 1, "segment": 1, "first_seq": 1, "reply": "t1-seg1"});
        assert_eq!(
            without(&answer, &["reply", "request"]),
            json!({"turn": 1, "segment": 1, "first_seq": 1})
        );
    }
}
