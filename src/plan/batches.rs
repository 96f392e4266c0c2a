//! Batch planning: which calls run together.

/// One batch of calls, by index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// Call indices, in order.
    pub indices: Vec<usize>,
    /// Whether the calls run concurrently (all parallel-safe) or one at a time.
    pub concurrent: bool,
}

/// Splits calls (index, parallel-safe for this input) into batches, in order: consecutive
/// parallel-safe calls form one concurrent batch; every other call is its own serial batch.
/// Order is kept across batches, so a write between two reads still separates them.
pub fn plan_batches(calls: &[(usize, bool)]) -> Vec<Batch> {
    let mut out: Vec<Batch> = Vec::new();
    for &(index, parallel) in calls {
        match out.last_mut() {
            Some(b) if parallel && b.concurrent => b.indices.push(index),
            _ => out.push(Batch {
                indices: vec![index],
                concurrent: parallel,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_parallel_calls_share_a_batch() {
        let b = plan_batches(&[(0, true), (1, true), (2, false), (3, true), (4, false), (5, false)]);
        let want = vec![
            Batch {
                indices: vec![0, 1],
                concurrent: true,
            },
            Batch {
                indices: vec![2],
                concurrent: false,
            },
            Batch {
                indices: vec![3],
                concurrent: true,
            },
            Batch {
                indices: vec![4],
                concurrent: false,
            },
            Batch {
                indices: vec![5],
                concurrent: false,
            },
        ];
        assert_eq!(b, want);
        assert!(plan_batches(&[]).is_empty());
    }
}
