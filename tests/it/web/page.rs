//! The page's files as `serve` sends them: every file of `web/` and every
//! module of the TypeScript package embedded with its type, the page's
//! security headers (the import map's hash in its content security
//! policy), validators, and no file outside the list.

use std::collections::BTreeSet;
use std::path::Path;

use crate::support::{open, scratch, start_server};

fn web_files(dir: &Path, prefix: &str, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).expect("read web/") {
        let entry = entry.expect("entry");
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        if entry.file_type().expect("type").is_dir() {
            web_files(&entry.path(), &format!("{name}/"), out);
        } else {
            out.insert(name);
        }
    }
}

/// Where an embedded asset lives in the repository.
fn source_of(path: &str) -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    match path.strip_prefix(ledgerwire::web::CLIENT_PREFIX) {
        Some(module) => root.join("clients/typescript/src").join(module),
        None => root.join("web").join(path),
    }
}

#[test]
fn every_file_of_web_is_embedded_and_nothing_else() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut on_disk = BTreeSet::new();
    web_files(&root.join("web"), "", &mut on_disk);
    // The package's modules (its generated `.d.ts` types are for editors,
    // not for the browser).
    let mut modules = BTreeSet::new();
    web_files(
        &root.join("clients/typescript/src"),
        ledgerwire::web::CLIENT_PREFIX,
        &mut modules,
    );
    on_disk.extend(modules.into_iter().filter(|m| m.ends_with(".js")));
    let embedded: BTreeSet<String> = ledgerwire::web::ASSETS
        .iter()
        .map(|asset| asset.path.to_owned())
        .collect();
    assert_eq!(
        on_disk, embedded,
        "web/ plus clients/typescript/src/*.js and ledgerwire::web::ASSETS must name the same files"
    );
    for asset in ledgerwire::web::ASSETS {
        let text = std::str::from_utf8(asset.body).expect("UTF-8");
        let disk = std::fs::read_to_string(source_of(asset.path)).expect("read");
        assert_eq!(text, disk, "{} is embedded as it is on disk", asset.path);
        // No file reaches out of the origin (no CDN, no remote import) or
        // turns a string into markup or code. A vendored library may name
        // URLs in its own text (markdown-it's link schemes), so for those
        // only an import from a URL counts.
        let vendored = asset.path.starts_with("vendor/");
        let outside = text.replace("http://www.w3.org/2000/svg", "");
        let compact: String = outside.chars().filter(|c| !c.is_whitespace()).collect();
        for remote in [
            "from\"http",
            "from'http",
            "import(\"http",
            "import('http",
            "from\"//",
            "from'//",
        ] {
            assert!(
                !compact.contains(remote),
                "{} imports from a URL",
                asset.path
            );
        }
        let urls: &[&str] = if vendored {
            &[]
        } else {
            &["http://", "https://"]
        };
        for forbidden in urls.iter().copied().chain([
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "eval(",
            "new Function",
            "document.write",
        ]) {
            assert!(
                !outside.contains(forbidden),
                "{} contains {forbidden}",
                asset.path
            );
        }
    }
}

#[tokio::test]
async fn the_page_and_its_modules_are_served_with_their_types() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_server(ledger).await;
    let http = reqwest::Client::new();
    let index = http
        .get(format!("http://{addr}/"))
        .send()
        .await
        .expect("GET /");
    assert_eq!(index.status(), 200);
    let headers = index.headers().clone();
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    let csp = headers["content-security-policy"].to_str().expect("CSP");
    assert!(
        csp.contains("script-src 'self' 'sha256-") && csp.contains("connect-src 'self'"),
        "{csp}"
    );
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(csp, ledgerwire::web::content_security_policy());
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let html = index.text().await.expect("body");
    assert!(html.contains(r#"<script type="module" src="/web/js/app.js">"#));
    // The import map names only files the server embeds.
    let map: serde_json::Value =
        serde_json::from_str(ledgerwire::web::import_map().expect("an import map")).expect("JSON");
    let imports = map["imports"].as_object().expect("imports");
    assert!(imports.contains_key("@ledgerwire/client/studio"));
    for target in imports.values() {
        let path = target.as_str().expect("a path");
        let asset = path.strip_prefix("/web/").expect("under /web/");
        assert!(
            ledgerwire::web::asset(asset).is_some(),
            "{path} is embedded"
        );
    }

    let mut total = html.len();
    for asset in ledgerwire::web::ASSETS
        .iter()
        .filter(|a| a.path != "index.html")
    {
        let response = http
            .get(format!("http://{addr}/web/{}", asset.path))
            .send()
            .await
            .expect("GET asset");
        assert_eq!(response.status(), 200, "{}", asset.path);
        assert_eq!(
            response.headers()["content-type"],
            asset.content_type,
            "{}",
            asset.path
        );
        let etag = response.headers()["etag"]
            .to_str()
            .expect("etag")
            .to_owned();
        total += response.bytes().await.expect("body").len();
        let again = http
            .get(format!("http://{addr}/web/{}", asset.path))
            .header("If-None-Match", &etag)
            .send()
            .await
            .expect("revalidate");
        assert_eq!(again.status(), 304, "{} revalidates", asset.path);
    }
    assert_eq!(total, ledgerwire::web::page_bytes());

    for missing in [
        "/web/nope.js",
        "/web/../Cargo.toml",
        "/web/js/../../Cargo.toml",
        "/web/",
    ] {
        let response = http
            .get(format!("http://{addr}{missing}"))
            .send()
            .await
            .expect("GET");
        assert_eq!(response.status(), 404, "{missing}");
    }
}
