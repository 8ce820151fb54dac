use std::collections::HashMap;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::*;

fn config(base_url: &str) -> AnthropicConfig {
    AnthropicConfig {
        api_key: "test-key".to_owned(),
        base_url: base_url.to_owned(),
        model: DEFAULT_MODEL.to_owned(),
    }
}

fn summarizer(base_url: &str) -> AnthropicSummarizer {
    AnthropicSummarizer::new(config(base_url), &TlsTrust::default()).unwrap()
}

fn cell(id: &str, outputs: &str) -> SummaryRequest {
    SummaryRequest {
        id: id.to_owned(),
        kind: "code".to_owned(),
        source: format!("# {id}\nx = 1"),
        outputs: outputs.to_owned(),
    }
}

#[test]
fn the_environment_needs_a_key_and_fills_in_the_rest() {
    let from = |pairs: &[(&str, &str)]| {
        let variables: HashMap<String, String> = pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        AnthropicConfig::from_variables(|name| variables.get(name).cloned())
    };
    assert_eq!(from(&[]), None);
    assert_eq!(from(&[("ANTHROPIC_API_KEY", "  ")]), None, "blank is unset");
    assert_eq!(
        from(&[
            ("ANTHROPIC_API_KEY", " key\n"),
            ("JUPYTER_MCP_SUMMARY_MODEL", "")
        ]),
        Some(AnthropicConfig {
            api_key: "key".to_owned(),
            base_url: DEFAULT_BASE_URL.to_owned(),
            model: DEFAULT_MODEL.to_owned(),
        })
    );
    let chosen = from(&[
        ("ANTHROPIC_API_KEY", "secret-key"),
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/"),
        ("JUPYTER_MCP_SUMMARY_MODEL", "claude-sonnet-4-5"),
    ])
    .unwrap();
    assert_eq!(chosen.base_url, "http://127.0.0.1:9/");
    assert_eq!(chosen.model, "claude-sonnet-4-5");
    assert!(!format!("{chosen:?}").contains("secret"), "{chosen:?}");
}

#[test]
fn the_endpoint_is_under_the_base_url_and_must_be_http() {
    let endpoint = |base: &str| messages_endpoint(base).map(|uri| uri.to_string());
    assert_eq!(
        endpoint("https://api.anthropic.com").unwrap(),
        "https://api.anthropic.com/v1/messages"
    );
    assert_eq!(
        endpoint("https://proxy.example/anthropic/").unwrap(),
        "https://proxy.example/anthropic/v1/messages"
    );
    for bad in [
        "ftp://example.org",
        "api.anthropic.com",
        "https://",
        "not a url",
    ] {
        assert!(
            matches!(messages_endpoint(bad), Err(Error::BaseUrl)),
            "{bad}"
        );
    }
}

#[test]
fn a_request_carries_the_key_version_model_and_cells() {
    let summarizer = summarizer("https://api.anthropic.com/");
    assert!(!format!("{summarizer:?}").contains("test-key"));
    assert!(!format!("{:?}", config("https://api.anthropic.com/")).contains("test-key"));
    let request = summarizer.request(&[cell("a", ""), cell("b", "42")]);
    assert_eq!(request.method(), http::Method::POST);
    assert_eq!(
        request.uri().to_string(),
        "https://api.anthropic.com/v1/messages"
    );
    let header = |name: &str| request.headers()[name].to_str().unwrap().to_owned();
    assert_eq!(header("x-api-key"), "test-key");
    assert!(request.headers()["x-api-key"].is_sensitive());
    assert_eq!(header("anthropic-version"), "2023-06-01");
    assert_eq!(header("content-type"), "application/json");
    let body: Value = serde_json::from_slice(request.body()).unwrap();
    assert_eq!(body["model"], DEFAULT_MODEL);
    assert_eq!(body["max_tokens"], MAX_TOKENS);
    assert!(body["system"].as_str().unwrap().contains("JSON array"));
    let listing: Value =
        serde_json::from_str(body["messages"][0]["content"].as_str().unwrap()).unwrap();
    assert_eq!(
        listing,
        json!([
            {"id": "a", "kind": "code", "source": "# a\nx = 1", "outputs": ""},
            {"id": "b", "kind": "code", "source": "# b\nx = 1", "outputs": "42"},
        ])
    );
}

