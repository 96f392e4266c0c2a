//! Which traces are kept: the samplers `OTEL_TRACES_SAMPLER` names, chosen by
//! `telemetry.sampler` or that variable, and what they make of a parent from another process.
//!
//! A root span of this process is decided by its trace id's ratio (`layer::ratio_keeps`, as the
//! SDK's `TraceIdRatioBased`); its children follow it. Only a parent from another process (a
//! host's `traceparent`) tells the samplers apart: a `parentbased_*` one keeps its flag, the
//! others decide on its trace id as on their own.

use opentelemetry::trace::SpanContext;
use opentelemetry_sdk::trace::Sampler;
use toolslot::config::TelemetryConfig;

use super::{TelemetryError, layer};

/// How traces are sampled: one of the samplers `OTEL_TRACES_SAMPLER` names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// A trace that came from another process keeps its sampled flag (`parentbased_*`);
    /// otherwise this process decides on its trace id as on its own.
    pub parent_based: bool,
    /// The share of traces kept: 1.0 for `*always_on`, 0.0 for `*always_off`.
    pub ratio: f64,
}

impl Sampling {
    /// The sampling `cfg` and the environment (`env`, a variable's value by name) ask for:
    /// `telemetry.sampler`, else `OTEL_TRACES_SAMPLER` (its ratio `OTEL_TRACES_SAMPLER_ARG`,
    /// else `telemetry.sampling_ratio`), else `parentbased_traceidratio`.
    ///
    /// # Errors
    /// [`TelemetryError`] for a `telemetry.sampler` that names no sampler. For a value of
    /// `OTEL_TRACES_SAMPLER` that names none (or one not offered, such as `jaeger_remote`) the
    /// default is taken, as the specification asks, and `notes` says so; the same for an
    /// `OTEL_TRACES_SAMPLER_ARG` that is not a ratio.
    pub fn from(cfg: &TelemetryConfig, env: impl Fn(&str) -> Option<String>, notes: &mut Vec<String>) -> Result<Sampling, TelemetryError> {
        const DEFAULT: &str = "parentbased_traceidratio";
        let ratio = cfg.sampling_ratio.clamp(0.0, 1.0);
        let configured = cfg.sampler.trim();
        if !configured.is_empty() {
            return Self::named(configured, ratio).ok_or_else(|| {
                TelemetryError(format!(
                    "telemetry.sampler `{configured}` is not a sampler: always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio"
                ))
            });
        }
        let default = Sampling { parent_based: true, ratio };
        let Some(name) = env("OTEL_TRACES_SAMPLER").map(|v| v.trim().to_string()).filter(|v| !v.is_empty()) else {
            return Ok(default);
        };
        let ratio = match env("OTEL_TRACES_SAMPLER_ARG")
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
        {
            None => ratio,
            Some(arg) => match arg.parse::<f64>() {
                Ok(r) if (0.0..=1.0).contains(&r) => r,
                _ => {
                    notes.push(format!(
                        "OTEL_TRACES_SAMPLER_ARG `{arg}` is not a ratio from 0 to 1; telemetry.sampling_ratio ({ratio}) is used"
                    ));
                    ratio
                }
            },
        };
        Ok(Self::named(&name, ratio).unwrap_or_else(|| {
            notes.push(format!(
                "OTEL_TRACES_SAMPLER `{name}` names no sampler offered here; {DEFAULT} is used"
            ));
            default
        }))
    }

    fn named(name: &str, ratio: f64) -> Option<Sampling> {
        let (parent_based, rest) = match name.to_ascii_lowercase().strip_prefix("parentbased_") {
            Some(rest) => (true, rest.to_string()),
            None => (false, name.to_ascii_lowercase()),
        };
        let ratio = match rest.as_str() {
            "always_on" => 1.0,
            "always_off" => 0.0,
            "traceidratio" => ratio,
            _ => return None,
        };
        Some(Sampling { parent_based, ratio })
    }

    /// The SDK's sampler for the same choice (the reference exporter).
    pub(super) fn sdk(self) -> Sampler {
        let own = Sampler::TraceIdRatioBased(self.ratio);
        if self.parent_based {
            Sampler::ParentBased(Box::new(own))
        } else {
            own
        }
    }

