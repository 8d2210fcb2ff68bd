//! Keys rotated in Secrets Manager (the emulator keeps its staging labels as AWS does) while
//! environments hold them, in the two steps of docs/DEPLOY.md's "Rotating keys": the new value
//! staged `AWSPENDING`, then, once every environment has read it, made `AWSCURRENT`. An
//! environment is played by a key source read once at one moment: one read before a step and one
//! after stand for two environments of a function mid-rotation. What one signs, any other of the
//! same or the next step accepts; nothing in flight is refused.

use std::time::Duration;

use aws_sdk_secretsmanager::Client;
use shared::{
    config::{PassKeyRingSource, Publication, publish_pass_keys_to},
    domain::{
        EventId, OrderId, TicketNo, UserId,
        key_rotation::Staged,
        order_seal::SealKey,
        ticket_pass::{Pass, PassKey, PassKeyRing},
        verify_hash::HashKey,
    },
    secrets::StagedSecret,
};

use crate::helpers::*;

/// One secret and the runbook's two steps on it.
struct Rotating {
    sm: Client,
    id: String,
}

impl Rotating {
    async fn create(app: &TestApp, what: &str, value: &str) -> Self {
        let sm = Client::new(&app.sdk);
        let id = format!("{what}-{}", uuid::Uuid::now_v7().simple());
        sm.create_secret().name(&id).secret_string(value).send().await.unwrap();
        Self { sm, id }
    }

    /// Step 1: `aws secretsmanager put-secret-value ... --version-stages AWSPENDING`.
    async fn stage(&self, value: &str) -> String {
        let out = self
            .sm
            .put_secret_value()
            .secret_id(&self.id)
            .secret_string(value)
            .version_stages("AWSPENDING")
            .send()
            .await
            .unwrap();
        out.version_id.unwrap()
    }

    /// Step 2: `aws secretsmanager update-secret-version-stage ... --version-stage AWSCURRENT
    /// --move-to-version-id <new> --remove-from-version-id <current>`, then AWSPENDING removed.
    async fn promote(&self, new: &str) {
        let versions = self.sm.list_secret_version_ids().secret_id(&self.id).send().await.unwrap();
        let current = versions
            .versions
            .unwrap_or_default()
            .into_iter()
            .find(|v| v.version_stages().iter().any(|s| s == "AWSCURRENT"))
            .and_then(|v| v.version_id)
            .unwrap();
        let stage = |label: &str| self.sm.update_secret_version_stage().secret_id(&self.id).version_stage(label);
        stage("AWSCURRENT").move_to_version_id(new).remove_from_version_id(current).send().await.unwrap();
        stage("AWSPENDING").remove_from_version_id(new).send().await.unwrap();
    }

    /// A staging withdrawn: `aws secretsmanager update-secret-version-stage ... --version-stage
    /// AWSPENDING --remove-from-version-id <staged>`.
    async fn withdraw(&self, staged: &str) {
        let stage = self.sm.update_secret_version_stage().secret_id(&self.id).version_stage("AWSPENDING");
        stage.remove_from_version_id(staged).send().await.unwrap();
    }

    /// An environment reading the key now, and never again.
    async fn environment<K: Clone + Send + Sync + 'static>(
        &self,
        app: &TestApp,
        parse: fn(&str) -> Result<K, &'static str>,
    ) -> Staged<K> {
        let keys = StagedSecret::secret(&app.sdk, &self.id, parse, Duration::MAX);
        (*keys.get().await.unwrap()).clone()
    }
}

/// A key that signs and checks (the hash, the order seal): every environment of a step and of the
/// step after accepts what the other signs, and what was signed before the rotation is accepted
/// after it. An environment that read before the first step refuses what the new key signs: the
/// reason the runbook waits `SECRETS_KEPT_SECONDS` between the steps.
async fn rotate_without_a_gap<K: Clone + Send + Sync + 'static>(
    app: &TestApp,
    what: &str,
    parse: fn(&str) -> Result<K, &'static str>,
    sign: impl Fn(&K) -> String,
    accepts: impl Fn(&Staged<K>, &str) -> bool,
) {
    let secret = Rotating::create(app, what, "the key before the rotation, 32+").await;
    let before = secret.environment(app, parse).await;
    let in_flight = sign(&before.current);

    let version = secret.stage("the key after the rotation, 32 and more").await;
    let staged = secret.environment(app, parse).await;
    assert!(staged.pending.is_some(), "{what}: the new key is staged");
    for (signer, checker) in [(&before, &staged), (&staged, &before)] {
        assert!(accepts(checker, &sign(&signer.current)), "{what}: staged, every environment signs with the old key");
    }

    secret.promote(&version).await;
    let after = secret.environment(app, parse).await;
    assert!(accepts(&staged, &sign(&after.current)), "{what}: the new key checks where it was staged");
    assert!(accepts(&after, &sign(&staged.current)), "{what}: the old key checks as previous");
    assert!(accepts(&after, &in_flight), "{what}: signed before the rotation, accepted after it");
    assert!(!accepts(&before, &sign(&after.current)), "{what}: an environment two steps behind refuses the new key");
}