#[test]
fn answers_with_fences_and_prose_parse() {
    let text = "Here you go:\n```json\n[{\"id\": \"a\", \"tldr\": \"Loads data\", \"description\": \"d\", \"outputSummary\": \"\"}]\n```";
    let parsed = parse_summaries(text).unwrap();
    assert_eq!(parsed.len(), 1);
    assert_eq!(parsed[0].tldr, "Loads data");
    assert!(parse_summaries("no json here").is_none());
    // An item without an id cannot be matched to a cell.
    let parsed = parse_summaries(r#"[{"tldr": "x"}, {"id": " b ", "tldr": " y "}]"#).unwrap();
    assert_eq!(parsed.len(), 1);
    assert_eq!((parsed[0].id.as_str(), parsed[0].tldr.as_str()), ("b", "y"));
}

#[test]
fn an_answer_is_read_from_its_text_blocks_and_failures_are_short_sentences() {
    let reply = json!({"content": [
        {"type": "text", "text": "[{\"id\": \"a\", \"tldr\": \"T\","},
        {"type": "tool_use", "text": "ignored"},
        {"type": "text", "text": " \"description\": \"D\", \"outputSummary\": \"O\"}]"},
    ]});
    let summaries = read_answer(200, reply.to_string().as_bytes()).unwrap();
    assert_eq!(
        summaries,
        [SummaryResponse {
            id: "a".to_owned(),
            tldr: "T".to_owned(),
            description: "D".to_owned(),
            output_summary: "O".to_owned(),
        }]
    );
    let overloaded = json!({"type": "error", "error": {"type": "overloaded_error",
        "message": "Overloaded, with text we do not quote"}});
    assert_eq!(
        read_answer(529, overloaded.to_string().as_bytes()).unwrap_err(),
        "the API answered HTTP 529 (overloaded_error)"
    );
    assert_eq!(
        read_answer(502, b"<html>Bad gateway</html>").unwrap_err(),
        "the API answered HTTP 502"
    );
    assert_eq!(
        read_answer(200, b"<html>").unwrap_err(),
        "the API's answer is not JSON"
    );
    let prose = json!({"content": [{"type": "text", "text": "I cannot do that."}]});
    assert_eq!(
        read_answer(200, prose.to_string().as_bytes()).unwrap_err(),
        "the model's answer is not the JSON asked for"
    );
}

/// A loopback stand-in of the Messages API that answers one request with `answer` and hands
/// back what it received.
async fn stand_in(answer: Value) -> (String, tokio::task::JoinHandle<String>) {
    let (base, served) = stand_in_with(answer, None, 1).await;
    let first = tokio::spawn(async move { served.await.unwrap().remove(0) });
    (base, first)
}

/// The stand-in over `tls` when given (then its URL is `https://`), for `connections`
/// connections: what each received, or `"refused"` when its TLS handshake failed.
async fn stand_in_with(
    answer: Value,
    tls: Option<tokio_rustls::TlsAcceptor>,
    connections: usize,
) -> (String, tokio::task::JoinHandle<Vec<String>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let base = format!("{scheme}://{}", listener.local_addr().unwrap());
    let served = tokio::spawn(async move {
        let mut received = Vec::new();
        for _ in 0..connections {
            let (stream, _) = listener.accept().await.unwrap();
            received.push(match &tls {
                Some(acceptor) => match acceptor.accept(stream).await {
                    Ok(stream) => answer_one(stream, &answer).await,
                    Err(_) => "refused".to_owned(),
                },
                None => answer_one(stream, &answer).await,
            });
        }
        received
    });
    (base, served)
}

/// Reads one request from `stream`, answers it with `answer`, and returns the request.
async fn answer_one(
    mut stream: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    answer: &Value,
) -> String {
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let read = stream.read(&mut chunk).await.unwrap();
        received.extend_from_slice(&chunk[..read]);
        let text = String::from_utf8_lossy(&received).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length: usize = head
                .lines()
                .find_map(|line| {
                    line.to_lowercase()
                        .strip_prefix("content-length:")
                        .map(|value| value.trim().to_owned())
                })
                .and_then(|value| value.parse().ok())
                .unwrap_or(0);
            if body.len() >= length {
                break;
            }
        }
        assert!(read > 0, "the request ended early");
    }
    let answer = answer.to_string();
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
        answer.len()
    );
    stream.write_all(response.as_bytes()).await.unwrap();
    let _ = stream.shutdown().await;
    String::from_utf8_lossy(&received).into_owned()
}

