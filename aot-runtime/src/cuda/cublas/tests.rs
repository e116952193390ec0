//! [`gemm_args`] against cuBLAS's column-major definition, computed here on
//! the CPU, on every kind of operand layout.

use super::{gemm_args, GemmArgs};
use crate::layout::Layout;

/// cuBLAS's strided batched gemm with alpha 1 and beta 0, by definition:
/// `C[i + j·ldc] = Σ_l op(A)[i, l] · op(B)[l, j]`, column-major.
fn cublas_reference(g: &GemmArgs, a: &[f64], a0: usize, b: &[f64], b0: usize) -> Vec<f64> {
    let (m, n, k) = (g.m as usize, g.n as usize, g.k as usize);
    let mut c = vec![0.0; g.batch as usize * g.stride_c as usize];
    for p in 0..g.batch as usize {
        let (ab, bb, cb) = (a0 + p * g.stride_a as usize, b0 + p * g.stride_b as usize, p * g.stride_c as usize);
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for l in 0..k {
                    let x = if g.transa { a[ab + l + i * g.lda as usize] } else { a[ab + i + l * g.lda as usize] };
                    let y = if g.transb { b[bb + j + l * g.ldb as usize] } else { b[bb + l + j * g.ldb as usize] };
                    s += x * y;
                }
                c[cb + i + j * g.ldc as usize] = s;
            }
        }
    }
    c
}

fn layout(shape: [usize; 3], stride: [usize; 3], offset: usize) -> Layout {
    let mut l = Layout::contiguous(&shape);
    l.stride = stride.to_vec().into();
    l.offset = offset;
    l
}

fn at(l: &Layout, buf: &[f64], p: usize, r: usize, c: usize) -> f64 {
    buf[l.offset + p * l.stride[0] + r * l.stride[1] + c * l.stride[2]]
}

#[test]
fn gemm_args_compute_the_row_major_product_on_every_layout() {
    let buf: Vec<f64> = (0..4096).map(|i| ((i * 7919) % 97) as f64 - 48.0).collect();
    let (batch, m, k, n) = (2, 3, 4, 5);
    // Left operands [2, 3, 4]: row-major, transposed, offset, broadcast batch.
    let lefts = [
        layout([batch, m, k], [m * k, k, 1], 0),
        layout([batch, m, k], [m * k, 1, m], 7),
        layout([batch, m, k], [0, k + 2, 1], 3),
        layout([batch, m, k], [40, 1, m + 1], 11),
    ];
    let rights =
        [layout([batch, k, n], [k * n, n, 1], 5), layout([batch, k, n], [k * n, 1, k], 0), layout([batch, k, n], [0, 1, k + 3], 9)];
    let mut checked = 0;
    for la in &lefts {
        for lb in &rights {
            let g = gemm_args(la, lb).expect("a unit stride in each operand");
            // cuBLAS's A is our right operand, its B our left one.
            let c = cublas_reference(&g, &buf, lb.offset, &buf, la.offset);
            for p in 0..batch {
                for i in 0..m {
                    for j in 0..n {
                        let want: f64 = (0..k).map(|l| at(la, &buf, p, i, l) * at(lb, &buf, p, l, j)).sum();
                        assert_eq!(c[p * m * n + i * n + j], want, "{la:?} {lb:?} at {p},{i},{j}");
                        checked += 1;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 12 * batch * m * n);
}

#[test]
fn size_one_dims_and_unusable_layouts() {
    // A [1, 1, 4] row with any strides and a [1, 4, 1] column work.
    let row = layout([1, 1, 4], [99, 123, 1], 0);
    let col = layout([1, 4, 1], [99, 1, 77], 0);
    let g = gemm_args(&row, &col).expect("size-1 dims are free");
    assert_eq!((g.m, g.n, g.k, g.batch), (1, 1, 4, 1));
    assert!(g.lda >= 1 && g.ldb >= 1 && g.ldc >= 1);
    // Neither stride 1: a contiguous copy is needed.
    let strided = layout([1, 3, 4], [24, 8, 2], 0);
    assert_eq!(gemm_args(&strided, &layout([1, 4, 5], [20, 5, 1], 0)), None);
}
