//! `GET /admin/events/{id}/report`: the organiser's audit (section 13), or the attendee list as
//! CSV pages for a spreadsheet.

use lambda_http::{Body, Request, Response, http::StatusCode};

use super::{Query, cursor};
use crate::{
    domain::{
        EventId,
        audit::{Report, csv_cell},
    },
    http::{
        ApiError, Caller, json,
        reply::{event_id, query_param},
    },
};

impl Query {
    /// The organiser's report: the audit as JSON, or a page of the attendee list as CSV.
    pub(super) async fn report(&self, req: &Request, caller: &Caller) -> Result<Response<Body>, ApiError> {
        if !caller.admin {
            return Err(ApiError::Forbidden);
        }
        let event = event_id(req)?;
        // A malformed cursor is refused whatever the format (JSON has no pages).
        let after = cursor(req)?;
        match query_param(req, "format") {
            None | Some("json") => Ok(json(StatusCode::OK, &self.audit(&event).await?)),
            Some("csv") => self.attendees_csv(&event, after).await,
            Some(_) => Err(ApiError::BadRequest("format must be json or csv".into())),
        }
    }

    /// The organiser's audit of the event (`handlers::live::Auditor`).
    async fn audit(&self, event: &EventId) -> Result<Report, ApiError> {
        let stored = self.store.get_event(event).await?.ok_or(ApiError::EventNotFound)?;
        self.auditor.report(&stored.event).await
    }

    /// The attendee list (confirmed orders) as CSV, for the organiser's spreadsheet: at most
    /// [`CSV_PAGE`] rows and [`CSV_PAGE_BYTES`] a page (Lambda's response limit is 6 MB), each page a
    /// CSV with its header, the next page's address in a `Link: <...>; rel="next"` header
    /// (RFC 8288) while there is one.
    /// The page after ticket `after` (0: the first).
    async fn attendees_csv(&self, event: &EventId, after: u32) -> Result<Response<Body>, ApiError> {
        self.rebuilder.event(event).await?.ok_or(ApiError::EventNotFound)?;
        let page = self.store.list_orders(event, after, CSV_PAGE).await?;
        let mut csv = String::from(
            "ticket_no,order_id,user_id,email,created_at,confirmed_at,mail_status,promoted,checked_in_at\r\n",
        );
        let mut next = page.next;
        for r in page.items {
            // Long addresses make long rows: the page ends early rather than pass the limit.
            if csv.len() >= CSV_PAGE_BYTES {
                next = Some(last_row_ticket(&csv).to_string());
                break;
            }
            let cells = [
                r.ticket_no.to_string(),
                r.order_id.to_string(),
                r.user_id.to_string(),
                r.email.to_string(),
                r.created_at,
                r.confirmed_at.unwrap_or_default(),
                r.mail_status.unwrap_or_default(),
                r.promoted.to_string(),
                r.checked_in_at.unwrap_or_default(),
            ];
            csv.push_str(&cells.iter().map(|c| csv_cell(c)).collect::<Vec<_>>().join(","));
            csv.push_str("\r\n");
        }
        let first = after == 0;
        let name =
            if first { format!("{event}-attendees.csv") } else { format!("{event}-attendees-after-{after}.csv") };
        let mut reply = Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "text/csv; charset=utf-8")
            .header("content-disposition", format!("attachment; filename=\"{name}\""))
            .header("cache-control", "no-store");
        if let Some(next) = next {
            reply =
                reply.header("link", format!("</admin/events/{event}/report?format=csv&cursor={next}>; rel=\"next\""));
        }
        Ok(reply.body(Body::Text(csv)).unwrap_or_default())
    }
}

/// Rows of one page of the CSV report: ~200 bytes a row, ~4 MB a page.
pub const CSV_PAGE: usize = 20_000;
/// A page stops growing past this many bytes (a row is at most ~1 KB), under Lambda's 6 MB.
pub const CSV_PAGE_BYTES: usize = 4 * 1024 * 1024;

/// The ticket number of the last row written (the CSV's rows begin with it).
fn last_row_ticket(csv: &str) -> u32 {
    let last = csv.trim_end().rsplit("\r\n").next().unwrap_or_default();
    last.split(',').next().and_then(|n| n.parse().ok()).unwrap_or(0)
}
