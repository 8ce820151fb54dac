//! One-to-one conversions between the `kernels` crate's types and host-core's seam.

use execution_tracker::{IopubEvent, KernelLifecycle, ReplyStatus, Transient};
use futures::StreamExt;
use host_core::kernel::{
    KernelError, KernelEvent, KernelEvents, KernelPlace, KernelReply, KernelStatus, RaisedError,
};
use kernels::{ExecuteEvent, ExecuteHandle};
use serde_json::Value;

/// A kernel status as host-core sees it.
pub fn status(status: &kernels::KernelStatus) -> KernelStatus {
    match status {
        kernels::KernelStatus::Starting => KernelStatus::Starting,
        kernels::KernelStatus::Idle => KernelStatus::Idle,
        kernels::KernelStatus::Busy => KernelStatus::Busy,
        kernels::KernelStatus::Restarting => KernelStatus::Restarting,
        kernels::KernelStatus::Dead { .. } => KernelStatus::Dead,
        kernels::KernelStatus::Unreachable => KernelStatus::Unreachable,
    }
}

/// Where kernels run, as the tools show it (`runsOn`).
pub fn place(place: &kernels::KernelPlace) -> KernelPlace {
    use host_core::kernel::KernelPlaceKind;
    let nothing = KernelPlace {
        kind: KernelPlaceKind::Local,
        url: None,
        hub: None,
        user: None,
        server: None,
    };
    match place {
        kernels::KernelPlace::Local => nothing,
        kernels::KernelPlace::Server { url } => KernelPlace {
            kind: KernelPlaceKind::Server,
            url: Some(url.clone()),
            ..nothing
        },
        kernels::KernelPlace::JupyterHub {
            hub,
            user,
            server,
            url,
        } => KernelPlace {
            kind: KernelPlaceKind::Jupyterhub,
            url: url.clone(),
            hub: Some(hub.clone()),
            user: user.clone(),
            server: Some(if server.is_empty() {
                "default".to_owned()
            } else {
                server.clone()
            }),
        },
    }
}

/// A kernel failure as host-core sees it (the `kernels` crate's messages are already free of
/// raw kernel and OS text).
pub fn kernel_error(failure: &kernels::Error) -> KernelError {
    let message = failure.to_string();
    match failure {
        kernels::Error::NoKernel { .. } | kernels::Error::IpykernelMissing { .. } => {
            KernelError::NoKernel { message }
        }
        kernels::Error::UnknownSpec { .. } => KernelError::UnknownKernel { message },
        kernels::Error::MessageTooLarge { .. } => KernelError::TooLarge { message },
        kernels::Error::KernelRestarted => KernelError::Restarted,
        kernels::Error::KernelDied { .. }
        | kernels::Error::NotRunning
        | kernels::Error::ConnectionLost => KernelError::Gone,
        _ => KernelError::Unavailable { message },
    }
}

fn raised(error: kernels::ErrorOutput) -> RaisedError {
    RaisedError {
        ename: error.ename,
        evalue: error.evalue,
        traceback: error.traceback,
    }
}

/// One event of an execute request as host-core sees it; `None` for what it does not use
/// (the echo of the code).
pub(crate) fn event(event: ExecuteEvent) -> Option<KernelEvent> {
    let output = |event| Some(KernelEvent::output(event));
    match event {
        ExecuteEvent::Busy => Some(KernelEvent::Busy),
        ExecuteEvent::ActionRequired { code, message } => {
            Some(KernelEvent::ActionRequired { code, message })
        }
        ExecuteEvent::Input { .. } => None,
        ExecuteEvent::Stream { name, text } => output(IopubEvent::Stream {
            name: name.as_str().to_owned(),
            text,
        }),
        ExecuteEvent::ExecuteResult {
            execution_count,
            data,
            metadata,
        } => output(IopubEvent::ExecuteResult {
            data: Value::Object(data),
            metadata: Value::Object(metadata),
            execution_count,
            transient: None,
        }),
        ExecuteEvent::DisplayData {
            data,
            metadata,
            display_id,
            buffers,
        } => Some(KernelEvent::Output {
            event: IopubEvent::DisplayData {
                data: Value::Object(data),
                metadata: Value::Object(metadata),
                transient: Some(Transient { display_id }),
            },
            buffers,
        }),
        ExecuteEvent::UpdateDisplayData {
            data,
            metadata,
            display_id,
        } => output(IopubEvent::UpdateDisplayData {
            data: Value::Object(data),
            metadata: Value::Object(metadata),
            transient: Some(Transient { display_id }),
        }),
        ExecuteEvent::Error(error) => output(IopubEvent::Error {
            ename: error.ename,
            evalue: error.evalue,
            traceback: error.traceback,
        }),
        ExecuteEvent::ClearOutput { wait } => output(IopubEvent::ClearOutput { wait }),
        ExecuteEvent::Idle => Some(KernelEvent::Idle),
        ExecuteEvent::Replied { execution_count } => Some(KernelEvent::Replied { execution_count }),
        ExecuteEvent::Reply(reply) => Some(KernelEvent::Reply(KernelReply {
            status: match reply.status {
                kernels::ReplyStatus::Ok => ReplyStatus::Ok,
                kernels::ReplyStatus::Error => ReplyStatus::Error,
                kernels::ReplyStatus::Aborted => ReplyStatus::Aborted,
            },
            execution_count: reply.execution_count,
            error: reply.error.map(raised),
            user_expressions: reply.user_expressions,
        })),
        ExecuteEvent::KernelRestarted => Some(KernelEvent::Ended(KernelLifecycle::Restarted)),
        ExecuteEvent::KernelDied { .. } => Some(KernelEvent::Ended(KernelLifecycle::Died)),
        ExecuteEvent::KernelShutdown => Some(KernelEvent::Ended(KernelLifecycle::Terminated)),
        ExecuteEvent::ConnectionLost => Some(KernelEvent::Ended(KernelLifecycle::Disappeared)),
        ExecuteEvent::ServerStopped => Some(KernelEvent::Ended(KernelLifecycle::ServerStopped)),
    }
}

