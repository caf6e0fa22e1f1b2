//! Parse and serialise throughput of the largest Studio frames, in frames/s:
//! `plan.proposed` with every optional member, and `component.created`
//! whose payload holds 1,000 points.

// The allocator the `ledgerwire` binary ships with, so the figures are its.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ledgerwire::wire::{Frame, parse_frame};
use serde_json::{Value, json};

/// Points in the large component fixture.
const COMPONENT_POINTS: usize = 1_000;

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/studio")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// The component.created fixture with a payload of `COMPONENT_POINTS` points.
fn large_component_frame() -> Vec<u8> {
    let mut frame: Value =
        serde_json::from_slice(&fixture("frame-component-created.json")).expect("fixture");
    let points: Vec<Value> = (0..COMPONENT_POINTS)
        .map(|index| {
            json!({
                "place": "country/UGA",
                "period": format!("{}-{:02}", 1940 + index / 12, index % 12 + 1),
                "value": 6.2 + index as f64 * 0.0431,
            })
        })
        .collect();
    frame["payload"]["component"]["points"] = Value::Array(points);
    serde_json::to_vec(&frame).expect("serialise")
}

fn bench_frame(criterion: &mut Criterion, name: &str, bytes: &[u8]) {
    let frame: Frame = parse_frame(bytes).expect("the bench frame parses");
    let mut group = criterion.benchmark_group(name);
    group.throughput(Throughput::Elements(1));
    group.sample_size(30);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    group.bench_function("parse", |bench| {
        bench.iter(|| parse_frame(black_box(bytes)).expect("parses"))
    });
    group.bench_function("serialise", |bench| {
        bench.iter(|| serde_json::to_vec(black_box(&frame)).expect("serialises"))
    });
    group.finish();
}

fn wire(criterion: &mut Criterion) {
    let plan = fixture("frame-plan-proposed.json");
    bench_frame(criterion, "plan.proposed (all optional members)", &plan);
    let component = large_component_frame();
    println!(
        "component.created with {COMPONENT_POINTS} points: {} bytes",
        component.len()
    );
    bench_frame(criterion, "component.created (1,000 points)", &component);
}

criterion_group!(benches, wire);
criterion_main!(benches);
