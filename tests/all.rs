//! The one integration-test binary: every suite module links once, which keeps link times low.

mod suite;
