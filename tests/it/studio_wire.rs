//! The Studio wire (contract v1): fixtures, refusals, answers against the
//! paused frame, seeds, the schema, and JSON round-trips of any value.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use ledgerwire::wire::composition::{
    CardMeta, CompositionBlock, CompositionCounts, CompositionManifest, CompositionMutation,
    CompositionOp, CompositionOpKind, LayoutHints,
};
use ledgerwire::wire::elicitation::{
    ElicitationOption, ElicitationQuestion, ElicitationRequest, InputKind, PendingElicitation,
    PendingInterrupt, PendingPlan,
};
use ledgerwire::wire::frame::{
    ActivityStep, ComponentCreated, ComponentRevised, CompositionUpdated, Done, ErrorFrame,
    FactPoint, FactSummary, MessageComplete, MessageDelta, Provenance, SeriesFact, StepStatus,
    Suggestions,
};
use ledgerwire::wire::ids::{
    ActivityStepId, ChoiceId, ComponentId, CompositionId, ConversationId, InterruptId, OptionId,
    PlanStepId, PlanVersionId, QuestionId, TraceId,
};
use ledgerwire::wire::limits::MAX_TURN_REQUEST_BYTES;
use ledgerwire::wire::plan::{
    ApprovedChoice, ApprovedStep, PlanApproved, PlanAsk, PlanDecision, PlanDecisionOption,
    PlanOperation, PlanProposed, PlanRequirement, PlanStep, PlanVersioned, SwitchFailed,
};
use ledgerwire::wire::request::{
    Answer, CancelRequest, ComponentIntent, ComponentRef, Decision, InterruptResponse, Surface,
    TurnRequest,
};
use ledgerwire::wire::schema::{JSON_SCHEMA_DIALECT, schema_json};
use ledgerwire::wire::seed::{self, SeedReference, SeedSpec};
use ledgerwire::wire::validate::check_bounds;
use ledgerwire::wire::{
    ErrorCode, Frame, FrameEvent, RequestKind, Retry, StudioRequest, WireError,
    parse_cancel_request, parse_composition_mutation, parse_frame, parse_interrupt_response,
    parse_request, parse_turn_request,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

// ---------------------------------------------------------------- fixtures

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/studio")
}

/// `(file name, raw bytes)` of every `*.json` directly in `dir`, sorted.
fn json_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("read {}: {error}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .map(|path| {
            let name = path
                .file_name()
                .expect("file name")
                .to_string_lossy()
                .into_owned();
            let bytes = std::fs::read(&path).expect("read fixture");
            (name, bytes)
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixtures_dir().join(name)).unwrap_or_else(|error| panic!("{name}: {error}"))
}

fn fixture_value(name: &str) -> Value {
    serde_json::from_slice(&fixture(name)).expect("fixture is JSON")
}

/// Parses a request body through its route's own function.
fn parse_on_route(route: &str, body: &[u8]) -> Result<StudioRequest, WireError> {
    match route {
        "/api/studio/turn" => parse_turn_request(body).map(StudioRequest::Turn),
        "/api/studio/interrupt" => {
            parse_interrupt_response(body).map(StudioRequest::InterruptResponse)
        }
        "/api/studio/composition" => {
            parse_composition_mutation(body).map(StudioRequest::CompositionMutate)
        }
        "/api/studio/cancel" => parse_cancel_request(body).map(StudioRequest::Cancel),
        other => panic!("unknown route {other}"),
    }
}

#[test]
fn every_fixture_parses_and_reserialises_to_the_same_json() {
    for (name, bytes) in json_files(&fixtures_dir()) {
        let file: Value = serde_json::from_slice(&bytes).expect("fixture is JSON");
        let reserialised = if let Some(kind) = file.get("kind").and_then(Value::as_str) {
            let kind = RequestKind::from_wire(kind).unwrap_or_else(|| panic!("{name}: kind"));
            let request = parse_on_route(kind.route(), &bytes)
                .unwrap_or_else(|error| panic!("{name} refused on its route: {error:?}"));
            assert_eq!(request.kind(), kind, "{name}");
            assert_eq!(parse_request(&bytes).as_ref(), Ok(&request), "{name}");
            serde_json::to_value(&request).expect("serialise")
        } else {
            let frame = parse_frame(&bytes).unwrap_or_else(|error| panic!("{name}: {error:?}"));
            serde_json::to_value(&frame).expect("serialise")
        };
        assert_eq!(reserialised, file, "{name} does not re-serialise to itself");
    }
}

/// What the valid fixtures cover, by discriminant.
fn covered() -> (BTreeSet<String>, BTreeSet<String>, Vec<Value>) {
    let mut kinds = BTreeSet::new();
    let mut events = BTreeSet::new();
    let mut values = Vec::new();
    for (_, bytes) in json_files(&fixtures_dir()) {
        let value: Value = serde_json::from_slice(&bytes).expect("JSON");
        if let Some(kind) = value.get("kind").and_then(Value::as_str) {
            kinds.insert(kind.to_owned());
        }
        if let Some(event) = value.get("event").and_then(Value::as_str) {
            events.insert(event.to_owned());
        }
        values.push(value);
    }
    (kinds, events, values)
}

