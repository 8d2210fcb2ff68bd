//! The ticket pass: what the confirmation mail carries as a QR code and the door scans. A signed
//! statement "order O holds ticket n of event E", Ed25519, so a door device checks it offline with
//! the public key (`GET /events/{id}/pass-key`); only mail holds the private key and signs.
//!
//! Pass: `TP2.<base64url payload>.<base64url signature>`, the payload a compact JSON object
//! `{"k":<key id>,"e":<event>,"o":<order>,"n":<ticket no>}`, the signature over
//! `"ticket-pass-v2\n" + payload`. The key id names the key that signed (its public key's SHA-256,
//! first 8 bytes, base64url), so a door verifies with the current or the previous key and a
//! rotation voids no pass in flight. The pass names no user: the door needs the order and the
//! ticket, not the identity. Passes of the first format (`TP1`, with the user and no key id) still
//! verify, against either key. The pass alone admits nobody: check-in marks the order used exactly
//! once, and a cancelled order's pass is refused there.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use ed25519_dalek::{Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{EventId, OrderId, TicketNo, UserId};

const PREFIX: &str = "TP2.";
const CONTEXT: &[u8] = b"ticket-pass-v2\n";
const PREFIX_V1: &str = "TP1.";
const CONTEXT_V1: &[u8] = b"ticket-pass-v1\n";
/// Longer passes are refused before any decoding (a real one is ~220 characters).
pub const MAX_PASS_LEN: usize = 1_024;

/// What a pass says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pass {
    pub event: EventId,
    pub order: OrderId,
    pub ticket_no: TicketNo,
}

/// The signed payload of a `TP2` pass.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Payload {
    #[serde(rename = "k")]
    key: String,
    #[serde(rename = "e")]
    event: EventId,
    #[serde(rename = "o")]
    order: OrderId,
    #[serde(rename = "n")]
    ticket_no: TicketNo,
}

/// The signed payload of a `TP1` pass (mailed before key ids).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PayloadV1 {
    #[serde(rename = "e")]
    event: EventId,
    #[serde(rename = "o")]
    order: OrderId,
    #[serde(rename = "u")]
    _user: UserId,
    #[serde(rename = "n")]
    ticket_no: TicketNo,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadPass {
    #[error("not a ticket pass")]
    Malformed,
    #[error("the pass's signature does not match")]
    Forged,
    #[error("the pass names a key this deployment no longer knows")]
    UnknownKey,
}

/// The deployment's pass key: signs, in mail only. Never printed.
#[derive(Clone)]
pub struct PassKey(SigningKey);

impl std::fmt::Debug for PassKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PassKey(<redacted>)")
    }
}

impl PassKey {
    /// The key from a deployment secret (any string of at least 16 bytes: Secrets Manager
    /// generates one); the Ed25519 seed is its SHA-256 under this use's own label.
    pub fn new(secret: &[u8]) -> Result<Self, &'static str> {
        if secret.len() < 16 {
            return Err("must be at least 16 bytes");
        }
        let seed: [u8; 32] = Sha256::new().chain_update(b"ticket-pass-key-v1\n").chain_update(secret).finalize().into();
        Ok(Self(SigningKey::from_bytes(&seed)))
    }

    pub fn public(&self) -> PublicPassKey {
        PublicPassKey(self.0.verifying_key())
    }

    pub fn issue(&self, pass: &Pass) -> String {
        let payload = Payload {
            key: self.public().id(),
            event: pass.event.clone(),
            order: pass.order.clone(),
            ticket_no: pass.ticket_no,
        };
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&payload).expect("ids and numbers always serialize"));
        let signature = self.0.sign(&[CONTEXT, payload.as_bytes()].concat());
        format!("{PREFIX}{payload}.{}", URL_SAFE_NO_PAD.encode(signature.to_bytes()))
    }
}

/// A public half: checks passes, cannot sign one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicPassKey(VerifyingKey);

