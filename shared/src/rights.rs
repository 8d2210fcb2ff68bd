//! Each function's rights: what its code calls, on which resource, for which items, and why. The
//! one source of template.yaml's policies and docs/SECURITY.md's table of rights (`cargo xtask
//! gen`); `tests/integration/rights.rs` evaluates the template's documents against it, and the local
//! cloud runs every route and path under these roles with IAM enforced, taking rights away one at a
//! time (docs/SECURITY.md, "Rights").
//!
//! Writes and reads of the table are scoped to the items a function uses by their partition key
//! (`dynamodb:LeadingKeys`); an update also by the attributes it may name (`dynamodb:Attributes`,
//! the lists of [`crate::store::schema::updated`], which each update's unit test holds its
//! expressions to).

use crate::store::schema::updated;

/// A resource of template.yaml a right names: its name in docs/SECURITY.md's table, and the
/// expression that names it in a policy (a YAML flow value, or indented block lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    pub name: &'static str,
    pub yaml: &'static str,
}

pub const TABLE: Resource = Resource { name: "Table", yaml: "!GetAtt Table.Arn" };
pub const GSI1: Resource = Resource { name: "Table/index/GSI1", yaml: "!Sub \"${Table.Arn}/index/GSI1\"" };
pub const GSI2: Resource = Resource { name: "Table/index/GSI2", yaml: "!Sub \"${Table.Arn}/index/GSI2\"" };
pub const ORDERS_QUEUE: Resource = Resource { name: "OrdersQueue", yaml: "!GetAtt OrdersQueue.Arn" };
pub const DEAD_LETTERS: Resource =
    Resource { name: "OrdersDeadLetterQueue", yaml: "!GetAtt OrdersDeadLetterQueue.Arn" };
pub const CACHE_AUTH_SECRET: Resource = Resource { name: "CacheAuthSecret", yaml: "!GetAtt CacheAuthSecret.Id" };
pub const HASH_SECRET: Resource = Resource { name: "HashSecret", yaml: "!GetAtt HashSecret.Id" };
pub const ORDER_KEY_SECRET: Resource = Resource { name: "OrderKeySecret", yaml: "!GetAtt OrderKeySecret.Id" };
/// The stack's own pass keys, or a retained stack's (a teardown keeps them: docs/DEPLOY.md).
pub const PASS_KEY_SECRET: Resource = Resource {
    name: "PassKeySecret",
    yaml: "!If [CreatesPassKeys, !GetAtt PassKeySecret.Id, !Ref RetainedPassKeySecretArn]",
};
pub const PASS_PUBLIC_KEYS_SECRET: Resource = Resource {
    name: "PassPublicKeysSecret",
    yaml: "!If [CreatesPassKeys, !GetAtt PassPublicKeysSecret.Id, !Ref RetainedPassPublicKeysSecretArn]",
};
/// The aliases the API invokes, where the warm fleet is provisioned.
pub const GRAB_ALIAS: Resource = Resource { name: "GrabFunction:live", yaml: "!Sub \"${GrabFunction.Arn}:live\"" };
pub const VERIFY_HASH_ALIAS: Resource =
    Resource { name: "VerifyHashFunction:live", yaml: "!Sub \"${VerifyHashFunction.Arn}:live\"" };
pub const GRAB_FUNCTION: Resource = Resource { name: "GrabFunction", yaml: "!GetAtt GrabFunction.Arn" };
pub const VERIFY_HASH_FUNCTION: Resource =
    Resource { name: "VerifyHashFunction", yaml: "!GetAtt VerifyHashFunction.Arn" };
/// Calls IAM cannot scope to a resource (an account's settings).
pub const ANY: Resource = Resource { name: "*", yaml: "\"*\"" };
/// The account's SES identities, held to the sender by [`FROM_THE_SENDER`]; on an emulator "*".
pub const SENDER_IDENTITIES: Resource = Resource {
    name: "identities as SenderEmail",
    yaml: "!If\n  - HasAwsEndpointUrl\n  - \"*\"\n  - !Sub arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:identity/*",
};
/// A send only as `SenderEmail` (AWS only: an emulator sets no `ses:FromAddress`).
pub const FROM_THE_SENDER: &str = "!If\n  - HasAwsEndpointUrl\n  - !Ref AWS::NoValue\n  - {\"StringEquals\": {\"ses:FromAddress\": !Ref SenderEmail}}";