#[test]
fn every_request_kind_frame_event_and_op_has_a_fixture() {
    let (kinds, events, values) = covered();
    for kind in RequestKind::ALL {
        assert!(
            kinds.contains(kind.as_str()),
            "no fixture for kind {}",
            kind.as_str()
        );
    }
    for event in FrameEvent::ALL {
        assert!(
            events.contains(event.as_str()),
            "no fixture for event {}",
            event.as_str()
        );
    }
    let ops: BTreeSet<&str> = values
        .iter()
        .filter_map(|value| value.get("ops")?.as_array())
        .flatten()
        .filter_map(|op| op.get("op")?.as_str())
        .collect();
    for op in CompositionOpKind::ALL {
        assert!(
            ops.contains(op.as_str()),
            "no fixture uses op {}",
            op.as_str()
        );
    }
    let count = |event: &str| values.iter().filter(|v| v["event"] == event).count();
    assert!(
        count("elicitation.request") >= 3,
        "three elicitation variants"
    );
    assert!(count("plan.proposed") >= 2, "two plan.proposed variants");
    assert!(
        values
            .iter()
            .any(|v| v["event"] == "plan.proposed" && v.get("switch_failed").is_some()),
        "a plan.proposed with switch_failed"
    );
    assert!(
        values.iter().any(|v| v["seed_spec"].is_array()),
        "a seeded turn"
    );
}

#[test]
fn discriminants_are_distinct_and_read_back() {
    let kinds: BTreeSet<_> = RequestKind::ALL
        .map(RequestKind::as_str)
        .into_iter()
        .collect();
    assert_eq!(kinds.len(), 4);
    let events: BTreeSet<_> = FrameEvent::ALL
        .map(FrameEvent::as_str)
        .into_iter()
        .collect();
    assert_eq!(events.len(), 13);
    for kind in RequestKind::ALL {
        assert_eq!(RequestKind::from_wire(kind.as_str()), Some(kind));
    }
    for event in FrameEvent::ALL {
        assert_eq!(FrameEvent::from_wire(event.as_str()), Some(event));
    }
    for code in ErrorCode::ALL {
        assert_eq!(ErrorCode::from_wire(code.as_str()), Some(code));
        assert_eq!(
            serde_json::to_value(code).expect("code"),
            json!(code.as_str())
        );
    }
}

/// The pause an invalid fixture's `pending` member describes.
fn pending_of(value: &Value) -> Option<PendingInterrupt> {
    match value.get("pending")? {
        Value::String(plan) if plan == "plan" => {
            Some(PendingInterrupt::Plan(PendingPlan::default()))
        }
        frame if frame["event"] == "plan.proposed" => {
            let plan: PlanProposed =
                serde_json::from_value(frame.clone()).expect("pending is a plan frame");
            Some(PendingInterrupt::Plan(PendingPlan::from(&plan)))
        }
        frame => {
            let frame: ElicitationRequest =
                serde_json::from_value(frame.clone()).expect("pending is an elicitation frame");
            Some(PendingInterrupt::Elicitation(PendingElicitation::from(
                &frame,
            )))
        }
    }
}

/// The refused body: `raw_body` verbatim, else `body` padded with spaces
/// (valid JSON whitespace) to `pad_to_bytes`.
fn refused_body(case: &Value) -> Vec<u8> {
    if let Some(raw) = case.get("raw_body").and_then(Value::as_str) {
        return raw.as_bytes().to_vec();
    }
    let mut body = serde_json::to_vec(&case["body"]).expect("body");
    if let Some(target) = case.get("pad_to_bytes").and_then(Value::as_u64) {
        let target = usize::try_from(target).expect("pad fits");
        body.resize(target.max(body.len()), b' ');
    }
    body
}

#[test]
fn every_invalid_fixture_is_refused_with_its_status_code_and_pointer() {
    let files = json_files(&fixtures_dir().join("invalid"));
    assert!(
        files.len() >= 40,
        "the refusal catalogue shrank to {}",
        files.len()
    );
    for (name, bytes) in files {
        let case: Value = serde_json::from_slice(&bytes).expect("JSON");
        let route = case["route"].as_str().expect("route");
        let body = refused_body(&case);
        let refusal = match (parse_on_route(route, &body), pending_of(&case)) {
            (Err(error), None) => error,
            (Ok(StudioRequest::InterruptResponse(response)), Some(pending)) => pending
                .validate(&response)
                .expect_err(&format!("{name}: accepted against its pending pause")),
            (Ok(request), _) => panic!("{name}: accepted as {request:?}"),
            (Err(error), Some(_)) => panic!("{name}: refused at the edge already: {error:?}"),
        };
        assert_eq!(
            refusal.code.as_str(),
            case["code"],
            "{name}: code ({refusal:?})"
        );
        assert_eq!(
            json!(refusal.http_status()),
            case["status"],
            "{name}: status"
        );
        assert_eq!(
            refusal.pointer.as_deref(),
            case["pointer"].as_str(),
            "{name}: pointer ({refusal:?})"
        );
        assert!(
            refusal.detail.ends_with('.'),
            "{name}: detail is a sentence: {}",
            refusal.detail
        );
        let json = serde_json::to_value(&refusal).expect("serialise");
        assert_eq!(
            serde_json::from_value::<WireError>(json).ok(),
            Some(refusal),
            "{name}"
        );
    }
}

#[test]
fn the_same_bodies_pass_the_edge_once_corrected() {
    // A refusal test is only meaningful if a near-identical body passes.
    let base = fixture_value("request-01-turn.json");
    assert!(parse_turn_request(base.to_string().as_bytes()).is_ok());
    let mut padded = base.to_string().into_bytes();
    padded.resize(MAX_TURN_REQUEST_BYTES, b' ');
    assert!(
        parse_turn_request(&padded).is_ok(),
        "a body of exactly the bound passes"
    );
    padded.push(b' ');
    assert_eq!(
        parse_turn_request(&padded).map_err(|e| e.code),
        Err(ErrorCode::PayloadTooLarge)
    );
}

