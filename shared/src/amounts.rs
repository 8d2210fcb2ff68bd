//! Red-packet amounts as replies, orders and mails carry them: an amount is a function of the
//! event's seed and the ticket number (`domain::red_packet`), so nothing is stored per order; each
//! environment computes an event's split once and keeps it.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use crate::{
    domain::{
        Event, EventId, TicketNo,
        red_packet::{Amount, Currency},
    },
    recovery::Rebuilder,
};

/// Events whose split an environment keeps (a split of 100,000 numbers is 800 KB).
const SPLITS_KEPT: usize = 64;

struct Split {
    amounts: Vec<u64>,
    currency: Currency,
}

/// Each event's split, computed once per environment; a plain event is remembered as having none.
#[derive(Clone, Default)]
pub struct Splits {
    memo: Arc<Mutex<HashMap<EventId, Option<Arc<Split>>>>>,
}

impl Splits {
    /// The amount of `ticket` in `event` (`None`: not a red-packet event).
    pub fn amount(&self, event: &Event, ticket: TicketNo) -> Option<Amount> {
        let split = match self.remembered(&event.id) {
            Some(split) => split,
            None => self.remember(event),
        };
        lookup(split.as_deref(), ticket)
    }

    /// [`Self::amount`] by the event's id: remembered, or the event read once through the
    /// rebuilder's book. A read that fails leaves the amount out (logged) and is tried again next time.
    pub async fn amount_of(&self, rebuilder: &Rebuilder, event: &EventId, ticket: TicketNo) -> Option<Amount> {
        if let Some(split) = self.remembered(event) {
            return lookup(split.as_deref(), ticket);
        }
        match rebuilder.event(event).await {
            Ok(Some(read)) => self.amount(&read, ticket),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(event_id = %event, error = %e, "event unreadable; the amount is left out");
                None
            }
        }
    }

    /// The event read through the rebuilder's book and its split made, ahead of its first win (a
    /// warm environment before the open); whether the event was found.
    pub async fn prepare(
        &self,
        rebuilder: &Rebuilder,
        event: &EventId,
    ) -> Result<bool, crate::recovery::RecoveryError> {
        if self.remembered(event).is_some() {
            return Ok(true);
        }
        Ok(match rebuilder.event(event).await? {
            Some(read) => {
                self.remember(&read);
                true
            }
            None => false,
        })
    }

    fn remembered(&self, event: &EventId) -> Option<Option<Arc<Split>>> {
        self.memo.lock().expect("splits").get(event).cloned()
    }

    fn remember(&self, event: &Event) -> Option<Arc<Split>> {
        let split = event
            .red_packet
            .as_ref()
            .map(|packet| Arc::new(Split { amounts: packet.split(event.capacity), currency: packet.currency.clone() }));
        let mut memo = self.memo.lock().expect("splits");
        if memo.len() >= SPLITS_KEPT {
            memo.clear();
        }
        memo.insert(event.id.clone(), split.clone());
        split
    }
}

fn lookup(split: Option<&Split>, ticket: TicketNo) -> Option<Amount> {
    let split = split?;
    let value = *split.amounts.get((ticket.get() as usize).checked_sub(1)?)?;
    Some(Amount { value, currency: split.currency.clone() })
}
