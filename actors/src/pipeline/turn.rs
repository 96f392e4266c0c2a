//! Which numbered submission holds a session: plain numbers, kept in the session's shared
//! state under one lock, which a submission's start, its end and a cancellation aimed at it
//! all take, so a late cancellation can never land on the next submission.

/// Which submission holds the session, by number (numbers start at 1, per session).
#[derive(Debug, Default)]
pub(crate) struct Turn {
    /// The submission running now (0: none).
    current: u64,
    /// The last number given out.
    issued: u64,
    /// The last number that began running.
    begun: u64,
}

/// Where a numbered submission is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmissionState {
    /// Accepted, waiting for the previous submission's body to end.
    Waiting,
    /// Holding the session.
    Running,
    /// Ended (or never known to this session).
    Over,
}

impl Turn {
    /// Gives out the next number.
    pub(crate) fn issue(&mut self) -> u64 {
        self.issued += 1;
        self.issued
    }

    /// Submission `number` holds the session from now on.
    pub(crate) fn begin(&mut self, number: u64) {
        self.current = number;
        self.begun = number;
    }

    /// The running submission ended: nobody holds the session.
    pub(crate) fn end(&mut self) {
        self.current = 0;
    }

    /// Whether submission `number` is the one running.
    pub(crate) fn is_running(&self, number: u64) -> bool {
        number != 0 && self.current == number
    }

    /// Where submission `number` is in its life.
    pub(crate) fn state(&self, number: u64) -> SubmissionState {
        if self.is_running(number) {
            SubmissionState::Running
        } else if number > self.begun && number <= self.issued {
            SubmissionState::Waiting
        } else {
            SubmissionState::Over
        }
    }
}