// ------------------------------------------------------- identity, defaults

#[test]
fn session_id_is_read_as_conversation_id_and_written_as_it() {
    let body = json!({"kind": "turn.cancel", "session_id": "conv_1"});
    let request = parse_cancel_request(body.to_string().as_bytes()).expect("alias accepted");
    assert_eq!(request.conversation_id.as_str(), "conv_1");
    let written = serde_json::to_value(StudioRequest::Cancel(request)).expect("serialise");
    assert_eq!(
        written,
        json!({"kind": "turn.cancel", "conversation_id": "conv_1"})
    );
}

#[test]
fn surface_and_auto_add_default_when_omitted() {
    let turn = parse_turn_request(&fixture("request-01-turn.json")).expect("valid");
    assert_eq!((turn.surface(), turn.auto_add()), (Surface::Studio, true));
    let edit = parse_turn_request(&fixture("request-02-turn-edit-card.json")).expect("valid");
    assert!(!edit.auto_add());
    let follow = parse_turn_request(&fixture("request-03-turn-follow-up.json")).expect("valid");
    assert_eq!(follow.surface(), Surface::Embed);
}

#[test]
fn a_follow_up_may_carry_seeds_but_an_edit_may_not() {
    let mut body = fixture_value("request-11-turn-seeded.json");
    body["component_ref"] = json!({"component_id": "c1", "revision": 1, "intent": "follow_up"});
    assert!(parse_turn_request(body.to_string().as_bytes()).is_ok());
    body["component_ref"]["intent"] = json!("edit");
    let refusal = parse_turn_request(body.to_string().as_bytes()).expect_err("seeded edit");
    assert_eq!(refusal.pointer.as_deref(), Some("/component_ref/intent"));
}

// ----------------------------------------------- answers against the pause

fn response(name: &str) -> InterruptResponse {
    parse_interrupt_response(&fixture(name)).expect("valid fixture")
}

fn pending(name: &str) -> PendingElicitation {
    let frame: ElicitationRequest = serde_json::from_slice(&fixture(name)).expect("frame");
    PendingElicitation::from(&frame)
}

#[test]
fn answers_matching_their_frame_are_accepted() {
    let two = PendingInterrupt::Elicitation(pending("frame-elicitation-two-questions.json"));
    two.validate(&response("request-08-interrupt-answers.json"))
        .expect("q1 option, q2 skipped");
    let free = PendingInterrupt::Elicitation(pending("frame-elicitation-free-text.json"));
    free.validate(&response("request-10-interrupt-text-answer.json"))
        .expect("free text");
    let one = PendingInterrupt::Elicitation(pending("frame-elicitation-question.json"));
    one.validate(&response("request-09-interrupt-skip.json"))
        .expect("skippable frame");
    for plan in [
        "request-04-interrupt-approve.json",
        "request-07-interrupt-amend.json",
        "request-14-interrupt-reject.json",
    ] {
        PendingInterrupt::Plan(PendingPlan::default())
            .validate(&response(plan))
            .expect(plan);
    }
    let chart = ChoiceId::new("decision/chart").expect("choice id");
    let options = ["line_chart", "table"].map(|o| OptionId::new(o).expect("option id"));
    let offered = PendingPlan {
        choices: Some(vec![(chart, options.to_vec())]),
    };
    PendingInterrupt::Plan(offered)
        .validate(&response("request-15-interrupt-switch.json"))
        .expect("a switch to an offered option");
}

#[test]
fn a_legacy_payload_answers_only_a_pre_delta_21_elicitation() {
    let legacy_answer = response("request-13-interrupt-legacy-payload.json");
    let mut legacy = pending("frame-elicitation-question.json");
    let current = PendingInterrupt::Elicitation(legacy.clone());
    let refusal = current
        .validate(&legacy_answer)
        .expect_err("payload on a delta-21 frame");
    assert_eq!(refusal.pointer.as_deref(), Some("/payload"));

    legacy.takes_legacy_payload = true;
    let old = PendingInterrupt::Elicitation(legacy.clone());
    old.validate(&legacy_answer).expect("an offered option id");
    let mut free_text = legacy_answer.clone();
    free_text.payload = Some("the East African Community".to_owned());
    old.validate(&free_text).expect("free text where allowed");

    legacy.questions[0].allow_free_text = false;
    let closed = PendingInterrupt::Elicitation(legacy);
    assert!(closed.validate(&legacy_answer).is_ok());
    let refusal = closed
        .validate(&free_text)
        .expect_err("not offered, no free text");
    assert_eq!(refusal.code, ErrorCode::BindingInvalid);
}

// ------------------------------------------------------------ error grammar

#[test]
fn an_unknown_upstream_code_becomes_transient_with_the_reason_kept() {
    let error = WireError::from_upstream(
        "quota_exhausted",
        "The data service is over its quota.",
        Retry::DoNotRetry,
    );
    assert_eq!(error.code, ErrorCode::TransientUnavailable);
    assert!(matches!(error.retry, Retry::RetryAfterDelay { .. }));
    assert!(error.detail.contains("over its quota") && error.detail.contains("quota_exhausted"));
    let known = WireError::from_upstream("edit_conflict", "stale", Retry::RefreshThenRetry);
    assert_eq!(
        (known.code, known.retry),
        (ErrorCode::EditConflict, Retry::RefreshThenRetry)
    );
}

