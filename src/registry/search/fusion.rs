//! Fusing the lexical ranker's scores with the sentence model's, each weighted by what it is
//! good at.
//!
//! The two fail differently. The lexical ranker knows the words coding tools and coding agents
//! use (its synonym tables, argument shapes, git revisions): on the coding query sets it puts
//! the right tool in the top 3 nine times in ten and more, where the model alone manages six to
//! nine. On tools of every other kind it matches words by accident ("time" in a recipe's
//! cooking time answers "what time is it in Sydney") and the model, which reads meaning, is far
//! ahead (59.5% against 84% top-3 on the general tuning set). Added at equal weight, each
//! ranker's confident mistakes pull the other down; so:
//! - the model's cosine is the base score: it ranks every tool, and its differences are
//!   small where tools are near-duplicates (a file read and a file view) and large where a
//!   request is about something else entirely;
//! - the lexical score is added as evidence that saturates (past a point BM25's magnitude
//!   only says a word is rare, not that the tool is right) and is weighted by how much of the
//!   request the best lexical match answers: a match on one word of six is an accident more
//!   often than not, a match on every word is the lexical ranker at its best;
//! - the lexical ranker's own top 3 get a small fixed lift: among near-duplicates, where the
//!   model cannot tell them apart, its ordering (tuned on the coding sets) decides.
//!
//! The constants were fitted on the general tuning set (`tool_search_general1.json`) and the
//! coding sets together, then measured on sets nobody tuned on (BENCHMARKS.md).

/// What each ranker says of every tool for one query, in index order.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct Scores {
    /// The lexical ranker's score (BM25 scaled by coverage).
    pub lexical: Vec<f64>,
    /// The share of the query's words each tool answers, directly or through what they imply.
    pub coverage: Vec<f64>,
    /// The sentence model's cosine of the query with each tool, when it ranks too.
    pub cosines: Option<Vec<f64>>,
    /// How many words of the query count for coverage.
    pub words: usize,
}

/// How much one unit of (saturated) lexical score weighs against the cosine, before it is
/// scaled by the best lexical match's coverage.
const LEXICAL_WEIGHT: f64 = 0.2;

/// Where lexical evidence saturates: `SATURATION · tanh(score / SATURATION)`. Lexical scores
/// of a clear match run 5 to 10; beyond that, more says a word is rare, not that it fits.
const SATURATION: f64 = 8.0;

/// The lift of the lexical ranker's own top 3: about the cosine gap between near-duplicates.
const LEXICAL_TOP_LIFT: f64 = 0.15;
const LEXICAL_TOP: usize = 3;

/// Keeps every fused score positive (a cosine is at least -1), so each tool stays a hit.
const OFFSET: f64 = 1.0;

/// One score per tool: the lexical score alone without the model, the fusion with it.
pub(super) fn fuse(scores: Scores) -> Vec<f64> {
    let Some(cosines) = scores.cosines else {
        return scores.lexical;
    };
    let lexical = &scores.lexical;
    let mut order: Vec<usize> = (0..lexical.len()).filter(|i| lexical[*i] > 0.0).collect();
    order.sort_by(|a, b| lexical[*b].total_cmp(&lexical[*a]).then(a.cmp(b)));
    let best_coverage = order.first().map_or(0.0, |i| scores.coverage[*i]);
    let mut fused: Vec<f64> = lexical
        .iter()
        .zip(&cosines)
        .map(|(l, c)| c + OFFSET + LEXICAL_WEIGHT * best_coverage * SATURATION * (l / SATURATION).tanh())
        .collect();
    for i in order.into_iter().take(LEXICAL_TOP) {
        fused[i] += LEXICAL_TOP_LIFT;
    }
    fused
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scores(lexical: &[f64], coverage: &[f64], cosines: &[f64]) -> Scores {
        Scores {
            lexical: lexical.to_vec(),
            coverage: coverage.to_vec(),
            cosines: Some(cosines.to_vec()),
            words: 4,
        }
    }

    #[test]
    fn without_the_model_the_lexical_score_is_the_score() {
        let s = Scores {
            lexical: vec![2.0, 0.0],
            coverage: vec![1.0, 0.0],
            cosines: None,
            words: 2,
        };
        assert_eq!(fuse(s), [2.0, 0.0]);
    }

    #[test]
    fn an_accidental_word_match_does_not_beat_the_meaning() {
        // One word of four matched strongly (coverage 0.25) against a tool the model reads as
        // the request: the model wins.
        let f = fuse(scores(&[6.0, 0.0, 0.0], &[0.25, 0.0, 0.0], &[0.05, 0.55, 0.10]));
        assert!(f[1] > f[0], "{f:?}");
    }

    #[test]
    fn a_full_lexical_match_decides_between_near_duplicates() {
        // Two tools the model cannot tell apart; the words of the request name one of them.
        let f = fuse(scores(&[7.0, 2.0], &[1.0, 0.5], &[0.40, 0.45]));
        assert!(f[0] > f[1], "{f:?}");
    }
}
