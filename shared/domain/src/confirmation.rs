//! The confirmation mail a winner receives: subject, text and HTML parts, composed from the event
//! and the order. Pure: sending is the mailer's job.

use super::{
    Event,
    event::rfc3339,
    order::OrderMessage,
    red_packet::Amount,
    ticket_pass::{Pass, PassKey, qr_png},
};

/// The content id of the ticket pass's QR code, an inline image the HTML part shows.
pub const PASS_IMAGE_ID: &str = "ticket-pass";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmation {
    pub subject: String,
    pub text: String,
    pub html: String,
    /// The signed ticket pass (also in the text part, for a door that types it in).
    pub pass: String,
    /// The pass as a QR code (PNG), sent inline as [`PASS_IMAGE_ID`].
    pub pass_png: Option<Vec<u8>>,
}

/// Organisers write titles and venues; they go into HTML escaped.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The confirmation of `order`; `amount` is its red packet's, for a red-packet event.
pub fn compose(event: &Event, order: &OrderMessage, amount: Option<&Amount>, key: &PassKey) -> Confirmation {
    let pass =
        key.issue(&Pass { event: order.event_id.clone(), order: order.order_id.clone(), ticket_no: order.ticket_no });
    let when = event.starts_at.map(rfc3339);
    let mut lines = vec![
        format!("Your ticket for \"{}\" is confirmed.", event.title),
        String::new(),
        format!("Ticket number: {}", order.ticket_no),
        format!("Order id:      {}", order.order_id),
    ];
    if let Some(amount) = amount {
        lines.push(format!("Red packet:    {}", amount.display()));
    }
    if let Some(when) = &when {
        lines.push(format!("When:          {when}"));
    }
    if let Some(venue) = &event.venue {
        lines.push(format!("Where:         {venue}"));
    }
    lines.push(String::new());
    lines.push("Show the QR code at the door (or this pass). This ticket is yours alone.".into());
    lines.push(format!("Pass: {pass}"));

    let mut rows = vec![
        format!("<tr><th align=\"left\">Ticket number</th><td>{}</td></tr>", order.ticket_no),
        format!("<tr><th align=\"left\">Order id</th><td><code>{}</code></td></tr>", escape(order.order_id.as_str())),
    ];
    if let Some(amount) = amount {
        rows.push(format!("<tr><th align=\"left\">Red packet</th><td>{}</td></tr>", escape(&amount.display())));
    }
    if let Some(when) = &when {
        rows.push(format!("<tr><th align=\"left\">When</th><td>{}</td></tr>", escape(when)));
    }
    if let Some(venue) = &event.venue {
        rows.push(format!("<tr><th align=\"left\">Where</th><td>{}</td></tr>", escape(venue)));
    }
    let html = format!(
        "<!doctype html><html><body><p>Your ticket for <strong>{}</strong> is confirmed.</p><table>{}</table>\
         <p><img src=\"cid:{PASS_IMAGE_ID}\" alt=\"Ticket pass QR code\" width=\"240\" height=\"240\"></p>\
         <p>Show the QR code at the door. This ticket is yours alone.</p></body></html>",
        escape(&event.title),
        rows.join("")
    );
    Confirmation {
        subject: format!("Your ticket #{} for {}", order.ticket_no, event.title),
        text: lines.join("\n"),
        html,
        pass_png: qr_png(&pass, 6),
        pass,
    }
}