#[test]
fn retry_data_travels_only_with_its_mode() {
    let shapes = [
        (
            json!({"code": "binding_invalid", "retry": "correct_and_retry", "fix": "f", "detail": "d."}),
            true,
        ),
        (
            json!({"code": "binding_invalid", "retry": "correct_and_retry", "detail": "d."}),
            false,
        ),
        (
            json!({"code": "not_found", "retry": "do_not_retry", "fix": "f", "detail": "d."}),
            false,
        ),
        (
            json!({"code": "transient_unavailable", "retry": "retry_after_delay", "retry_after_seconds": 3, "detail": "d."}),
            true,
        ),
        (
            json!({"code": "transient_unavailable", "retry": "retry_after_delay", "detail": "d."}),
            false,
        ),
        (
            json!({"code": "edit_conflict", "retry": "refresh_then_retry", "retry_after_seconds": 3, "detail": "d."}),
            false,
        ),
        (
            json!({"code": "teapot", "retry": "do_not_retry", "detail": "d."}),
            false,
        ),
    ];
    for (shape, valid) in shapes {
        assert_eq!(
            serde_json::from_value::<WireError>(shape.clone()).is_ok(),
            valid,
            "{shape}"
        );
    }
}

#[test]
fn statuses_follow_the_code() {
    let statuses = [
        (ErrorCode::BindingInvalid, 422),
        (ErrorCode::NotFound, 404),
        (ErrorCode::EditConflict, 409),
        (ErrorCode::TransientUnavailable, 409),
        (ErrorCode::MalformedRequest, 400),
        (ErrorCode::PayloadTooLarge, 413),
        (ErrorCode::Unauthorized, 401),
    ];
    for (code, status) in statuses {
        assert_eq!(code.http_status(), status, "{code:?}");
    }
}

#[test]
fn unknown_frame_events_are_refused() {
    let refusal =
        parse_frame(br#"{"event": "message.edit", "seq": 1}"#).expect_err("unknown event");
    assert_eq!(
        (refusal.code, refusal.pointer.as_deref()),
        (ErrorCode::MalformedRequest, Some("/event"))
    );
    assert!(
        parse_frame(br#"{"event": "done", "seq": 1, "trace_id": "t"}"#).is_ok(),
        "composition may be null or absent"
    );
}

#[test]
fn frames_that_end_the_stream() {
    let ending: Vec<&str> = FrameEvent::ALL
        .into_iter()
        .filter(|e| e.ends_stream())
        .map(FrameEvent::as_str)
        .collect();
    assert_eq!(
        ending,
        ["plan.proposed", "elicitation.request", "error", "done"]
    );
}

// -------------------------------------------------------------------- seeds

#[test]
fn the_seeded_fixture_reads_into_bounded_seeds() {
    let turn = parse_turn_request(&fixture("request-11-turn-seeded.json")).expect("valid");
    let Some(SeedSpec::Seeds(items)) = &turn.seed_spec else {
        panic!("seeds")
    };
    let seeds: Vec<_> = items
        .iter()
        .enumerate()
        .map(|(index, item)| seed::read_seed(index, item))
        .collect();
    let first = seeds[0].as_ref().expect("first seed");
    assert_eq!(first.spec.spec_id, "spec_4d5e6f7a33333333");
    assert_eq!(first.spec.entity_groups.len(), 1);
    assert_eq!(first.operations[0].target_year, Some(2030));
    assert!(seeds[1].is_ok());
}

fn seed_with(operations: Value, spec_extra: Value) -> Value {
    let mut spec = json!({"spec_id": "spec_1", "definition": {}});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({"spec": spec, "operations": operations})
}

#[test]
fn a_seed_past_a_bound_is_refused_whole() {
    let op = |verb: &str, year: Value| json!({"verb": verb, "phrase": "p", "target_year": year});
    let cases = [
        (
            seed_with(
                json!(vec![json!({"verb": "rank", "phrase": "p"}); 9]),
                json!({}),
            ),
            "/seed_spec/0/operations",
        ),
        (
            seed_with(json!([op("rank", json!(2030))]), json!({})),
            "/seed_spec/0/operations/0/target_year",
        ),
        (
            seed_with(json!([op("forecast", json!(999))]), json!({})),
            "/seed_spec/0/operations/0/target_year",
        ),
        (
            seed_with(json!([op("forecast", json!(2201))]), json!({})),
            "/seed_spec/0/operations/0/target_year",
        ),
        (
            seed_with(
                json!([{"verb": "rank", "phrase": "p", "by": "x"}]),
                json!({}),
            ),
            "/seed_spec/0/operations/0",
        ),
        (
            seed_with(
                json!([]),
                json!({"pad": "x".repeat(seed::MAX_SEED_SPEC_BYTES)}),
            ),
            "/seed_spec/0/spec",
        ),
        (json!({"operations": []}), "/seed_spec/0/spec"),
        (
            json!({"spec": {"definition": {}}}),
            "/seed_spec/0/spec/spec_id",
        ),
    ];
    for (item, pointer) in cases {
        let refusal = seed::read_seed(0, &item).expect_err(pointer);
        assert_eq!(refusal.pointer, pointer, "{item}");
    }
    let bounds = [op("forecast", json!(1000)), op("forecast", json!(2200))];
    let at_bounds = seed_with(json!(bounds), json!({}));
    assert!(seed::read_seed(0, &at_bounds).is_ok());
    let eight = seed_with(
        json!(vec![json!({"verb": "rank", "phrase": "p"}); 8]),
        json!({}),
    );
    assert!(seed::read_seed(0, &eight).is_ok());
}

#[test]
fn entity_groups_outside_the_name_bound_are_dropped() {
    let groups = json!({"resolved": {"entity_groups": [
        {"role": "country", "name": "EAC"},
        {"role": "country", "name": ""},
        {"role": "country", "name": "n".repeat(121)},
        {"role": "country", "name": "n".repeat(120)},
        {"name": "no role"},
    ]}});
    let seed = seed::read_seed(0, &seed_with(json!([]), groups)).expect("a seed");
    let names: Vec<usize> = seed
        .spec
        .entity_groups
        .iter()
        .map(|g| g.name.chars().count())
        .collect();
    assert_eq!(names, [3, 120]);
}

// ------------------------------------------------------------------- schema

fn collect_consts(value: &Value, found: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(constant)) = map.get("const") {
                found.insert(constant.clone());
            }
            map.values().for_each(|child| collect_consts(child, found));
        }
        Value::Array(items) => items.iter().for_each(|child| collect_consts(child, found)),
        _ => {}
    }
}

