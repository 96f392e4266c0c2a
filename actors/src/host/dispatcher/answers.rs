//! The host's answers to a session's questions: approvals (by call index, and by question
//! number once an index is ambiguous), the listing and revoking of remembered decisions, and
//! MCP servers' input requests.

use super::{DispatchError, Dispatcher};
use crate::pipeline::stages::approval::{Answer, HostDecision, Unanswerable};

impl Dispatcher {
    /// Answers the approval request of call `index`, without naming the question: refused
    /// once more than one question of the session has had that index (use
    /// [`Dispatcher::answer_request`]).
    ///
    /// # Errors
    /// [`DispatchError::NotWaiting`] when nothing waits for that call;
    /// [`DispatchError::NeedsRequest`] when the index is ambiguous.
    ///
    /// # Cancel safety
    /// Dropping the future may lose the answer; the request then keeps waiting.
    pub async fn answer_approval(&self, id: &str, index: usize, decision: HostDecision) -> Result<(), DispatchError> {
        self.answer_request(id, index, None, decision).await
    }

    /// Answers the approval request of call `index`, and only if it is request `request` (the
    /// `request` of its `approval_required` event) when given: an answer meant for a question
    /// that ended (cancelled, expired, a round that is over) never reaches a later question
    /// about a call with the same index.
    ///
    /// # Errors
    /// [`DispatchError::NotWaiting`] when that question does not wait;
    /// [`DispatchError::NeedsRequest`] when `request` is `None` and the index is ambiguous.
    ///
    /// # Cancel safety
    /// Dropping the future may lose the answer; the request then keeps waiting.
    pub async fn answer_request(&self, id: &str, index: usize, request: Option<u64>, decision: HostDecision) -> Result<(), DispatchError> {
        let handle = self.session(id)?;
        match handle.stages.approval.send(Answer { index, request, decision }).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e @ Unanswerable::NeedsRequest { .. })) => Err(DispatchError::NeedsRequest {
                session: id.to_string(),
                reason: e.to_string(),
            }),
            Ok(Err(Unanswerable::NotWaiting(_))) => Err(DispatchError::NotWaiting {
                session: id.to_string(),
                index,
            }),
            Err(_) => Err(DispatchError::Gone(id.to_string())),
        }
    }

    /// The call of session `id` waiting for the host's decision, if any.
    ///
    /// # Errors
    /// [`DispatchError::Gone`] (or unknown session) when the session is not there.
    pub async fn pending_approval(&self, id: &str) -> Result<Option<crate::pipeline::stages::approval::Pending>, DispatchError> {
        let handle = self.session(id)?;
        handle
            .stages
            .approval
            .send(crate::pipeline::stages::approval::GetPending)
            .await
            .map_err(|_| DispatchError::Gone(id.to_string()))
    }

    /// Session `id`'s remembered decisions (approve_for_session, reject_for_session, …).
    ///
    /// # Errors
    /// [`DispatchError::Gone`] (or unknown session) when the session is not there.
    pub async fn remembered_approvals(&self, id: &str) -> Result<Vec<toolslot::plan::approval::Remembered>, DispatchError> {
        let handle = self.session(id)?;
        handle
            .stages
            .approval
            .send(crate::pipeline::stages::approval::GetRemembered)
            .await
            .map_err(|_| DispatchError::Gone(id.to_string()))
    }

    /// Forgets session `id`'s remembered decision under `key` (every one with `None`): later
    /// calls it covered are asked again. Returns how many were forgotten.
    ///
    /// # Errors
    /// [`DispatchError::Gone`] (or unknown session) when the session is not there.
    pub async fn revoke_approvals(&self, id: &str, key: Option<String>) -> Result<usize, DispatchError> {
        let handle = self.session(id)?;
        handle
            .stages
            .approval
            .send(crate::pipeline::stages::approval::Revoke { key })
            .await
            .map_err(|_| DispatchError::Gone(id.to_string()))
    }

    /// The workspace of session `id`.
    ///
    /// # Errors
    /// An unknown session.
    pub fn workspace_of(&self, id: &str) -> Result<std::path::PathBuf, DispatchError> {
        Ok(self.session(id)?.shared.workspace.clone())
    }

    /// Answers input request `n` of the session (an `input_required` event): accepted with
    /// content (checked against the requested schema), declined or cancelled.
    ///
    /// # Errors
    /// [`DispatchError::UnknownSession`], [`DispatchError::InputNotWaiting`], or
    /// [`DispatchError::BadInput`] when accepted content does not match the schema (the
    /// request keeps waiting).
    pub fn answer_input(&self, id: &str, n: u64, answer: toolslot::tool::InputAnswer) -> Result<(), DispatchError> {
        self.session(id)?.shared.inputs.answer(n, answer).map_err(|e| match e {
            crate::pipeline::inputs::InputError::NotWaiting(n) => DispatchError::InputNotWaiting {
                session: id.to_string(),
                n,
            },
            crate::pipeline::inputs::InputError::Invalid(reason) => DispatchError::BadInput(reason),
        })
    }
}
