//! `AOT_LOG`, the comma-separated list of what the runtime prints:
//! `kernels` (each stage's kernels when they are built), `graphs` (the
//! scheduled partitions of training calls), `profile` (the process-wide
//! profile, printed at exit: `crate::profile`). Each reader asks once and
//! keeps the answer, so the variable is read at most once per item.

/// Whether `AOT_LOG` names `what`.
pub(crate) fn names(what: &str) -> bool {
    std::env::var("AOT_LOG").is_ok_and(|v| list_names(&v, what))
}

/// Whether the comma-separated `list` names `what` (blanks around an item
/// are ignored).
fn list_names(list: &str, what: &str) -> bool {
    list.split(',').any(|w| w.trim() == what)
}

#[cfg(test)]
mod tests {
    #[test]
    fn items_are_whole_words_of_the_list() {
        assert!(super::list_names("kernels, profile", "profile"));
        assert!(super::list_names("profile", "profile"));
        assert!(!super::list_names("profiles,kernels", "profile"));
        assert!(!super::list_names("", "profile"));
    }
}
