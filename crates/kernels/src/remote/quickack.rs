//! A TCP stream that acknowledges what it receives at once.
//!
//! Jupyter Server writes a kernel's messages to the WebSocket without `TCP_NODELAY`. After the
//! first small frame of a reply, Nagle's algorithm holds the next ones (the result, `idle`,
//! `execute_reply`) until that frame is acknowledged, and Linux delays an acknowledgement by up
//! to 40 ms: a trivial cell on a Jupyter Server took about 48 ms on loopback against 4 ms on a
//! local kernel. `TCP_QUICKACK` does not persist, so it is set again after every read that
//! brought bytes. Elsewhere than on Linux the stream is a plain TCP stream.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A [`TcpStream`] that re-arms `TCP_QUICKACK` after each read (Linux).
#[derive(Debug)]
pub struct QuickAckStream(TcpStream);

impl QuickAckStream {
    /// Wraps `tcp` and arms quick acknowledgements for what arrives first.
    pub fn new(tcp: TcpStream) -> QuickAckStream {
        rearm(&tcp);
        QuickAckStream(tcp)
    }

    /// The stream underneath.
    pub fn get_ref(&self) -> &TcpStream {
        &self.0
    }
}

#[cfg(target_os = "linux")]
fn rearm(tcp: &TcpStream) {
    // Best effort: without it the stream is only slower.
    let _ = socket2::SockRef::from(tcp).set_tcp_quickack(true);
}

#[cfg(not(target_os = "linux"))]
fn rearm(_tcp: &TcpStream) {}

impl AsyncRead for QuickAckStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.0).poll_read(cx, buf);
        if matches!(poll, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            rearm(&self.0);
        }
        poll
    }
}

impl AsyncWrite for QuickAckStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn bytes_pass_both_ways_and_each_read_leaves_quick_acks_armed() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut peer, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4];
            peer.read_exact(&mut request).await.unwrap();
            assert_eq!(&request, b"ping");
            peer.write_all(b"pong").await.unwrap();
            peer
        });
        let mut stream = QuickAckStream::new(TcpStream::connect(address).await.unwrap());
        stream.write_all(b"ping").await.unwrap();
        #[cfg(target_os = "linux")]
        {
            // Delayed acknowledgements, as an interactive connection falls back to.
            let socket = socket2::SockRef::from(stream.get_ref());
            socket.set_tcp_quickack(false).unwrap();
            assert!(!socket.tcp_quickack().unwrap());
        }
        let mut answer = [0u8; 4];
        stream.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"pong");
        #[cfg(target_os = "linux")]
        {
            // The read re-armed quick acknowledgements (before Linux's delayed-ack timer, 40 ms
            // after the bytes arrived, would have left delayed mode on its own).
            assert!(
                socket2::SockRef::from(stream.get_ref())
                    .tcp_quickack()
                    .unwrap()
            );
        }
        drop(server.await.unwrap());
    }
}
