//! Tests of the host imports against the fixture trees under `tests/fixtures/imports`.
