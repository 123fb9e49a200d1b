//! The `Retry-After` of a rejected job.

use std::time::Duration;

use super::*;

#[test]
fn retry_after_is_the_projected_wait_in_whole_seconds_within_1_and_60() {
    use kennel::RejectReason;
    let header_of = |wait: Option<Duration>| {
        let e = ApiError::Rejected {
            reason: RejectReason::QueueFull,
            retry_after: RETRY_AFTER_SECS,
        }
        .retry_after_projected(wait);
        let response = axum::response::IntoResponse::into_response(e);
        response.headers()[axum::http::header::RETRY_AFTER]
            .to_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(header_of(None), "1");
    assert_eq!(header_of(Some(Duration::ZERO)), "1");
    assert_eq!(header_of(Some(Duration::from_millis(1))), "1");
    assert_eq!(header_of(Some(Duration::from_millis(2001))), "3");
    assert_eq!(header_of(Some(Duration::from_secs(2))), "2");
    assert_eq!(
        header_of(Some(Duration::from_secs(3600))),
        MAX_RETRY_AFTER_SECS.to_string()
    );
}
