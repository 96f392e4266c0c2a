//! The forward pass of a BERT encoder (all-MiniLM-L6-v2: 6 layers, 384 wide, 12 heads) and
//! mean pooling: token ids in, one unit vector per text out.
//!
//! Hand-written over matrixmultiply's sgemm rather than on candle: the model is six identical
//! layers of four matrix products, a softmax and two layer norms, a few hundred lines here,
//! while candle-core with its gemm backends takes minutes to build on the two cores CI has and
//! brings a tensor library the rest of toolslot has no use for. The matrix products, where all
//! the time goes, are matrixmultiply's (SIMD, cache-blocked).

use safetensors::SafeTensors;
use safetensors::tensor::Dtype;

use super::ModelError;

/// BERT's layer-norm epsilon (`layer_norm_eps` in the model's config.json).
const LAYER_NORM_EPS: f32 = 1e-12;

/// One linear layer, its weight stored input-major (`in × out`) so `x · w` is a plain product.
struct Linear {
    w: Vec<f32>,
    b: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

struct Layer {
    /// Query, key and value in one product (`hidden × 3·hidden`).
    qkv: Linear,
    attn_out: Linear,
    attn_norm: Norm,
    up: Linear,
    down: Linear,
    out_norm: Norm,
}

/// The encoder's weights.
pub(super) struct Bert {
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    embed_norm: Norm,
    layers: Vec<Layer>,
    hidden: usize,
    heads: usize,
    /// How many positions the model has embeddings for.
    pub(super) max_positions: usize,
    /// The vocabulary's size: an id at or past it is not the model's.
    pub(super) vocab: usize,
}

fn tensor(st: &SafeTensors<'_>, name: &str, shape: &[usize]) -> Result<Vec<f32>, ModelError> {
    let view = st.tensor(name).map_err(|_| ModelError::Weights(format!("no tensor `{name}`")))?;
    if view.dtype() != Dtype::F32 || view.shape() != shape {
        return Err(ModelError::Weights(format!(
            "`{name}` is {:?} {:?}, not F32 {shape:?}",
            view.dtype(),
            view.shape()
        )));
    }
    Ok(view
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

/// A PyTorch linear layer (`out × in` weight) read and transposed to `in × out`.
fn linear(st: &SafeTensors<'_>, prefix: &str, inputs: usize, outputs: usize) -> Result<Linear, ModelError> {
    let raw = tensor(st, &format!("{prefix}.weight"), &[outputs, inputs])?;
    let mut w = vec![0.0; inputs * outputs];
    for o in 0..outputs {
        for i in 0..inputs {
            w[i * outputs + o] = raw[o * inputs + i];
        }
    }
    Ok(Linear {
        w,
        b: tensor(st, &format!("{prefix}.bias"), &[outputs])?,
        inputs,
        outputs,
    })
}

fn norm(st: &SafeTensors<'_>, prefix: &str, hidden: usize) -> Result<Norm, ModelError> {
    Ok(Norm {
        gamma: tensor(st, &format!("{prefix}.weight"), &[hidden])?,
        beta: tensor(st, &format!("{prefix}.bias"), &[hidden])?,
    })
}

/// The three of query, key and value side by side: one product instead of three.
fn fused(parts: [Linear; 3]) -> Linear {
    let inputs = parts[0].inputs;
    let outputs: usize = parts.iter().map(|p| p.outputs).sum();
    let mut w = Vec::with_capacity(inputs * outputs);
    for i in 0..inputs {
        for p in &parts {
            w.extend_from_slice(&p.w[i * p.outputs..(i + 1) * p.outputs]);
        }
    }
    let b = parts.iter().flat_map(|p| p.b.iter().copied()).collect();
    Linear { w, b, inputs, outputs }
}

impl Bert {
    /// Reads the encoder from a safetensors file's bytes, shaped by config.json's numbers.
    pub(super) fn load(bytes: &[u8], config: &serde_json::Value) -> Result<Self, ModelError> {
        let num = |key: &str| {
            config
                .get(key)
                .and_then(serde_json::Value::as_u64)
                .map(|n| n as usize)
                .ok_or_else(|| ModelError::Weights(format!("config.json has no `{key}`")))
        };
        let (hidden, heads, layers, inner) = (
            num("hidden_size")?,
            num("num_attention_heads")?,
            num("num_hidden_layers")?,
            num("intermediate_size")?,
        );
        let (vocab, max_positions, types) = (num("vocab_size")?, num("max_position_embeddings")?, num("type_vocab_size")?);
        if heads == 0 || hidden % heads != 0 {
            return Err(ModelError::Weights(format!("{hidden} wide does not split into {heads} heads")));
        }
        let st = SafeTensors::deserialize(bytes).map_err(|e| ModelError::Weights(e.to_string()))?;
        let mut stack = Vec::with_capacity(layers);
        for l in 0..layers {
            let p = format!("encoder.layer.{l}");
            stack.push(Layer {
                qkv: fused([
                    linear(&st, &format!("{p}.attention.self.query"), hidden, hidden)?,
                    linear(&st, &format!("{p}.attention.self.key"), hidden, hidden)?,
                    linear(&st, &format!("{p}.attention.self.value"), hidden, hidden)?,
                ]),
                attn_out: linear(&st, &format!("{p}.attention.output.dense"), hidden, hidden)?,
                attn_norm: norm(&st, &format!("{p}.attention.output.LayerNorm"), hidden)?,
                up: linear(&st, &format!("{p}.intermediate.dense"), hidden, inner)?,
                down: linear(&st, &format!("{p}.output.dense"), inner, hidden)?,
                out_norm: norm(&st, &format!("{p}.output.LayerNorm"), hidden)?,
            });
        }
        Ok(Self {
            word: tensor(&st, "embeddings.word_embeddings.weight", &[vocab, hidden])?,
            position: tensor(&st, "embeddings.position_embeddings.weight", &[max_positions, hidden])?,
            token_type: tensor(&st, "embeddings.token_type_embeddings.weight", &[types, hidden])?,
            embed_norm: norm(&st, "embeddings.LayerNorm", hidden)?,
            layers: stack,
            hidden,
            heads,
            max_positions,
            vocab,
        })
    }

    /// The vector's width.
    pub(super) fn width(&self) -> usize {
        self.hidden
    }

    /// Bytes the weights take in memory.
    pub(super) fn weight_bytes(&self) -> usize {
        let layer = |l: &Layer| {
            [&l.qkv, &l.attn_out, &l.up, &l.down]
                .iter()
                .map(|x| x.w.len() + x.b.len())
                .sum::<usize>()
                + 4 * self.hidden
        };
        4 * (self.word.len() + self.position.len() + self.token_type.len() + 2 * self.hidden + self.layers.iter().map(layer).sum::<usize>())
    }

    /// One unit vector per sequence of token ids (each already framed by `[CLS]`/`[SEP]` and no
    /// longer than [`Bert::max_positions`]): the mean of the last layer's token states. The
    /// sequences are stacked into one matrix so every linear layer is one large product; only
    /// attention looks at one sequence at a time.
    pub(super) fn embed(&self, sequences: &[Vec<u32>]) -> Vec<Vec<f32>> {
        let h = self.hidden;
        let total: usize = sequences.iter().map(Vec::len).sum();
        let mut x = vec![0.0f32; total * h];
        let mut row = 0;
        for seq in sequences {
            for (pos, id) in seq.iter().enumerate() {
                let out = &mut x[row * h..(row + 1) * h];
                let word = &self.word[*id as usize * h..(*id as usize + 1) * h];
                let place = &self.position[pos * h..(pos + 1) * h];
                for j in 0..h {
                    out[j] = word[j] + place[j] + self.token_type[j];
                }
                row += 1;
            }
        }
        layer_norm(&mut x, &self.embed_norm, h);
        for layer in &self.layers {
            self.layer(&mut x, total, sequences, layer);
        }
        let mut out = Vec::with_capacity(sequences.len());
        let mut start = 0;
        for seq in sequences {
            let mut mean = vec![0.0f32; h];
            for r in start..start + seq.len() {
                for (m, v) in mean.iter_mut().zip(&x[r * h..(r + 1) * h]) {
                    *m += v;
                }
            }
            start += seq.len();
            let norm = mean.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
            out.push(mean.into_iter().map(|v| v / norm).collect());
        }
        out
    }

    fn layer(&self, x: &mut [f32], rows: usize, sequences: &[Vec<u32>], layer: &Layer) {
        let h = self.hidden;
        let qkv = product(x, rows, &layer.qkv);
        let mut context = vec![0.0f32; rows * h];
        let dim = h / self.heads;
        let scale = 1.0 / (dim as f32).sqrt();
        let stride = 3 * h;
        // Attention by hand, not through sgemm: its products are a sequence's few dozen
        // tokens by one head's 32 dimensions, where sgemm's packing costs more than the
        // arithmetic (an eighth of the index time when they went through it).
        let mut start = 0;
        let mut scores = Vec::new();
        for seq in sequences {
            let n = seq.len();
            scores.clear();
            scores.resize(n * n, 0.0f32);
            let row = |r: usize, offset: usize| &qkv[(start + r) * stride + offset..][..dim];
            for head in 0..self.heads {
                let (q0, k0, v0) = (head * dim, h + head * dim, 2 * h + head * dim);
                for (i, line) in scores.chunks_exact_mut(n).enumerate() {
                    let q = row(i, q0);
                    for (j, s) in line.iter_mut().enumerate() {
                        *s = scale * dot(q, row(j, k0));
                    }
                    softmax(line);
                }
                for (i, line) in scores.chunks_exact(n).enumerate() {
                    let out = &mut context[(start + i) * h + q0..][..dim];
                    for (j, p) in line.iter().enumerate() {
                        for (o, v) in out.iter_mut().zip(row(j, v0)) {
                            *o += p * v;
                        }
                    }
                }
            }
            start += n;
        }
        let attended = product(&context, rows, &layer.attn_out);
        for (a, b) in x.iter_mut().zip(&attended) {
            *a += b;
        }
        layer_norm(x, &layer.attn_norm, h);
        let mut inner = product(x, rows, &layer.up);
        for v in inner.iter_mut() {
            *v = gelu(*v);
        }
        let down = product(&inner, rows, &layer.down);
        for (a, b) in x.iter_mut().zip(&down) {
            *a += b;
        }
        layer_norm(x, &layer.out_norm, h);
    }
}

/// `x · w + b` for `rows` rows of `x`.
fn product(x: &[f32], rows: usize, lin: &Linear) -> Vec<f32> {
    let mut out: Vec<f32> = Vec::with_capacity(rows * lin.outputs);
    for _ in 0..rows {
        out.extend_from_slice(&lin.b);
    }
    debug_assert!(x.len() >= rows * lin.inputs);
    // SAFETY: `x` is `rows × inputs`, `w` is `inputs × outputs` and `out` is `rows × outputs`,
    // all row-major and contiguous; beta = 1 adds the bias rows already in `out`.
    unsafe {
        matrixmultiply::sgemm(
            rows,
            lin.inputs,
            lin.outputs,
            1.0,
            x.as_ptr(),
            lin.inputs as isize,
            1,
            lin.w.as_ptr(),
            lin.outputs as isize,
            1,
            1.0,
            out.as_mut_ptr(),
            lin.outputs as isize,
            1,
        );
    }
    out
}

fn layer_norm(x: &mut [f32], norm: &Norm, h: usize) {
    for row in x.chunks_exact_mut(h) {
        let mean = row.iter().sum::<f32>() / h as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / h as f32;
        let inv = 1.0 / (var + LAYER_NORM_EPS).sqrt();
        for ((v, g), b) in row.iter_mut().zip(&norm.gamma).zip(&norm.beta) {
            *v = (*v - mean) * inv * g + b;
        }
    }
}

/// `a · b`, in eight lanes the compiler keeps in vector registers (a plain `sum()` of floats
/// must add in order, one at a time).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a8.remainder().iter().zip(b8.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in a8.zip(b8) {
        for l in 0..8 {
            lanes[l] += x[l] * y[l];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for v in row.iter_mut() {
        *v = exp(*v - max);
    }
    let sum: f32 = row.iter().sum();
    for v in row.iter_mut() {
        *v /= sum;
    }
}

/// BERT's GELU, the exact one (`x·Φ(x)`, through erf), not the tanh approximation.
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// erf to within 4e-7 (a few units of f32 near ±1), as a ratio of odd and even polynomials on [-4, 4] (erf is ±1 to f32's
/// precision beyond): no branch and no call, so the loop over a layer's activations
/// vectorizes, where libm's exp inside the textbook formula took a tenth of the index time.
fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.726_142_3e-10 + 2.770_681_4e-8;
    p = p * x2 - 2.101_024e-6;
    p = p * x2 - 5.692_506_4e-5;
    p = p * x2 - 7.349_906_3e-4;
    p = p * x2 - 2.9546e-3;
    p = p * x2 - 1.609_603_3e-2;
    let mut q = x2 * -1.456_607_2e-5 - 2.133_740_6e-4;
    q = q * x2 - 1.682_827e-3;
    q = q * x2 - 7.373_329e-3;
    q = q * x2 - 1.426_474e-2;
    x * p / q
}

/// e^x for the softmax (x ≤ 0 there), to about 2e-7 relative: 2^n by the exponent bits times
/// a polynomial on [-ln2/2, ln2/2], without a call, for the same reason as `erf`.
fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    // Round to nearest by the float-magic trick (no `round` call without SSE4.1).
    const MAGIC: f32 = 12_582_912.0;
    let n = (x * std::f32::consts::LOG2_E + MAGIC) - MAGIC;
    // ln 2 in two parts, the first short enough that `n ·` it is exact (Cephes' split).
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let e = p * r * r + r + 1.0;
    f32::from_bits(e.to_bits().wrapping_add(((n as i32) << 23) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// erf by its Taylor series in f64, exact enough on [-4, 4] to check against.
    fn erf_reference(x: f64) -> f64 {
        if x.abs() > 4.0 {
            return x.signum();
        }
        let (mut term, mut sum, mut n) = (x, x, 0.0);
        while term.abs() > 1e-17 {
            n += 1.0;
            term *= -x * x / n;
            sum += term / (2.0 * n + 1.0);
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn erf_and_exp_are_accurate_to_a_few_units_of_f32() {
        for i in -6000..=6000 {
            let x = i as f32 / 1000.0;
            let (got, want) = (erf(x) as f64, erf_reference(x as f64));
            assert!((got - want).abs() < 4e-7, "erf({x}) = {got}, want {want}");
        }
        for i in -8700..=0 {
            let x = i as f32 / 100.0;
            let (got, want) = (exp(x) as f64, (x as f64).exp());
            assert!((got - want).abs() <= want * 4e-7 + 1e-37, "exp({x}) = {got}, want {want}");
        }
    }

    #[test]
    fn dot_adds_every_lane_and_the_tail() {
        let a: Vec<f32> = (0..37).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..37).map(|i| (i % 5) as f32 - 2.0).collect();
        let want: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert_eq!(dot(&a, &b), want);
    }
}
