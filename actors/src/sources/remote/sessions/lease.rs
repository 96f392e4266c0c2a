//! A session's lease: claimed, renewed and let go by one dispatcher at a time. Its value names
//! the holder (sealed with the dispatcher's key when signing is on), so that a dispatcher
//! started again under the same `remote.dispatcher_id` can tell a lease is its own and take
//! the session back at once, while any other waits for the lease to run out.

use async_nats::jetstream::kv;

use super::{LeaseError, SessionStore};

impl SessionStore {
    /// The value of this dispatcher's lease on `session`: its name, sealed for the session.
    pub(super) fn lease_value(&self, session: &str) -> bytes::Bytes {
        self.sealer
            .seal(toolslot::remote::seal::Domain::Lease, session, self.me.as_bytes())
            .into()
    }

    /// Who holds the lease whose value is `value`, and whether it is this dispatcher: only a
    /// lease that opens under the dispatcher's key (when signing is on) and names this
    /// dispatcher is its own.
    fn holder(&self, session: &str, value: &[u8]) -> (String, bool) {
        use toolslot::remote::seal::{Domain, Speaker};
        match self.sealer.open(Domain::Lease, session, value, Speaker::Dispatcher) {
            Ok(name) => (String::from_utf8_lossy(name).into_owned(), name == self.me.as_bytes()),
            Err(_) => ("a dispatcher whose lease does not verify".into(), false),
        }
    }

    /// Takes (or keeps) the lease on `session`; returns its revision. A lease that names this
    /// dispatcher (a restart under the same `remote.dispatcher_id`) is taken back at once.
    ///
    /// # Errors
    /// [`LeaseError::Held`] when another dispatcher holds it.
    pub async fn claim(&self, session: &str) -> Result<u64, LeaseError> {
        match self.leases.create(session, self.lease_value(session)).await {
            Ok(rev) => return Ok(rev),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {}
            Err(e) => return Err(LeaseError::Store(e.to_string())),
        }
        let entry = self.leases.entry(session).await.map_err(|e| LeaseError::Store(e.to_string()))?;
        let holder = entry
            .as_ref()
            .filter(|e| e.operation == kv::Operation::Put)
            .map(|e| self.holder(session, &e.value));
        match entry {
            Some(_) if holder.as_ref().is_some_and(|(_, mine)| !mine) => Err(LeaseError::Held {
                session: session.to_string(),
                holder: holder.map(|(name, _)| name).unwrap_or_default(),
            }),
            Some(e) => self
                .leases
                .update(session, self.lease_value(session), e.revision)
                .await
                .map_err(|_| LeaseError::Held {
                    session: session.to_string(),
                    holder: "another dispatcher".into(),
                }),
            // Gone between the two reads: take it now, or lose to whoever did.
            None => self
                .leases
                .create(session, self.lease_value(session))
                .await
                .map_err(|_| LeaseError::Held {
                    session: session.to_string(),
                    holder: "another dispatcher".into(),
                }),
        }
    }

    /// Lets go of a lease taken with [`SessionStore::claim`] (revision `lease`) without having
    /// written the session's record: another dispatcher may take it at once.
    pub async fn release(&self, session: &str, lease: u64) {
        if let Err(e) = self.leases.delete_expect_revision(session, Some(lease)).await {
            tracing::warn!(session, error = %e, "a lease was left to run out");
        }
    }
}
