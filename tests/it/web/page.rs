//! The page's files as `serve` sends them: every file of `web/` embedded
//! with its type, the page's security headers, validators, and no file
//! outside the list.

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

#[test]
fn every_file_of_web_is_embedded_and_nothing_else() {
    let mut on_disk = BTreeSet::new();
    web_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("web"),
        "",
        &mut on_disk,
    );
    let embedded: BTreeSet<String> = ledgerwire::web::ASSETS
        .iter()
        .map(|asset| asset.path.to_owned())
        .collect();
    assert_eq!(
        on_disk, embedded,
        "web/ and ledgerwire::web::ASSETS must name the same files"
    );
    for asset in ledgerwire::web::ASSETS {
        let text = std::str::from_utf8(asset.body).expect("UTF-8");
        let disk = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("web")
                .join(asset.path),
        )
        .expect("read");
        assert_eq!(text, disk, "{} is embedded as it is on disk", asset.path);
        // No file reaches out of the origin (no CDN, no remote import) or
        // turns a string into markup or code.
        let outside = text.replace("http://www.w3.org/2000/svg", "");
        for forbidden in [
            "http://",
            "https://",
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "eval(",
            "new Function",
            "document.write",
        ] {
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
        csp.contains("script-src 'self'") && csp.contains("connect-src 'self'"),
        "{csp}"
    );
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let html = index.text().await.expect("body");
    assert!(html.contains(r#"<script type="module" src="/web/js/app.js">"#));

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