#[test]
fn the_schema_is_draft_2020_12_and_names_every_kind_and_event() {
    let schema = schema_json();
    assert_eq!(schema["$schema"], JSON_SCHEMA_DIALECT);
    assert_eq!(
        JSON_SCHEMA_DIALECT,
        "https://json-schema.org/draft/2020-12/schema"
    );
    for union in ["StudioRequest", "Frame"] {
        assert!(
            schema["$defs"][union]["oneOf"].is_array(),
            "$defs/{union} is a union"
        );
    }
    let mut consts = BTreeSet::new();
    collect_consts(&schema, &mut consts);
    for name in RequestKind::ALL
        .map(RequestKind::as_str)
        .into_iter()
        .chain(FrameEvent::ALL.map(FrameEvent::as_str))
    {
        assert!(consts.contains(name), "the schema does not name {name}");
    }
}

#[test]
fn ledgerwire_schema_prints_the_schema() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ledgerwire"))
        .arg("schema")
        .output()
        .expect("run ledgerwire schema");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed: Value = serde_json::from_slice(&output.stdout).expect("valid JSON");
    assert_eq!(printed, schema_json());
}

// ------------------------------------------------------- docs and contract

#[test]
fn the_protocol_doc_links_every_fixture() {
    let doc_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/studio-wire.md");
    let doc = std::fs::read_to_string(&doc_path).expect("docs/studio-wire.md");
    for (name, _) in json_files(&fixtures_dir()) {
        assert!(
            doc.contains(&format!("fixtures/studio/{name})")),
            "docs/studio-wire.md does not link {name}"
        );
    }
    for event in FrameEvent::ALL {
        assert!(
            doc.contains(&format!("`{}`", event.as_str())),
            "the doc does not explain {}",
            event.as_str()
        );
    }
}

/// The contract's request kinds and frame events (studio-contract-v1,
/// "Requests: four kinds" and "Thirteen frame types"), transcribed: the
/// wire's vocabulary is exactly this.
const CONTRACT_KINDS: [&str; 4] = [
    "turn.request",
    "interrupt.response",
    "composition.mutate",
    "turn.cancel",
];
const CONTRACT_EVENTS: [&str; 13] = [
    "message.delta",
    "message.complete",
    "plan.proposed",
    "plan.versioned",
    "plan.approved",
    "activity.step",
    "component.created",
    "component.revised",
    "composition.updated",
    "elicitation.request",
    "suggestions",
    "error",
    "done",
];

#[test]
fn the_wire_names_the_contracts_kinds_and_events() {
    let kinds: Vec<&str> = RequestKind::ALL.map(RequestKind::as_str).to_vec();
    assert_eq!(kinds, CONTRACT_KINDS);
    let events: Vec<&str> = FrameEvent::ALL.map(FrameEvent::as_str).to_vec();
    assert_eq!(events, CONTRACT_EVENTS);
}

// --------------------------------------------------------------- proptest

fn id<T: std::fmt::Debug + 'static>(
    make: fn(String) -> Result<T, ledgerwire::wire::ids::IdError>,
) -> BoxedStrategy<T> {
    "[a-z][a-z0-9_:/.-]{0,15}"
        .prop_map(move |text| make(text).expect("generated id is valid"))
        .boxed()
}

fn text() -> BoxedStrategy<String> {
    "\\PC{0,24}".boxed()
}

fn prose() -> BoxedStrategy<String> {
    "[A-Za-z][ -~]{0,40}".boxed()
}

fn json_value() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            json_map(inner).prop_map(Value::Object),
        ]
    })
    .boxed()
}

fn json_map(values: impl Strategy<Value = Value> + 'static) -> BoxedStrategy<Map<String, Value>> {
    prop::collection::btree_map("[a-z_]{1,8}", values, 0..4)
        .prop_map(|map| map.into_iter().collect())
        .boxed()
}

/// Dyadic fractions print and parse back exactly.
fn number() -> BoxedStrategy<f64> {
    (-1_000_000i32..1_000_000)
        .prop_map(|n| f64::from(n) / 8.0)
        .boxed()
}

fn opt<T: std::fmt::Debug + 'static>(
    strategy: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<Option<T>> {
    prop::option::of(strategy).boxed()
}

fn component_ref() -> BoxedStrategy<ComponentRef> {
    (
        id(ComponentId::new),
        any::<u64>(),
        prop_oneof![Just(ComponentIntent::Edit), Just(ComponentIntent::FollowUp)],
    )
        .prop_map(|(component_id, revision, intent)| ComponentRef {
            component_id,
            revision,
            intent,
        })
        .boxed()
}

fn seed_spec() -> BoxedStrategy<SeedSpec> {
    prop_oneof![
        prop::collection::vec(json_value(), 1..=6).prop_map(SeedSpec::Seeds),
        (text(), text()).prop_map(|(spec_id, content_version)| SeedSpec::Reference(
            SeedReference {
                spec_id,
                content_version
            }
        )),
    ]
    .boxed()
}

