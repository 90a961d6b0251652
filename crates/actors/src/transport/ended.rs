//! A client transport wrapper that reports the end of rmcp's service loop: rmcp closes its transport once the loop
//! has ended, whatever ended it (the server's end of stream, a broken pipe, a cancel), and that close fires a token
//! the server actor's watcher awaits. So a dead connection is noticed when rmcp notices it, with no polling.

use std::borrow::Cow;
use std::future::Future;

use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use tokio_util::sync::CancellationToken;

/// See the module docs. [`Ended::token`] is cancelled when rmcp closes the transport.
pub(crate) struct Ended<T> {
    inner: T,
    token: CancellationToken,
}

impl<T> Ended<T> {
    pub(crate) fn new(inner: T) -> Self {
        Ended {
            inner,
            token: CancellationToken::new(),
        }
    }

    pub(crate) fn token(&self) -> CancellationToken {
        self.token.clone()
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Ended<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(&mut self, item: ClientJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.inner.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.token.cancel();
        self.inner.close()
    }
}