    /// `remote`, a parent from another process, with this sampling's decision on its trace.
    pub(super) fn parent(self, remote: SpanContext) -> SpanContext {
        if self.parent_based {
            return remote;
        }
        let flags = if layer::ratio_keeps(self.ratio, remote.trace_id()) {
            remote.trace_flags().with_sampled(true)
        } else {
            remote.trace_flags().with_sampled(false)
        };
        SpanContext::new(
            remote.trace_id(),
            remote.span_id(),
            flags,
            remote.is_remote(),
            remote.trace_state().clone(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampling(sampler: &str, ratio: f64, env: &[(&str, &str)]) -> (Result<Sampling, TelemetryError>, Vec<String>) {
        let mut cfg = toolslot::config::Config::builtin().telemetry;
        cfg.sampler = sampler.into();
        cfg.sampling_ratio = ratio;
        let mut notes = Vec::new();
        let got = Sampling::from(
            &cfg,
            |name| env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string()),
            &mut notes,
        );
        (got, notes)
    }

    fn sampler(parent_based: bool, ratio: f64) -> Sampling {
        Sampling { parent_based, ratio }
    }

    #[test]
    fn the_sampler_comes_from_the_key_then_otel_traces_sampler_then_the_default() {
        assert_eq!(sampling("", 0.5, &[]).0.unwrap(), sampler(true, 0.5), "the default");
        let env = [("OTEL_TRACES_SAMPLER", "traceidratio"), ("OTEL_TRACES_SAMPLER_ARG", "0.25")];
        assert_eq!(sampling("", 1.0, &env).0.unwrap(), sampler(false, 0.25));
        assert_eq!(
            sampling("", 1.0, &[("OTEL_TRACES_SAMPLER", "always_off")]).0.unwrap(),
            sampler(false, 0.0)
        );
        assert_eq!(
            sampling("", 0.3, &[("OTEL_TRACES_SAMPLER", "parentbased_always_on")]).0.unwrap(),
            sampler(true, 1.0)
        );
        assert_eq!(
            sampling("", 0.3, &[("OTEL_TRACES_SAMPLER", "ParentBased_TraceIdRatio")]).0.unwrap(),
            sampler(true, 0.3)
        );
        // The key wins over the variable.
        assert_eq!(sampling("always_on", 0.1, &env).0.unwrap(), sampler(false, 1.0));
        // A variable not understood: the default, and a note saying so.
        let (got, notes) = sampling("", 0.7, &[("OTEL_TRACES_SAMPLER", "jaeger_remote")]);
        assert_eq!(got.unwrap(), sampler(true, 0.7));
        assert!(notes[0].contains("jaeger_remote"), "{notes:?}");
        let (got, notes) = sampling(
            "",
            0.7,
            &[("OTEL_TRACES_SAMPLER", "traceidratio"), ("OTEL_TRACES_SAMPLER_ARG", "2")],
        );
        assert_eq!(got.unwrap(), sampler(false, 0.7));
        assert!(notes[0].contains("OTEL_TRACES_SAMPLER_ARG `2`"), "{notes:?}");
        // A key not understood is the configuration's error.
        let err = sampling("sometimes", 1.0, &[]).0.unwrap_err();
        assert!(err.to_string().contains("telemetry.sampler `sometimes`"), "{err}");
    }

    #[test]
    fn a_hosts_sampled_flag_is_followed_only_by_a_parent_based_sampler() {
        use opentelemetry::trace::{SpanId, TraceFlags, TraceId, TraceState};
        let remote = |flags| SpanContext::new(TraceId::from(7u128), SpanId::from(9u64), flags, true, TraceState::default());
        let unsampled = remote(TraceFlags::default());
        let sampled = remote(TraceFlags::SAMPLED);
        assert!(
            !sampler(true, 1.0).parent(unsampled.clone()).is_sampled(),
            "parent-based: the host decided"
        );
        assert!(sampler(true, 0.0).parent(sampled.clone()).is_sampled());
        assert!(sampler(false, 1.0).parent(unsampled).is_sampled(), "always_on overrules the host");
        let off = sampler(false, 0.0).parent(sampled);
        assert!(!off.is_sampled(), "always_off too");
        assert_eq!(
            (off.trace_id(), off.span_id()),
            (TraceId::from(7u128), SpanId::from(9u64)),
            "the trace is kept"
        );
    }
}