fn turn() -> BoxedStrategy<TurnRequest> {
    let surface = opt(prop_oneof![
        Just(Surface::Studio),
        Just(Surface::Download),
        Just(Surface::Embed)
    ]);
    (
        id(ConversationId::new),
        prose(),
        surface,
        opt(component_ref()),
        opt(seed_spec()),
        opt(any::<bool>()),
    )
        .prop_map(
            |(conversation_id, message, surface, component_ref, seed_spec, auto_add)| {
                let edits = component_ref
                    .as_ref()
                    .is_some_and(|r| r.intent == ComponentIntent::Edit);
                TurnRequest {
                    conversation_id,
                    message,
                    surface,
                    component_ref,
                    seed_spec: if edits { None } else { seed_spec },
                    auto_add,
                }
            },
        )
        .boxed()
}

fn answer() -> BoxedStrategy<Answer> {
    prop_oneof![
        id(OptionId::new).prop_map(|option_id| Answer::Option { option_id }),
        prose().prop_map(|text| Answer::Text { text }),
        Just(Answer::Skipped),
    ]
    .boxed()
}

fn interrupt_response() -> BoxedStrategy<InterruptResponse> {
    let answers = prop::collection::btree_map(id(QuestionId::new), answer(), 1..=3);
    let decision = prop_oneof![
        opt(prose()).prop_map(|payload| (Decision::Approve, payload, None)),
        opt(prose()).prop_map(|payload| (Decision::Reject, payload, None)),
        prose().prop_map(|payload| (Decision::Amend, Some(payload), None)),
        answers.prop_map(|answers| (Decision::Answer, None, Some(answers))),
        prose().prop_map(|payload| (Decision::Answer, Some(payload), None)),
        Just((Decision::Skip, None, None)),
    ];
    (id(ConversationId::new), id(InterruptId::new), decision)
        .prop_map(
            |(conversation_id, interrupt_id, (decision, payload, answers))| InterruptResponse {
                conversation_id,
                interrupt_id,
                decision,
                payload,
                answers,
                switch: None,
            },
        )
        .boxed()
}

fn card_meta() -> BoxedStrategy<CardMeta> {
    (
        opt(text()),
        opt(text()),
        opt(text()),
        opt(text()),
        opt(text()),
    )
        .prop_map(
            |(subtitle, description, x_label, y_label, style)| CardMeta {
                subtitle,
                description,
                x_label,
                y_label,
                style,
            },
        )
        .boxed()
}

fn layout_hints() -> BoxedStrategy<LayoutHints> {
    json_map(json_value()).prop_map(LayoutHints).boxed()
}

fn composition_op() -> BoxedStrategy<CompositionOp> {
    prop_oneof![
        id(ComponentId::new).prop_map(|component_id| CompositionOp::Add { component_id }),
        prop::collection::btree_set(id(ComponentId::new), 0..5).prop_map(|ids| {
            CompositionOp::Reorder {
                order: ids.into_iter().collect(),
            }
        }),
        id(ComponentId::new).prop_map(|component_id| CompositionOp::Remove { component_id }),
        id(ComponentId::new).prop_map(|component_id| CompositionOp::Pin { component_id }),
        id(ComponentId::new).prop_map(|component_id| CompositionOp::Unpin { component_id }),
        layout_hints().prop_map(|layout_hints| CompositionOp::SetLayoutHints { layout_hints }),
        (id(ComponentId::new), card_meta())
            .prop_map(|(component_id, meta)| CompositionOp::SetCardMeta { component_id, meta }),
    ]
    .boxed()
}

fn mutation() -> BoxedStrategy<CompositionMutation> {
    (
        id(ConversationId::new),
        opt(id(CompositionId::new)),
        any::<u64>(),
        prop::collection::vec(composition_op(), 1..6),
    )
        .prop_map(
            |(conversation_id, composition_id, expected_revision, ops)| CompositionMutation {
                conversation_id,
                composition_id,
                expected_revision,
                ops,
            },
        )
        .boxed()
}

fn request() -> BoxedStrategy<StudioRequest> {
    prop_oneof![
        turn().prop_map(StudioRequest::Turn),
        interrupt_response().prop_map(StudioRequest::InterruptResponse),
        mutation().prop_map(StudioRequest::CompositionMutate),
        id(ConversationId::new)
            .prop_map(|conversation_id| StudioRequest::Cancel(CancelRequest { conversation_id })),
    ]
    .boxed()
}

fn wire_error() -> BoxedStrategy<WireError> {
    let retry = prop_oneof![
        text().prop_map(|fix| Retry::CorrectAndRetry { fix }),
        Just(Retry::RefreshThenRetry),
        any::<u64>().prop_map(|retry_after_seconds| Retry::RetryAfterDelay {
            retry_after_seconds
        }),
        Just(Retry::DoNotRetry),
    ];
    (
        prop::sample::select(ErrorCode::ALL.to_vec()),
        retry,
        text(),
        opt(text()),
    )
        .prop_map(|(code, retry, detail, pointer)| WireError {
            code,
            retry,
            detail,
            pointer,
        })
        .boxed()
}