/// When a right is in the role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    Always,
    /// The cache has an AUTH token in Secrets Manager (every AWS deployment; not the local cloud's
    /// emulator, which names its token).
    CacheAuthSecret,
    /// Only on an emulator (`AwsEndpointUrl` set), for an action it names otherwise than AWS:
    /// never in an AWS deployment, and in no table of rights.
    Emulator,
}

impl When {
    /// The template's condition, if any.
    pub fn condition(self) -> Option<&'static str> {
        match self {
            Self::Always => None,
            Self::CacheAuthSecret => Some("HasCacheAuthSecret"),
            Self::Emulator => Some("HasAwsEndpointUrl"),
        }
    }
}

/// One statement of a function's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The function's binary.
    pub function: &'static str,
    /// Which calls need it (the policy's comment).
    pub why: &'static str,
    pub actions: &'static [&'static str],
    pub on: &'static [Resource],
    /// The partition-key prefixes of the items it may touch (empty: any).
    pub keys: &'static [&'static str],
    /// For an update: every attribute it may name.
    pub attributes: Option<&'static [&'static str]>,
    /// A condition of another kind, as the template writes it.
    pub condition: Option<&'static str>,
    pub when: When,
}

/// The orders queue's receive and delete for mail's event source mapping, as SAM's
/// `SQSPollerPolicy` on that queue alone. The mapping is a resource of its own (`MailOrders`), not
/// a SAM event: SAM would add the managed `AWSLambdaSQSQueueExecutionRole`, receive and delete on
/// every queue, the dead letters' included.
pub const POLLERS: &[(&str, &str)] = &[("mail", "OrdersQueue")];

