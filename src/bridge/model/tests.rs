use super::*;

#[test]
fn slice_names_differ_where_dashes_would_make_them_equal() {
    assert_ne!(
        slice_name("a-b", "c", Family::V4),
        slice_name("a", "b-c", Family::V4)
    );
    assert_ne!(
        slice_name("a", "b", Family::V4),
        slice_name("a", "b", Family::V6)
    );
    assert!(slice_name("web", "east.eu", Family::V4).starts_with("web-east-eu-"));
}
