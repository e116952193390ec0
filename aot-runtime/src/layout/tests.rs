use super::*;
#[test]
fn view_strides_follow_torch() {
    let l = Layout::contiguous(&[2, 3, 4]);
    assert_eq!(l.view("view", &[6, 4]).unwrap().stride, vec![4, 1]);
    let t = l.transpose("t", 0, 1).unwrap();
    assert!(t.view("view", &[-1]).is_err());
    assert_eq!(t.view("view", &[3, 2, 2, 2]).unwrap().stride, vec![4, 12, 2, 1]);
}
#[test]
fn offsets_of_transposed() {
    let l = Layout::contiguous(&[2, 3]).t("t").unwrap();
    assert_eq!(l.offsets().collect::<Vec<_>>(), vec![0, 3, 1, 4, 2, 5]);
}
#[test]
fn overlap_status() {
    let a = Layout::contiguous(&[3, 3]);
    assert_eq!(a.overlap(&a.t("t").unwrap()), Overlap::Partial);
    assert_eq!(a.overlap(&a), Overlap::Full);
    let r0 = a.select("s", 0, 0).unwrap();
    let r1 = a.select("s", 0, 1).unwrap();
    assert_eq!(r0.overlap(&r1), Overlap::No);
    let c0 = a.select("s", 1, 0).unwrap();
    assert_eq!(c0.overlap(&r0), Overlap::TooHard);
}
#[test]
fn non_overlapping_layouts_are_recognised_from_strides() {
    let l = |shape: &[usize], stride: &[usize]| Layout::new(shape, stride, 0);
    assert!(l(&[2, 3], &[3, 1]).is_non_overlapping());
    assert!(l(&[3, 2], &[1, 3]).is_non_overlapping(), "transposed");
    assert!(l(&[4, 2], &[5, 1]).is_non_overlapping(), "columns of a wider matrix");
    assert!(l(&[2, 1, 3], &[3, 0, 1]).is_non_overlapping(), "a size-1 dim's stride is irrelevant");
    assert!(l(&[0, 3], &[0, 0]).is_non_overlapping(), "empty");
    assert!(!l(&[2, 4, 2], &[0, 2, 1]).is_non_overlapping(), "expanded");
    assert!(!l(&[2, 2], &[1, 1]).is_non_overlapping(), "a sliding window");
    assert!(!l(&[3, 3], &[2, 1]).is_non_overlapping(), "rows that overlap by one");
    assert!(!l(&[2, 2], &[2, 2]).is_non_overlapping(), "equal strides");
}