/// The events of an execute request, converted, ending after its terminal event.
pub fn events(handle: ExecuteHandle) -> KernelEvents {
    futures::stream::unfold(handle, |mut handle| async move {
        loop {
            let next = handle.next().await?;
            if let Some(converted) = event(next) {
                return Some((converted, handle));
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_events_stay_terminal_and_the_echo_is_dropped() {
        let reply = kernels::ExecuteReply {
            status: kernels::ReplyStatus::Error,
            execution_count: Some(3),
            user_expressions: Default::default(),
            payload: Vec::new(),
            error: Some(kernels::ErrorOutput {
                ename: "ValueError".into(),
                ..Default::default()
            }),
        };
        for (event, terminal) in [
            (ExecuteEvent::Busy, false),
            (ExecuteEvent::Reply(reply), true),
            (ExecuteEvent::KernelRestarted, true),
            (ExecuteEvent::KernelShutdown, true),
            (ExecuteEvent::ConnectionLost, true),
            (ExecuteEvent::ServerStopped, true),
        ] {
            assert_eq!(super::event(event).unwrap().is_terminal(), terminal);
        }
        assert_eq!(
            event(ExecuteEvent::Input {
                code: "1".into(),
                execution_count: None
            }),
            None
        );
    }

    #[test]
    fn places_name_the_server_and_the_hub_user_without_secrets() {
        assert_eq!(
            place(&kernels::KernelPlace::Local).kind,
            host_core::kernel::KernelPlaceKind::Local
        );
        let server = place(&kernels::KernelPlace::Server {
            url: "https://jupyter.example.org/".into(),
        });
        assert_eq!(
            (server.kind, server.url.as_deref()),
            (
                host_core::kernel::KernelPlaceKind::Server,
                Some("https://jupyter.example.org/")
            )
        );
        let hub = place(&kernels::KernelPlace::JupyterHub {
            hub: "https://hub.example.org/".into(),
            user: Some("alice".into()),
            server: String::new(),
            url: None,
        });
        assert_eq!(hub.kind, host_core::kernel::KernelPlaceKind::Jupyterhub);
        assert_eq!(hub.server.as_deref(), Some("default"));
        assert_eq!(hub.user.as_deref(), Some("alice"));
        assert_eq!(
            serde_json::to_value(&hub).unwrap(),
            serde_json::json!({"kind": "jupyterhub", "hub": "https://hub.example.org/",
                               "user": "alice", "server": "default"})
        );
    }

    #[test]
    fn display_buffers_ride_with_their_output() {
        let converted = event(ExecuteEvent::DisplayData {
            data: Default::default(),
            metadata: Default::default(),
            display_id: Some("d".into()),
            buffers: vec![vec![1, 2]],
        });
        let Some(KernelEvent::Output { event, buffers }) = converted else {
            panic!("an output");
        };
        assert_eq!(buffers, vec![vec![1, 2]]);
        assert!(matches!(
            event,
            IopubEvent::DisplayData {
                transient: Some(Transient {
                    display_id: Some(_)
                }),
                ..
            }
        ));
    }
}