impl PublicPassKey {
    /// The key as published: 32 bytes, base64url without padding.
    pub fn encoded(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.0.as_bytes())
    }

    /// A published key read back.
    pub fn decode(encoded: &str) -> Result<Self, BadPass> {
        let bytes: [u8; 32] =
            URL_SAFE_NO_PAD.decode(encoded).ok().and_then(|b| b.try_into().ok()).ok_or(BadPass::Malformed)?;
        VerifyingKey::from_bytes(&bytes).map(Self).map_err(|_| BadPass::Malformed)
    }

    /// The key's id, as a pass names it: the first 8 bytes of its SHA-256, base64url.
    pub fn id(&self) -> String {
        let digest = Sha256::digest(self.0.as_bytes());
        URL_SAFE_NO_PAD.encode(&digest[..8])
    }

    fn check(&self, context: &[u8], payload: &str, signature: &[u8; 64]) -> Result<(), BadPass> {
        self.0
            .verify(&[context, payload.as_bytes()].concat(), &ed25519_dalek::Signature::from_bytes(signature))
            .map_err(|_| BadPass::Forged)
    }
}

/// The public keys a door trusts: the current one, the next one while a rotation is staged (so a
/// pass signed by a mail environment that read the new key first checks at a door that has not),
/// and after a rotation the previous one, so a pass mailed before it still checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassKeyRing {
    pub current: PublicPassKey,
    pub next: Option<PublicPassKey>,
    pub previous: Option<PublicPassKey>,
}

impl From<PublicPassKey> for PassKeyRing {
    fn from(current: PublicPassKey) -> Self {
        Self { current, next: None, previous: None }
    }
}

impl PassKeyRing {
    /// The public halves of a pass key's stages.
    pub fn of(keys: &super::key_rotation::Staged<PassKey>) -> Self {
        let public = keys.map(PassKey::public);
        Self { current: public.current, next: public.pending, previous: public.previous }
    }

    fn keys(&self) -> impl Iterator<Item = &PublicPassKey> {
        std::iter::once(&self.current).chain(self.next.as_ref()).chain(self.previous.as_ref())
    }

    /// Whether a key of this id is trusted.
    pub fn knows(&self, key_id: &str) -> bool {
        self.keys().any(|k| k.id() == key_id)
    }

    /// Checks a pass's signature with the key it names and reads it; every id is checked as at
    /// the HTTP edge.
    pub fn verify(&self, pass: &str) -> Result<Pass, BadPass> {
        if pass.len() > MAX_PASS_LEN {
            return Err(BadPass::Malformed);
        }
        let (v1, rest) = match (pass.strip_prefix(PREFIX), pass.strip_prefix(PREFIX_V1)) {
            (Some(rest), _) => (false, rest),
            (None, Some(rest)) => (true, rest),
            (None, None) => return Err(BadPass::Malformed),
        };
        let (payload, signature) = rest.split_once('.').ok_or(BadPass::Malformed)?;
        let signature: [u8; 64] =
            URL_SAFE_NO_PAD.decode(signature).ok().and_then(|s| s.try_into().ok()).ok_or(BadPass::Malformed)?;
        let json = URL_SAFE_NO_PAD.decode(payload).map_err(|_| BadPass::Malformed)?;
        if v1 {
            // No key id: either key may have signed it.
            if !self.keys().any(|k| k.check(CONTEXT_V1, payload, &signature).is_ok()) {
                return Err(BadPass::Forged);
            }
            let p: PayloadV1 = serde_json::from_slice(&json).map_err(|_| BadPass::Malformed)?;
            return Ok(Pass { event: p.event, order: p.order, ticket_no: p.ticket_no });
        }
        // The payload is read before its signature is checked only to learn which key to check
        // it with; nothing of it is used unless the signature holds.
        let p: Payload = serde_json::from_slice(&json).map_err(|_| BadPass::Malformed)?;
        let key = self.keys().find(|k| k.id() == p.key).ok_or(BadPass::UnknownKey)?;
        key.check(CONTEXT, payload, &signature)?;
        Ok(Pass { event: p.event, order: p.order, ticket_no: p.ticket_no })
    }
}

