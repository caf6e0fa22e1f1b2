//! The server's built-in demo protocols: `acme-chat` (durable: a theme
//! and a counter in its main document, keyed message documents, an
//! ephemeral `acme-chat/preferences` synced document) and `acme-status`,
//! which requires `acme-chat`.
//!
//! Why they live in the door and not among the test fixtures: the binary
//! serves them (`ledgerwire serve --statewire-examples`, for trying the
//! door out with any client, and for the crash campaign against the real
//! process), so they ship with the host. The tests and the benchmark use
//! them too, because they reach every host feature a small application
//! can: durable and ephemeral lanes, context, keyed and synced documents,
//! a required protocol and adapters.
//!
//! `acme-chat` also serves two older contracts through a chain of two
//! adapters: from 2026-08-15 the theme was a `colour` set with
//! `setColour`; from 2026-08-01 the counter was `count` and `paint` set
//! the colour, answering `{painted}`.
//!
//! Must never: keep state outside the host's documents.
//! Owns: the demo protocols' definitions, handlers and adapters.

use serde_json::{Value, json};

use crate::host::{Adapter, CommandContext, Host, HostBuilder, HostError, ProtocolDef};
use crate::negotiation::Record;
use crate::packet::Rejection;
use crate::version::Version;
use ledgerwire_ledger::Ledger;

pub const ACME_CHAT: &str = "acme-chat";
pub const ACME_PREFERENCES: &str = "acme-chat/preferences";
pub const ACME_STATUS: &str = "acme-status";
pub const ACME_CHAT_VERSION: Version = Version::ymd(2026, 9, 13);
pub const ACME_CHAT_MIN_VERSION: Version = Version::ymd(2026, 8, 1);
/// The revision `setTheme` and `theme` replaced `setColour` and `colour`.
pub const ACME_CHAT_THEMES: Version = Version::ymd(2026, 9, 1);
/// The revision `setColour` and `counter` replaced `paint` and `count`.
pub const ACME_CHAT_COLOURS: Version = Version::ymd(2026, 8, 15);
pub const ACME_STATUS_VERSION: Version = Version::ymd(2026, 10, 1);

fn string_param(params: &[Value], index: usize) -> Result<String, Rejection> {
    params
        .get(index)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| Rejection::new("invalid-params", format!("param {index} must be a string")))
}

fn key_param(params: &[Value]) -> Result<Vec<String>, Rejection> {
    let key = params
        .first()
        .and_then(Value::as_array)
        .ok_or_else(|| Rejection::new("invalid-params", "param 0 must be a key array"))?;
    key.iter()
        .map(|k| {
            k.as_str()
                .map(str::to_owned)
                .ok_or_else(|| Rejection::new("invalid-params", "key parts are strings"))
        })
        .collect()
}