#[tokio::test]
async fn the_hash_and_the_order_seal_rotate_with_nothing_refused() {
    let app = TestApp::new().await;
    let (event, user) = (EventId::parse("lecture-rotation").unwrap(), UserId::parse("u1").unwrap());
    let expires = shared::domain::event::epoch_ms(time::OffsetDateTime::now_utc()) + 600_000;
    rotate_without_a_gap(
        &app,
        "hash-secret",
        |s| HashKey::new(s.as_bytes()),
        |k: &HashKey| k.issue(&event, &user, expires),
        |keys, hash| keys.check(|k| k.verify(hash, &event, &user, expires - 1)).is_ok(),
    )
    .await;
    let body = r#"{"order_id":"0199a0b0-0000-7000-8000-000000000001"}"#;
    rotate_without_a_gap(
        &app,
        "order-key",
        |s| SealKey::new(s.as_bytes()),
        |k: &SealKey| k.seal(body),
        |keys, seal| keys.check(|k| k.check(body, Some(seal))).is_ok(),
    )
    .await;
}

/// The pass key: mail signs, the doors check with the public halves mail publishes. Staged, the
/// published ring names the new key as next; made current, the old one as previous. A door that
/// read the ring after the first step checks the passes of every mail environment after it.
#[tokio::test]
async fn the_pass_key_rotates_with_every_mailed_pass_still_checking_in() {
    let app = TestApp::new().await;
    let secret = Rotating::create(&app, "pass-key", "the pass key before the rotation").await;
    let sm = Client::new(&app.sdk);
    let public = format!("pass-public-keys-{}", uuid::Uuid::now_v7().simple());
    sm.create_secret().name(&public).secret_string("{}").send().await.unwrap();
    let parse = |s: &str| PassKey::new(s.as_bytes());
    // Mail publishes what it read; a door reads what is published.
    let publish = |keys: Staged<PassKey>| {
        let (sdk, public) = (app.sdk.clone(), public.clone());
        async move {
            publish_pass_keys_to(&sdk, &public, &PassKeyRing::of(&keys), keys.read_ms).await.unwrap()
                == Publication::Written
        }
    };
    let door = || async { PassKeyRingSource::secret(app.sdk.clone(), &public, Duration::MAX).get().await.unwrap() };
    let pass = Pass { event: fresh_event_id(), order: OrderId::generate(), ticket_no: TicketNo::new(7) };

    let before = secret.environment(&app, parse).await;
    assert!(publish(before.clone()).await, "first publication");
    assert!(!publish(before.clone()).await, "the same ring is not written again");
    let mailed_before = before.current.issue(&pass);
    let door_before = door().await;

    let version = secret.stage("the pass key after the rotation!").await;
    let staged = secret.environment(&app, parse).await;
    assert!(publish(staged.clone()).await);
    let door_staged = door().await;
    assert_eq!(door_staged.next, Some(staged.pending.as_ref().unwrap().public()));
    assert_eq!(door_staged.verify(&mailed_before), Ok(pass.clone()));

    secret.promote(&version).await;
    let after = secret.environment(&app, parse).await;
    assert!(publish(after.clone()).await);
    let mailed_after = after.current.issue(&pass);
    assert_eq!(door_staged.verify(&mailed_after), Ok(pass.clone()), "a door that read the staged ring");
    let door_after = door().await;
    assert_eq!(
        (door_after.current.clone(), door_after.previous.clone()),
        (after.current.public(), Some(before.current.public()))
    );
    assert_eq!(door_after.verify(&mailed_before), Ok(pass.clone()), "mailed before the rotation, still checks in");
    assert_eq!(door_after.verify(&mailed_after), Ok(pass.clone()));
    // A mail environment whose view is from before a step (read within its `kept`, so not stale)
    // publishes after one that read since: the newer ring stays published.
    assert!(!publish(staged.clone()).await, "the staged ring is not written back over the promoted one");
    assert!(!publish(before.clone()).await, "nor the ring from before the rotation");
    assert_eq!(door().await, door_after, "the doors still read the promoted ring");
    // A staging withdrawn (its key leaked, say): the view read after it is published, and the
    // withdrawn key is no longer `next`.
    let leaked = secret.stage("a pass key staged, then withdrawn!").await;
    assert!(publish(secret.environment(&app, parse).await).await);
    assert!(door().await.next.is_some());
    secret.withdraw(&leaked).await;
    assert!(publish(secret.environment(&app, parse).await).await, "the withdrawal is published");
    assert_eq!(door().await.next, None, "the withdrawn key is trusted no more");
    // A door that read before the first step does not know the new key: it reads the ring again
    // for such a pass (`Door::check_in`).
    assert!(door_before.verify(&mailed_after).is_err() && door_after.knows(&after.current.public().id()));
}

