//! RFC 7523 client assertions for `private_key_jwt` (ES256 over P-256, signed with aws-lc-rs, the provider rustls
//! already links): `iss = sub = client_id`, `aud` = the authorization server's issuer, a short expiry and a random
//! `jti`.

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use pimcp_config::Secret;

use crate::error::{Error, Result};
use crate::record::unix_secs;

/// `client_assertion_type` of a JWT bearer client assertion.
pub const CLIENT_ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// Lifetime of one assertion.
const ASSERTION_LIFETIME_SECS: u64 = 300;

/// A signed ES256 client assertion for `client_id`, addressed to `audience`.
pub fn client_assertion(private_key_pem: &Secret, client_id: &str, audience: &str) -> Result<String> {
    let der = pem_to_der(private_key_pem.expose())?;
    let key =
        EcdsaKeyPair::from_private_key_der(&ECDSA_P256_SHA256_FIXED_SIGNING, &der).map_err(|e| Error::PrivateKey {
            reason: format!("not a P-256 private key in PKCS#8 or SEC1 form ({e})"),
        })?;
    let now = unix_secs(std::time::SystemTime::now());
    let header = serde_json::json!({"alg": "ES256", "typ": "JWT"});
    let claims = serde_json::json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": now,
        "exp": now + ASSERTION_LIFETIME_SECS,
        "jti": hex::encode(rand::random::<[u8; 16]>()),
    });
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let signature = key
        .sign(&SystemRandom::new(), signing_input.as_bytes())
        .map_err(|_| Error::PrivateKey {
            reason: "signing failed".into(),
        })?;
    Ok(format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(signature.as_ref())
    ))
}

/// The DER bytes of the first PEM block (`PRIVATE KEY` or `EC PRIVATE KEY`). Errors never quote the key.
fn pem_to_der(pem: &str) -> Result<Vec<u8>> {
    let mut inside = false;
    let mut body = String::new();
    for line in pem.lines().map(str::trim) {
        if line.starts_with("-----BEGIN ") {
            if !(line.contains("PRIVATE KEY")) || line.contains("ENCRYPTED") {
                return Err(Error::PrivateKey {
                    reason: "expected an unencrypted PRIVATE KEY or EC PRIVATE KEY block".into(),
                });
            }
            inside = true;
        } else if line.starts_with("-----END ") {
            break;
        } else if inside {
            body.push_str(line);
        }
    }
    if body.is_empty() {
        return Err(Error::PrivateKey {
            reason: "no PEM private key block found".into(),
        });
    }
    STANDARD.decode(body.as_bytes()).map_err(|_| Error::PrivateKey {
        reason: "PEM body is not valid base64".into(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, KeyPair as _, UnparsedPublicKey};

    fn test_key() -> (Secret, Vec<u8>) {
        let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new()).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, doc.as_ref()).unwrap();
        let b64 = STANDARD.encode(doc.as_ref());
        let pem = format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n");
        (Secret::new(pem), pair.public_key().as_ref().to_vec())
    }

    #[test]
    fn assertion_verifies_and_carries_the_claims() {
        let (pem, public) = test_key();
        let jwt = client_assertion(&pem, "client-7", "https://as.example").unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims: serde_json::Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["iss"], "client-7");
        assert_eq!(claims["sub"], "client-7");
        assert_eq!(claims["aud"], "https://as.example");
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &public)
            .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &signature)
            .unwrap();
    }

    #[test]
    fn bad_keys_are_reported_without_the_key() {
        let err = client_assertion(&Secret::new("not a pem planted-secret"), "c", "a").unwrap_err();
        assert!(!err.to_string().contains("planted"));
        let err = client_assertion(
            &Secret::new("-----BEGIN PRIVATE KEY-----\nplanted-secret\n-----END PRIVATE KEY-----"),
            "c",
            "a",
        )
        .unwrap_err();
        assert!(!err.to_string().contains("planted"), "{err}");
    }
}