fn main_object(ctx: &CommandContext<'_>) -> serde_json::Map<String, Value> {
    match ctx.main(ACME_CHAT) {
        Some(Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    }
}

/// `setTheme [theme]`: stores the theme; answers it with the attach's
/// `locale` context.
fn set_theme(ctx: &mut CommandContext<'_>, params: &[Value]) -> Result<Value, Rejection> {
    let theme = string_param(params, 0)?;
    let mut main = main_object(ctx);
    main.insert("theme".into(), json!(theme));
    ctx.set_main(ACME_CHAT, Value::Object(main))?;
    let locale = ctx
        .context()
        .and_then(|c| c.get("locale"))
        .cloned()
        .unwrap_or(Value::Null);
    Ok(json!({"theme": theme, "locale": locale}))
}

/// `bump []`: adds one to the counter; answers the new value.
fn bump(ctx: &mut CommandContext<'_>, _params: &[Value]) -> Result<Value, Rejection> {
    let mut main = main_object(ctx);
    let counter = main.get("counter").and_then(Value::as_u64).unwrap_or(0) + 1;
    main.insert("counter".into(), json!(counter));
    ctx.set_main(ACME_CHAT, Value::Object(main))?;
    Ok(json!(counter))
}

/// `post [key, text]`: sets the keyed document `key` to `{text}`.
fn post(ctx: &mut CommandContext<'_>, params: &[Value]) -> Result<Value, Rejection> {
    let key = key_param(params)?;
    let text = string_param(params, 1)?;
    ctx.set_document(ACME_CHAT, key, Some(json!({"text": text})))?;
    Ok(Value::Null)
}

/// `watch [key]`: includes the keyed document in the admitting attach.
fn watch(ctx: &mut CommandContext<'_>, params: &[Value]) -> Result<Value, Rejection> {
    let key = key_param(params)?;
    ctx.attach()?.include(ACME_CHAT, key)?;
    Ok(Value::Null)
}

/// `unwatch [key]`.
fn unwatch(ctx: &mut CommandContext<'_>, params: &[Value]) -> Result<Value, Rejection> {
    let key = key_param(params)?;
    ctx.attach()?.exclude(ACME_CHAT, key)?;
    Ok(Value::Null)
}

/// `setStatus [status]` on `acme-status`.
fn set_status(ctx: &mut CommandContext<'_>, params: &[Value]) -> Result<Value, Rejection> {
    let status = string_param(params, 0)?;
    ctx.set_main(ACME_STATUS, json!({"status": status}))?;
    Ok(json!(status))
}

/// `acme-chat` context: an object whose optional `locale` is a string.
fn check_chat_context(value: &Value, _meta: Option<&Value>) -> Result<(), String> {
    let object = value.as_object().ok_or("context must be an object")?;
    match object.get("locale") {
        None | Some(Value::String(_)) => Ok(()),
        Some(_) => Err("locale must be a string".into()),
    }
}

/// A main document with member `from` renamed `to`.
fn renamed(value: &Value, from: &str, to: &str) -> Result<Value, String> {
    let mut object = value
        .as_object()
        .cloned()
        .ok_or("the main document is an object")?;
    if let Some(member) = object.remove(from) {
        object.insert(to.to_owned(), member);
    }
    Ok(Value::Object(object))
}

/// A command with method `from` renamed `to` (others unchanged).
fn renamed_command(command: &Value, from: &str, to: &str) -> Result<Value, String> {
    let mut command = command.clone();
    if command["method"] == from {
        command["method"] = json!(to);
    }
    Ok(command)
}

/// A discovered command list with `from` renamed `to`.
fn renamed_commands(
    commands: Vec<crate::host::CommandInfo>,
    from: &str,
    to: &str,
) -> Vec<crate::host::CommandInfo> {
    commands
        .into_iter()
        .map(|mut info| {
            if info.method == from {
                info.method = to.to_owned();
            }
            info
        })
        .collect()
}

/// 2026-08-15..2026-08-31 read `colour` and sent `setColour`.
fn colours_adapter() -> Adapter {
    Adapter::new(ACME_CHAT_COLOURS, ACME_CHAT_THEMES)
        .state_down(|main| renamed(main, "theme", "colour"))
        .command_up(|command| renamed_command(command, "setColour", "setTheme"))
        .result_down(|result| match result.get("theme") {
            Some(_) => renamed(result, "theme", "colour"),
            None => Ok(result.clone()),
        })
        .commands_down(|commands| renamed_commands(commands, "setTheme", "setColour"))
}

/// 2026-08-01..2026-08-14 read `count`, sent `paint`, got `{painted}` and
/// `bad-arguments` for what is now `invalid-params`.
fn paint_adapter() -> Adapter {
    Adapter::new(ACME_CHAT_MIN_VERSION, ACME_CHAT_COLOURS)
        .state_down(|main| renamed(main, "counter", "count"))
        .command_up(|command| renamed_command(command, "paint", "setColour"))
        .result_down(|result| match result.get("colour") {
            Some(colour) => Ok(json!({"painted": colour})),
            None => Ok(result.clone()),
        })
        .error_down(|rejection| {
            let mut rejection = rejection.clone();
            if rejection.code == "invalid-params" {
                rejection.code = "bad-arguments".to_owned();
            }
            Ok(rejection)
        })
        .commands_down(|commands| renamed_commands(commands, "setColour", "paint"))
}

/// Registers the demo protocols on `builder`.
pub fn register(builder: HostBuilder) -> HostBuilder {
    builder
        .protocol(
            ProtocolDef::new(ACME_CHAT, ACME_CHAT_VERSION)
                .min_version(ACME_CHAT_MIN_VERSION)
                .subprotocol("preferences", Record::Ephemeral)
                .initial_main(json!({"theme": null, "counter": 0}))
                .adapter(paint_adapter())
                .adapter(colours_adapter()),
        )
        .protocol(
            ProtocolDef::new(ACME_STATUS, ACME_STATUS_VERSION)
                .requires(ACME_CHAT, ACME_CHAT_THEMES, Version::ymd(2026, 9, 30))
                .initial_main(json!({"status": "idle"})),
        )
        .command(ACME_CHAT, "setTheme", set_theme)
        .command(ACME_CHAT, "bump", bump)
        .command(ACME_CHAT, "post", post)
        .command(ACME_CHAT, "watch", watch)
        .command(ACME_CHAT, "unwatch", unwatch)
        .command(ACME_STATUS, "setStatus", set_status)
        .context_validator(ACME_CHAT, check_chat_context)
        .synced_document(ACME_PREFERENCES)
}

/// A host serving the demo protocols.
pub fn acme_host(ledger: Ledger) -> Result<Host, HostError> {
    register(Host::builder()).build(ledger)
}