/// A key source read through a network the test shuts, keeping its stages `kept`.
async fn behind_a_valve(
    app: &TestApp,
    secret: &Rotating,
    kept: Duration,
) -> (StagedSecret<HashKey>, local_runner::network::Valve) {
    let (far, valve) = local_runner::network::valve_network(&app.settings.aws_endpoint).await.expect("a network");
    let sdk = app.sdk.to_builder().endpoint_url(far).build();
    (StagedSecret::secret(&sdk, &secret.id, |s| HashKey::new(s.as_bytes()), kept), valve)
}

/// How long the environments below keep their keys.
const KEPT: Duration = Duration::from_secs(1);

/// A new secret `what` holding `value`, and an environment's key source for it behind a valve,
/// kept [`KEPT`], that has read it once: the secret, the source, the valve, what it read.
async fn read_behind_a_valve(
    app: &TestApp,
    what: &str,
    value: &str,
) -> (Rotating, StagedSecret<HashKey>, local_runner::network::Valve, std::sync::Arc<Staged<HashKey>>) {
    let secret = Rotating::create(app, what, value).await;
    let (keys, valve) = behind_a_valve(app, &secret, KEPT).await;
    let read = keys.get().await.unwrap();
    (secret, keys, valve, read)
}

/// An environment idle long past its keys' `kept` (a warm environment frozen before the open)
/// answers its first request from the stages it read, while it reads them again in the
/// background: Secrets Manager unreachable then costs the request nothing. (Before, an
/// environment idle more than `kept` + 5 s waited for the read, here forever.)
#[tokio::test]
async fn an_environment_idle_past_its_keys_refresh_answers_at_once_while_it_reads_them_again() {
    let app = TestApp::new().await;
    let (_secret, keys, valve, read) =
        read_behind_a_valve(&app, "hash-idle", "the key the environment read, 32+").await;
    // Idle past `kept` and the 5 s an environment used to serve its stages while reading.
    tokio::time::sleep(KEPT + Duration::from_secs(6)).await;
    valve.shut();
    let served = tokio::time::timeout(Duration::from_secs(1), keys.get()).await;
    let served = served.expect("the first request after the idle waited on Secrets Manager").unwrap();
    assert!(std::sync::Arc::ptr_eq(&served, &read), "the stages read before");
    // The read again is under way, held at the network.
    tokio::time::timeout(Duration::from_secs(10), valve.held(1)).await.expect("a read in the background");
    valve.open();
}

/// What an environment's stale stages cannot check (a key staged and promoted since, which others
/// sign with already) is checked again on the stages read again, at once.
#[tokio::test]
async fn a_check_that_fails_on_stale_stages_is_tried_again_on_the_stages_read_again() {
    let app = TestApp::new().await;
    let (secret, keys, _valve, before) =
        read_behind_a_valve(&app, "hash-stale", "the key before the rotation, 32+").await;
    let version = secret.stage("the key after the rotation, 32 and more").await;
    secret.promote(&version).await;
    let (event, user) = (EventId::parse("lecture-stale").unwrap(), UserId::parse("u1").unwrap());
    let now = shared::domain::event::epoch_ms(time::OffsetDateTime::now_utc());
    let after = HashKey::new(b"the key after the rotation, 32 and more").unwrap();
    let hash = after.issue(&event, &user, now + 600_000);
    assert!(before.check(|k| k.verify(&hash, &event, &user, now)).is_err(), "the stages read before refuse it");
    tokio::time::sleep(KEPT).await;
    let checked = keys.check(|k| k.verify(&hash, &event, &user, now)).await.unwrap();
    assert!(checked.is_ok(), "checked again on the stages read again");
    let forged = HashKey::new(b"a key nobody staged, 32 and more!").unwrap().issue(&event, &user, now + 600_000);
    assert!(keys.check(|k| k.verify(&forged, &event, &user, now)).await.unwrap().is_err(), "a forgery still fails");
}