fn manifest() -> BoxedStrategy<CompositionManifest> {
    let block = (
        id(ComponentId::new),
        any::<u64>(),
        text(),
        text(),
        any::<bool>(),
        opt(card_meta()),
    )
        .prop_map(
            |(component_id, revision, component_type, title, pinned, meta)| CompositionBlock {
                component_id,
                revision,
                component_type,
                title,
                pinned,
                meta,
            },
        );
    (
        id(CompositionId::new),
        any::<u64>(),
        prop::collection::vec(block, 0..4),
        any::<u32>(),
        any::<u32>(),
        layout_hints(),
    )
        .prop_map(
            |(composition_id, revision, blocks, block_count, pinned, layout_hints)| {
                CompositionManifest {
                    composition_id,
                    revision,
                    blocks,
                    counts: CompositionCounts {
                        blocks: block_count,
                        pinned,
                    },
                    layout_hints,
                }
            },
        )
        .boxed()
}

fn fact_summary() -> BoxedStrategy<FactSummary> {
    let point = (text(), number()).prop_map(|(period, value)| FactPoint { period, value });
    let series = (text(), opt(text()), opt(point), opt(number())).prop_map(
        |(label, unit, latest, change)| SeriesFact {
            label,
            unit,
            latest,
            change,
        },
    );
    (opt(text()), prop::collection::vec(series, 0..3))
        .prop_map(|(headline, series)| FactSummary { headline, series })
        .boxed()
}

fn plan_step() -> BoxedStrategy<PlanStep> {
    (
        id(PlanStepId::new),
        text(),
        text(),
        opt(json_map(json_value())),
        opt(any::<bool>()),
    )
        .prop_map(|(id, label, description, args, gives_answer)| PlanStep {
            id,
            label,
            description,
            args,
            gives_answer,
        })
        .boxed()
}

fn plan_proposed() -> BoxedStrategy<PlanProposed> {
    let requirement = (text(), text(), text(), prop::collection::vec(text(), 0..3)).prop_map(
        |(id, kind, sentence, decision_ids)| PlanRequirement {
            id,
            kind,
            sentence,
            decision_ids,
        },
    );
    let operation =
        (text(), text(), text(), opt(text())).prop_map(|(id, kind, sentence, requirement_id)| {
            PlanOperation {
                id,
                kind,
                sentence,
                requirement_id,
            }
        });
    let ask = (
        text(),
        prop::collection::vec(id(PlanStepId::new), 0..3),
        opt(text()),
        opt(text()),
    )
        .prop_map(|(ask, answered_by, declined, not_computed)| PlanAsk {
            ask,
            answered_by,
            declined,
            not_computed,
        });
    let option = (id(OptionId::new), text())
        .prop_map(|(option_id, label)| PlanDecisionOption { option_id, label });
    let decision = (
        id(ChoiceId::new),
        text(),
        text(),
        prop::collection::vec(option, 0..3),
    )
        .prop_map(|(choice_id, question, chosen, options)| PlanDecision {
            choice_id,
            question,
            chosen,
            options,
        });
    let switch_failed = (
        id(ChoiceId::new),
        id(OptionId::new),
        text(),
        text(),
        opt(any::<bool>()),
    )
        .prop_map(
            |(choice_id, option_id, code, reason, retryable)| SwitchFailed {
                choice_id,
                option_id,
                code,
                reason,
                retryable,
            },
        );
    let head = (
        any::<u64>(),
        id(InterruptId::new),
        id(PlanVersionId::new),
        any::<u32>(),
        prop::collection::vec(plan_step(), 0..4),
    );
    let detail = (
        opt(text()),
        opt(prop::collection::vec(requirement, 0..3)),
        opt(prop::collection::vec(operation, 0..3)),
        opt(prop::collection::vec(ask, 0..3)),
        opt(text()),
        opt(prop::collection::vec(text(), 0..3)),
        opt(prop::collection::vec(decision, 0..3)),
        opt(switch_failed),
    );
    (head, detail)
        .prop_map(
            |(
                (seq, interrupt_id, plan_version_id, version, steps),
                (
                    revision,
                    requirements,
                    operations,
                    asks,
                    summary,
                    caveats,
                    decisions,
                    switch_failed,
                ),
            )| {
                PlanProposed {
                    seq,
                    interrupt_id,
                    plan_version_id,
                    version,
                    steps,
                    revision,
                    requirements,
                    operations,
                    asks,
                    summary,
                    caveats,
                    decisions,
                    switch_failed,
                }
            },
        )
        .boxed()
}

fn plan_approved() -> BoxedStrategy<PlanApproved> {
    let step = (text(), opt(any::<bool>())).prop_map(|(label, gives_answer)| ApprovedStep {
        label,
        gives_answer,
    });
    let choice = (text(), text(), opt(text()), opt(id(ChoiceId::new))).prop_map(
        |(question, chosen, changed_from, choice_id)| ApprovedChoice {
            question,
            chosen,
            changed_from,
            choice_id,
        },
    );
    (
        any::<u64>(),
        id(PlanVersionId::new),
        any::<u32>(),
        opt(text()),
        text(),
        opt(text()),
        prop::collection::vec(step, 0..3),
        prop::collection::vec(choice, 0..3),
        opt(prop::collection::vec(text(), 0..2)),
    )
        .prop_map(
            |(seq, plan_version_id, version, revision, title, summary, steps, choices, caveats)| {
                PlanApproved {
                    seq,
                    plan_version_id,
                    version,
                    revision,
                    title,
                    summary,
                    steps,
                    choices,
                    caveats,
                }
            },
        )
        .boxed()
}