/// The pass as a QR code in a PNG image: black modules on white, a 4-module quiet zone, `scale`
/// pixels per module, one bit per pixel. The mask is the one the QR standard's penalty rules choose
/// (`fast_qr`: about 0.3 ms a pass, where `qrcode`'s choice took 2.2 ms and was the mail
/// consumer's largest cost; docs/BENCHMARKS.md "The rush beside the release before"). `None`
/// only if the pass is too long for any QR code (it never is).
pub fn qr_png(pass: &str, scale: u32) -> Option<Vec<u8>> {
    let code = fast_qr::QRBuilder::new(pass.as_bytes()).ecl(fast_qr::ECL::M).build().ok()?;
    let modules = code.size as u32;
    let quiet = 4;
    let side = (modules + 2 * quiet) * scale;
    let row_bytes = side.div_ceil(8) as usize;
    // 1 is white in a one-bit grayscale PNG: start white, clear the dark modules' bits.
    let mut pixels = vec![0xffu8; row_bytes * side as usize];
    for y in 0..modules {
        let row_of_modules = &code[y as usize];
        for x in (0..modules).filter(|&x| row_of_modules[x as usize].value()) {
            for dy in 0..scale {
                let row = ((y + quiet) * scale + dy) as usize * row_bytes;
                for dx in 0..scale {
                    let px = ((x + quiet) * scale + dx) as usize;
                    pixels[row + px / 8] &= !(0x80 >> (px % 8));
                }
            }
        }
    }
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, side, side);
    encoder.set_color(png::ColorType::Grayscale);
    encoder.set_depth(png::BitDepth::One);
    let mut writer = encoder.write_header().ok()?;
    writer.write_image_data(&pixels).ok()?;
    writer.finish().ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass() -> Pass {
        Pass {
            event: EventId::parse("lecture-1").unwrap(),
            order: OrderId::parse("0199a0b0-0000-7000-8000-000000000001").unwrap(),
            ticket_no: TicketNo::new(42),
        }
    }

    fn ring(key: &PassKey) -> PassKeyRing {
        key.public().into()
    }

    #[test]
    fn a_pass_verifies_with_its_keys_public_half_only() {
        let key = PassKey::new(b"0123456789abcdef-pass-key").unwrap();
        let other = PassKey::new(b"0123456789abcdef-other-key").unwrap();
        let token = key.issue(&pass());
        assert!(token.len() < 260, "{} characters", token.len());
        assert_eq!(ring(&key).verify(&token), Ok(pass()));
        assert_eq!(ring(&other).verify(&token), Err(BadPass::UnknownKey));
        // Another ticket number under the same signature: forged.
        let (_, sig) = token.rsplit_once('.').unwrap();
        let payload = URL_SAFE_NO_PAD.encode(
            serde_json::to_vec(
                &serde_json::json!({"k": key.public().id(), "e": "lecture-1", "o": pass().order, "n": 43}),
            )
            .unwrap(),
        );
        assert_eq!(ring(&key).verify(&format!("TP2.{payload}.{sig}")), Err(BadPass::Forged));
        // A pass naming this key but signed by another: forged.
        let mut forged = other.issue(&pass());
        let wrong_id = other.public().id();
        let claimed: String =
            String::from_utf8(URL_SAFE_NO_PAD.decode(forged[4..].split_once('.').unwrap().0).unwrap())
                .unwrap()
                .replace(&wrong_id, &key.public().id());
        let sig = forged.rsplit_once('.').unwrap().1.to_owned();
        forged = format!("TP2.{}.{sig}", URL_SAFE_NO_PAD.encode(claimed));
        assert_eq!(ring(&key).verify(&forged), Err(BadPass::Forged));
        for bad in ["", "TP2.", "TP2.abc", "TP3.a.b", &token[4..], &format!("{token}x"), &"A".repeat(2000)] {
            assert!(ring(&key).verify(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(key.public().encoded().len(), 43);
        assert_eq!(PublicPassKey::decode(&key.public().encoded()), Ok(key.public()));
        assert!(PassKey::new(b"short").is_err());
        assert_eq!(format!("{key:?}"), "PassKey(<redacted>)");
        let text = String::from_utf8(URL_SAFE_NO_PAD.decode(token[4..].split_once('.').unwrap().0).unwrap()).unwrap();
        assert!(!text.contains("\"u\""), "no user in the pass: {text}");
    }

    #[test]
    fn a_rotation_voids_no_pass_in_flight() {
        use crate::key_rotation::Staged;
        let old = PassKey::new(b"0123456789abcdef-old-key").unwrap();
        let new = PassKey::new(b"0123456789abcdef-new-key").unwrap();
        // Staged: a pass signed with the next key (by a mail environment that read it first)
        // checks at a door that still signs nothing with it.
        let staged = PassKeyRing::of(&Staged::of(old.clone(), Some(new.clone()), None));
        assert_eq!(staged.verify(&new.issue(&pass())), Ok(pass()));
        assert_eq!(staged.verify(&old.issue(&pass())), Ok(pass()));
        let rotated = PassKeyRing::of(&Staged::of(new.clone(), None, Some(old.clone())));
        assert_eq!(rotated.verify(&old.issue(&pass())), Ok(pass()));
        assert_eq!(rotated.verify(&new.issue(&pass())), Ok(pass()));
        assert!(rotated.knows(&old.public().id()) && !PassKeyRing::from(new.public()).knows(&old.public().id()));
        // Two rotations later the first key is gone, and so are its passes.
        let newer = PassKey::new(b"0123456789abcdef-newer-key").unwrap();
        let again = PassKeyRing::of(&Staged::of(newer, None, Some(new)));
        assert_eq!(again.verify(&old.issue(&pass())), Err(BadPass::UnknownKey));
    }

    #[test]
    fn a_pass_of_the_first_format_still_verifies() {
        let key = PassKey::new(b"0123456789abcdef-pass-key").unwrap();
        let payload =
            URL_SAFE_NO_PAD.encode(br#"{"e":"lecture-1","o":"0199a0b0-0000-7000-8000-000000000001","u":"u1","n":42}"#);
        let sig = key.0.sign(&[CONTEXT_V1, payload.as_bytes()].concat());
        let v1 = format!("TP1.{payload}.{}", URL_SAFE_NO_PAD.encode(sig.to_bytes()));
        assert_eq!(ring(&key).verify(&v1), Ok(pass()));
        let other = PassKey::new(b"0123456789abcdef-other-key").unwrap();
        assert_eq!(ring(&other).verify(&v1), Err(BadPass::Forged));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1_000))]
        #[test]
        fn no_string_but_an_issued_pass_verifies(s in "\\PC{0,300}|TP[12]\\.[A-Za-z0-9_-]{0,120}\\.[A-Za-z0-9_-]{0,90}") {
            let key = PassKey::new(b"0123456789abcdef-pass-key").unwrap();
            proptest::prop_assert!(ring(&key).verify(&s).is_err());
        }
    }

    #[test]
    fn the_qr_code_reads_back_as_the_pass() {
        let key = PassKey::new(b"0123456789abcdef-pass-key").unwrap();
        let token = key.issue(&pass());
        let png = qr_png(&token, 4).expect("a QR code");
        let mut decoder = png::Decoder::new(std::io::Cursor::new(png));
        decoder.set_transformations(png::Transformations::EXPAND);
        let mut reader = decoder.read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut pixels).unwrap();
        let (w, h) = (info.width as usize, info.height as usize);
        let mut image = rqrr::PreparedImage::prepare_from_greyscale(w, h, |x, y| pixels[y * w + x]);
        let grids = image.detect_grids();
        assert_eq!(grids.len(), 1);
        let (_, content) = grids[0].decode().unwrap();
        assert_eq!(content, token);
        assert_eq!(ring(&key).verify(&content), Ok(pass()));
    }
}
