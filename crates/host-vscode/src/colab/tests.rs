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