/// What mail publishes the doors' ring from: a view read since it asked, never the one served
/// stale. A thawed environment whose read fails (here: the secret gone) gets an error from
/// `fresh`, where `get` serves its old view; so it publishes nothing rather than put an older
/// ring over a newer one (a hostile review's finding).
#[tokio::test]
async fn a_fresh_view_is_never_the_one_served_stale() {
    let app = TestApp::new().await;
    let secret = Rotating::create(&app, "hash-fresh", "the key the environment read, 32+").await;
    let keys = StagedSecret::secret(&app.sdk, &secret.id, |s| HashKey::new(s.as_bytes()), KEPT);
    let read = keys.fresh().await.expect("a first read");
    assert!(std::sync::Arc::ptr_eq(&keys.fresh().await.unwrap(), &read), "younger than kept: as read");
    tokio::time::sleep(KEPT).await;
    secret.sm.delete_secret().secret_id(&secret.id).force_delete_without_recovery(true).send().await.unwrap();
    assert!(std::sync::Arc::ptr_eq(&keys.get().await.unwrap(), &read), "get serves the view read before");
    assert!(keys.fresh().await.is_err(), "fresh never does");
}

/// A refusal no newer key could turn into a pass (an expired hash, another user's) costs no read of
/// Secrets Manager, on however old a view: a crowd's junk at the open waits on nothing (a hostile
/// review's finding).
#[tokio::test]
async fn a_refusal_no_newer_key_could_pass_costs_no_read() {
    let app = TestApp::new().await;
    let (_secret, keys, valve, read) =
        read_behind_a_valve(&app, "hash-junk", "the key the environment read, 32+").await;
    tokio::time::sleep(KEPT).await;
    valve.shut();
    let (event, user) = (EventId::parse("lecture-junk").unwrap(), UserId::parse("u1").unwrap());
    let now = shared::domain::event::epoch_ms(time::OffsetDateTime::now_utc());
    let expired = read.current.issue(&event, &user, now - 1_000);
    let refused = tokio::time::timeout(Duration::from_secs(1), keys.check(|k| k.verify(&expired, &event, &user, now)))
        .await
        .expect("an expired hash waited on Secrets Manager");
    assert!(matches!(refused.unwrap(), Err(shared::domain::verify_hash::BadHash::Expired)));
    valve.open();
}

/// Reading a key's stages again costs one `DescribeSecret` while no rotation touched them: the
/// values are asked only for versions not read before (a warm fleet thawed at the open reads
/// every key again within seconds; `GetSecretValue`'s account quota is 10,000 a second,
/// `DescribeSecret`'s 40,000). A version staged since is read, and served.
#[tokio::test]
async fn a_key_read_again_unchanged_asks_for_its_labels_only() {
    let app = TestApp::new().await;
    let secret = Rotating::create(&app, "hash-labels", "the key the environment read, 32+").await;
    let (far, calls) = local_runner::network::counted_network(&app.settings.aws_endpoint).await.expect("a network");
    let sdk = app.sdk.to_builder().endpoint_url(far).build();
    let keys = StagedSecret::secret(&sdk, &secret.id, |s| HashKey::new(s.as_bytes()), KEPT);
    let (describe, get) = ("secretsmanager.DescribeSecret", "secretsmanager.GetSecretValue");
    keys.refresh().await.expect("a first read");
    assert_eq!((calls.of(describe), calls.of(get)), (1, 1), "the labels, then the current version's value");
    for _ in 0..3 {
        keys.refresh().await.expect("a read again");
    }
    assert_eq!((calls.of(describe), calls.of(get)), (4, 1), "read again: the labels only");
    let staged = "the key staged since, 32 and more!";
    secret.stage(staged).await;
    let read = keys.refresh().await.expect("a read after the staging");
    assert_eq!((calls.of(describe), calls.of(get)), (5, 2), "the staged version's value, once");
    let (event, user) = (EventId::parse("lecture-labels").unwrap(), UserId::parse("u1").unwrap());
    let now = shared::domain::event::epoch_ms(time::OffsetDateTime::now_utc());
    let hash = HashKey::new(staged.as_bytes()).unwrap().issue(&event, &user, now + 600_000);
    assert!(
        read.pending.as_ref().is_some_and(|k| k.verify(&hash, &event, &user, now).is_ok()),
        "the staged key is held"
    );
}
