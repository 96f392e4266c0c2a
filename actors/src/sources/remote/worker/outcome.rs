//! A claimed job's tool run on this worker, and its outcome recorded: the result (inline, or
//! in the object store when large, with its digest), signed and written over the worker's own
//! claim with compare-and-set.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use toolslot::remote::seal;
use toolslot::remote::wire::{CallRecord, Job, WireOutcome};
use toolslot::tool::{ErrorCategory, ToolContext, ToolError, ToolOutput};

use super::super::records::{self, CasError};
use super::{SESSION_BOUND, Worker};

impl Worker {
    /// Runs the tool as the pipeline would: validated input, the call's timeout, a panic
    /// contained.
    pub(super) async fn execute(&self, job: &Job) -> Result<ToolOutput, ToolError> {
        let registry = self.registry.current();
        let hosted = !SESSION_BOUND.contains(&job.tool.as_str());
        let Some(tool) = registry.get(&job.tool).filter(|_| hosted) else {
            return Err(ToolError::refused(
                ErrorCategory::UnknownTool,
                format!("worker `{}` does not host `{}`; nothing was run.", self.id, job.tool),
            ));
        };
        tool.validate_input(&job.input)?;
        let hidden = match job.hidden.as_slice() {
            [] => None,
            globs => match toolslot::policy::Policy::hiding_only(&self.config, &job.tool, globs, &job.workspace) {
                Ok(policy) => Some(Arc::new(policy) as Arc<dyn toolslot::tool::HiddenPaths>),
                Err(e) => {
                    return Err(ToolError::refused(
                        ErrorCategory::Unavailable,
                        format!(
                            "worker `{}` cannot hide what the session's policy hides ({e}); nothing was run.",
                            self.id
                        ),
                    ));
                }
            },
        };
        let ctx = ToolContext {
            session_id: job.session.clone(),
            workspace: job.workspace.clone(),
            call_id: job.call_id.clone(),
            index: job.index,
            config: Arc::clone(&self.config),
            services: Arc::new(super::super::worker_session::CallServices {
                session: self
                    .sessions
                    .get(&job.session, Duration::from_secs(self.config.shell.background_stale_secs)),
                client: self.broker.client.clone(),
                subject: super::super::broker::progress_subject(&job.key),
                sealer: self.broker.sealer.clone(),
                key: job.key.clone(),
                hidden,
            }),
            // The dispatcher's approval gate decided it; this worker's sandbox enforces it.
            grant: job.grant,
        };
        let spec = Arc::clone(&tool.spec);
        let input = job.input.clone();
        let run = AssertUnwindSafe(async move { spec.run(input, &ctx).await }).catch_unwind();
        let name = &job.tool;
        // The dispatcher stops the call at its timeout and tells this worker; the worker's own
        // limit, an ack wait later, is the backstop for a cancellation that never arrives.
        let limit = job.timeout_ms.saturating_add(self.config.remote.ack_wait_ms);
        let done = if job.timeout_ms == 0 {
            Ok(run.await)
        } else {
            tokio::time::timeout(Duration::from_millis(limit), run).await
        };
        match done {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(ToolError::tool(format!(
                "`{name}` failed internally on worker `{}` (it panicked); its outcome is unknown. Do not assume it took effect.",
                self.id
            ))),
            Err(_) => Err(ToolError {
                category: ErrorCategory::Timeout,
                message: format!("`{name}` did not finish within {limit} ms and was stopped; its outcome is unknown."),
                field: None,
                started: true,
            }),
        }
    }

    /// Writes `done` over this worker's claim (its revision `over`), or where there is no record
    /// (`over` is `None`: a read-only call that ended before its claim was due); a record that
    /// changed meanwhile means the call was given up (or, unclaimed, answered by another
    /// delivery), and the result is dropped.
    pub(super) async fn record_done(&self, job: &Job, over: Option<u64>, result: Result<ToolOutput, ToolError>) {
        let cfg = &self.config.remote;
        let mut outcome = WireOutcome::from(result);
        outcome.fold_rich(cfg.inline_result_max_bytes);
        let (mut object, mut digest) = (None, None);
        if let Some(content) = outcome.content_mut()
            && content.len() > cfg.inline_result_max_bytes
        {
            let size = content.len();
            match self.broker.results.put(job.key.as_str(), &mut content.as_bytes()).await {
                Ok(_) => {
                    object = Some(job.key.clone());
                    digest = Some(seal::digest(content.as_bytes()));
                    content.clear();
                }
                Err(e) => {
                    outcome = WireOutcome::from(Err(ToolError::outcome_unknown(format!(
                        "`{}` finished on worker `{}`, but its output ({size} bytes) could not be stored ({e}); check before retrying.",
                        job.tool, self.id
                    ))));
                }
            }
        }
        let done = CallRecord::Done {
            worker: self.id.clone(),
            outcome,
            object,
            digest,
        };
        let (store, sealer) = (&self.broker.records, &self.broker.sealer);
        // The dispatcher hears the answer now; the record, written next, is what counts if
        // the message is lost or the call was given up meanwhile.
        if let Some(reply) = &job.reply {
            let _ = self
                .broker
                .client
                .publish(format!("{reply}.{}", job.key), records::encode(sealer, &job.key, &done))
                .await;
        }
        let give_up = Instant::now() + Duration::from_millis(cfg.ack_wait_ms.saturating_mul(3)).max(Duration::from_secs(30));
        loop {
            let written = match over {
                Some(rev) => records::update(store, sealer, &job.key, &done, rev).await,
                None => records::create(store, sealer, &job.key, &done).await,
            };
            match written {
                Ok(_) => return,
                Err(CasError::Conflict) => {
                    if !matches!(records::read(store, sealer, &job.key).await, Ok(Some((CallRecord::Done { ref worker, .. }, _))) if *worker == self.id)
                    {
                        tracing::info!(key = %job.key, "the call was given up meanwhile; its result is dropped");
                    }
                    return;
                }
                Err(CasError::Nats(e)) if Instant::now() > give_up => {
                    tracing::error!(key = %job.key, error = %e, "cannot record a result; the dispatcher will report its outcome as unknown");
                    return;
                }
                Err(CasError::Nats(_)) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }
}