/// The one mail a user who waited gets when the waitlist closes with no ticket for them. No pass.
pub fn waitlist_closed(event: &Event) -> Confirmation {
    let text = format!(
        "The waitlist for \"{}\" has closed: no ticket came back for you, and none will.\n\n\
         Your place and your address have been removed from the waitlist.",
        event.title
    );
    let html = format!(
        "<!doctype html><html><body><p>The waitlist for <strong>{}</strong> has closed: no ticket came back \
         for you, and none will.</p><p>Your place and your address have been removed from the waitlist.</p>\
         </body></html>",
        escape(&event.title)
    );
    Confirmation {
        subject: format!("No ticket came back for {}", event.title),
        text,
        html,
        pass: String::new(),
        pass_png: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EventId, TicketNo};
    use time::macros::datetime;

    fn event(venue: Option<&str>) -> Event {
        Event {
            id: EventId::parse("ev1").unwrap(),
            title: "Rust <on> Lambda".into(),
            capacity: 100,
            sale_start: datetime!(2026-12-01 09:00 UTC),
            sale_end: datetime!(2026-12-01 10:00 UTC),
            venue: venue.map(str::to_owned),
            starts_at: venue.map(|_| datetime!(2026-12-08 18:00 UTC)),
            description: None,
            cancel_until: datetime!(2026-12-01 10:00 UTC),
            waitlist_size: 100,
            check_in_from: None,
            check_in_until: None,
            expected_rate: None,
            buckets: 1,
            red_packet: None,
            sale_mode: Default::default(),
            draw: None,
            queue: None,
            created_at: datetime!(2026-11-22 10:00 UTC),
        }
    }

    fn order() -> OrderMessage {
        OrderMessage {
            v: 1,
            order_id: crate::OrderId::parse("0199a0b0-0000-7000-8000-000000000001").unwrap(),
            event_id: crate::EventId::parse("ev1").unwrap(),
            user_id: crate::UserId::parse("u1").unwrap(),
            email: crate::Email::parse("u1@example.com").unwrap(),
            ticket_no: TicketNo::new(42),
            created_at: "2026-12-01T09:00:01Z".into(),
            promoted: false,
        }
    }

    #[test]
    fn the_mail_names_the_event_ticket_order_date_and_place() {
        let key = PassKey::new(b"0123456789abcdef-pass-key").unwrap();
        let mail = compose(&event(Some("Hall \"A\"")), &order(), None, &key);
        let pass =
            crate::ticket_pass::PassKeyRing::from(key.public()).verify(&mail.pass).expect("the mail's pass is signed");
        assert_eq!((pass.ticket_no, pass.order.as_str()), (TicketNo::new(42), "0199a0b0-0000-7000-8000-000000000001"));
        assert!(mail.text.contains(&mail.pass) && mail.html.contains("cid:ticket-pass"));
        assert!(mail.pass_png.as_deref().is_some_and(|png| png.starts_with(b"\x89PNG")));
        assert_eq!(mail.subject, "Your ticket #42 for Rust <on> Lambda");
        for part in [&mail.text, &mail.html] {
            assert!(part.contains("42") && part.contains("0199a0b0-0000-7000-8000-000000000001"));
            assert!(part.contains("2026-12-08T18:00:00Z"));
        }
        assert!(mail.text.contains("Where:         Hall \"A\""));
        assert!(mail.html.contains("Rust &lt;on&gt; Lambda") && mail.html.contains("Hall &quot;A&quot;"));
        assert!(!mail.html.contains("<on>"));
    }

    #[test]
    fn date_and_place_are_left_out_when_not_given() {
        let mail = compose(&event(None), &order(), None, &PassKey::new(b"0123456789abcdef-pass-key").unwrap());
        assert!(!mail.text.contains("Where") && !mail.text.contains("When"));
        assert!(!mail.text.contains("Red packet"));
    }

    #[test]
    fn a_red_packet_mail_names_its_amount() {
        let amount = Amount { value: 1_234, currency: crate::red_packet::Currency::parse("CNY").unwrap() };
        let key = PassKey::new(b"0123456789abcdef-pass-key").unwrap();
        let mail = compose(&event(None), &order(), Some(&amount), &key);
        assert!(mail.text.contains("Red packet:    12.34 CNY"), "{}", mail.text);
        assert!(mail.html.contains("<td>12.34 CNY</td>"), "{}", mail.html);
    }
}