/// Every function's rights, in the order of its policy.
pub const GRANTS: &[Grant] = &[
    Grant {
        function: "release",
        why: "The cache's AUTH token, read at cold start (shared/adapters/src/config.rs, GateSettings::load).",
        actions: &["secretsmanager:GetSecretValue"],
        on: &[CACHE_AUTH_SECRET],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::CacheAuthSecret,
    },
    Grant {
        function: "release",
        why: "Writes scoped by the item's key (docs/SECURITY.md, \"Rights\"): the event, a ballot's losers' waiting places, a rebuild's record, the draw's roll; the draw's record on the event's item. A draw reads its laid places' addresses a hundred at a time. Reads scoped by key too: the event (and a rebuild's doubted holder), the entries and the roll, the give-backs and waiters a rebuild lays down.",
        actions: &["dynamodb:GetItem"],
        on: &[TABLE],
        keys: &["EVENT#", "ORDER#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "release",
        why: "A ballot's draw reads its winners' entries for their addresses (store/draws.rs).",
        actions: &["dynamodb:BatchGetItem"],
        on: &[TABLE],
        keys: &["ENTRY#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "release",
        why: "A draw's entries and roll (store/draws.rs, handlers/draws/draw.rs); an exact rebuild's give-backs and waiters (recovery.rs).",
        actions: &["dynamodb:Query"],
        on: &[TABLE],
        keys: &["ENTRY#", "ROLL#", "RETURN#", "WAIT#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "release",
        why: "An exact rebuild's orders of the event, by the attendee index (recovery.rs, store/orders.rs).",
        actions: &["dynamodb:Query"],
        on: &[GSI2],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "release",
        why: "The released event (handlers/release.rs); a draw's roll and its waiting places (handlers/draws/draw.rs); a rebuild's record (recovery.rs).",
        actions: &["dynamodb:PutItem"],
        on: &[TABLE],
        keys: &["EVENT#", "WAIT#", "REBUILD#", "ROLL#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "release",
        why: "A draw closes the registration and records itself on the event's item (store/draws.rs).",
        actions: &["dynamodb:UpdateItem"],
        on: &[TABLE],
        keys: &["EVENT#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "release",
        why: "A ballot's draw sends its winners' orders, sealed as grab seals them.",
        actions: &["sqs:SendMessage", "sqs:GetQueueAttributes"],
        on: &[ORDERS_QUEUE],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "release",
        why: "Rotating keys: their labels (DescribeSecret), then the values of versions not read before. The order seal; and the hash secret, whose receipt keys' public halves a draw's event commits to at release (handlers/release.rs).",
        actions: &["secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"],
        on: &[ORDER_KEY_SECRET, HASH_SECRET],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "release",
        why: "Read-only: the account's limits for the release's warnings (neither names a resource).",
        actions: &["lambda:GetAccountSettings", "ses:GetAccount"],
        on: &[ANY],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "door",
        why: "The event, a ticket's holder, the order.",
        actions: &["dynamodb:GetItem"],
        on: &[TABLE],
        keys: &["EVENT#", "TICKET#", "ORDER#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "door",
        why: "The door's figures: the attendee list (checked in of tickets).",
        actions: &["dynamodb:Query"],
        on: &[GSI2],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "door",
        why: "The check-in is written on the order and nowhere else, naming only the check-in's attributes and what its condition reads (shared/adapters/src/store/schema.rs, `updated`).",
        actions: &["dynamodb:UpdateItem"],
        on: &[TABLE],
        keys: &["ORDER#"],
        attributes: Some(updated::DOOR_ORDER),
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "door",
        why: "The public pass keys a pass is checked with (config.rs, PassKeyRingSource).",
        actions: &["secretsmanager:GetSecretValue"],
        on: &[PASS_PUBLIC_KEYS_SECRET],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "query",
        why: "The cache's AUTH token, read at cold start (shared/adapters/src/config.rs, GateSettings::load).",
        actions: &["secretsmanager:GetSecretValue"],
        on: &[CACHE_AUTH_SECRET],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::CacheAuthSecret,
    },
    Grant {
        function: "query",
        why: "The audit (report, live view) reads the tickets a hundred at a time. Reads scoped by key: an event, an order, an entry; the audit's give-backs, rebuilds and waiters; a draw's entries and roll.",
        actions: &["dynamodb:GetItem"],
        on: &[TABLE],
        keys: &["EVENT#", "ORDER#", "ENTRY#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "query",
        why: "The audit's tickets (handlers/live.rs, Auditor).",
        actions: &["dynamodb:BatchGetItem"],
        on: &[TABLE],
        keys: &["TICKET#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "query",
        why: "The audit's give-backs, rebuilds, entries and roll (handlers/live.rs); an exact rebuild's give-backs and waiters (recovery.rs).",
        actions: &["dynamodb:Query"],
        on: &[TABLE],
        keys: &["RETURN#", "REBUILD#", "ENTRY#", "ROLL#", "WAIT#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "query",
        why: "The event list (GSI1, store/events.rs); the attendee list, the audit's and a rebuild's orders (GSI2, store/orders.rs).",
        actions: &["dynamodb:Query"],
        on: &[GSI1, GSI2],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "query",
        why: "The exact rebuild of a lost cache (an event's or an order's read finds it gone) records itself; an old layout's rebuild writes the waiting places.",
        actions: &["dynamodb:PutItem"],
        on: &[TABLE],
        keys: &["REBUILD#", "WAIT#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "query",
        why: "The queue's depth: the live view's orders on their way, a rebuild that goes by the queue (recovery.rs).",
        actions: &["sqs:GetQueueAttributes"],
        on: &[ORDERS_QUEUE],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "query",
        why: "GET /events/{id}/pass-key (handlers/query/pass_key.rs).",
        actions: &["secretsmanager:GetSecretValue"],
        on: &[PASS_PUBLIC_KEYS_SECRET],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "verify-hash",
        why: "The cache's AUTH token, read at cold start (shared/adapters/src/config.rs, GateSettings::load).",
        actions: &["secretsmanager:GetSecretValue"],
        on: &[CACHE_AUTH_SECRET],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::CacheAuthSecret,
    },
    Grant {
        function: "verify-hash",
        why: "The event's window, once per environment; the cache only for the per-user limit.",
        actions: &["dynamodb:GetItem"],
        on: &[TABLE],
        keys: &["EVENT#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "verify-hash",
        why: "The hash key, a rotating key: its labels, then the versions not read before (secrets.rs).",
        actions: &["secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"],
        on: &[HASH_SECRET],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "grab",
        why: "The cache's AUTH token, read at cold start (shared/adapters/src/config.rs, GateSettings::load).",
        actions: &["secretsmanager:GetSecretValue"],
        on: &[CACHE_AUTH_SECRET],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::CacheAuthSecret,
    },
    Grant {
        function: "grab",
        why: "Reads scoped by key: the event, an order, a waiting place, an entry; a rebuild's give-backs and waiters, a draw's entries and roll.",
        actions: &["dynamodb:GetItem"],
        on: &[TABLE],
        keys: &["EVENT#", "ORDER#", "WAIT#", "ENTRY#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "grab",
        why: "A rebuild's give-backs and waiters (recovery.rs); a fair open's entries and roll, for a place (handlers/draws/queue.rs).",
        actions: &["dynamodb:Query"],
        on: &[TABLE],
        keys: &["RETURN#", "WAIT#", "ENTRY#", "ROLL#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "grab",
        why: "A rebuild's orders of the event, by the attendee index (recovery.rs).",
        actions: &["dynamodb:Query"],
        on: &[GSI2],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "grab",
        why: "A cancellation: one transaction on the order, its ticket and the return marker, then the marker's removal; a waiting place; a ballot's entry or a queue place with a check of the event's item (and a late joiner counted on it); a rebuild's record.",
        actions: &["dynamodb:PutItem"],
        on: &[TABLE],
        keys: &["RETURN#", "WAIT#", "ENTRY#", "REBUILD#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "grab",
        why: "A cancellation's update of the order, a late joiner counted on the event's item: each naming only its own attributes (shared/adapters/src/store/schema.rs, `updated`).",
        actions: &["dynamodb:UpdateItem"],
        on: &[TABLE],
        keys: &["ORDER#"],
        attributes: Some(updated::GRAB_ORDER),
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "grab",
        why: "A fair open's late joiner counted on the event's item (store/draws.rs).",
        actions: &["dynamodb:UpdateItem"],
        on: &[TABLE],
        keys: &["EVENT#"],
        attributes: Some(updated::GRAB_EVENT),
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "grab",
        why: "A cancellation frees the ticket (store/cancellations.rs); the give-back marker goes once the number is back (give_back.rs).",
        actions: &["dynamodb:DeleteItem"],
        on: &[TABLE],
        keys: &["TICKET#", "RETURN#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "grab",
        why: "An entry's transaction checks the event's registration is open (store/draws.rs).",
        actions: &["dynamodb:ConditionCheckItem"],
        on: &[TABLE],
        keys: &["EVENT#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "grab",
        why: "Each order sent to the queue (delivery.rs); a rebuild that goes by the queue reads its depth (recovery.rs).",
        actions: &["sqs:SendMessage", "sqs:GetQueueAttributes"],
        on: &[ORDERS_QUEUE],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "grab",
        why: "The rotating keys: the hash (and the receipt key derived from it) and the order seal (secrets.rs).",
        actions: &["secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"],
        on: &[HASH_SECRET, ORDER_KEY_SECRET],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "mail",
        why: "The cache's AUTH token, read at cold start (shared/adapters/src/config.rs, GateSettings::load).",
        actions: &["secretsmanager:GetSecretValue"],
        on: &[CACHE_AUTH_SECRET],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::CacheAuthSecret,
    },
    Grant {
        function: "mail",
        why: "The event, and an order already stored.",
        actions: &["dynamodb:GetItem"],
        on: &[TABLE],
        keys: &["EVENT#", "ORDER#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "mail",
        why: "The order and its ticket (one transaction), the mail's claim on the order, a waiting place's closing notice.",
        actions: &["dynamodb:PutItem"],
        on: &[TABLE],
        keys: &["ORDER#", "TICKET#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "mail",
        why: "The mail's claim and status on the order (store/orders.rs); a waiting place's closing notice (store/waitlist.rs).",
        actions: &["dynamodb:UpdateItem"],
        on: &[TABLE],
        keys: &["ORDER#", "WAIT#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "mail",
        why: "The order seal it checks, the pass key it signs with, and the public keys it publishes (config.rs).",
        actions: &["secretsmanager:GetSecretValue"],
        on: &[ORDER_KEY_SECRET, PASS_KEY_SECRET, PASS_PUBLIC_KEYS_SECRET],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "mail",
        why: "The rotating keys' labels (the public keys are read whole).",
        actions: &["secretsmanager:DescribeSecret"],
        on: &[ORDER_KEY_SECRET, PASS_KEY_SECRET],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "mail",
        why: "The only writer of the public keys: it alone holds the private one.",
        actions: &["secretsmanager:PutSecretValue"],
        on: &[PASS_PUBLIC_KEYS_SECRET],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "mail",
        why: "Mail as the sender and no one else. SES authorizes a send on the sender's identity, and in the SES sandbox on each recipient's identity too (a staging stack's verified test addresses), so the resource is the account's identities and the condition the From address. An emulator (AwsEndpointUrl set) authorizes SES v2's send on \"*\" whatever the sender, and sets no ses:FromAddress (MiniStack 1.5.33: _ses_v2_resource_arn), so there the statement names \"*\" without the condition; tests/integration/rights.rs checks the AWS form.",
        actions: &["ses:SendEmail"],
        on: &[SENDER_IDENTITIES],
        keys: &[],
        attributes: None,
        condition: Some(FROM_THE_SENDER),
        when: When::Always,
    },
    Grant {
        function: "reconcile",
        why: "The cache's AUTH token, read at cold start (shared/adapters/src/config.rs, GateSettings::load).",
        actions: &["secretsmanager:GetSecretValue"],
        on: &[CACHE_AUTH_SECRET],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::CacheAuthSecret,
    },
    Grant {
        function: "reconcile",
        why: "An order; the give-backs due and the waiters (its rebuilds too).",
        actions: &["dynamodb:GetItem"],
        on: &[TABLE],
        keys: &["ORDER#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "reconcile",
        why: "The give-backs due and the waiting places (give_back.rs, handlers/reconcile.rs), a rebuild's too (recovery.rs).",
        actions: &["dynamodb:Query"],
        on: &[TABLE],
        keys: &["RETURN#", "WAIT#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "reconcile",
        why: "The events (GSI1, store/events.rs); a rebuild's and the drift's orders of an event (GSI2, store/orders.rs).",
        actions: &["dynamodb:Query"],
        on: &[GSI1, GSI2],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "reconcile",
        why: "The stock snapshot and a waitlist's close on the event's item, a promoted waiter, a give-back's marker removed, a rebuild's record.",
        actions: &["dynamodb:UpdateItem"],
        on: &[TABLE],
        keys: &["EVENT#", "WAIT#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "reconcile",
        why: "A give-back's marker, once the number is back (give_back.rs).",
        actions: &["dynamodb:DeleteItem"],
        on: &[TABLE],
        keys: &["RETURN#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "reconcile",
        why: "A rebuild's record, and the waiting places an old layout's rebuild writes (recovery.rs).",
        actions: &["dynamodb:PutItem"],
        on: &[TABLE],
        keys: &["REBUILD#", "WAIT#"],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "reconcile",
        why: "The outbox re-driven to the queue, its depth read first (delivery.rs, handlers/reconcile.rs).",
        actions: &["sqs:SendMessage", "sqs:GetQueueAttributes"],
        on: &[ORDERS_QUEUE],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "reconcile",
        why: "An operator's redrive ({\"redrive\": \"dead-letters\"}): the DLQ's messages back on the queue.",
        actions: &["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"],
        on: &[DEAD_LETTERS],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "reconcile",
        why: "The order seal, a rotating key (secrets.rs).",
        actions: &["secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"],
        on: &[ORDER_KEY_SECRET],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "reconcile",
        why: "The warm fleet, on the two aliases the API invokes and nowhere else.",
        actions: &[
            "lambda:GetProvisionedConcurrencyConfig",
            "lambda:PutProvisionedConcurrencyConfig",
            "lambda:DeleteProvisionedConcurrencyConfig",
        ],
        on: &[GRAB_ALIAS, VERIFY_HASH_ALIAS],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Always,
    },
    Grant {
        function: "reconcile",
        why: "Only on an emulator (AwsEndpointUrl set): MiniStack 1.5.33 authorizes those three calls as lambda:GetFunction, UpdateFunctionCode and DeleteFunction on the function without its qualifier (core/iam_actions.py, _lambda_action). An AWS deployment never has this statement.",
        actions: &["lambda:GetFunction", "lambda:UpdateFunctionCode", "lambda:DeleteFunction"],
        on: &[GRAB_FUNCTION, VERIFY_HASH_FUNCTION],
        keys: &[],
        attributes: None,
        condition: None,
        when: When::Emulator,
    },
];