fn elicitation() -> BoxedStrategy<ElicitationRequest> {
    let option =
        (id(OptionId::new), text(), opt(any::<bool>())).prop_map(|(id, label, recommended)| {
            ElicitationOption {
                id,
                label,
                recommended,
            }
        });
    let input = prop_oneof![Just(InputKind::Choice), Just(InputKind::Text)];
    let question = (
        id(QuestionId::new),
        text(),
        input,
        opt(prop::collection::vec(option, 0..3)),
        any::<bool>(),
        any::<bool>(),
        opt(text()),
    )
        .prop_map(
            |(id, question, input, options, allow_free_text, skippable, rationale)| {
                ElicitationQuestion {
                    id,
                    question,
                    input,
                    options,
                    allow_free_text,
                    skippable,
                    rationale,
                }
            },
        );
    (
        any::<u64>(),
        id(InterruptId::new),
        prop::collection::vec(question, 1..=3),
        any::<bool>(),
    )
        .prop_map(
            |(seq, interrupt_id, questions, skippable)| ElicitationRequest {
                seq,
                interrupt_id,
                questions,
                skippable,
            },
        )
        .boxed()
}

fn frame() -> BoxedStrategy<Frame> {
    let status = prop_oneof![
        Just(StepStatus::Running),
        Just(StepStatus::Complete),
        Just(StepStatus::Failed)
    ];
    let provenance =
        (text(), opt(text()), opt(text())).prop_map(|(source, spec_id, content_version)| {
            Provenance {
                source,
                spec_id,
                content_version,
            }
        });
    prop_oneof![
        (any::<u64>(), text())
            .prop_map(|(seq, text)| Frame::MessageDelta(MessageDelta { seq, text })),
        (any::<u64>(), text())
            .prop_map(|(seq, text)| Frame::MessageComplete(MessageComplete { seq, text })),
        plan_proposed().prop_map(Frame::PlanProposed),
        (
            any::<u64>(),
            id(PlanVersionId::new),
            any::<u32>(),
            id(PlanVersionId::new)
        )
            .prop_map(
                |(seq, plan_version_id, version, supersedes)| Frame::PlanVersioned(PlanVersioned {
                    seq,
                    plan_version_id,
                    version,
                    supersedes
                })
            ),
        plan_approved().prop_map(Frame::PlanApproved),
        (
            any::<u64>(),
            id(ActivityStepId::new),
            status,
            text(),
            text(),
            opt(text()),
            opt(text())
        )
            .prop_map(|(seq, step_id, status, tool, label, detail, code)| {
                Frame::ActivityStep(ActivityStep {
                    seq,
                    step_id,
                    status,
                    tool,
                    label,
                    detail,
                    code,
                })
            }),
        (
            any::<u64>(),
            id(ComponentId::new),
            any::<u64>(),
            text(),
            text(),
            json_value(),
            fact_summary(),
            provenance
        )
            .prop_map(
                |(
                    seq,
                    component_id,
                    revision,
                    component_type,
                    title,
                    payload,
                    fact_summary,
                    provenance,
                )| {
                    Frame::ComponentCreated(ComponentCreated {
                        seq,
                        component_id,
                        revision,
                        component_type,
                        title,
                        payload,
                        fact_summary,
                        provenance,
                    })
                }
            ),
        (
            any::<u64>(),
            id(ComponentId::new),
            any::<u64>(),
            text(),
            prop::collection::vec(text(), 0..3),
            json_value(),
            opt(fact_summary())
        )
            .prop_map(
                |(seq, component_id, revision, title, changed, payload, fact_summary)| {
                    Frame::ComponentRevised(ComponentRevised {
                        seq,
                        component_id,
                        revision,
                        title,
                        changed,
                        payload,
                        fact_summary,
                    })
                }
            ),
        (any::<u64>(), manifest()).prop_map(|(seq, composition)| Frame::CompositionUpdated(
            CompositionUpdated { seq, composition }
        )),
        elicitation().prop_map(Frame::ElicitationRequest),
        (any::<u64>(), prop::collection::vec(text(), 0..4))
            .prop_map(|(seq, suggestions)| Frame::Suggestions(Suggestions { seq, suggestions })),
        (any::<u64>(), wire_error())
            .prop_map(|(seq, error)| Frame::Error(ErrorFrame { seq, error })),
        (any::<u64>(), id(TraceId::new), opt(manifest())).prop_map(
            |(seq, trace_id, composition)| Frame::Done(Done {
                seq,
                trace_id,
                composition
            })
        ),
    ]
    .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn any_request_round_trips_through_json_and_the_edge(request in request()) {
        let json = serde_json::to_vec(&request).expect("serialise");
        let back: StudioRequest = serde_json::from_slice(&json).expect("deserialise");
        prop_assert_eq!(&back, &request);
        prop_assert_eq!(check_bounds(&request), Ok(()));
        prop_assert_eq!(parse_request(&json), Ok(request.clone()));
        prop_assert_eq!(parse_on_route(request.kind().route(), &json), Ok(request));
    }

    #[test]
    fn any_frame_round_trips_through_json(frame in frame()) {
        let json = serde_json::to_vec(&frame).expect("serialise");
        let back = parse_frame(&json).expect("parse");
        prop_assert_eq!(back.event(), frame.event());
        prop_assert_eq!(back.seq(), frame.seq());
        prop_assert_eq!(back, frame);
    }

    #[test]
    fn any_wire_error_round_trips_through_json(error in wire_error()) {
        let json = serde_json::to_string(&error).expect("serialise");
        prop_assert_eq!(serde_json::from_str::<WireError>(&json).expect("deserialise"), error);
    }
}

#[test]
fn answers_keys_are_question_ids() {
    // BTreeMap keys serialise as JSON object keys: the contract's answer shape.
    let answers: BTreeMap<QuestionId, Answer> =
        [(QuestionId::new("q1").expect("id"), Answer::Skipped)]
            .into_iter()
            .collect();
    assert_eq!(
        serde_json::to_value(&answers).expect("serialise"),
        json!({"q1": {"kind": "skipped"}})
    );
}
