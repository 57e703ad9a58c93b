//! Request bodies with the listener's deadline: one fails with [`BodyTimedOut`] once the
//! deadline passes, the other keeps its connection counted as busy while it is read.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Frame, Incoming, SizeHint};

use axum::body::Body;

use super::{BodyTimedOut, Busy};

/// A request body that fails with [`BodyTimedOut`] once its deadline passes.
pub(super) struct DeadlineBody {
    pub(super) inner: Incoming,
    pub(super) timeout: Duration,
    pub(super) deadline: Pin<Box<tokio::time::Sleep>>,
}

impl hyper::body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(BodyTimedOut(self.timeout).into()))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body that keeps its connection busy until it has been sent or dropped.
pub(super) struct HeldBody {
    pub(super) inner: Body,
    pub(super) _busy: Busy,
}

impl hyper::body::Body for HeldBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The [`BodyTimedOut`] that `error` (from reading a request body) is, however wrapped.
pub fn body_timeout(error: &(dyn std::error::Error + 'static)) -> Option<BodyTimedOut> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(BodyTimedOut(timeout)) = error.downcast_ref::<BodyTimedOut>() {
            return Some(BodyTimedOut(*timeout));
        }
        current = error.source();
    }
    None
}
