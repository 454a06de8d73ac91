//! The page, embedded in the binary: HTML, CSS, JS and the vendored uPlot (MIT, see
//! `page/vendor/uPlot.LICENSE`). The page loads nothing from anywhere else.

/// An embedded file: its content type and body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Asset {
    /// `Content-Type` header value.
    pub content_type: &'static str,
    /// The file.
    pub body: &'static str,
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// The embedded file served at `path`, if any.
pub fn asset(path: &str) -> Option<Asset> {
    let (content_type, body) = match path {
        "/" | "/index.html" => (HTML, include_str!("../page/index.html")),
        "/app.js" => (JS, include_str!("../page/app.js")),
        "/style.css" => (CSS, include_str!("../page/style.css")),
        "/vendor/uPlot.iife.min.js" => (JS, include_str!("../page/vendor/uPlot.iife.min.js")),
        "/vendor/uPlot.min.css" => (CSS, include_str!("../page/vendor/uPlot.min.css")),
        "/vendor/uPlot.LICENSE" => (
            "text/plain; charset=utf-8",
            include_str!("../page/vendor/uPlot.LICENSE"),
        ),
        _ => return None,
    };
    Some(Asset { content_type, body })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_references_only_embedded_files() {
        let index = asset("/").expect("index").body;
        for r in [
            "/app.js",
            "/style.css",
            "/vendor/uPlot.iife.min.js",
            "/vendor/uPlot.min.css",
        ] {
            assert!(
                index.contains(&format!("\"{r}\"")),
                "index does not load {r}"
            );
            assert!(asset(r).is_some(), "{r} not embedded");
        }
        // No absolute URL in what the page itself loads or fetches.
        for a in ["/", "/app.js", "/style.css"] {
            let body = asset(a)
                .expect("asset")
                .body
                .replace("http://www.w3.org/2000/svg", "");
            assert!(
                !body.contains("http://") && !body.contains("https://"),
                "{a}"
            );
        }
        assert!(asset("/../Cargo.toml").is_none());
    }
}
