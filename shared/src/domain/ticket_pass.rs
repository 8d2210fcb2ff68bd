//! The ticket pass: what the confirmation mail carries as a QR code and the door scans. A signed
//! statement "order O holds ticket n of event E for user U", Ed25519, so a door device checks it
//! offline with the public key (`GET /events/{id}/pass-key`); only the deployment's key signs.
//!
//! Pass: `TP1.<base64url payload>.<base64url signature>`, the payload a compact JSON object
//! `{"e":<event>,"o":<order>,"u":<user>,"n":<ticket no>}`, the signature over
//! `"ticket-pass-v1\n" + payload`. The pass alone admits nobody: check-in marks the order used
//! exactly once, and a cancelled order's pass is refused there.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use ed25519_dalek::{Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{EventId, OrderId, UserId};

const PREFIX: &str = "TP1.";
const CONTEXT: &[u8] = b"ticket-pass-v1\n";
/// Longer passes are refused before any decoding (a real one is ~250 characters).
pub const MAX_PASS_LEN: usize = 1_024;

/// What a pass says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pass {
    #[serde(rename = "e")]
    pub event: EventId,
    #[serde(rename = "o")]
    pub order: OrderId,
    #[serde(rename = "u")]
    pub user: UserId,
    #[serde(rename = "n")]
    pub ticket_no: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadPass {
    #[error("not a ticket pass")]
    Malformed,
    #[error("the pass's signature does not match")]
    Forged,
}

/// The deployment's pass key: signs in mail, checks at the door. Never printed.
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
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(pass).expect("ids and numbers always serialize"));
        let signature = self.0.sign(&signed(&payload));
        format!("{PREFIX}{payload}.{}", URL_SAFE_NO_PAD.encode(signature.to_bytes()))
    }
}

/// What a door device needs: the public half.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicPassKey(VerifyingKey);

impl PublicPassKey {
    /// The key as published: 32 bytes, base64url without padding.
    pub fn encoded(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.0.as_bytes())
    }

    /// Checks a pass's signature and reads it; every id is checked as at the HTTP edge.
    pub fn verify(&self, pass: &str) -> Result<Pass, BadPass> {
        if pass.len() > MAX_PASS_LEN {
            return Err(BadPass::Malformed);
        }
        let rest = pass.strip_prefix(PREFIX).ok_or(BadPass::Malformed)?;
        let (payload, signature) = rest.split_once('.').ok_or(BadPass::Malformed)?;
        let signature: [u8; 64] =
            URL_SAFE_NO_PAD.decode(signature).ok().and_then(|s| s.try_into().ok()).ok_or(BadPass::Malformed)?;
        self.0
            .verify(&signed(payload), &ed25519_dalek::Signature::from_bytes(&signature))
            .map_err(|_| BadPass::Forged)?;
        let json = URL_SAFE_NO_PAD.decode(payload).map_err(|_| BadPass::Malformed)?;
        serde_json::from_slice(&json).map_err(|_| BadPass::Malformed)
    }
}

fn signed(payload: &str) -> Vec<u8> {
    [CONTEXT, payload.as_bytes()].concat()
}

/// The pass as a QR code in a PNG image: black modules on white, a 4-module quiet zone, `scale`
/// pixels per module. `None` only if the pass is too long for any QR code (it never is).
pub fn qr_png(pass: &str, scale: u32) -> Option<Vec<u8>> {
    let code = qrcode::QrCode::with_error_correction_level(pass.as_bytes(), qrcode::EcLevel::M).ok()?;
    let modules = code.width() as u32;
    let colors = code.to_colors();
    let quiet = 4;
    let side = (modules + 2 * quiet) * scale;
    let mut pixels = vec![255u8; (side * side) as usize];
    for y in 0..modules {
        for x in 0..modules {
            if colors[(y * modules + x) as usize] == qrcode::Color::Dark {
                for dy in 0..scale {
                    let row = ((y + quiet) * scale + dy) * side;
                    let start = (row + (x + quiet) * scale) as usize;
                    pixels[start..start + scale as usize].fill(0);
                }
            }
        }
    }
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, side, side);
    encoder.set_color(png::ColorType::Grayscale);
    encoder.set_depth(png::BitDepth::Eight);
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
            user: UserId::parse("u1").unwrap(),
            ticket_no: 42,
        }
    }

    #[test]
    fn a_pass_verifies_with_its_keys_public_half_only() {
        let key = PassKey::new(b"0123456789abcdef-pass-key").unwrap();
        let other = PassKey::new(b"0123456789abcdef-other-key").unwrap();
        let token = key.issue(&pass());
        assert!(token.len() < 300, "{} characters", token.len());
        assert_eq!(key.public().verify(&token), Ok(pass()));
        assert_eq!(other.public().verify(&token), Err(BadPass::Forged));
        // Another ticket number under the same signature: forged.
        let mut forged = pass();
        forged.ticket_no = 43;
        let (_, sig) = token.rsplit_once('.').unwrap();
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).unwrap());
        assert_eq!(key.public().verify(&format!("TP1.{payload}.{sig}")), Err(BadPass::Forged));
        for bad in ["", "TP1.", "TP1.abc", "TP2.a.b", &token[4..], &format!("{token}x"), &"A".repeat(2000)] {
            assert!(key.public().verify(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(key.public().encoded().len(), 43);
        assert!(PassKey::new(b"short").is_err());
        assert_eq!(format!("{key:?}"), "PassKey(<redacted>)");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1_000))]
        #[test]
        fn no_string_but_an_issued_pass_verifies(s in "\\PC{0,300}|TP1\\.[A-Za-z0-9_-]{0,120}\\.[A-Za-z0-9_-]{0,90}") {
            let key = PassKey::new(b"0123456789abcdef-pass-key").unwrap();
            proptest::prop_assert!(key.public().verify(&s).is_err());
        }
    }

    #[test]
    fn the_qr_code_reads_back_as_the_pass() {
        let key = PassKey::new(b"0123456789abcdef-pass-key").unwrap();
        let token = key.issue(&pass());
        let png = qr_png(&token, 4).expect("a QR code");
        let decoder = png::Decoder::new(std::io::Cursor::new(png));
        let mut reader = decoder.read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut pixels).unwrap();
        let (w, h) = (info.width as usize, info.height as usize);
        let mut image = rqrr::PreparedImage::prepare_from_greyscale(w, h, |x, y| pixels[y * w + x]);
        let grids = image.detect_grids();
        assert_eq!(grids.len(), 1);
        let (_, content) = grids[0].decode().unwrap();
        assert_eq!(content, token);
        assert_eq!(key.public().verify(&content), Ok(pass()));
    }
}
