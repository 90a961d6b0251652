//! A keyring error as text, for every credential-store backend: what went wrong, never the bytes some errors carry.

/// A keyring error as text, without the payload bytes some variants carry.
pub(crate) fn keyring_reason(err: &keyring_core::Error) -> String {
    use keyring_core::Error as K;
    match err {
        K::PlatformFailure(inner) => format!("platform failure: {inner}"),
        K::NoStorageAccess(inner) => format!("no access to the credential store: {inner}"),
        K::NoEntry => "no entry".into(),
        K::BadEncoding(_) => "stored value is not UTF-8".into(),
        K::BadDataFormat(..) => "stored value has an unexpected format".into(),
        K::BadStoreFormat(reason) => format!("store data is malformed: {reason}"),
        K::TooLong(name, limit) => format!("`{name}` is longer than the platform limit of {limit}"),
        K::Invalid(name, reason) => format!("`{name}` is invalid: {reason}"),
        K::Ambiguous(items) => format!("entry matches {} credentials", items.len()),
        K::NoDefaultStore => "no credential store is set".into(),
        K::NotSupportedByStore(issue) => format!("unsupported by the store: {issue}"),
        _ => "unknown keyring error".into(),
    }
}