/// A certificate authority made for this test and a TLS acceptor for `127.0.0.1` with a
/// certificate it signed; the CA's PEM file lives in the returned folder.
fn private_ca() -> (
    tempfile::TempDir,
    std::path::PathBuf,
    tokio_rustls::TlsAcceptor,
) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    use tokio_rustls::rustls;
    let mut authority = CertificateParams::new(Vec::<String>::new()).unwrap();
    authority
        .distinguished_name
        .push(DnType::CommonName, "summarizer test CA");
    authority.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    authority.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let authority_key = KeyPair::generate().unwrap();
    let authority_certificate = authority.self_signed(&authority_key).unwrap();
    let issuer = rcgen::Issuer::new(authority, authority_key);
    let mut server = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_key = KeyPair::generate().unwrap();
    let server_certificate = server.signed_by(&server_key, &issuer).unwrap();

    let folder = tempfile::tempdir().unwrap();
    let ca_file = folder.path().join("ca.pem");
    std::fs::write(&ca_file, authority_certificate.pem()).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![server_certificate.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(server_key.serialize_der().into()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    (folder, ca_file, acceptor)
}

/// The answer of the Messages API with one summary of cell `a`.
fn one_summary() -> Value {
    let text = json!([{"id": "a", "tldr": "Sets x", "description": "D.", "outputSummary": ""}]);
    json!({"type": "message", "content": [{"type": "text", "text": text.to_string()}]})
}

#[tokio::test]
async fn a_private_ca_given_as_kernel_server_trust_is_trusted_for_the_api() {
    let (_folder, ca_file, acceptor) = private_ca();
    let (base, served) = stand_in_with(one_summary(), Some(acceptor), 2).await;
    // Without the CA (the platform's store only), the certificate is refused.
    let untrusting = summarizer(&base);
    let failure = untrusting.summarize(&[cell("a", "")]).await.unwrap_err();
    assert_eq!(
        failure,
        "the API could not be reached (see the server's log)"
    );
    // With it, as `--kernel-server-ca` gives it to kernel servers, the request goes through.
    let trust = TlsTrust {
        extra_roots: vec![ca_file],
    };
    let trusting = AnthropicSummarizer::new(config(&base), &trust).unwrap();
    let summaries = trusting.summarize(&[cell("a", "")]).await.unwrap();
    assert_eq!(summaries[0].tldr, "Sets x");
    let received = served.await.unwrap();
    assert_eq!(received[0], "refused");
    assert!(
        received[1].starts_with("POST /v1/messages "),
        "{received:?}"
    );
}

/// Set (to the stand-in's URL) only in the child process of
/// `ssl_cert_file_is_trusted_for_the_api`, which also sets `SSL_CERT_FILE`.
const CHILD_BASE_URL: &str = "SUMMARIZER_TEST_CHILD_BASE_URL";

#[tokio::test]
async fn ssl_cert_file_is_trusted_for_the_api() {
    let (_folder, ca_file, acceptor) = private_ca();
    let (base, served) = stand_in_with(one_summary(), Some(acceptor), 1).await;
    // The platform's store is read once per process: a child process of this test binary runs
    // `ssl_cert_file_child` with `SSL_CERT_FILE` naming the private CA and no other trust.
    let child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["tests::ssl_cert_file_child", "--exact", "--nocapture"])
        .env("SSL_CERT_FILE", &ca_file)
        .env_remove("SSL_CERT_DIR")
        .env(CHILD_BASE_URL, &base)
        .output()
        .await
        .unwrap();
    let output = String::from_utf8_lossy(&child.stdout);
    assert!(child.status.success(), "{output}");
    assert!(output.contains("1 passed"), "{output}");
    let received = served.await.unwrap();
    assert!(
        received[0].starts_with("POST /v1/messages "),
        "{received:?}"
    );
}

/// The child side of `ssl_cert_file_is_trusted_for_the_api`: with `SSL_CERT_FILE` set, the
/// summarizer with no extra trust reaches the stand-in. Outside that child it has nothing to do.
#[tokio::test]
async fn ssl_cert_file_child() {
    let Ok(base) = std::env::var(CHILD_BASE_URL) else {
        return;
    };
    let summarizer = summarizer(&base);
    let summaries = summarizer.summarize(&[cell("a", "")]).await.unwrap();
    assert_eq!(summaries[0].tldr, "Sets x");
}

#[tokio::test]
async fn a_batch_goes_to_the_api_through_the_kernels_http_client() {
    let text = json!([{"id": "a", "tldr": "Sets x", "description": "D.", "outputSummary": ""}]);
    let (base, served) = stand_in(json!({
        "type": "message",
        "content": [{"type": "text", "text": text.to_string()}],
    }))
    .await;
    let summarizer = summarizer(&base);
    let summaries = summarizer.summarize(&[cell("a", "")]).await.unwrap();
    assert_eq!(summaries.len(), 1);
    assert_eq!(summaries[0].tldr, "Sets x");
    let received = served.await.unwrap().to_lowercase();
    assert!(
        received.starts_with("post /v1/messages http/1.1\r\n"),
        "{received}"
    );
    assert!(
        received.contains("\r\nx-api-key: test-key\r\n"),
        "{received}"
    );
    assert!(received.contains("\r\nhost: 127.0.0.1:"), "{received}");
}

#[tokio::test]
async fn an_unreachable_api_is_a_short_sentence() {
    // A port that was free a moment ago: nothing listens there.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let summarizer = summarizer(&format!("http://127.0.0.1:{port}"));
    let failure = summarizer.summarize(&[cell("a", "")]).await.unwrap_err();
    assert_eq!(
        failure,
        "the API could not be reached (see the server's log)"
    );
}

#[test]
fn an_unreadable_ca_file_is_refused_at_the_start() {
    let trust = TlsTrust {
        extra_roots: vec!["/nonexistent/jupyter-mcp-test-ca.pem".into()],
    };
    let error = AnthropicSummarizer::new(config(DEFAULT_BASE_URL), &trust).unwrap_err();
    assert!(matches!(error, Error::Tls(_)), "{error}");
}
