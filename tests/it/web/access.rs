//! Safe Markdown and plain access in the browser: the renderer's GFM
//! subset and what it refuses to make (markup, scripts, images, unsafe
//! links); a conversation worked from the keyboard alone in a narrow
//! window.

use serde_json::{Value, json};

use super::browser::with_browser;
use super::minimal_server;
use fantoccini::key::Key;

const MARKDOWN: &str = r#"# Title

Some **bold**, *em*, `code`, ~~gone~~ and &lt;b&gt;not bold&lt;/b&gt;.
<img src=x onerror="window.__xss = 1"> <script>window.__xss = 2</script>
[bad](javascript:window.__xss=3) [data](data:text/html,hi) [ok](https://example.org/a?b=1) and https://example.org/bare
![a picture](https://example.org/x.png)

| place | value |
|:------|------:|
| Kenya | 61.7 |

- one
- two
  - nested
1. first
2. second

- [x] done
- [ ] todo

> quoted *text*

```html
<b onclick="window.__xss = 4">x</b>
```
"#;

#[tokio::test]
async fn markdown_renders_a_gfm_subset_and_never_markup() {
    let (_dir, addr) = minimal_server().await;
    with_browser("markdown", addr, &[], |page| async move {
        page.goto("/").await;
        let script = r#"
            const [text, done] = arguments;
            import('/web/js/markdown.js').then((m) => {
              const box = document.createElement('div');
              box.append(m.renderMarkdown(text));
              document.body.append(box);
              const count = (css) => box.querySelectorAll(css).length;
              done({
                h3: box.querySelector('h3')?.textContent,
                strong: count('strong'), em: count('em'), code: count('p code'), del: count('del'),
                markup: count('img, script, b, iframe, object, embed, [onerror], [onclick]'),
                entities: box.textContent.includes('<b>not bold</b>'),
                raw: box.textContent.includes('<img src=x'),
                links: [...box.querySelectorAll('a')].map((a) => [a.getAttribute('href'), a.rel]),
                alt: box.querySelector('.img-alt')?.textContent,
                th: count('th'), td: count('td'), right: box.querySelectorAll('td')[1]?.style.textAlign,
                ul: count('ul'), nested: count('li ul li'), ol: count('ol li'),
                checked: [...box.querySelectorAll('li.task input')].map((i) => i.checked),
                quote: box.querySelector('blockquote em')?.textContent,
                fence: box.querySelector('pre code.language-html')?.textContent,
                xss: window.__xss ?? null,
              });
            }, (e) => done({ error: String(e) }));
        "#;
        let out: Value = page
            .client
            .execute_async(script, vec![json!(MARKDOWN)])
            .await
            .expect("render");
        assert_eq!(out["error"], Value::Null, "{out}");
        assert_eq!(out["h3"], "Title");
        for (key, n) in [("strong", 1), ("em", 2), ("code", 1), ("del", 1), ("markup", 0), ("th", 2), ("td", 2), ("ol", 2)] {
            assert_eq!(out[key], n, "{key}: {out}");
        }
        assert_eq!(out["entities"], true);
        assert_eq!(out["raw"], true, "raw HTML shows as its characters");
        assert_eq!(
            out["links"],
            json!([["https://example.org/a?b=1", "noopener noreferrer nofollow"], ["https://example.org/bare", "noopener noreferrer nofollow"]]),
            "only http(s) and mailto links are made"
        );
        assert_eq!(out["alt"], "a picture");
        assert_eq!(out["right"], "right");
        assert_eq!(out["nested"], 1);
        assert_eq!(out["checked"], json!([true, false]));
        assert_eq!(out["quote"], "text");
        assert_eq!(out["fence"], "<b onclick=\"window.__xss = 4\">x</b>");
        assert_eq!(out["xss"], Value::Null);
    })
    .await;
}

#[tokio::test]
async fn a_conversation_is_worked_from_the_keyboard_in_a_narrow_window() {
    let (_dir, addr) = minimal_server().await;
    with_browser("keyboard", addr, &[], |page| async move {
        page.client.set_window_size(420, 900).await.expect("narrow window");
        page.goto("/").await;
        page.find("#token-input").await;
        let press = |key: String| {
            let client = page.client.clone();
            async move {
                client.active_element().await.expect("focus").send_keys(&key).await.expect("key");
            }
        };
        // A first visit puts the focus in the token field; type it, Enter.
        assert_eq!(page.eval("document.activeElement.id").await, "token-input");
        press(format!("kbd-user{}", Key::Enter)).await;
        page.wait_js("document.activeElement.id === 'composer-text'").await;
        press(format!("plan it{}", Key::Enter)).await;
        page.find(".plan-card button.approve").await;
        // Tab on to Approve and press Enter.
        let mut on_approve = false;
        for _ in 0..60 {
            press(Key::Tab.to_string()).await;
            if page.eval("document.activeElement.classList.contains('approve')").await == true {
                on_approve = true;
                break;
            }
        }
        assert!(on_approve, "Approve is reachable with Tab");
        press(Key::Enter.to_string()).await;
        page.find(".canvas .card svg.line-chart").await;
        page.wait_js("document.querySelector('.turn').dataset.state === 'done'").await;
        // Shift+Tab back from the composer reaches the card's Pin button.
        page.find("#composer-text").await.send_keys("").await.expect("focus the composer");
        let mut on_pin = false;
        for _ in 0..40 {
            press(format!("{}{}", Key::Shift, Key::Tab)).await;
            if page.eval("document.activeElement.classList.contains('pin')").await == true {
                on_pin = true;
                break;
            }
        }
        if !on_pin {
            // The canvas comes after the composer in a narrow window: go forward.
            for _ in 0..40 {
                press(Key::Tab.to_string()).await;
                if page.eval("document.activeElement.classList.contains('pin')").await == true {
                    on_pin = true;
                    break;
                }
            }
        }
        assert!(on_pin, "a card's buttons are reachable with Tab");
        press(Key::Enter.to_string()).await;
        page.find(".canvas .card.pinned").await;
        // One column: the canvas below the chat, nothing wider than the window.
        let layout = page
            .eval("({chat: document.getElementById('chat').getBoundingClientRect().bottom, canvas: document.getElementById('canvas').getBoundingClientRect().top, wide: document.documentElement.scrollWidth > window.innerWidth})")
            .await;
        assert!(layout["canvas"].as_f64() >= layout["chat"].as_f64(), "{layout}");
        assert_eq!(layout["wide"], false, "{layout}");
    })
    .await;
}
