use super::*;

#[test]
fn a_colab_folder_names_its_root_and_nothing_else_does() {
    assert_eq!(
        colab_root("colab://m0123abcd-srv/content").map(|root| root.uri()),
        Some("colab://m0123abcd-srv/".to_owned())
    );
    assert_eq!(
        colab_root("colab://srv").map(|root| root.uri()),
        Some("colab://srv/".to_owned())
    );
    assert!(colab_root("file:///content").is_none());
    assert!(colab_root("colab:///content").is_none());
}

#[test]
fn requests_are_camel_case_with_an_op() {
    let request = serde_json::to_value(ColabOp::Fs {
        action: FsAction::Read,
        uri: "colab://s/content/x".to_owned(),
        data_base64: None,
    })
    .unwrap();
    assert_eq!(
        request,
        json!({"op": "fs", "action": "read", "uri": "colab://s/content/x"})
    );
    let request = serde_json::to_value(ColabOp::CloseTerminal {
        handle: "t3".to_owned(),
        name: "bash".to_owned(),
        process_id: Some(7),
    })
    .unwrap();
    assert_eq!(
        request,
        json!({"op": "closeTerminal", "handle": "t3", "name": "bash", "processId": 7})
    );
}

#[tokio::test(start_paused = true)]
async fn a_poll_answers_as_soon_as_its_look_does() {
    let started = Instant::now();
    let mut looks = 0;
    let answer = poll(Duration::from_secs(10), || {
        looks += 1;
        let now = looks;
        async move { (now == 3).then_some(now) }
    })
    .await;
    assert_eq!(answer, Some(3));
    // Two waits of one poll interval each, on tokio's (paused) clock.
    assert_eq!(started.elapsed(), POLL * 2);
}

#[tokio::test(start_paused = true)]
async fn a_poll_gives_up_at_its_deadline_after_one_last_look() {
    let started = Instant::now();
    let mut looks = 0;
    let answer: Option<()> = poll(Duration::from_secs(1), || {
        looks += 1;
        async { None }
    })
    .await;
    assert_eq!(answer, None);
    assert_eq!(started.elapsed(), Duration::from_secs(1));
    // At 0, 250, 500, 750 and 1000 ms.
    assert_eq!(looks, 5);
}
